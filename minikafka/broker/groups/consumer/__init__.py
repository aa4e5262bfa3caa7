"""KIP-848 consumer groups: membership, broker-side assignment and reconciliation.

* :mod:`.model`: :class:`ConsumerGroup`, :class:`ConsumerGroupMember`, states and the coordinator's request
  and answer values (Kafka's ``ConsumerGroup``, ``ConsumerGroupMember``, ``MemberState``).
* :mod:`.assignors`: the ``uniform`` and ``range`` server assignors (pure functions).
* :mod:`.reconciliation`: Kafka's ``CurrentAssignmentBuilder`` (revoke before assign, member epochs).
* :mod:`.subscription`: topic-name and regular-expression (RE2/J) subscriptions, subscribed topic metadata.
* :mod:`.heartbeat`: ConsumerGroupHeartbeat, ConsumerGroupDescribe and the member timers: the group
  coordinator's consumer-groups part (:class:`~.heartbeat.ConsumerGroupManager`).
* :mod:`.classic_members` and :mod:`.migration`: classic-protocol members inside consumer groups and the online
  upgrade and downgrade between group types (parts the coordinator wires to it).
* :mod:`.records`: a consumer group as Kafka's ``__consumer_offsets`` records, and back.
"""
