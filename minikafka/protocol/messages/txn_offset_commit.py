"""TxnOffsetCommit (api key 28): requests and responses, versions 0-5.

Version 5 has exactly version 4's format: Kafka 4.x added it for KIP-890
(transactions V2, where the offsets' partition is added to the transaction
implicitly instead of through AddOffsetsToTxn).  The JSON schema
minikafka's tests compare against stops at version 4; they check v5
against Kafka's v4.
"""

from ..schema import Message, f

TxnOffsetCommitRequest = Message('TxnOffsetCommitRequest', 28, "0-5", '3+', [
    f('transactional_id', 'string', entity='transactionalId'),
    f('group_id', 'string', entity='groupId'),
    f('producer_id', 'int64', entity='producerId'),
    f('producer_epoch', 'int16'),
    f('generation_id', 'int32', '3+', default=-1),
    f('member_id', 'string', '3+', default=''),
    f('group_instance_id', 'string', '3+', nullable='3+', default=None),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('committed_offset', 'int64'),
            f('committed_leader_epoch', 'int32', '2+', default=-1),
            f('committed_metadata', 'string', nullable='0+'),
        ]),
    ]),
])

TxnOffsetCommitResponse = Message('TxnOffsetCommitResponse', 28, "0-5", '3+', [
    f('throttle_time_ms', 'int32'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
        ]),
    ]),
])
