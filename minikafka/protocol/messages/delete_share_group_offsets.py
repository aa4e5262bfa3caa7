"""DeleteShareGroupOffsets (api key 92, KIP-932): requests and responses, version 0."""

from ..schema import Message, f

DeleteShareGroupOffsetsRequest = Message('DeleteShareGroupOffsetsRequest', 92, "0", '0+', [
    f('group_id', 'string', entity='groupId'),
    f('topics', [
        f('topic_name', 'string', entity='topicName'),
    ]),
])

DeleteShareGroupOffsetsResponse = Message('DeleteShareGroupOffsetsResponse', 92, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('responses', [
        f('topic_name', 'string', entity='topicName'),
        f('topic_id', 'uuid', entity='topicId'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
    ]),
])
