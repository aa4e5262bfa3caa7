"""DeleteTopics (api key 20): requests and responses, versions 0-6."""

from ..schema import Message, f

DeleteTopicsRequest = Message('DeleteTopicsRequest', 20, "0-6", '4+', [
    f('topics', [
        f('name', 'string', '6+', nullable='6+', default=None),
        f('topic_id', 'uuid', '6+'),
    ], '6+'),
    f('topic_names', '[]string', '0-5'),
    f('timeout_ms', 'int32'),
])

DeleteTopicsResponse = Message('DeleteTopicsResponse', 20, "0-6", '4+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('responses', [
        f('name', 'string', nullable='6+'),
        f('topic_id', 'uuid', '6+'),
        f('error_code', 'int16'),
        f('error_message', 'string', '5+', nullable='5+', default=None),
    ]),
])
