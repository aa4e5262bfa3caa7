"""A share group and its members (Kafka's ``ShareGroup`` and ``ShareGroupMember``).

A share group is a modern group (KIP-848 style: the coordinator assigns, members heartbeat) whose
partitions may be held by several members at once.  It keeps:

* the **group epoch**, bumped whenever membership, a subscription or the subscribed topics' metadata
  (topic ids, partition counts) change;
* the **target assignment** computed by the assignor for a group epoch (the **assignment epoch**);
* per member its subscription, its member epoch (and the previous one, which a member whose response was
  lost may still use) and the partitions it was told about.

Share groups have no revocation phase (Kafka's ``ShareGroupAssignmentBuilder``): a member heartbeating
below the assignment epoch simply takes its target assignment and that epoch.  States as Kafka's
``ShareGroup.ShareGroupState``: ``Empty`` (no members), ``Stable``, ``Dead`` (deleted).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ..groups.consumer.model import TopicImage
from enum import Enum

MemberAssignment = dict[uuid.UUID, set[int]]


class ShareGroupState(str, Enum):
    """Kafka's ``ShareGroup.ShareGroupState`` as ListGroups / ShareGroupDescribe name it."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareGroupMember:
    """One member of a share group (Kafka's ``ShareGroupMember``); ``session_deadline`` is on the
    coordinator's clock (seconds)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned_partitions: MemberAssignment = field(default_factory=dict)
    session_deadline: float = 0.0


@dataclass
class ShareGroup:
    """A share group's membership and assignment (Kafka's ``ShareGroup``)."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    # member id -> the partitions the assignor gave it at ``assignment_epoch``
    target_assignment: dict[str, MemberAssignment] = field(default_factory=dict)
    # subscribed topic name -> (topic id, partition count) as of the last epoch bump
    subscription_metadata: dict[str, TopicImage] = field(default_factory=dict)  # by topic name
    dead: bool = False

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        """Every topic some member subscribes to."""
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def assignment_of(self, member_id: str) -> MemberAssignment:
        return self.target_assignment.get(member_id, {})
