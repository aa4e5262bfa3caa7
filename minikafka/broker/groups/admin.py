"""Group administration queries of the group coordinator.

Models Kafka's ``GroupCoordinator.handleListGroups``, ``handleDescribeGroup``
and ``handleDeleteGroups`` as Kafka 4's ``GroupMetadataManager`` answers them for
classic and KIP-848 consumer groups alike: ListGroups names each group's type
and filters by state and type; DescribeGroups (the classic API) describes classic
groups only, a consumer group is "not found" there (ConsumerGroupDescribe
describes it); DeleteGroups deletes a group of either type once it is Empty.
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from .core import CoordinatorCore, E, S, log
from .metadata import CONSUMER_PROTOCOL_TYPE, GROUP_TYPE_CONSUMER, GroupMetadata, GroupOverview, GroupSummary


class GroupAdmin:
    """ListGroups, DescribeGroups and DeleteGroups over the groups of ``core`` (a part of the group coordinator)."""

    def __init__(self, core: CoordinatorCore) -> None:
        self.core = core

    def list_groups(self, states: set[str] | None = None,
                    types: set[str] | None = None) -> tuple[ErrorCode, list[GroupOverview]]:
        """Kafka's ``listGroups``: ``states`` filters by state name (case-insensitive, trimmed), ``types``
        by group type (``classic``, ``consumer``; case-insensitive, an unknown type matches nothing)."""
        if self.core._closed:
            return E.COORDINATOR_NOT_AVAILABLE, []
        wanted_states = {s.strip().lower() for s in states} if states else None
        wanted_types = {t.lower() for t in types} if types else None
        out = []
        for group in self.core.groups.values():
            overview = group_overview(group)
            if wanted_states is not None and overview.state.lower() not in wanted_states:
                continue
            if wanted_types is not None and overview.group_type not in wanted_types:
                continue
            out.append(overview)
        return E.NONE, out

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """Kafka's ``describeGroups``: a group that does not exist, or is not a classic group, is
        GROUP_ID_NOT_FOUND in a Dead summary with a message (DescribeGroups before v6 reports it
        as a Dead group without an error)."""
        err = self.core._inactive_error(group_id, need_non_empty=False)
        if err is not None:
            return err, GroupSummary("", "", "", [])
        group = self.core.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND, GroupSummary(S.DEAD.value, "", "", [], f"Group {group_id} not found.")
        if group.consumer is not None:
            return E.GROUP_ID_NOT_FOUND, GroupSummary(S.DEAD.value, "", "", [],
                                                      f"Group {group_id} is not a classic group.")
        return E.NONE, group.summary()

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Kafka's ``deleteGroups``: only Empty groups can be deleted (with their offsets)."""
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            err = self.core._inactive_error(gid, need_non_empty=False)
            if err is not None:
                out[gid] = err
                continue
            group = self.core.groups.get(gid)
            if group is None or group.state == S.DEAD:
                out[gid] = E.GROUP_ID_NOT_FOUND
            elif is_empty(group):
                self.core._remove_group(group)
                log.info("deleted group %s", gid)
                out[gid] = E.NONE
            else:
                out[gid] = E.NON_EMPTY_GROUP
        return out


def is_empty(group: GroupMetadata) -> bool:
    """Kafka's ``Group.isEmpty``: a consumer group without members, a classic group in Empty."""
    if group.consumer is not None:
        return not group.consumer.members
    return group.state == S.EMPTY


def group_overview(group: GroupMetadata) -> GroupOverview:
    """Kafka's ``asListedGroup``: id, protocol type, state and type."""
    if group.consumer is not None:
        return GroupOverview(group.group_id, CONSUMER_PROTOCOL_TYPE, group.consumer.state.value, GROUP_TYPE_CONSUMER)
    return group.overview()
