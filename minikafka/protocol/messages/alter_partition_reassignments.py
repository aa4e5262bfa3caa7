"""AlterPartitionReassignments (api key 45, KIP-455): requests and responses, versions 0-1.

Version 1 adds ``allow_replication_factor_change`` (KIP-860): false refuses a target replica list whose
size differs from the partition's replication factor.
"""

from ..schema import Message, f

AlterPartitionReassignmentsRequest = Message('AlterPartitionReassignmentsRequest', 45, "0-1", '0+', [
    f('timeout_ms', 'int32', default=60000),
    f('allow_replication_factor_change', 'bool', '1+', default=True),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('replicas', '[]int32', nullable='0+', default=None,
              entity='brokerId'),  # null: cancel the ongoing reassignment
        ]),
    ]),
])

AlterPartitionReassignmentsResponse = Message('AlterPartitionReassignmentsResponse', 45, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('allow_replication_factor_change', 'bool', '1+', default=True),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('responses', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
        ]),
    ]),
])
