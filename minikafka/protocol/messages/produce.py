"""Produce (api key 0): requests and responses, versions 3-9."""

from ..schema import Message, f

ProduceRequest = Message('ProduceRequest', 0, "3-9", '9+', [
    f('transactional_id', 'string', '3+', nullable='3+', default=None),
    f('acks', 'int16'),
    f('timeout_ms', 'int32'),
    f('topic_data', [
        f('name', 'string'),
        f('partition_data', [
            f('index', 'int32'),
            f('records', 'records', nullable='0+'),
        ]),
    ]),
])

ProduceResponse = Message('ProduceResponse', 0, "3-9", '9+', [
    f('responses', [
        f('name', 'string'),
        f('partition_responses', [
            f('index', 'int32'),
            f('error_code', 'int16'),
            f('base_offset', 'int64'),
            f('log_append_time_ms', 'int64', '2+', default=-1),
            f('log_start_offset', 'int64', '5+', default=-1),
            f('record_errors', [
                f('batch_index', 'int32', '8+'),
                f('batch_index_error_message', 'string', '8+', nullable='8+', default=None),
            ], '8+'),
            f('error_message', 'string', '8+', nullable='8+', default=None),
        ]),
    ]),
    f('throttle_time_ms', 'int32', '1+', default=0),
])
