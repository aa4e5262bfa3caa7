"""DescribeShareGroupOffsets (api key 90, KIP-932): requests and responses, versions 0-1.

Version 1 adds each partition's ``lag`` (Kafka 4.2).
"""

from ..schema import Message, f

DescribeShareGroupOffsetsRequest = Message('DescribeShareGroupOffsetsRequest', 90, "0-1", '0+', [
    f('groups', [
        f('group_id', 'string', entity='groupId'),
        f('topics', [
            f('topic_name', 'string', entity='topicName'),
            f('partitions', '[]int32', entity='partitionIndex'),
        ], nullable='0+'),
    ]),
])

DescribeShareGroupOffsetsResponse = Message('DescribeShareGroupOffsetsResponse', 90, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('groups', [
        f('group_id', 'string', entity='groupId'),
        f('topics', [
            f('topic_name', 'string', entity='topicName'),
            f('topic_id', 'uuid', entity='topicId'),
            f('partitions', [
                f('partition_index', 'int32', entity='partitionIndex'),
                f('start_offset', 'int64'),
                f('leader_epoch', 'int32'),
                f('lag', 'int64', '1+', default=-1),
                f('error_code', 'int16'),
                f('error_message', 'string', nullable='0+', default=None),
            ]),
        ]),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
    ]),
])
