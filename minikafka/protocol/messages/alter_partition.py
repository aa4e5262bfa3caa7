"""AlterPartition (api key 56, KIP-497, KIP-704, KIP-841, KIP-903): requests and responses, versions 0-3.

A partition leader asks the KRaft controller to change the partition's ISR; the answer is the partition's
state after it.  v1 adds the leader recovery state, v2 names topics by id, v3 gives each ISR member with its
broker epoch.
"""

from ..schema import Message, f

AlterPartitionRequest = Message('AlterPartitionRequest', 56, "0-3", '0+', [
    f('broker_id', 'int32', entity='brokerId'),
    f('broker_epoch', 'int64', default=-1),
    f('topics', [
        f('topic_name', 'string', '0-1', entity='topicName'),
        f('topic_id', 'uuid', '2+', entity='topicId'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('leader_epoch', 'int32'),
            f('new_isr', '[]int32', '0-2', entity='brokerId'),
            f('new_isr_with_epochs', [
                f('broker_id', 'int32', entity='brokerId'),
                f('broker_epoch', 'int64', default=-1),
            ], '3+'),
            f('leader_recovery_state', 'int8', '1+', default=0),
            f('partition_epoch', 'int32'),
        ]),
    ]),
])

AlterPartitionResponse = Message('AlterPartitionResponse', 56, "0-3", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('topics', [
        f('topic_name', 'string', '0-1', entity='topicName'),
        f('topic_id', 'uuid', '2+', entity='topicId'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('leader_id', 'int32', entity='brokerId'),
            f('leader_epoch', 'int32'),
            f('isr', '[]int32', entity='brokerId'),
            f('leader_recovery_state', 'int8', '1+', default=0),
            f('partition_epoch', 'int32'),
        ]),
    ]),
])
