"""ElectLeaders (api key 43, KIP-183, KIP-460): requests and responses, versions 0-2.

Version 1 adds the election type (0 preferred, 1 unclean; version 0 is preferred only) and a top-level
error code; version 2 is the first flexible version.  Null ``topic_partitions`` means every partition.
"""

from ..schema import Message, f

ElectLeadersRequest = Message('ElectLeadersRequest', 43, "0-2", '2+', [
    f('election_type', 'int8', '1+'),
    f('topic_partitions', [
        f('topic', 'string', entity='topicName'),
        f('partitions', '[]int32', entity='partitionIndex'),
    ], nullable='0+'),
    f('timeout_ms', 'int32', default=60000),
])

ElectLeadersResponse = Message('ElectLeadersResponse', 43, "0-2", '2+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16', '1+'),
    f('replica_election_results', [
        f('topic', 'string', entity='topicName'),
        f('partition_result', [
            f('partition_id', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
        ]),
    ]),
])
