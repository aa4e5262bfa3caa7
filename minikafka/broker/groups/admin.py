"""Group administration queries of the group coordinator.

Models Kafka's ``GroupCoordinator.handleListGroups``, ``handleDescribeGroup``
and ``handleDeleteGroups``.
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from .core import CoordinatorCore, E, S, log
from .metadata import GroupOverview, GroupSummary


class AdminMixin(CoordinatorCore):
    """ListGroups, DescribeGroups and DeleteGroups."""

    def list_groups(self, states: set[str] | None = None) -> tuple[ErrorCode, list[GroupOverview]]:
        """Kafka's ``handleListGroups``; ``states`` filters by state name (case-insensitive)."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE, []
        wanted = {s.lower() for s in states} if states else None
        return E.NONE, [
            g.overview() for g in self.groups.values() if wanted is None or g.state.value.lower() in wanted
        ]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """Kafka's ``handleDescribeGroup``; an unknown group is reported as Dead."""
        err = self._inactive_error(group_id, need_non_empty=False)
        if err is not None:
            return err, GroupSummary("", "", "", [])
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE, GroupSummary(S.DEAD.value, "", "", [])
        return E.NONE, group.summary()

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Kafka's ``handleDeleteGroups``: only Empty groups can be deleted."""
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            err = self._inactive_error(gid, need_non_empty=False)
            if err is not None:
                out[gid] = err
                continue
            group = self.groups.get(gid)
            if group is None or group.state == S.DEAD:
                out[gid] = E.GROUP_ID_NOT_FOUND
            elif group.state == S.EMPTY:
                self._remove_group(group)
                log.info("deleted group %s", gid)
                out[gid] = E.NONE
            else:
                out[gid] = E.NON_EMPTY_GROUP
        return out
