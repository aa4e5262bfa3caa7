"""LeaveGroup (api key 13): requests and responses, versions 0-5."""

from ..schema import Message, f

LeaveGroupRequest = Message('LeaveGroupRequest', 13, "0-5", '4+', [
    f('group_id', 'string', entity='groupId'),
    f('member_id', 'string', '0-2'),
    f('members', [
        f('member_id', 'string', '3+'),
        f('group_instance_id', 'string', '3+', nullable='3+', default=None),
        f('reason', 'string', '5+', nullable='5+', default=None),
    ], '3+'),
])

LeaveGroupResponse = Message('LeaveGroupResponse', 13, "0-5", '4+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('error_code', 'int16'),
    f('members', [
        f('member_id', 'string', '3+'),
        f('group_instance_id', 'string', '3+', nullable='3+'),
        f('error_code', 'int16', '3+'),
    ], '3+'),
])
