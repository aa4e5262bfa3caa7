"""Metadata (api key 3): requests and responses, versions 0-13.

v10 adds topic ids (queries by id work from v12); v13 (KIP-1102) adds a top-level ``error_code`` to the
response, with which a broker tells a client to rebootstrap (REBOOTSTRAP_REQUIRED) or that the request
was refused as a whole.
"""

from ..schema import Message, f

MetadataRequest = Message('MetadataRequest', 3, "0-13", '9+', [
    f('topics', [
        f('topic_id', 'uuid', '10+', entity='topicId'),
        f('name', 'string', nullable='10+', entity='topicName'),
    ], nullable='1+'),
    f('allow_auto_topic_creation', 'bool', '4+', default=True),
    f('include_cluster_authorized_operations', 'bool', '8-10'),
    f('include_topic_authorized_operations', 'bool', '8+'),
])

MetadataResponse = Message('MetadataResponse', 3, "0-13", '9+', [
    f('throttle_time_ms', 'int32', '3+'),
    f('brokers', [
        f('node_id', 'int32', entity='brokerId'),
        f('host', 'string'),
        f('port', 'int32'),
        f('rack', 'string', '1+', nullable='1+', default=None),
    ]),
    f('cluster_id', 'string', '2+', nullable='2+', default=None),
    f('controller_id', 'int32', '1+', default=-1, entity='brokerId'),
    f('topics', [
        f('error_code', 'int16'),
        f('name', 'string', nullable='12+', entity='topicName'),
        f('topic_id', 'uuid', '10+', entity='topicId'),
        f('is_internal', 'bool', '1+', default=False),
        f('partitions', [
            f('error_code', 'int16'),
            f('partition_index', 'int32', entity='partitionIndex'),
            f('leader_id', 'int32', entity='brokerId'),
            f('leader_epoch', 'int32', '7+', default=-1),
            f('replica_nodes', '[]int32', entity='brokerId'),
            f('isr_nodes', '[]int32', entity='brokerId'),
            f('offline_replicas', '[]int32', '5+', entity='brokerId'),
        ]),
        f('topic_authorized_operations', 'int32', '8+', default=-2147483648),
    ]),
    f('cluster_authorized_operations', 'int32', '8-10', default=-2147483648),
    f('error_code', 'int16', '13+'),
])
