"""DeleteTopics (api key 20): requests and responses, versions 0-6."""

from ..schema import Message, f

DeleteTopicsRequest = Message('DeleteTopicsRequest', 20, "0-6", '4+', [
    f('topics', [
        f('name', 'string', '6+', nullable='6+', default=None, entity='topicName'),
        f('topic_id', 'uuid', '6+', entity='topicId'),
    ], '6+'),
    f('topic_names', '[]string', '0-5', entity='topicName'),
    f('timeout_ms', 'int32'),
])

DeleteTopicsResponse = Message('DeleteTopicsResponse', 20, "0-6", '4+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('responses', [
        f('name', 'string', nullable='6+', entity='topicName'),
        f('topic_id', 'uuid', '6+', entity='topicId'),
        f('error_code', 'int16'),
        f('error_message', 'string', '5+', nullable='5+', default=None),
    ]),
])
