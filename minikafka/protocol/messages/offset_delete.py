"""OffsetDelete (api key 47, KIP-496): requests and responses, version 0.

Deletes a group's committed offsets for the partitions named; the group coordinator answers.
"""

from ..schema import Message, f

OffsetDeleteRequest = Message('OffsetDeleteRequest', 47, "0", None, [
    f('group_id', 'string', entity='groupId'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
        ]),
    ]),
])

OffsetDeleteResponse = Message('OffsetDeleteResponse', 47, "0", None, [
    f('error_code', 'int16'),
    f('throttle_time_ms', 'int32'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
        ]),
    ]),
])
