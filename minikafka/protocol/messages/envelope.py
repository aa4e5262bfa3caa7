"""Envelope (api key 58, KIP-590): requests and responses, version 0.

A broker forwards a client's admin request to the KRaft controller: the request's bytes (header and body),
the client's principal (``DefaultPrincipalData``, :mod:`~minikafka.protocol.principal`) and address; the
answer carries the response's bytes.
"""

from ..schema import Message, f

EnvelopeRequest = Message('EnvelopeRequest', 58, "0", '0+', [
    f('request_data', 'bytes'),
    f('request_principal', 'bytes', nullable='0+'),
    f('client_host_address', 'bytes'),
])

EnvelopeResponse = Message('EnvelopeResponse', 58, "0", '0+', [
    f('response_data', 'bytes', nullable='0+', default=None),
    f('error_code', 'int16'),
])
