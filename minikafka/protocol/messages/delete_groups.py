"""DeleteGroups (api key 42): requests and responses, versions 0-2."""

from ..schema import Message, f

DeleteGroupsRequest = Message('DeleteGroupsRequest', 42, "0-2", '2+', [
    f('groups_names', '[]string', entity='groupId'),
])

DeleteGroupsResponse = Message('DeleteGroupsResponse', 42, "0-2", '2+', [
    f('throttle_time_ms', 'int32'),
    f('results', [
        f('group_id', 'string', entity='groupId'),
        f('error_code', 'int16'),
    ]),
])
