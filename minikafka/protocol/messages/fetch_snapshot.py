"""FetchSnapshot (api key 59, KIP-630): requests and responses, versions 0-1.

A broker (or a controller follower) whose fetch offset is below the start of the ``__cluster_metadata`` log
reads the snapshot the Fetch answer named, in pieces by byte position.  v1 adds the follower's directory id and
the current leaders' endpoints (tagged).
"""

from ..schema import Message, f, struct

FetchSnapshotRequest = Message('FetchSnapshotRequest', 59, "0-1", '0+', [
    f('cluster_id', 'string', '0+', nullable='0+', default=None, tag=0),
    f('replica_id', 'int32', default=-1, entity='brokerId'),
    f('max_bytes', 'int32', default=0x7fffffff),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition', 'int32', entity='partitionIndex'),
            f('current_leader_epoch', 'int32'),
            f('snapshot_id', struct(
                f('end_offset', 'int64'),
                f('epoch', 'int32'),
            )),
            f('position', 'int64'),
            f('replica_directory_id', 'uuid', '1+', tag=0),
        ]),
    ]),
])

FetchSnapshotResponse = Message('FetchSnapshotResponse', 59, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('snapshot_id', struct(
                f('end_offset', 'int64'),
                f('epoch', 'int32'),
            )),
            f('current_leader', struct(
                f('leader_id', 'int32', entity='brokerId'),
                f('leader_epoch', 'int32'),
            ), '0+', tag=0),
            f('size', 'int64'),
            f('position', 'int64'),
            f('unaligned_records', 'records'),
        ]),
    ]),
    f('node_endpoints', [
        f('node_id', 'int32', '1+', entity='brokerId'),
        f('host', 'string', '1+'),
        f('port', 'uint16', '1+'),
    ], '1+', tag=0),
])
