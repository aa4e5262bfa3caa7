"""OffsetFetch (api key 9): requests and responses, versions 0-10.

Version 9 adds the KIP-848 ``member_id``/``member_epoch`` of each group (STALE_MEMBER_EPOCH and
UNKNOWN_MEMBER_ID answer a mismatch).  Version 10 (stable from Kafka 4.2) names topics by id only.
"""

from ..schema import Message, f

OffsetFetchRequest = Message('OffsetFetchRequest', 9, "0-10", '6+', [
    f('group_id', 'string', '0-7', entity='groupId'),
    f('topics', [
        f('name', 'string', '0-7', entity='topicName'),
        f('partition_indexes', '[]int32', '0-7', entity='partitionIndex'),
    ], '0-7', nullable='2-7'),
    f('groups', [
        f('group_id', 'string', '8+', entity='groupId'),
        f('member_id', 'string', '9+', nullable='9+', default=None),
        f('member_epoch', 'int32', '9+', default=-1),
        f('topics', [
            f('name', 'string', '8-9', entity='topicName'),
            f('topic_id', 'uuid', '10+', entity='topicId'),
            f('partition_indexes', '[]int32', '8+', entity='partitionIndex'),
        ], '8+', nullable='8+'),
    ], '8+'),
    f('require_stable', 'bool', '7+', default=False),
])

OffsetFetchResponse = Message('OffsetFetchResponse', 9, "0-10", '6+', [
    f('throttle_time_ms', 'int32', '3+'),
    f('topics', [
        f('name', 'string', '0-7', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', '0-7', entity='partitionIndex'),
            f('committed_offset', 'int64', '0-7'),
            f('committed_leader_epoch', 'int32', '5-7', default=-1),
            f('metadata', 'string', '0-7', nullable='0-7'),
            f('error_code', 'int16', '0-7'),
        ], '0-7'),
    ], '0-7'),
    f('error_code', 'int16', '2-7', default=0),
    f('groups', [
        f('group_id', 'string', '8+', entity='groupId'),
        f('topics', [
            f('name', 'string', '8-9', entity='topicName'),
            f('topic_id', 'uuid', '10+', entity='topicId'),
            f('partitions', [
                f('partition_index', 'int32', '8+', entity='partitionIndex'),
                f('committed_offset', 'int64', '8+'),
                f('committed_leader_epoch', 'int32', '8+', default=-1),
                f('metadata', 'string', '8+', nullable='8+'),
                f('error_code', 'int16', '8+'),
            ], '8+'),
        ], '8+'),
        f('error_code', 'int16', '8+', default=0),
    ], '8+'),
])
