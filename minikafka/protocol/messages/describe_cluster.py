"""DescribeCluster (api key 60): requests and responses, versions 0-2.

v1 adds the endpoint type (brokers or controllers); v2 (KIP-1073) lets the client ask for fenced brokers
too, each broker saying whether it is fenced.
"""

from ..schema import Message, f

DescribeClusterRequest = Message('DescribeClusterRequest', 60, "0-2", '0+', [
    f('include_cluster_authorized_operations', 'bool'),
    f('endpoint_type', 'int8', '1+', default=1),
    f('include_fenced_brokers', 'bool', '2+', default=False),
])

DescribeClusterResponse = Message('DescribeClusterResponse', 60, "0-2", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('endpoint_type', 'int8', '1+', default=1),
    f('cluster_id', 'string'),
    f('controller_id', 'int32', default=-1, entity='brokerId'),
    f('brokers', [
        f('broker_id', 'int32', entity='brokerId'),
        f('host', 'string'),
        f('port', 'int32'),
        f('rack', 'string', nullable='0+', default=None),
        f('is_fenced', 'bool', '2+', default=False),
    ]),
    f('cluster_authorized_operations', 'int32', default=-2147483648),
])
