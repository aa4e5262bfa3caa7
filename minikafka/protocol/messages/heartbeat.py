"""Heartbeat (api key 12): requests and responses, versions 0-4."""

from ..schema import Message, f

HeartbeatRequest = Message('HeartbeatRequest', 12, "0-4", '4+', [
    f('group_id', 'string', entity='groupId'),
    f('generation_id', 'int32'),
    f('member_id', 'string'),
    f('group_instance_id', 'string', '3+', nullable='3+', default=None),
])

HeartbeatResponse = Message('HeartbeatResponse', 12, "0-4", '4+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('error_code', 'int16'),
])
