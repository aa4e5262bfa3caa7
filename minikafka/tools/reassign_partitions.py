"""``minikafka reassign-partitions``: move partitions between brokers (``kafka-reassign-partitions.sh``).

The options, JSON files and output of Kafka's tool (``ReassignPartitionsCommand``), over
AlterPartitionReassignments / ListPartitionReassignments (KIP-455), Metadata and IncrementalAlterConfigs::

    minikafka reassign-partitions --bootstrap-server H:P --generate \\
        --topics-to-move-json-file topics.json --broker-list 1,2        # propose a plan
    minikafka reassign-partitions --bootstrap-server H:P --execute \\
        --reassignment-json-file plan.json --throttle 1048576           # start it, replication throttled
    minikafka reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file plan.json
    minikafka reassign-partitions --bootstrap-server H:P --cancel --reassignment-json-file plan.json
    minikafka reassign-partitions --bootstrap-server H:P --list

``topics.json`` is ``{"version": 1, "topics": [{"topic": "t"}]}``; a plan is
``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}``.
``--throttle`` sets, as Kafka's tool does, ``leader.replication.throttled.replicas`` (the partitions' current
replicas) and ``follower.replication.throttled.replicas`` (the moving ones) on the topics and
``leader/follower.replication.throttled.rate`` on every broker involved; ``--verify`` (and ``--cancel``) remove
them once no reassignment is left, unless ``--preserve-throttles``.

``--command-config`` names the admin client's properties file (``security.protocol``, ``sasl.*``, ``ssl.*``).

Deliberate differences: no ``--bootstrap-controller`` (brokers answer both APIs); ``log_dirs`` other than ``"any"``
(moving a replica between a broker's log directories) are refused, and ``--replica-alter-log-dirs-throttle`` with
them; the throttles cleared are the two replication rates (not ``replica.alter.log.dirs.io.max.bytes.per.second``,
which minikafka's brokers do not configure).
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..common import TopicPartition
from .admin import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC, AdminClient
from .common import ToolError, add_bootstrap, add_command_config, command_security, error_name, set_main

ANY_LOG_DIR = "any"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
BROKER_LEVEL_THROTTLES = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
EXISTING_REASSIGNMENT = ("Cannot execute because there is an existing partition assignment.  Use --additional to "
                         "override this and create a new partition assignment in addition to the existing one. The "
                         "--additional flag can also be used to change the throttle by resubmitting the current "
                         "reassignment.")
RUN_VERIFY = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
              "throttle is removed.")

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# Kafka's requiredArgs and permittedArgs per action (dest names; bootstrap_server is always there).
REQUIRED = {"generate": ("topics_to_move_json_file", "broker_list"), "execute": ("reassignment_json_file",),
            "verify": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}
PERMITTED = {"generate": ("disable_rack_aware",),
             "execute": ("additional", "throttle", "replica_alter_log_dirs_throttle", "timeout"),
             "verify": ("preserve_throttles",), "cancel": ("preserve_throttles", "timeout"), "list": ()}
OPTIONAL = ("topics_to_move_json_file", "broker_list", "reassignment_json_file", "throttle",
            "replica_alter_log_dirs_throttle", "timeout", "additional", "preserve_throttles", "disable_rack_aware")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reassign-partitions",
                       help="move partitions between brokers: generate, execute, verify, cancel, list "
                            "(kafka-reassign-partitions.sh)")
    add_bootstrap(p)
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true",
                        help="propose a reassignment of --topics-to-move-json-file's topics to --broker-list")
    action.add_argument("--execute", action="store_true", help="start the reassignment of --reassignment-json-file")
    action.add_argument("--verify", action="store_true",
                        help="whether --reassignment-json-file's reassignment completed (then clear the throttles)")
    action.add_argument("--cancel", action="store_true", help="cancel --reassignment-json-file's reassignment")
    action.add_argument("--list", action="store_true", help="list the ongoing reassignments")
    p.add_argument("--topics-to-move-json-file", default=None, metavar="FILE",
                   help='--generate: {"version": 1, "topics": [{"topic": "foo"}]}')
    p.add_argument("--broker-list", default=None, metavar="0,1,2", help="--generate: the brokers to move to")
    p.add_argument("--reassignment-json-file", default=None, metavar="FILE",
                   help='the plan: {"version": 1, "partitions": [{"topic": "foo", "partition": 0, '
                        '"replicas": [1, 2]}]}')
    p.add_argument("--throttle", type=int, default=None, metavar="BYTES/S",
                   help="--execute: throttle replication of the moving partitions to this rate")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=None, metavar="BYTES/S",
                   help="--execute: throttle moves between log directories (not supported)")
    p.add_argument("--timeout", type=int, default=None, metavar="MS",
                   help="--execute/--cancel: how long to wait for log directory moves to start")
    p.add_argument("--additional", action="store_true", default=None,
                   help="--execute: even when other reassignments are going on")
    p.add_argument("--preserve-throttles", action="store_true", default=None,
                   help="--verify/--cancel: leave the throttles in place")
    p.add_argument("--disable-rack-aware", action="store_true", default=None,
                   help="--generate: ignore the brokers' racks")
    set_main(p, main)


def check_options(args: argparse.Namespace) -> str:
    """The action; ToolError (with Kafka's wording) for a missing or misplaced option."""
    action = next(a for a in ACTIONS if getattr(args, a))
    for dest in REQUIRED[action]:
        if getattr(args, dest) is None:
            raise ToolError(f"Missing required argument \"[{dest.replace('_', '-')}]\"")
    for dest in OPTIONAL:
        if getattr(args, dest) is not None and dest not in REQUIRED[action] and dest not in PERMITTED[action]:
            raise ToolError(f"Option \"[{dest.replace('_', '-')}]\" can't be used with action \"[{action}]\"")
    return action


async def main(args: argparse.Namespace) -> int:
    action = check_options(args)
    async with AdminClient(args.bootstrap_server, client_id="reassign-partitions-tool",
                           security=command_security(args.command_config)) as admin:
        if action == "generate":
            current, proposed = await generate(admin, read_file(args.topics_to_move_json_file),
                                               args.broker_list, not args.disable_rack_aware)
            print(f"Current partition replica assignment\n{format_reassignment_json(current)}\n")
            print(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")
        elif action == "execute":
            await execute(admin, read_file(args.reassignment_json_file), bool(args.additional),
                          -1 if args.throttle is None else args.throttle,
                          -1 if args.replica_alter_log_dirs_throttle is None else args.replica_alter_log_dirs_throttle)
        elif action == "verify":
            await verify(admin, read_file(args.reassignment_json_file), bool(args.preserve_throttles))
        elif action == "cancel":
            await cancel(admin, read_file(args.reassignment_json_file), bool(args.preserve_throttles))
        else:
            print(await list_reassignments(admin))
    return 0


def read_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None


def tp_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


# -- the JSON files ----------------------------------------------------------------------------------
def _load_json(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ToolError(f"The input string is not a valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ToolError("The input string is not a JSON object")
    version = data.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    return data


def parse_topics_json(text: str) -> list[str]:
    """``--topics-to-move-json-file``: the topic names, duplicates refused (Kafka's ``parseTopicsData``)."""
    try:
        topics = [str(t["topic"]) for t in _load_json(text).get("topics", [])]
    except (KeyError, TypeError):
        raise ToolError('each entry of "topics" needs a "topic"') from None
    dupes = sorted({t for t in topics if topics.count(t) > 1})
    if dupes:
        raise ToolError(f"List of topics to reassign contains duplicate entries: {', '.join(dupes)}")
    return topics


def parse_reassignment_json(text: str) -> list[tuple[TopicPartition, list[int], list[str]]]:
    """A plan: (partition, replicas, log dirs) in file order (Kafka's ``parsePartitionReassignmentData``)."""
    out = []
    for entry in _load_json(text).get("partitions", []):
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise ToolError('each entry of "partitions" needs "topic", "partition" and "replicas"') from None
        log_dirs = [str(d) for d in entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))]
        if len(log_dirs) != len(replicas):
            raise ToolError(f"Size of replicas list {replicas} is different from size of log dirs list {log_dirs} "
                            f"for partition {tp_name(tp)}")
        out.append((tp, replicas, log_dirs))
    return out


def validate_plan(plan: list[tuple[TopicPartition, list[int], list[str]]]) -> dict[TopicPartition, list[int]]:
    """Kafka's ``parseExecuteAssignmentArgs`` checks: a non-empty plan, no partition twice, no empty or
    repeating replica list; log directory moves refused (not supported here)."""
    if not plan:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas, _ in plan):
        raise ToolError("Partition replica list cannot be empty")
    parts = [tp for tp, _, _ in plan]
    dupes = sorted({tp for tp in parts if parts.count(tp) > 1})
    if dupes:
        raise ToolError("Partition reassignment contains duplicate topic partitions: "
                        + ",".join(tp_name(tp) for tp in dupes))
    repeats = [(tp, sorted({r for r in replicas if replicas.count(r) > 1})) for tp, replicas, _ in plan]
    repeats = [(tp, r) for tp, r in repeats if r]
    if repeats:
        raise ToolError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{tp_name(tp)} contains multiple entries for {','.join(map(str, r))}" for tp, r in repeats))
    if any(d != ANY_LOG_DIR for _, _, dirs in plan for d in dirs):
        raise ToolError('log_dirs other than "any" (moving replicas between log directories) are not supported')
    return {tp: replicas for tp, replicas, _ in plan}


def format_reassignment_json(assignment: dict[TopicPartition, list[int]]) -> str:
    """Kafka's ``formatAsReassignmentJson``: compact, partitions sorted, ``log_dirs`` all "any"."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": assignment[tp],
         "log_dirs": [ANY_LOG_DIR] * len(assignment[tp])} for tp in sorted(assignment)]}, separators=(",", ":"))


# -- --generate ---------------------------------------------------------------------------------------
def assign_replicas_to_brokers(brokers: dict[int, str | None], partitions: int, replication_factor: int,
                               rng: random.Random | None = None) -> list[list[int]]:
    """Kafka's ``AdminUtils.assignReplicasToBrokers`` with a random start index and replica shift: rack-aware
    (replicas spread over racks, brokers in rack-alternated order) when brokers have racks, else
    rack-unaware (``broker -> rack or None``)."""
    if partitions <= 0:
        raise ToolError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ToolError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise ToolError(f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    racks = {b: r for b, r in brokers.items() if r is not None}
    arranged = _rack_alternated(racks) if racks else sorted(brokers)
    n = len(arranged)
    num_racks = len(set(racks.values())) if racks else 1
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [arranged[first]]
        if not racks:
            replicas += [arranged[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)]
        else:
            used_racks, k = {racks[arranged[first]]}, 0
            for _ in range(replication_factor - 1):
                while True:
                    broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                    k += 1
                    if ((racks[broker] not in used_racks or len(used_racks) == num_racks)
                            and (broker not in replicas or len(replicas) == n)):
                        replicas.append(broker)
                        used_racks.add(racks[broker])
                        break
        out.append(replicas)
    return out


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n if n > 1 else first


def _rack_alternated(racks: dict[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: one broker of each rack (racks sorted) in turn."""
    by_rack: dict[str, list[int]] = defaultdict(list)
    for b in sorted(racks):
        by_rack[racks[b]].append(b)
    iters = [iter(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        nxt = next(iters[i], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(iters)
    return out


async def current_assignment(admin: AdminClient, topics: list[str]) -> dict[TopicPartition, list[int]]:
    """Every partition's replicas, from Metadata (ToolError for a topic that does not exist)."""
    meta = await admin.metadata(topics)
    out = {}
    for name in topics:
        info = meta.topics.get(name)
        if info is None or info.error:
            raise ToolError(f"Topic {name} not found.")
        out.update({TopicPartition(name, p.partition): list(p.replicas) for p in info.partitions})
    return out


async def generate(admin: AdminClient, topics_json: str, broker_list: str, rack_aware: bool = True
                   ) -> tuple[dict[TopicPartition, list[int]], dict[TopicPartition, list[int]]]:
    """``--generate``: (current assignment, proposed assignment) of the topics over the brokers listed."""
    try:
        wanted = [int(b) for b in broker_list.split(",")]
    except ValueError:
        raise ToolError(f"--broker-list {broker_list!r} is not a list of broker ids") from None
    dupes = sorted({b for b in wanted if wanted.count(b) > 1})
    if dupes:
        raise ToolError(f"Broker list contains duplicate entries: {', '.join(map(str, dupes))}")
    topics = parse_topics_json(topics_json)
    current = await current_assignment(admin, topics)
    meta = await admin.metadata([])
    brokers = {b: (node.rack if rack_aware else None) for b, node in meta.brokers.items() if b in wanted}
    rackless = sum(1 for r in brokers.values() if r is None)
    if rack_aware and 0 < rackless < len(brokers):
        raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                        "replica assignment without rack information.")
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        parts = sorted(tp for tp in current if tp.topic == topic)
        rf = len(current[parts[0]]) if parts else 0
        for tp, replicas in zip(parts, assign_replicas_to_brokers(brokers, len(parts), rf)):
            proposed[tp] = replicas
    return current, proposed


# -- --execute ----------------------------------------------------------------------------------------
@dataclass
class PartitionMove:
    """Kafka's ``PartitionMove``: where a partition's data comes from and goes to."""

    sources: set[int] = field(default_factory=set)
    destinations: set[int] = field(default_factory=set)


def proposed_move_map(ongoing: dict[TopicPartition, tuple[list[int], list[int], list[int]]],
                      proposed: dict[TopicPartition, list[int]], current: dict[TopicPartition, list[int]]
                      ) -> dict[str, dict[int, PartitionMove]]:
    """Kafka's ``calculateProposedMoveMap``: the ongoing reassignments' moves, then the proposed ones
    (sources: the current replicas, or an ongoing move's sources; destinations: the new replicas)."""
    moves: dict[str, dict[int, PartitionMove]] = defaultdict(dict)
    for tp, (replicas, adding, _) in ongoing.items():
        moves[tp.topic][tp.partition] = PartitionMove(set(replicas) - set(adding), set(adding))
    for tp, replicas in proposed.items():
        known = moves[tp.topic].get(tp.partition)
        sources = set(known.sources) if known is not None else set(current[tp])
        moves[tp.topic][tp.partition] = PartitionMove(sources, set(replicas) - sources)
    return moves


def leader_throttles(moves: dict[str, dict[int, PartitionMove]]) -> dict[str, str]:
    """``leader.replication.throttled.replicas`` per topic: ``partition:source`` of every move."""
    return {t: ",".join(sorted({f"{p}:{s}" for p, m in parts.items() for s in m.sources}))
            for t, parts in moves.items()}


def follower_throttles(moves: dict[str, dict[int, PartitionMove]]) -> dict[str, str]:
    """``follower.replication.throttled.replicas`` per topic: ``partition:destination`` of every move."""
    return {t: ",".join(sorted({f"{p}:{d}" for p, m in parts.items() for d in m.destinations
                                if d not in m.sources}))
            for t, parts in moves.items()}


async def execute(admin: AdminClient, plan_json: str, additional: bool = False, throttle: int = -1,
                  log_dirs_throttle: int = -1) -> None:
    """``--execute``: print the current assignment (for a rollback), set the throttles, start the moves."""
    proposed = validate_plan(parse_reassignment_json(plan_json))
    if log_dirs_throttle >= 0:
        raise ToolError("--replica-alter-log-dirs-throttle: moving replicas between log directories is not "
                        "supported")
    ongoing = await admin.list_partition_reassignments()
    if not additional and ongoing:
        raise ToolError(EXISTING_REASSIGNMENT)
    meta = await admin.metadata([])
    for broker_id in sorted({b for replicas in proposed.values() for b in replicas}):
        if broker_id not in meta.brokers:
            raise ToolError(f"Unknown broker id {broker_id}")
    current = await current_assignment(admin, sorted({tp.topic for tp in proposed}))
    missing = sorted(tp for tp in proposed if tp not in current)
    if missing:
        raise ToolError("Unable to find partition: " + ", ".join(tp_name(tp) for tp in missing))
    print("Current partition replica assignment\n\n"
          f"{format_reassignment_json({tp: current[tp] for tp in proposed})}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        print(RUN_VERIFY)
        moves = proposed_move_map(ongoing, proposed, current)
        leaders, followers = leader_throttles(moves), follower_throttles(moves)
        for topic in sorted(moves):
            await admin.alter_configs(RESOURCE_TOPIC, topic, [(LEADER_THROTTLED_REPLICAS, OP_SET, leaders[topic]),
                                                               (FOLLOWER_THROTTLED_REPLICAS, OP_SET, followers[topic])])
        brokers = sorted({b for parts in moves.values() for m in parts.values() for b in m.sources | m.destinations})
        for broker_id in brokers:
            await admin.alter_configs(RESOURCE_BROKER, str(broker_id), [(LEADER_THROTTLED_RATE, OP_SET, str(throttle)),
                                                                        (FOLLOWER_THROTTLED_RATE, OP_SET,
                                                                         str(throttle))])
        print(f"The inter-broker throttle limit was set to {throttle} B/s")
    results = await admin.alter_partition_reassignments(dict(proposed))
    errors = {tp: r for tp, r in results.items() if r[0]}
    if errors:
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(
            f"{tp_name(tp)}: {message or error_name(code)}" for tp, (code, message) in sorted(errors.items())))
    print(f"Successfully started partition reassignment{'s' if len(proposed) != 1 else ''} for "
          + ",".join(tp_name(tp) for tp in sorted(proposed)))


# -- --verify, --cancel, --list ---------------------------------------------------------------------------
@dataclass
class PartitionReassignmentState:
    """Kafka's ``PartitionReassignmentState``."""

    current_replicas: list[int]
    target_replicas: list[int]
    done: bool


async def reassignment_states(admin: AdminClient, targets: dict[TopicPartition, list[int]]
                              ) -> tuple[dict[TopicPartition, PartitionReassignmentState], bool]:
    """Kafka's ``findPartitionReassignmentStates``: each partition's state, and whether any reassignment at
    all (also one not in the plan) is going on."""
    ongoing = await admin.list_partition_reassignments()
    states: dict[TopicPartition, PartitionReassignmentState] = {}
    others = sorted({tp.topic for tp in targets if tp not in ongoing})
    current: dict[TopicPartition, list[int]] = {}
    if others:
        meta = await admin.metadata(others)
        for name in others:
            info = meta.topics.get(name)
            if info is not None and not info.error:
                current.update({TopicPartition(name, p.partition): list(p.replicas) for p in info.partitions})
    for tp, target in targets.items():
        if tp in ongoing:
            states[tp] = PartitionReassignmentState(ongoing[tp][0], target, False)
        else:
            states[tp] = PartitionReassignmentState(current.get(tp, []), target, True)
    return states, bool(ongoing)


def states_to_string(states: dict[TopicPartition, PartitionReassignmentState]) -> str:
    """Kafka's ``partitionReassignmentStatesToString``."""
    lines = ["Status of partition reassignment:"]
    for tp in sorted(states):
        st = states[tp]
        if not st.done:
            lines.append(f"Reassignment of partition {tp_name(tp)} is still in progress.")
        elif st.current_replicas == st.target_replicas:
            lines.append(f"Reassignment of partition {tp_name(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp_name(tp)}, but replica set is "
                         f"{','.join(map(str, st.current_replicas))} rather than "
                         f"{','.join(map(str, st.target_replicas))}.")
    return "\n".join(lines)


async def verify(admin: AdminClient, plan_json: str, preserve_throttles: bool = False
                 ) -> tuple[dict[TopicPartition, PartitionReassignmentState], bool]:
    """``--verify``: each partition's progress; with no reassignment left, the throttles are cleared."""
    plan = parse_reassignment_json(plan_json)
    targets = {tp: replicas for tp, replicas, _ in plan}
    states, ongoing = await reassignment_states(admin, targets)
    print(states_to_string(states))
    print()  # the (empty) status of log directory moves
    if not ongoing and not preserve_throttles:
        await clear_all_throttles(admin, targets)
    return states, ongoing


async def clear_all_throttles(admin: AdminClient, targets: dict[TopicPartition, list[int]]) -> None:
    """Kafka's ``clearAllThrottles``: the replication rates on every broker (those of the cluster and of the
    plan) and the throttled replicas of the plan's topics."""
    meta = await admin.metadata([])
    brokers = sorted(set(meta.brokers) | {b for replicas in targets.values() for b in replicas})
    print(f"Clearing broker-level throttles on broker{'s' if len(brokers) != 1 else ''} "
          + ",".join(map(str, brokers)))
    for broker_id in brokers:
        if broker_id in meta.brokers:  # a broker that is not up has no throttle to clear
            await admin.alter_configs(RESOURCE_BROKER, str(broker_id),
                                      [(name, OP_DELETE, None) for name in BROKER_LEVEL_THROTTLES])
    topics = sorted({tp.topic for tp in targets})
    print(f"Clearing topic-level throttles on topic{'s' if len(topics) != 1 else ''} {','.join(topics)}")
    for topic in topics:
        await admin.alter_configs(RESOURCE_TOPIC, topic, [(name, OP_DELETE, None) for name in TOPIC_LEVEL_THROTTLES])


async def cancel(admin: AdminClient, plan_json: str, preserve_throttles: bool = False) -> set[TopicPartition]:
    """``--cancel``: cancel the plan's partitions still being reassigned; clear the throttles."""
    plan = parse_reassignment_json(plan_json)
    targets = {tp: replicas for tp, replicas, _ in plan}
    active = set(await admin.list_partition_reassignments(targets))
    if active:
        results = await admin.alter_partition_reassignments({tp: None for tp in active})
        errors = {tp: r for tp, r in results.items() if r[0]}
        if errors:
            raise ToolError(f"Error cancelling partition reassignment{'s' if len(errors) != 1 else ''} for:\n"
                            + "\n".join(f"{tp_name(tp)}: {message or error_name(code)}"
                                        for tp, (code, message) in sorted(errors.items())))
        print(f"Successfully cancelled partition reassignment{'s' if len(active) != 1 else ''} for: "
              + ",".join(tp_name(tp) for tp in sorted(active)))
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.")
    if not preserve_throttles:
        await clear_all_throttles(admin, targets)
    return active


async def list_reassignments(admin: AdminClient) -> str:
    """``--list``: Kafka's ``curReassignmentsToString``."""
    ongoing = await admin.list_partition_reassignments()
    if not ongoing:
        return "No partition reassignments found."
    lines = []
    for tp in sorted(ongoing):
        replicas, adding, removing = ongoing[tp]
        line = f"{tp_name(tp)}: replicas: {','.join(map(str, replicas))}."
        if adding:
            line += f" adding: {','.join(map(str, adding))}."
        if removing:
            line += f" removing: {','.join(map(str, removing))}."
        lines.append(line)
    return "Current partition reassignments:\n" + "\n".join(lines)


__all__ = ["add_parser", "assign_replicas_to_brokers", "format_reassignment_json", "main", "parse_reassignment_json"]
