"""ListPartitionReassignments (api key 46, KIP-455): requests and responses, version 0."""

from ..schema import Message, f

ListPartitionReassignmentsRequest = Message('ListPartitionReassignmentsRequest', 46, "0", '0+', [
    f('timeout_ms', 'int32', default=60000),
    f('topics', [  # null: every ongoing reassignment
        f('name', 'string', entity='topicName'),
        f('partition_indexes', '[]int32', entity='partitionIndex'),
    ], nullable='0+', default=None),
])

ListPartitionReassignmentsResponse = Message('ListPartitionReassignmentsResponse', 46, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('replicas', '[]int32', entity='brokerId'),
            f('adding_replicas', '[]int32', entity='brokerId'),
            f('removing_replicas', '[]int32', entity='brokerId'),
        ]),
    ]),
])
