"""AlterReplicaLogDirs (api key 34): requests and responses, versions 0-2 (KIP-113)."""

from ..schema import Message, f

AlterReplicaLogDirsRequest = Message('AlterReplicaLogDirsRequest', 34, "0-2", '2+', [
    f('dirs', [
        f('path', 'string'),
        f('topics', [
            f('name', 'string', entity='topicName'),
            f('partitions', '[]int32', entity='partitionIndex'),
        ]),
    ]),
])

AlterReplicaLogDirsResponse = Message('AlterReplicaLogDirsResponse', 34, "0-2", '2+', [
    f('throttle_time_ms', 'int32'),
    f('results', [
        f('topic_name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
        ]),
    ]),
])
