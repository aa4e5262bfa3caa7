"""``minikafka consumer-groups``: list, describe (lag per partition), reset offsets of, delete consumer
groups and delete their offsets (``kafka-consumer-groups.sh``).

As Kafka's tool: offsets are reset only for inactive groups (state Empty or Dead), new offsets are
kept within each partition's earliest and latest offsets, and without ``--execute`` a reset is a
dry run that only prints the plan.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any, Iterable

from ..common import TopicPartition
from ..protocol.errors import ErrorCode
from .admin import EARLIEST, LATEST, AdminClient
from .common import ToolError, add_bootstrap, error_name, print_table, set_main

INACTIVE_STATES = ("Empty", "Dead")
RESET_SPECS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime")
OFFSET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe, reset or delete consumer groups "
                                               "(kafka-consumer-groups.sh)")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the groups")
    action.add_argument("--describe", action="store_true", help="offsets and lag per partition (or --members, "
                                                                 "--state)")
    action.add_argument("--reset-offsets", action="store_true", help="move an inactive group's committed offsets")
    action.add_argument("--delete", action="store_true", help="delete groups")
    action.add_argument("--delete-offsets", action="store_true",
                        help="delete a group's committed offsets of --topic (OffsetDelete)")
    p.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--members", action="store_true", help="--describe: the members instead of the offsets")
    p.add_argument("--state", action="store_true", help="--describe/--list: the groups' state")
    p.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (the default)")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                   help="--reset-offsets/--delete-offsets: a topic, or some of its partitions (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic the group committed")
    spec = p.add_mutually_exclusive_group()
    spec.add_argument("--to-earliest", action="store_true", help="reset to the earliest offsets")
    spec.add_argument("--to-latest", action="store_true", help="reset to the latest offsets")
    spec.add_argument("--to-current", action="store_true", help="reset to the committed offsets")
    spec.add_argument("--to-offset", type=int, default=None, metavar="N", help="reset to offset N")
    spec.add_argument("--shift-by", type=int, default=None, metavar="N", help="move the committed offsets by N")
    spec.add_argument("--to-datetime", default=None, metavar="YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM]",
                      help="reset to the first offset at or after a time (UTC unless an offset is given)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    set_main(p, main)


async def main(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap_server, client_id="minikafka-consumer-groups") as admin:
        if args.list:
            groups = await admin.list_groups()
            if args.state:
                print_table(("GROUP", "STATE"), [(g, state or "-") for g, _, state in groups])
            else:
                for g, _, _ in groups:
                    print(g)
            return 0
        names = await _groups(admin, args)
        if args.delete_offsets:
            return await delete_offsets(admin, names, args)
        if args.describe:
            for group in names:
                await describe(admin, group, args)
        elif args.reset_offsets:
            rows = []
            for group in names:
                rows += await reset_offsets(admin, group, args)
            print_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows)
        else:
            await delete(admin, names)
    return 0


async def _groups(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g for g, _, _ in await admin.list_groups()]
    if not args.group:
        raise ToolError("--group (or --all-groups) is required here")
    return list(dict.fromkeys(args.group))


# -- describe -----------------------------------------------------------------------------------------
def _owners(members: Iterable[Any], protocol_type: str) -> dict[TopicPartition, Any]:
    """Which member each partition is assigned to (consumer groups only)."""
    from ..client.consumer.protocol import PROTOCOL_TYPE, decode_assignment

    owners: dict[TopicPartition, Any] = {}
    if protocol_type != PROTOCOL_TYPE:
        return owners
    for m in members:
        if m.member_assignment:
            for tp in decode_assignment(bytes(m.member_assignment)).partitions:
                owners[tp] = m
    return owners


async def describe(admin: AdminClient, group: str, args: argparse.Namespace) -> None:
    g = await admin.describe_group(group)
    if g.group_state == "Dead":
        raise ToolError(f"consumer group {group!r} does not exist")
    if args.state:
        conn = await admin.coordinator(group)
        print_table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                    [(group, f"{conn.host}:{conn.port} ({conn.node_id})", g.protocol_data or None, g.group_state,
                      len(g.members))])
        return
    owners = _owners(g.members, g.protocol_type)
    if args.members:
        counts = {m.member_id: 0 for m in g.members}
        for m in owners.values():
            counts[m.member_id] += 1
        print_table(("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"),
                    [(group, m.member_id, m.client_host, m.client_id, counts[m.member_id]) for m in g.members])
        return
    if not g.members:
        print(f"Consumer group '{group}' has no active members.", file=sys.stderr)
    committed = await admin.committed_offsets(group)
    partitions = sorted(set(committed) | set(owners))
    ends = await admin.list_offsets(partitions, LATEST) if partitions else {}
    rows = []
    for tp in partitions:
        current, end, owner = committed.get(tp), ends.get(tp), owners.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append((group, tp.topic, tp.partition, current, end, lag,
                     owner.member_id if owner else None, owner.client_host if owner else None,
                     owner.client_id if owner else None))
    print_table(OFFSET_COLUMNS, rows)


# -- reset offsets --------------------------------------------------------------------------------------
async def _scope(admin: AdminClient, args: argparse.Namespace,
                 committed: dict[TopicPartition, int]) -> list[TopicPartition]:
    """The partitions ``--topic``/``--all-topics`` name."""
    if args.all_topics:
        return sorted(committed)
    if not args.topic:
        raise ToolError("--reset-offsets needs --topic or --all-topics")
    out: list[TopicPartition] = []
    for item in args.topic:
        topic, _, parts = item.partition(":")
        meta = await admin.metadata([topic])
        known = meta.partitions_for(topic)
        if not known:
            raise ToolError(f"topic {topic!r} does not exist")
        try:
            wanted = [int(p) for p in parts.split(",")] if parts else known
        except ValueError:
            raise ToolError(f"--topic expects TOPIC or TOPIC:P,P, got {item!r}") from None
        missing = sorted(set(wanted) - set(known))
        if missing:
            raise ToolError(f"topic {topic!r} has no partition(s) {missing}")
        out += [TopicPartition(topic, p) for p in wanted]
    return sorted(set(out))


def _timestamp_ms(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"--to-datetime expects YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM], got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


async def _targets(admin: AdminClient, args: argparse.Namespace, tps: list[TopicPartition],
                   committed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The new offset of each partition, before clamping."""
    if args.to_earliest:
        return await admin.list_offsets(tps, EARLIEST)
    if args.to_latest:
        return await admin.list_offsets(tps, LATEST)
    if args.to_offset is not None:
        return {tp: args.to_offset for tp in tps}
    if args.to_datetime is not None:
        found = await admin.list_offsets(tps, _timestamp_ms(args.to_datetime))
        latest = await admin.list_offsets([tp for tp, o in found.items() if o < 0], LATEST)
        return {**found, **latest}
    missing = [tp for tp in tps if tp not in committed]
    if missing:
        raise ToolError(f"cannot move the offset of {missing[0].topic}-{missing[0].partition}: "
                        "the group has no committed offset there")
    shift = args.shift_by or 0
    return {tp: committed[tp] + shift for tp in tps}


async def reset_offsets(admin: AdminClient, group: str, args: argparse.Namespace) -> list[tuple]:
    """Plan (and with --execute commit) the new offsets; the rows GROUP TOPIC PARTITION NEW-OFFSET."""
    if not any(getattr(args, name) not in (None, False) for name in RESET_SPECS):
        raise ToolError("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, --to-offset, "
                        "--shift-by, --to-datetime")
    state = (await admin.describe_group(group)).group_state
    if state not in INACTIVE_STATES:
        raise ToolError(f"assignments can only be reset if the group '{group}' is inactive, but the current "
                        f"state is {state}")
    committed = await admin.committed_offsets(group)
    tps = await _scope(admin, args, committed)
    if not tps:
        return []
    targets = await _targets(admin, args, tps, committed)
    low, high = await admin.list_offsets(tps, EARLIEST), await admin.list_offsets(tps, LATEST)
    new = {tp: min(max(targets[tp], low[tp]), high[tp]) for tp in tps}
    if args.execute:
        await admin.commit_offsets(group, new)
    elif not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. In a future major "
              "release, the default behavior of this command will be to prompt the user before executing the "
              "reset rather than doing a dry run. You should add the --dry-run option explicitly if you are "
              "scripting this command and want to keep the current default behavior without prompting.",
              file=sys.stderr)
    return [(group, tp.topic, tp.partition, new[tp]) for tp in tps]


# -- delete ---------------------------------------------------------------------------------------------
async def delete(admin: AdminClient, groups: list[str]) -> None:
    results = await admin.delete_groups(groups)
    failed = {g: code for g, code in results.items() if code}
    if failed:
        reasons = "; ".join(f"group '{g}': {error_name(c)}" + (" (the group has members)"
                                                               if c == ErrorCode.NON_EMPTY_GROUP else "")
                            for g, c in failed.items())
        raise ToolError(f"deletion of some consumer groups failed: {reasons}")
    print(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in groups)}) was successful.")


# -- delete offsets ---------------------------------------------------------------------------------------
_GROUP_ERRORS: dict[int, str] = {
    ErrorCode.INVALID_GROUP_ID: "'{}' is not valid.",
    ErrorCode.GROUP_ID_NOT_FOUND: "'{}' does not exist.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Access to '{}' is not authorized.",
    ErrorCode.NON_EMPTY_GROUP: "Deleting offsets of a consumer group '{}' is forbidden if the group is not empty.",
}


async def delete_offsets(admin: AdminClient, groups: list[str], args: argparse.Namespace) -> int:
    """Kafka's ``ConsumerGroupService.deleteOffsets``: the offsets of every partition of each ``--topic`` (or of
    the partitions named, ``TOPIC:P,P``); prints a TOPIC PARTITION STATUS table.  A group-level error is the
    tool's error; a partition-level one (GROUP_SUBSCRIBED_TO_TOPIC, ...) shows in the table, exit status 1."""
    if len(groups) != 1:
        raise ToolError("--delete-offsets takes exactly one --group")
    if not args.topic:
        raise ToolError("--delete-offsets needs --topic")
    (group,) = groups
    results: dict[tuple[str, int], int] = {}
    partitions: list[TopicPartition] = []
    for item in args.topic:
        topic, _, parts = item.partition(":")
        if parts:
            try:
                partitions += [TopicPartition(topic, int(p)) for p in parts.split(",")]
            except ValueError:
                raise ToolError(f"--topic expects TOPIC or TOPIC:P,P, got {item!r}") from None
            continue
        known = (await admin.metadata([topic])).partitions_for(topic)
        if known:
            partitions += [TopicPartition(topic, p) for p in known]
        else:
            results[(topic, -1)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if partitions:
        code, deleted = await admin.delete_offsets(group, partitions)
        if code in _GROUP_ERRORS:
            raise ToolError(_GROUP_ERRORS[code].format(group))
        if code:
            raise ToolError(f"Encounter some unknown error: {error_name(code)}")
        results.update(((tp.topic, tp.partition), err) for tp, err in deleted.items())
    failed = any(results.values())
    if not failed:
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} group {group}")
    else:
        print("Error: Encounter some partition level error, see the follow-up details:")
    print()
    fmt = "{:<30} {:<15} {:<15}"
    print(fmt.format("TOPIC", "PARTITION", "STATUS"))
    for (topic, partition), code in sorted(results.items(), key=lambda kv: f"{kv[0][0]}{kv[0][1]}"):
        print(fmt.format(topic, partition if partition >= 0 else "Not Provided",
                         f"Error: :{error_name(code)}" if code else "Successful").rstrip())
    return 1 if failed else 0

