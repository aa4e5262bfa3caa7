"""OffsetCommit (api key 8): requests and responses, versions 0-8."""

from ..schema import Message, f

OffsetCommitRequest = Message('OffsetCommitRequest', 8, "0-8", '8+', [
    f('group_id', 'string'),
    f('generation_id_or_member_epoch', 'int32', '1+', default=-1),
    f('member_id', 'string', '1+'),
    f('group_instance_id', 'string', '7+', nullable='7+', default=None),
    f('retention_time_ms', 'int64', '2-4', default=-1),
    f('topics', [
        f('name', 'string'),
        f('partitions', [
            f('partition_index', 'int32'),
            f('committed_offset', 'int64'),
            f('committed_leader_epoch', 'int32', '6+', default=-1),
            f('commit_timestamp', 'int64', '1', default=-1),
            f('committed_metadata', 'string', nullable='0+'),
        ]),
    ]),
])

OffsetCommitResponse = Message('OffsetCommitResponse', 8, "0-8", '8+', [
    f('throttle_time_ms', 'int32', '3+'),
    f('topics', [
        f('name', 'string'),
        f('partitions', [
            f('partition_index', 'int32'),
            f('error_code', 'int16'),
        ]),
    ]),
])
