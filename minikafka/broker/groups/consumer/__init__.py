"""KIP-848 consumer groups: membership, broker-side assignment and reconciliation.

* :mod:`.model`: :class:`ConsumerGroup`, :class:`ConsumerGroupMember`, states and the coordinator's request
  and answer values (Kafka's ``ConsumerGroup``, ``ConsumerGroupMember``, ``MemberState``).
* :mod:`.assignors`: the ``uniform`` and ``range`` server assignors (pure functions).
* :mod:`.reconciliation`: Kafka's ``CurrentAssignmentBuilder`` (revoke before assign, member epochs).
* :mod:`.subscription`: topic-name and regular-expression (RE2/J) subscriptions, subscribed topic metadata.
* :mod:`.heartbeat`: ConsumerGroupHeartbeat, ConsumerGroupDescribe and the member timers, a mixin of the
  group coordinator.
* :mod:`.classic_members`: classic-protocol members inside consumer groups and the online upgrade and
  downgrade between group types.
"""
