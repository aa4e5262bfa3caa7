"""DescribeGroups (api key 15): requests and responses, versions 0-6.

Version 6 (KIP-1043) adds each group's ``error_message`` and answers GROUP_ID_NOT_FOUND for an
unknown group (Dead and empty before).
"""

from ..schema import Message, f

DescribeGroupsRequest = Message('DescribeGroupsRequest', 15, "0-6", '5+', [
    f('groups', '[]string', entity='groupId'),
    f('include_authorized_operations', 'bool', '3+'),
])

DescribeGroupsResponse = Message('DescribeGroupsResponse', 15, "0-6", '5+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('groups', [
        f('error_code', 'int16'),
        f('error_message', 'string', '6+', nullable='6+', default=None),
        f('group_id', 'string', entity='groupId'),
        f('group_state', 'string'),
        f('protocol_type', 'string'),
        f('protocol_data', 'string'),
        f('members', [
            f('member_id', 'string'),
            f('group_instance_id', 'string', '4+', nullable='4+', default=None),
            f('client_id', 'string', entity='clientId'),
            f('client_host', 'string'),
            f('member_metadata', 'bytes'),
            f('member_assignment', 'bytes'),
        ]),
        f('authorized_operations', 'int32', '3+', default=-2147483648),
    ]),
])
