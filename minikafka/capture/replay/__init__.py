"""Wire replay of a traffic capture against another Kafka broker, comparing every response.

Resembles traffic shadowing/replay tools (``tcpreplay``, GoReplay, Kafka's
``kafka-producer-perf-test`` driven by recorded traffic) but works at the
Kafka protocol level: each captured connection is re-opened as one TCP
connection to the target and its request frames are re-sent in order, with
fresh correlation ids (a map new -> original is kept).  Every response is
decoded with :mod:`minikafka.protocol` next to the captured one and compared
field by field.

Ordering and pacing:

* within a connection requests go out in capture order with at most
  ``max_in_flight`` outstanding (Kafka clients pipeline up to 5);
* causality: a request is held until every request whose captured response was
  sent before it was received has been answered in the replay (on the same
  connection, or on any connection with ``causality="global"``, the default),
  so a consumer never fetches before the produce it saw in the capture, and a
  SyncGroup never goes out before its JoinGroup's answer;
* pacing: at ``speed`` x, request *i* is due at
  ``start + (receive_ns_i - first receive_ns of the capture) / speed``;
  ``speed=None`` ("max") sends as soon as order and causality allow.

Values a broker makes up differ between runs; they are mapped, not compared:
fetch session ids, topic ids, group member ids and generations, member and
group epochs (KIP-848 consumer groups, KIP-932 share groups; per member, see
:mod:`.rewrite`), producer ids and epochs (InitProducerId), node ids.  Member
ids a client makes (ConsumerGroupHeartbeat v1, ShareGroupHeartbeat) map to
themselves, but order the member's requests after the heartbeat that joined
with them.  The first response that shows a value
teaches the map captured -> replayed; later requests are rewritten through it
(FetchRequest.session_id and topic ids, group requests' member id and
generation, and the producer id/epoch inside Produce record batches, whose
CRC-32C is recomputed) and later responses compared through it.  Fields that
legitimately differ (throttle time, cluster id, host/port, log-append
timestamps, batch CRCs) are counted as expected differences, and so are what
membership timing decides in groups of several members (assignments, epochs,
describe responses' members) and which records a share consumer acquires
(:mod:`.compare` says exactly what).

Security: against a secured target (:class:`ReplaySecurity`: TLS with a CA,
client certificate and key; SASL PLAIN or SCRAM-SHA-256/512) each replayed
connection does the TLS handshake, then authenticates as the principal the
capture recorded for it (per-principal credentials, or one user for all),
renewing its session as KIP-368 asks (``session_lifetime_ms``).  Captured
SaslHandshake/SaslAuthenticate requests are never re-sent: their tokens are
single-use (a SCRAM proof answers one server nonce), so they are skipped and
counted in the report.

Cluster targets (``--to h1:p1,h2:p2``, :mod:`.routing`): requests go where a
client's would, from the target's metadata -- partitions to their leader (a
stateless request spanning leaders split per leader and its answers merged in
the captured order), group and transactional requests to their coordinator,
the rest to the connection's first node -- over one connection per (captured
connection, target node); the report counts requests per API per node.  A
request in a fetch or share session goes whole to the node its session started
on (counted ``unsplittable``).  A connection the target closes is reopened for
the requests still to send (at most ``max_reconnects`` times per captured
connection, with backoff; those in flight are counted lost).

Load generation (``--scale K``, ``ReplayOptions.scale``): the capture is replayed K times at once, each copy
by its own replayer (its own maps and causality; copies never wait on each other) under its own names --
topics, groups, transactional and client ids prefixed ``s<i>.`` (:mod:`.rename`), requests renamed before they
go out and responses un-renamed before they are compared, so each copy compares as if it had been alone.

Differences from a real client: requests are never retried (an error answer is
compared as it is), and requests of api keys minikafka does not know are sent
verbatim and compared as raw bytes.
"""

from .options import (
    DEFAULT_EXAMPLES,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_TIMEOUT_S,
    ConnKey,
    ReplayOptions,
    ReplaySecurity,
    SaslCredentials,
    load_credentials,
    parse_speed,
    parse_target,
)
from .report import ApiStats, ReplayReport
from .rewrite import rewrite_producer_ids
from .plan import ReplayPlan, build_plan
from .runner import (SASL_API_KEYS, ReplaySync, connection_principal, group_connections, replay_capture, replay_records,
                     run_replay, run_replay_copies)

__all__ = [
    "DEFAULT_EXAMPLES", "DEFAULT_MAX_IN_FLIGHT", "DEFAULT_TIMEOUT_S", "SASL_API_KEYS",
    "ApiStats", "ConnKey", "ReplayOptions", "ReplayPlan", "ReplayReport", "ReplaySync", "ReplaySecurity",
    "SaslCredentials",
    "connection_principal", "group_connections", "load_credentials", "parse_speed", "parse_target", "build_plan",
    "replay_capture", "replay_records", "rewrite_producer_ids", "run_replay", "run_replay_copies",
]
