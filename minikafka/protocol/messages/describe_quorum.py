"""DescribeQuorum (api key 55, KIP-595, KIP-836, KIP-853): requests and responses, versions 0-2.

Describes the KRaft metadata log partition (``__cluster_metadata``-0): its leader, epoch, high watermark,
voters and observers.  Version 1 adds each replica's last fetch and last caught-up timestamps; version 2
adds error messages, replica directory ids and the voters' listener endpoints (``nodes``).
"""

from ..schema import Message, f


def _replica_state():  # Kafka's common struct ReplicaState
    return [
        f('replica_id', 'int32', entity='brokerId'),
        f('replica_directory_id', 'uuid', '2+'),
        f('log_end_offset', 'int64'),
        f('last_fetch_timestamp', 'int64', '1+', default=-1),
        f('last_caught_up_timestamp', 'int64', '1+', default=-1),
    ]


DescribeQuorumRequest = Message('DescribeQuorumRequest', 55, "0-2", '0+', [
    f('topics', [
        f('topic_name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
        ]),
    ]),
])

DescribeQuorumResponse = Message('DescribeQuorumResponse', 55, "0-2", '0+', [
    f('error_code', 'int16'),
    f('error_message', 'string', '2+', nullable='2+', default=None),
    f('topics', [
        f('topic_name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('error_message', 'string', '2+', nullable='2+', default=None),
            f('leader_id', 'int32', entity='brokerId'),
            f('leader_epoch', 'int32'),
            f('high_watermark', 'int64'),
            f('current_voters', _replica_state()),
            f('observers', _replica_state()),
        ]),
    ]),
    f('nodes', [
        f('node_id', 'int32', '2+', entity='brokerId'),
        f('listeners', [
            f('name', 'string', '2+'),
            f('host', 'string', '2+'),
            f('port', 'uint16', '2+'),
        ], '2+'),
    ], '2+'),
])
