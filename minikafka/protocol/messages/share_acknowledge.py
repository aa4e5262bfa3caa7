"""ShareAcknowledge (api key 79, KIP-932): requests and responses, versions 1-2.

Version 0 was Kafka 4.0's early access and is gone from Kafka 4.1 on: not declared.  Version 2
(Kafka 4.2, KIP-1222) adds ``is_renew_ack`` (acknowledge type 4, Renew) and the response's
``acquisition_lock_timeout_ms``.
"""

from ..schema import Message, f, struct

ShareAcknowledgeRequest = Message('ShareAcknowledgeRequest', 79, "1-2", '0+', [
    f('group_id', 'string', nullable='0+', default=None, entity='groupId'),
    f('member_id', 'string', nullable='0+'),
    f('share_session_epoch', 'int32'),
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
])

ShareAcknowledgeResponse = Message('ShareAcknowledgeResponse', 79, "1-2", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('acquisition_lock_timeout_ms', 'int32', '2+'),
    f('responses', [
        f('topic_id', 'uuid', entity='topicId'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
            f('current_leader', struct(
                f('leader_id', 'int32', entity='brokerId'),
                f('leader_epoch', 'int32'),
            )),
        ]),
    ]),
    f('node_endpoints', [
        f('node_id', 'int32', entity='brokerId'),
        f('host', 'string'),
        f('port', 'int32'),
        f('rack', 'string', nullable='0+', default=None),
    ]),
])
