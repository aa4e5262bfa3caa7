"""CreateTopics (api key 19): requests and responses, versions 0-7."""

from ..schema import Message, f

CreateTopicsRequest = Message('CreateTopicsRequest', 19, "0-7", '5+', [
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('num_partitions', 'int32'),
        f('replication_factor', 'int16'),
        f('assignments', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('broker_ids', '[]int32', entity='brokerId'),
        ]),
        f('configs', [
            f('name', 'string'),
            f('value', 'string', nullable='0+'),
        ]),
    ]),
    f('timeout_ms', 'int32', default=60000),
    f('validate_only', 'bool', '1+', default=False),
])

CreateTopicsResponse = Message('CreateTopicsResponse', 19, "0-7", '5+', [
    f('throttle_time_ms', 'int32', '2+'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('topic_id', 'uuid', '7+', entity='topicId'),
        f('error_code', 'int16'),
        f('error_message', 'string', '1+', nullable='0+'),
        f('topic_config_error_code', 'int16', '5+', tag=0),
        f('num_partitions', 'int32', '5+', default=-1),
        f('replication_factor', 'int16', '5+', default=-1),
        f('configs', [
            f('name', 'string', '5+'),
            f('value', 'string', '5+', nullable='5+'),
            f('read_only', 'bool', '5+'),
            f('config_source', 'int8', '5+', default=-1),
            f('is_sensitive', 'bool', '5+'),
        ], '5+', nullable='5+'),
    ]),
])
