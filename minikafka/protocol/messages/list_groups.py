"""ListGroups (api key 16): requests and responses, versions 0-4."""

from ..schema import Message, f

ListGroupsRequest = Message('ListGroupsRequest', 16, "0-4", '3+', [
    f('states_filter', '[]string', '4+'),
])

ListGroupsResponse = Message('ListGroupsResponse', 16, "0-4", '3+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('error_code', 'int16'),
    f('groups', [
        f('group_id', 'string'),
        f('protocol_type', 'string'),
        f('group_state', 'string', '4+'),
    ]),
])
