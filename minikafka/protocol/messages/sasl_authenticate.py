"""SaslAuthenticate (api key 36): requests and responses, versions 0-2 (KIP-152; v1 adds KIP-368's session
lifetime)."""

from ..schema import Message, f

SaslAuthenticateRequest = Message('SaslAuthenticateRequest', 36, "0-2", '2+', [
    f('auth_bytes', 'bytes'),
])

SaslAuthenticateResponse = Message('SaslAuthenticateResponse', 36, "0-2", '2+', [
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+'),
    f('auth_bytes', 'bytes'),
    f('session_lifetime_ms', 'int64', '1+', default=0),
])
