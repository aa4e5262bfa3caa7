"""Fetch-session savings (KIP-227): bytes actually sent vs what sessionless full fetches would have cost.

Sessions are reconstructed from the capture, per broker and session id (a
session belongs to a broker, not a connection): the full fetch (epoch 0) that
created it (its id comes back in the response), then every incremental fetch
naming that id, which adds or updates the partitions it names and drops its
forgotten ones.  For every fetch of a session the counterfactual is the same
fetch sent sessionless: a request naming every partition of the session, and a
response carrying every one of them (those the incremental response left out
as empty entries).  Sizes are exact for the request's version: the difference
between two bodies built with minikafka's protocol layer (the session's
partitions vs the partitions actually present) is added to the captured body
size, so fields the rows do not keep (rack id, tagged fields) cancel out.
Sessionless fetches (before v7, or epoch -1) cost what they cost: no saving.

Modelled on Kafka's ``FetchSession``/``CachedPartition`` bookkeeping; differs
in that a session whose full fetch is not in the capture (it started before
the capture did) is reconstructed from its incremental fetches alone, so its
counterfactual only knows the partitions seen so far (rows say so:
``complete`` is false).

Share sessions (KIP-932, ``share_sessions``): a share consumer's ShareFetch and
ShareAcknowledge requests to a broker run in a share session named by its group
and member id (no session id), whose ShareSessionEpoch is 0 in the ShareFetch that
opens it, -1 in the request that closes it, and otherwise the previous epoch + 1
(after 2^31-1 comes 1), as Kafka's ``ShareRequestMetadata.nextEpoch``.  Per
(broker, group, member) the requests are replayed in order: ``opens``/``closes``
count epoch 0 and -1, ``out_of_sequence`` the requests whose epoch is not the one
the session expected (the broker answers those INVALID_SHARE_SESSION_EPOCH),
``epoch_errors`` the responses INVALID_SHARE_SESSION_EPOCH or
SHARE_SESSION_NOT_FOUND.  As for fetch sessions, an incremental ShareFetch names
only the partitions it adds or acknowledges and its response only those with
records, acquisitions or errors; the counterfactual of each ShareFetch is the
same request naming every partition of the session and a response carrying
every one of them (ShareFetch bodies built with minikafka's protocol layer, the
difference added to the captured size).  ShareAcknowledge requests count at
their captured size.  A session opened before the capture started is
reconstructed from what its requests name (``complete`` false).
"""

from __future__ import annotations

import uuid
from typing import Any

from . import AnalysisOptions, Section
from .traffic import exprs, ordered
from .plots import Chart

NAME = "sessions"
TITLE = "Fetch-session savings"

PER_FETCH_SCHEMA = (
    "broker_id int, session_key int, client_id string, replica_id int, connection_id string, "
    "correlation_id int, receive_ns bigint, api_version int, fetch_kind string, complete boolean, "
    "session_partitions int, request_partitions int, response_partitions int, "
    "request_body_bytes bigint, full_request_body_bytes bigint, "
    "response_body_bytes bigint, full_response_body_bytes bigint"
)

_ZERO_TOPIC_ID = uuid.UUID(int=0)


class _SizeModel:
    """Body sizes of Fetch requests/responses holding a given set of partitions (cached by set)."""

    def __init__(self) -> None:
        from ...protocol.messages.fetch import FetchRequest, FetchResponse

        self.req, self.resp = FetchRequest, FetchResponse
        self._cache: dict[tuple, int] = {}

    @staticmethod
    def _topics(parts: frozenset, version: int) -> list[tuple[Any, list[int]]]:
        by_topic: dict[Any, list[int]] = {}
        for topic, partition in sorted(parts, key=lambda tp: (str(tp[0]), tp[1])):
            by_topic.setdefault(topic, []).append(partition)
        return list(by_topic.items())

    @staticmethod
    def _topic_fields(topic: Any, version: int) -> dict:
        if version >= 13:
            return {"topic_id": topic if isinstance(topic, uuid.UUID) else _parse_uuid(topic)}
        return {"topic": str(topic)}

    def request(self, parts: frozenset, forgotten: frozenset, version: int) -> int:
        key = ("q", version, parts, forgotten)
        size = self._cache.get(key)
        if size is None:
            body = {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 0, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "",
                "topics": [{**self._topic_fields(t, version), "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 0} for p in ps]}
                    for t, ps in self._topics(parts, version)],
                "forgotten_topics_data": [{**self._topic_fields(t, version), "partitions": ps}
                                          for t, ps in self._topics(forgotten, version)],
            }
            size = self._cache[key] = len(self.req.build(body, version))
        return size

    def response(self, parts: frozenset, version: int) -> int:
        """A response whose partitions all have null records (record bytes are added separately)."""
        key = ("r", version, parts)
        size = self._cache.get(key)
        if size is None:
            body = {
                "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                "responses": [{**self._topic_fields(t, version), "partitions": [
                    {"partition_index": p, "error_code": 0, "high_watermark": 0, "last_stable_offset": -1,
                     "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1,
                     "records": None} for p in ps]}
                    for t, ps in self._topics(parts, version)],
            }
            size = self._cache[key] = len(self.resp.build(body, version))
        return size


def _parse_uuid(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return _ZERO_TOPIC_ID


def replay_sessions(requests: Any, partitions: Any) -> Any:
    """Per fetch of one group of sessions: actual and counterfactual body sizes (pandas in, pandas out)."""
    import pandas as pd

    model = _SizeModel()
    parts_by_req: dict[tuple, list] = {}
    for row in partitions.itertuples(index=False):
        parts_by_req.setdefault((row.connection_id, row.correlation_id), []).append(row)
    out = []
    state: dict[int, set] = {}
    complete: dict[int, bool] = {}
    for q in requests.sort_values(["receive_ns", "correlation_id"]).itertuples(index=False):
        rows = parts_by_req.get((q.connection_id, q.correlation_id), [])
        v = int(q.api_version)

        def key(r: Any) -> tuple:
            return (r.topic_id if v >= 13 and r.topic_id is not None else r.topic, int(r.partition))

        asked = frozenset(key(r) for r in rows if r.in_request)
        forgotten = frozenset(key(r) for r in rows if r.forgotten)
        answered = frozenset(key(r) for r in rows if r.in_response)
        skey = int(q.session_key)
        kind = q.fetch_kind
        if kind in ("full", "sessionless", "close") or skey == 0:
            session = set(asked)
            if kind == "full" and skey:
                state[skey] = set(asked)
                complete[skey] = True
            full_parts = frozenset(asked)
            is_complete = True
        else:
            session = state.setdefault(skey, set())
            complete.setdefault(skey, False)
            session |= asked
            session -= forgotten
            full_parts = frozenset(session)
            is_complete = complete[skey]
        req_body = int(q.request_body_bytes or 0)
        resp_body = int(q.response_body_bytes or 0)
        full_req = req_body - model.request(asked, forgotten, v) + model.request(full_parts, frozenset(), v)
        if q.has_response:
            full_resp = resp_body - model.response(answered, v) + model.response(full_parts | answered, v)
        else:
            full_resp = 0
        out.append((q.broker_id, skey, q.client_id, q.replica_id, q.connection_id, q.correlation_id,
                    q.receive_ns, v, kind, is_complete, len(full_parts), len(asked), len(answered),
                    req_body, full_req, resp_body, full_resp))
    cols = [c.split()[0] for c in PER_FETCH_SCHEMA.split(", ")]
    return pd.DataFrame(out, columns=cols)


SHARE_SESSION_SCHEMA = (
    "broker_id int, group_id string, member_id string, client_id string, complete boolean, requests bigint, "
    "share_fetches bigint, share_acknowledges bigint, opens bigint, closes bigint, max_epoch int, "
    "out_of_sequence bigint, epoch_errors bigint, max_session_partitions int, request_bytes bigint, "
    "full_request_bytes bigint, response_bytes bigint, full_response_bytes bigint"
)
_SHARE_FETCH, _SHARE_ACKNOWLEDGE = 78, 79
_SHARE_EPOCH_ERRORS = ("INVALID_SHARE_SESSION_EPOCH", "SHARE_SESSION_NOT_FOUND")
_MAX_EPOCH = 2**31 - 1


def next_share_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` in a share session (Kafka's ``ShareRequestMetadata.nextEpoch``)."""
    if epoch < 0:
        return 0  # after a close: a new session opens at 0
    return 1 if epoch == _MAX_EPOCH else epoch + 1


class _ShareSizeModel:
    """Body sizes of ShareFetch requests/responses naming a set of (topic id, partition) (cached by set)."""

    def __init__(self) -> None:
        from ...protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse

        self.req, self.resp = ShareFetchRequest, ShareFetchResponse
        self._cache: dict[tuple, int] = {}

    @staticmethod
    def _topics(parts: frozenset) -> list[tuple[uuid.UUID, list[int]]]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(parts, key=lambda tp: (str(tp[0]), tp[1])):
            by_topic.setdefault(str(topic), []).append(partition)
        return [(_parse_uuid(t), ps) for t, ps in by_topic.items()]

    def request(self, parts: frozenset, forgotten: frozenset, version: int) -> int:
        key = ("q", version, parts, forgotten)
        size = self._cache.get(key)
        if size is None:
            body = {"group_id": "", "member_id": "", "share_session_epoch": 0, "max_wait_ms": 0, "min_bytes": 0,
                    "max_bytes": 0, "max_records": 0, "batch_size": 0,
                    "topics": [{"topic_id": t, "partitions": [{"partition_index": p, "acknowledgement_batches": []}
                                                              for p in ps]} for t, ps in self._topics(parts)],
                    "forgotten_topics_data": [{"topic_id": t, "partitions": ps} for t, ps in self._topics(forgotten)]}
            size = self._cache[key] = len(self.req.build(body, version))
        return size

    def response(self, parts: frozenset, version: int) -> int:
        """A response whose partitions have null records and nothing acquired."""
        key = ("r", version, parts)
        size = self._cache.get(key)
        if size is None:
            body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 0,
                    "responses": [{"topic_id": t, "partitions": [
                        {"partition_index": p, "error_code": 0, "error_message": None, "acknowledge_error_code": 0,
                         "acknowledge_error_message": None, "current_leader": {"leader_id": -1, "leader_epoch": -1},
                         "records": None, "acquired_records": []} for p in ps]} for t, ps in self._topics(parts)],
                    "node_endpoints": []}
            size = self._cache[key] = len(self.resp.build(body, version))
        return size


def replay_share_sessions(requests: Any, partitions: Any) -> Any:
    """One row per share session (the requests of one broker, group and member; pandas in, pandas out)."""
    import pandas as pd

    cols = [c.split()[0] for c in SHARE_SESSION_SCHEMA.split(", ")]
    if requests.empty:
        return pd.DataFrame([], columns=cols)
    model = _ShareSizeModel()
    parts_by_req: dict[tuple, list] = {}
    for row in partitions.itertuples(index=False):
        parts_by_req.setdefault((row.connection_id, row.correlation_id), []).append(row)
    session: set = set()
    expected: int | None = None  # the next epoch the session expects (None: not known from the capture)
    complete = False
    n = fetches = acks = opens = closes = out_of_seq = errors = 0
    max_epoch = -1
    max_parts = 0
    req_bytes = full_req = resp_bytes = full_resp = 0
    client = None
    for q in requests.sort_values(["receive_ns", "correlation_id"]).itertuples(index=False):
        rows = parts_by_req.get((q.connection_id, q.correlation_id), [])
        epoch = int(q.fetch_session_epoch) if q.fetch_session_epoch is not None else 0
        fetch = int(q.api_key) == _SHARE_FETCH
        n += 1
        fetches += fetch
        acks += not fetch
        client = q.client_id if q.client_id is not None else client
        max_epoch = max(max_epoch, epoch)

        def key(r: Any) -> tuple:
            return (r.topic_id, int(r.partition))

        asked = frozenset(key(r) for r in rows if r.in_request)
        forgotten = frozenset(key(r) for r in rows if r.forgotten)
        answered = frozenset(key(r) for r in rows if r.in_response)
        failed = q.error_name in _SHARE_EPOCH_ERRORS
        errors += failed
        if epoch == 0:
            opens += fetch
            session = set(asked) if fetch else session
            complete = complete or fetch
            expected = 1
        elif epoch == -1:
            closes += 1
            expected = None
        else:
            if expected is not None and epoch != expected:
                out_of_seq += 1
            if not failed:
                expected = next_share_epoch(epoch)
            if fetch:
                session |= asked
                session -= forgotten
        v = int(q.api_version)
        body = int(q.request_body_bytes or 0)
        resp_body = int(q.response_body_bytes or 0) if q.has_response else 0
        req_bytes += body
        resp_bytes += resp_body
        if fetch and epoch > 0 and not failed:
            full_parts = frozenset(session)
            max_parts = max(max_parts, len(full_parts))
            full_req += body - model.request(asked, forgotten, v) + model.request(full_parts, frozenset(), v)
            if q.has_response:
                full_resp += resp_body - model.response(answered, v) + model.response(full_parts | answered, v)
        else:
            max_parts = max(max_parts, len(asked))
            full_req += body
            full_resp += resp_body
        if epoch == -1:
            session = set()
    first = requests.iloc[0]
    return pd.DataFrame([(int(first.broker_id), first.group_id, first.member_id, client, complete, n, fetches, acks,
                          opens, closes, max_epoch, out_of_seq, errors, max_parts, req_bytes, full_req,
                          resp_bytes, full_resp)], columns=cols)


def share_sessions(tables: Any) -> Any:
    """The ``share_sessions`` table (see the module docstring)."""
    from pyspark.sql import functions as F

    share = F.col("api_key").isin(_SHARE_FETCH, _SHARE_ACKNOWLEDGE)
    keys = ["broker_id", "group_id", "member_id"]
    reqs = (tables.requests.where(share & F.col("member_id").isNotNull())
            .withColumn("group_id", F.coalesce(F.col("group_id"), F.lit("")))
            .select(*keys, "client_id", "connection_id", "correlation_id", "receive_ns", "api_key", "api_version",
                    "fetch_session_epoch", "error_name", "has_response", "request_body_bytes", "response_body_bytes"))
    parts = (tables.partitions.where(share & F.col("member_id").isNotNull())
             .withColumn("group_id", F.coalesce(F.col("group_id"), F.lit("")))
             .select(*keys, "connection_id", "correlation_id", "topic_id", "partition", "in_request", "in_response",
                     "forgotten"))
    out = (reqs.groupBy(*keys).cogroup(parts.groupBy(*keys))
           .applyInPandas(lambda q, p: replay_share_sessions(q, p), SHARE_SESSION_SCHEMA))
    return (out.withColumn("saving_ratio", (F.col("full_request_bytes") + F.col("full_response_bytes"))
                           / (F.col("request_bytes") + F.col("response_bytes")))
            .transform(ordered, "broker_id", "group_id", "member_id"))


def has_input(facts: dict[str, Any]) -> bool:
    """The tables come from Fetch, ShareFetch and ShareAcknowledge requests."""
    return bool({1, _SHARE_FETCH, _SHARE_ACKNOWLEDGE} & set(facts.get("api_keys", (1,))))


def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    from pyspark.sql import functions as F

    fetches = (tables.requests.where(F.col("api_key") == 1)
               .withColumn("session_key", F.when(F.col("fetch_kind") == "full", F.col("response_session_id"))
                           .when(F.col("fetch_kind").isin("incremental", "close"), F.col("fetch_session_id"))
                           .otherwise(F.lit(0)))
               .select("broker_id", "session_key", "client_id", "replica_id", "connection_id", "correlation_id",
                       "receive_ns", "api_version", "fetch_kind", "has_response", "request_body_bytes",
                       "response_body_bytes"))
    # Sessionless fetches cannot save anything; group them per connection so they spread over tasks.
    fetches = fetches.withColumn("group_key", F.when(F.col("session_key") == 0, F.col("connection_id"))
                                 .otherwise(F.lit("")))
    # Fresh column names: a cogroup with a frame derived from ``fetches`` is otherwise ambiguous.
    keys = fetches.select("broker_id", "connection_id", "correlation_id", F.col("session_key").alias("p_session"),
                          F.col("group_key").alias("p_group"))
    parts = (tables.partitions.where(F.col("api_key") == 1)
             .select("broker_id", "connection_id", "correlation_id", "topic", "topic_id", "partition",
                     "in_request", "in_response", "forgotten")
             .join(keys, ["broker_id", "connection_id", "correlation_id"]))
    per_fetch = (fetches.groupBy("broker_id", "session_key", "group_key")
                 .cogroup(parts.groupBy("broker_id", "p_session", "p_group"))
                 .applyInPandas(lambda q, p: replay_sessions(q, p), PER_FETCH_SCHEMA))
    per_fetch = per_fetch.cache()
    incremental = "fetch_kind = 'incremental'"
    agg = exprs(
        "count(1) AS fetches",
        "sum(CASE WHEN fetch_kind = 'full' THEN 1 ELSE 0 END) AS full_fetches",
        f"sum(CASE WHEN {incremental} THEN 1 ELSE 0 END) AS incremental_fetches",
        "max(session_partitions) AS max_session_partitions",
        "sum(request_body_bytes) AS request_bytes", "sum(full_request_body_bytes) AS full_request_bytes",
        "sum(response_body_bytes) AS response_bytes", "sum(full_response_body_bytes) AS full_response_bytes",
        "min(CASE WHEN fetch_kind IN ('full', 'sessionless') THEN request_body_bytes END) AS full_request_size",
        f"sum(CASE WHEN {incremental} THEN request_body_bytes END) AS incr_bytes",
        f"sum(CASE WHEN {incremental} THEN full_request_body_bytes END) AS incr_full_bytes",
        f"percentile_approx(CASE WHEN {incremental} THEN request_body_bytes END, 0.5D, 100000)"
        " AS median_incremental_request_size")

    def ratios(df: Any) -> Any:
        return (df.withColumn("request_saving_ratio", F.col("full_request_bytes") / F.col("request_bytes"))
                  .withColumn("response_saving_ratio", F.col("full_response_bytes") / F.col("response_bytes"))
                  .withColumn("incremental_saving_ratio", F.col("incr_full_bytes") / F.col("incr_bytes"))
                  .drop("incr_bytes", "incr_full_bytes")
                  .withColumn("saving_ratio", (F.col("full_request_bytes") + F.col("full_response_bytes"))
                              / (F.col("request_bytes") + F.col("response_bytes"))))

    per_session = ratios(per_fetch.where(F.col("session_key") != 0)
                         .groupBy("broker_id", "session_key", "client_id", "replica_id").agg(*agg))
    per_client = ratios(per_fetch.withColumn("follower", F.col("replica_id") >= 0)
                        .groupBy("broker_id", "client_id", "follower").agg(*agg))
    bucket_ns = int(opts.bucket_seconds * 1e9)
    over_time = (per_fetch.withColumn("bucket", (F.col("receive_ns") / bucket_ns).cast("long") * opts.bucket_seconds)
                 .groupBy("bucket").agg(
                     F.sum(F.col("request_body_bytes") + F.col("response_body_bytes")).alias("bytes"),
                     F.sum(F.col("full_request_body_bytes") + F.col("full_response_body_bytes")).alias("full_bytes"))
                 .transform(ordered, "bucket"))
    return {"per_fetch": per_fetch, "per_session": per_session, "per_client": per_client, "over_time": over_time,
            "share_sessions": share_sessions(tables)}


def report(results: dict[str, Any], opts: AnalysisOptions) -> list[Section]:
    """Savings per client and broker, cumulative bytes actual against sessionless, share sessions."""
    sec = Section(TITLE)
    sec.text.append(
        "For every Fetch that used a session, what the same fetch would have cost sessionless: a request naming "
        "every partition of the session and a response carrying all of them. Sizes are body bytes (after the "
        "request/response header), exact for each request's version. Ratios above 1 are savings.")
    per_client = results.get("per_client")
    if per_client is not None and len(per_client):
        cols = ["broker_id", "client_id", "follower", "fetches", "full_fetches", "incremental_fetches",
                "full_request_size", "median_incremental_request_size", "request_bytes", "full_request_bytes",
                "request_saving_ratio", "incremental_saving_ratio", "response_saving_ratio", "saving_ratio"]
        sec.tables.append(("Per client and broker", per_client[cols].sort_values("full_request_bytes",
                                                                                   ascending=False).head(30)))
        tot_actual = float(per_client.request_bytes.sum() + per_client.response_bytes.sum())
        tot_full = float(per_client.full_request_bytes.sum() + per_client.full_response_bytes.sum())
        if tot_actual:
            sec.text.append(f"Overall: {tot_actual:,.0f} bytes sent, {tot_full:,.0f} bytes sessionless "
                            f"({tot_full / tot_actual:.1f}x).")
    over = results.get("over_time")
    if over is not None and len(over):
        over = over.sort_values("bucket")
        chart = Chart("Cumulative Fetch body bytes (log-like scale)", list(over.bucket - over.bucket.min()),
                      y_label="bytes", y_scale="asinh")
        chart.add("sessionless full fetches", over.full_bytes.cumsum())
        chart.add("actually sent", over.bytes.cumsum())
        sec.figures.append(("Cumulative Fetch body bytes, actual vs sessionless", chart))
    shares = results.get("share_sessions")
    if shares is not None and len(shares):
        sec.text.append(
            f"Share sessions (KIP-932): {len(shares)} session(s) of {shares.member_id.nunique()} share-group "
            f"member(s), {int(shares.opens.sum())} opened and {int(shares.closes.sum())} closed in the capture, "
            f"{int(shares.out_of_sequence.sum())} request(s) out of epoch sequence, "
            f"{int(shares.epoch_errors.sum())} answered INVALID_SHARE_SESSION_EPOCH or SHARE_SESSION_NOT_FOUND. "
            "The full-request figures are what every ShareFetch would cost naming every partition of its session.")
        sec.tables.append(("Share sessions", shares.head(30)))
    return [sec]
