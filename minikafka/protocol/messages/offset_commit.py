"""OffsetCommit (api key 8): requests and responses, versions 0-10.

Version 9 is the first a KIP-848 consumer uses (``generation_id_or_member_epoch`` carries its member
epoch; the format is version 8's).  Version 10 (stable from Kafka 4.2) names topics by id only.
"""

from ..schema import Message, f

OffsetCommitRequest = Message('OffsetCommitRequest', 8, "0-10", '8+', [
    f('group_id', 'string', entity='groupId'),
    f('generation_id_or_member_epoch', 'int32', '1+', default=-1),
    f('member_id', 'string', '1+'),
    f('group_instance_id', 'string', '7+', nullable='7+', default=None),
    f('retention_time_ms', 'int64', '2-4', default=-1),
    f('topics', [
        f('name', 'string', '0-9', entity='topicName'),
        f('topic_id', 'uuid', '10+', entity='topicId'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('committed_offset', 'int64'),
            f('committed_leader_epoch', 'int32', '6+', default=-1),
            f('commit_timestamp', 'int64', '1', default=-1),
            f('committed_metadata', 'string', nullable='0+'),
        ]),
    ]),
])

OffsetCommitResponse = Message('OffsetCommitResponse', 8, "0-10", '8+', [
    f('throttle_time_ms', 'int32', '3+'),
    f('topics', [
        f('name', 'string', '0-9', entity='topicName'),
        f('topic_id', 'uuid', '10+', entity='topicId'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
        ]),
    ]),
])
