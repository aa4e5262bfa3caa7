"""Produce (api key 0): requests and responses, versions 3-13.

What each version means (Kafka 4.2's ``ProduceRequest.json``): v9 is the first flexible version; v10
(KIP-951) answers a partition refused with NOT_LEADER_OR_FOLLOWER with the ``current_leader`` and lists
that leader's endpoint in ``node_endpoints``; v11 (KIP-890) may answer TRANSACTION_ABORTABLE, which
older versions get as INVALID_TXN_STATE; v12 (KIP-890 part 2) is v11's format, and a transactional
producer using it under transaction version 2 lets the produce request add the partition to its
transaction; v13 (KIP-516) names topics by ``topic_id`` instead of ``name`` and may answer
UNKNOWN_TOPIC_ID.
"""

from ..schema import Message, f, struct

ProduceRequest = Message('ProduceRequest', 0, "3-13", '9+', [
    f('transactional_id', 'string', '3+', nullable='3+', default=None, entity='transactionalId'),
    f('acks', 'int16'),
    f('timeout_ms', 'int32'),
    f('topic_data', [
        f('name', 'string', '0-12', entity='topicName'),
        f('topic_id', 'uuid', '13+', entity='topicId'),
        f('partition_data', [
            f('index', 'int32', entity='partitionIndex'),
            f('records', 'records', nullable='0+'),
        ]),
    ]),
])

ProduceResponse = Message('ProduceResponse', 0, "3-13", '9+', [
    f('responses', [
        f('name', 'string', '0-12', entity='topicName'),
        f('topic_id', 'uuid', '13+', entity='topicId'),
        f('partition_responses', [
            f('index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('base_offset', 'int64'),
            f('log_append_time_ms', 'int64', '2+', default=-1),
            f('log_start_offset', 'int64', '5+', default=-1),
            f('record_errors', [
                f('batch_index', 'int32', '8+'),
                f('batch_index_error_message', 'string', '8+', nullable='8+', default=None),
            ], '8+'),
            f('error_message', 'string', '8+', nullable='8+', default=None),
            f('current_leader', struct(
                f('leader_id', 'int32', '10+', default=-1, entity='brokerId'),
                f('leader_epoch', 'int32', '10+', default=-1),
            ), '10+', tag=0),
        ]),
    ]),
    f('throttle_time_ms', 'int32', '1+', default=0),
    f('node_endpoints', [
        f('node_id', 'int32', '10+', entity='brokerId'),
        f('host', 'string', '10+'),
        f('port', 'int32', '10+'),
        f('rack', 'string', '10+', nullable='10+', default=None),
    ], '10+', tag=0),
])
