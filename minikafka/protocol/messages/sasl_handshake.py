"""SaslHandshake (api key 17): requests and responses, versions 0-1.

Version 0 makes the SASL tokens that follow travel as raw size-prefixed frames (the pre-KIP-152 way);
version 1 has them wrapped in SaslAuthenticate requests.
"""

from ..schema import Message, f

SaslHandshakeRequest = Message('SaslHandshakeRequest', 17, "0-1", None, [
    f('mechanism', 'string'),
])

SaslHandshakeResponse = Message('SaslHandshakeResponse', 17, "0-1", None, [
    f('error_code', 'int16'),
    f('mechanisms', '[]string'),
])
