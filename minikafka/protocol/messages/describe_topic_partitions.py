"""DescribeTopicPartitions (api key 75, KIP-966): requests and responses, version 0.

Metadata's topic and partition part, paged: at most ``response_partition_limit`` partitions per response,
resumed from ``cursor`` (a topic name and partition index) with the ``next_cursor`` the previous response
gave.  Partitions carry KIP-966's eligible leader replicas (ELR) and last known ELR.
"""

from ..schema import Message, f, struct


def _cursor():  # Kafka's Cursor: a topic name and the partition index to start at
    return struct(
        f('topic_name', 'string', entity='topicName'),
        f('partition_index', 'int32', entity='partitionIndex'),
    )


DescribeTopicPartitionsRequest = Message('DescribeTopicPartitionsRequest', 75, "0", '0+', [
    f('topics', [
        f('name', 'string', entity='topicName'),
    ]),
    f('response_partition_limit', 'int32', default=2000),
    f('cursor', _cursor(), nullable='0+', default=None),
])

DescribeTopicPartitionsResponse = Message('DescribeTopicPartitionsResponse', 75, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('topics', [
        f('error_code', 'int16'),
        f('name', 'string', nullable='0+', entity='topicName'),
        f('topic_id', 'uuid', entity='topicId'),
        f('is_internal', 'bool', default=False),
        f('partitions', [
            f('error_code', 'int16'),
            f('partition_index', 'int32', entity='partitionIndex'),
            f('leader_id', 'int32', entity='brokerId'),
            f('leader_epoch', 'int32', default=-1),
            f('replica_nodes', '[]int32', entity='brokerId'),
            f('isr_nodes', '[]int32', entity='brokerId'),
            f('eligible_leader_replicas', '[]int32', nullable='0+', default=None, entity='brokerId'),
            f('last_known_elr', '[]int32', nullable='0+', default=None, entity='brokerId'),
            f('offline_replicas', '[]int32', entity='brokerId'),
        ]),
        f('topic_authorized_operations', 'int32', default=-2147483648),
    ]),
    f('next_cursor', _cursor(), nullable='0+', default=None),
])
