"""CreatePartitions (api key 37): requests and responses, versions 0-3."""

from ..schema import Message, f

CreatePartitionsRequest = Message('CreatePartitionsRequest', 37, "0-3", '2+', [
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('count', 'int32'),
        f('assignments', [
            f('broker_ids', '[]int32', entity='brokerId'),
        ], nullable='0+'),
    ]),
    f('timeout_ms', 'int32'),
    f('validate_only', 'bool'),
])

CreatePartitionsResponse = Message('CreatePartitionsResponse', 37, "0-3", '2+', [
    f('throttle_time_ms', 'int32'),
    f('results', [
        f('name', 'string', entity='topicName'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
    ]),
])
