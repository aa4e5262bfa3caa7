"""ListGroups (api key 16): requests and responses, versions 0-5.

Version 5 adds the ``types_filter`` and each group's ``group_type`` (KIP-848: classic, consumer, share).
"""

from ..schema import Message, f

ListGroupsRequest = Message('ListGroupsRequest', 16, "0-5", '3+', [
    f('states_filter', '[]string', '4+'),
    f('types_filter', '[]string', '5+'),
])

ListGroupsResponse = Message('ListGroupsResponse', 16, "0-5", '3+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('error_code', 'int16'),
    f('groups', [
        f('group_id', 'string', entity='groupId'),
        f('protocol_type', 'string'),
        f('group_state', 'string', '4+'),
        f('group_type', 'string', '5+'),
    ]),
])
