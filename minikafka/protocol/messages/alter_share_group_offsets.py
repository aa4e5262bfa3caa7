"""AlterShareGroupOffsets (api key 91, KIP-932): requests and responses, version 0."""

from ..schema import Message, f

AlterShareGroupOffsetsRequest = Message('AlterShareGroupOffsetsRequest', 91, "0", '0+', [
    f('group_id', 'string', entity='groupId'),
    f('topics', [
        f('topic_name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('start_offset', 'int64'),
        ]),
    ]),
])

AlterShareGroupOffsetsResponse = Message('AlterShareGroupOffsetsResponse', 91, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('responses', [
        f('topic_name', 'string', entity='topicName'),
        f('topic_id', 'uuid', entity='topicId'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
        ]),
    ]),
])
