"""ShareFetch (api key 78, KIP-932): requests and responses, versions 1-2.

Version 0 was Kafka 4.0's early access and is gone from Kafka 4.1 on: not declared.  Version 2
(Kafka 4.2) adds ``share_acquire_mode`` (KIP-1206) and ``is_renew_ack`` with the Renew
acknowledge type 4 (KIP-1222); the response is unchanged.
"""

from ..schema import Message, f, struct


ShareFetchRequest = Message('ShareFetchRequest', 78, "1-2", '0+', [
    f('group_id', 'string', nullable='0+', default=None, entity='groupId'),
    f('member_id', 'string', nullable='0+'),
    f('share_session_epoch', 'int32'),
    f('max_wait_ms', 'int32'),
    f('min_bytes', 'int32'),
    f('max_bytes', 'int32', default=0x7FFFFFFF),
    f('max_records', 'int32', '1+'),
    f('batch_size', 'int32', '1+'),
    f('share_acquire_mode', 'int8', '2+', default=0),
    f('is_renew_ack', 'bool', '2+', default=False),
    f('topics', [
        f('topic_id', 'uuid', entity='topicId'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('acknowledgement_batches', [
                f('first_offset', 'int64'),
                f('last_offset', 'int64'),
                f('acknowledge_types', '[]int8'),
            ]),
        ]),
    ]),
    f('forgotten_topics_data', [
        f('topic_id', 'uuid', entity='topicId'),
        f('partitions', '[]int32', entity='partitionIndex'),
    ]),
])

ShareFetchResponse = Message('ShareFetchResponse', 78, "1-2", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('acquisition_lock_timeout_ms', 'int32'),
    f('responses', [
        f('topic_id', 'uuid', entity='topicId'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
            f('acknowledge_error_code', 'int16'),
            f('acknowledge_error_message', 'string', nullable='0+', default=None),
            f('current_leader', struct(
                f('leader_id', 'int32', entity='brokerId'),
                f('leader_epoch', 'int32'),
            )),
            f('records', 'records', nullable='0+'),
            f('acquired_records', [
                f('first_offset', 'int64'),
                f('last_offset', 'int64'),
                f('delivery_count', 'int16'),
            ]),
        ]),
    ]),
    f('node_endpoints', [  # the leaders of the partitions answered NOT_LEADER_OR_FOLLOWER
        f('node_id', 'int32', entity='brokerId'),
        f('host', 'string'),
        f('port', 'int32'),
        f('rack', 'string', nullable='0+', default=None),
    ]),
])
