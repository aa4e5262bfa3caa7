"""ListConfigResources (api key 74): requests and responses, versions 0-1.

Version 0 is KIP-1000's ListClientMetricsResources (client metrics resources only); v1 (KIP-1142,
Kafka 4.1) filters by resource type and names each resource's type.
"""

from ..schema import Message, f

ListConfigResourcesRequest = Message('ListConfigResourcesRequest', 74, "0-1", '0+', [
    f('resource_types', '[]int8', '1+'),
])

ListConfigResourcesResponse = Message('ListConfigResourcesResponse', 74, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('config_resources', [
        f('resource_name', 'string'),
        f('resource_type', 'int8', '1+', default=16),
    ]),
])
