"""SyncGroup (api key 14): requests and responses, versions 0-5."""

from ..schema import Message, f

SyncGroupRequest = Message('SyncGroupRequest', 14, "0-5", '4+', [
    f('group_id', 'string', entity='groupId'),
    f('generation_id', 'int32'),
    f('member_id', 'string'),
    f('group_instance_id', 'string', '3+', nullable='3+', default=None),
    f('protocol_type', 'string', '5+', nullable='5+', default=None),
    f('protocol_name', 'string', '5+', nullable='5+', default=None),
    f('assignments', [
        f('member_id', 'string'),
        f('assignment', 'bytes'),
    ]),
])

SyncGroupResponse = Message('SyncGroupResponse', 14, "0-5", '4+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('error_code', 'int16'),
    f('protocol_type', 'string', '5+', nullable='5+', default=None),
    f('protocol_name', 'string', '5+', nullable='5+', default=None),
    f('assignment', 'bytes'),
])
