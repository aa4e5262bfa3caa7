"""DescribeCluster (api key 60): requests and responses, versions 0-1."""

from ..schema import Message, f

DescribeClusterRequest = Message('DescribeClusterRequest', 60, "0-1", '0+', [
    f('include_cluster_authorized_operations', 'bool'),
    f('endpoint_type', 'int8', '1+', default=1),
])

DescribeClusterResponse = Message('DescribeClusterResponse', 60, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('endpoint_type', 'int8', '1+', default=1),
    f('cluster_id', 'string'),
    f('controller_id', 'int32', default=-1),
    f('brokers', [
        f('broker_id', 'int32'),
        f('host', 'string'),
        f('port', 'int32'),
        f('rack', 'string', nullable='0+', default=None),
    ]),
    f('cluster_authorized_operations', 'int32', default=-2147483648),
])
