"""Quota what-if replay: Kafka's client-quota algorithm re-run over captured traffic with other quotas.

For every (broker, client id) the captured requests are replayed in time order
through the broker's own quota code: :class:`~minikafka.broker.quota.QuotaManagers`
(``ClientQuotaManager`` for Produce, Fetch and Request quotas, each a
``Sensor`` holding a ``Rate`` over ``quota_window_num`` samples of
``quota_window_size_seconds``, and Kafka's throttle time
``round((rate - bound) / bound * windowSize)`` ms from ``QuotaUtils``).  The
managers are not tied to Trio: every value is recorded with an explicit
timestamp and the metrics registry gets an injected clock, so nothing here
re-implements the algorithm.  Quotas are per broker in Kafka, so each broker's
traffic has its own sensors; the replay runs on Spark with
``groupBy(broker_id, client_id).applyInPandas`` (the Rate state is sequential
per client, so the work scales by client).

What is recorded, as the broker records it:

* Produce: the request size (the frame after its 4-byte size prefix, Kafka's
  ``request.sizeInBytes``), into the produce byte-rate quota.
* Consumer Fetch (``replica_id < 0``): ``FetchResponse.sizeOf`` = 4 + the
  response body, into the fetch byte-rate quota; when the response would have
  been throttled (by the fetch or the request quota) the bytes are un-recorded,
  as Kafka does (the throttled consumer gets an empty response).  Follower
  fetches are exempt from client quotas (they are replication traffic; Kafka
  answers them with ``sendResponseExemptThrottle``, while minikafka's broker
  still charges them to the request quota).
* Request percentage: the captured latency stands in for the handler time
  (the broker does not capture handler time).  It over-estimates: latency
  includes queueing, the long-poll wait of fetches (``max_wait_ms``) and
  writing the response.  Produce with ``acks=0`` is exempt, as in the broker.

Each request is recorded when the broker answered it (receive time + latency),
as the broker records after handling.  The captured send time of a throttled
response is taken after its connection's mute ended (or, for clients older
than KIP-219, after the response was held), so when the latency is at least
the captured ``throttle_time_ms`` that throttle is taken off the latency first.

The replay is open-loop: the captured arrival times are kept, i.e. clients are
assumed not to react to the throttling they would have got (no back-off, no
muting delay).  A throttled response mutes its connection (KIP-219) from the
moment it is sent for the throttle time; requests that arrived on that
connection while it would have been muted are counted as delayed (requests,
bytes and how long they would have waited).  ``muted_ms`` is the union of the
mute intervals (overlapping throttles counted once).  The captured
``throttle_time_ms`` (what the broker really did at capture time) is shown
beside the what-if figures.

Quota settings (:class:`AnalysisOptions`): ``produce_quota``/``fetch_quota``
(bytes/s) and ``request_quota`` (percent) map a client id to a quota; ``"*"``
is the default for every client (``/clients/<default>``); a key written as a
Kafka entity (``user=alice,client-id=app``, ``user=<default>``) is used as that
entity, resolved in Kafka's precedence order.

Principals: the quota user of a request is its captured principal's name, as
the broker derives it (:attr:`RequestContext.user <minikafka.broker.request.RequestContext.user>`:
``User:alice`` -> ``alice``, a mapped certificate subject as mapped,
``ANONYMOUS`` without authentication; "" for pcap traffic, whose principal is
unknown), so ``/users/alice`` quotas apply to what alice's connections did.
The broker keeps one quota sensor per resolved entity (its metric tags: a
``/users/U`` quota is one sensor for all of U's client ids, a ``/clients/C``
quota one for every principal using client id C); the replay keeps the same
sensors.  Requests whose sensors are shared, or that share a connection (whose
mute state is per connection), are replayed together: the (broker, principal,
client id, connection) combinations are joined into groups of shared state in
the driver (:func:`quota_groups`) and each group is one ``applyInPandas``
task, so the replay is exact whatever the entities and still spreads over
independent clients.  Each task sums its requests up per client and per time
bucket (:func:`summarize`), and Spark adds those sums up: the per-request
rows never leave the task.  With no what-if quota at all nothing can be
throttled, and Spark sums the captured traffic up itself (:func:`_unthrottled`:
the same tables, no Python task).

Tables:

* ``quota_clients``: per client id and principal (and the quota ``user`` it
  maps to): bytes, what-if throttle total/max, throttled requests, muted time,
  delayed requests/bytes, and the captured throttling.  Two principals sharing a
  client id are two rows (a SASL client's ApiVersions sent before it
  authenticated is a ``User:ANONYMOUS`` row of its own).
* ``quota_series``: per client id, principal and time bucket: bytes, what-if and
  captured throttle time, delayed bytes.
"""

from __future__ import annotations

import math
from typing import Any

from . import AnalysisOptions, Section
from .plots import Chart

NAME = "quotas"
TITLE = "Quota what-if replay"

NO_CLIENT = "(none)"
TOP_N = 15
TOP_SERIES = 6

_PRODUCE, _FETCH = 0, 1

REPLAY_SCHEMA = (
    "broker_id int, client_id string, principal string, connection_id string, api_key int, api_name string, "
    "receive_ms bigint, record_ms bigint, bytes bigint, produce_bytes bigint, fetch_bytes bigint, "
    "request_pct double, produce_throttle_ms bigint, fetch_throttle_ms bigint, request_throttle_ms bigint, "
    "throttle_ms bigint, throttled boolean, delayed boolean, delay_ms bigint, muted_ms bigint, "
    "captured_throttle_ms bigint, produce_quota double, fetch_quota double, request_quota double, user string"
)
_REPLAY_COLUMNS = [c.strip().split(" ")[0] for c in REPLAY_SCHEMA.split(",")]
#: What each replay task returns (:func:`summarize`): the sums, maxima and extremes of its requests per broker,
#: client id and principal (``kind`` "c") and per bucket of those (``kind`` "s", ``bucket_us`` its start in
#: microseconds), which :func:`run` adds up over the tasks.
PARTIAL_SCHEMA = (
    "kind string, broker_id int, client_id string, principal string, user string, bucket_us bigint, "
    "requests bigint, bytes bigint, produce_bytes bigint, fetch_bytes bigint, throttle_ms bigint, "
    "throttled bigint, delayed_bytes bigint, captured_throttle_ms bigint, max_throttle_ms bigint, "
    "produce_throttle_ms bigint, fetch_throttle_ms bigint, request_throttle_ms bigint, muted_ms bigint, "
    "delayed_requests bigint, delay_ms bigint, captured_throttled_requests bigint, captured_max_throttle_ms bigint, "
    "produce_quota double, fetch_quota double, request_quota double, first_ms bigint, last_ms bigint"
)
_PARTIAL_COLUMNS = [c.strip().split(" ")[0] for c in PARTIAL_SCHEMA.split(",")]


# -- settings -----------------------------------------------------------------------------------
def settings_of(opts: AnalysisOptions) -> dict[str, Any]:
    """The picklable replay settings of ``opts`` (shipped to the executors)."""
    w = float(opts.quota_window_size_seconds)
    return {
        "produce": {str(k): float(v) for k, v in (opts.produce_quota or {}).items()},
        "fetch": {str(k): float(v) for k, v in (opts.fetch_quota or {}).items()},
        "request": {str(k): float(v) for k, v in (opts.request_quota or {}).items()},
        "window_num": int(opts.quota_window_num),
        "window_size_s": int(w) if w.is_integer() else w,
        "unrecord_throttled_fetch": bool(opts.extra.get("quota_unrecord_throttled_fetch", True)),
    }


def _entity(name: str) -> Any:
    """A quota key of the options as a Kafka entity: "*" = /clients/<default>, "a=b,..." as written."""
    from ...broker.quota.entity import DEFAULT, ClientQuotaEntity

    if name in ("*", DEFAULT):
        return ClientQuotaEntity(None, DEFAULT)
    if "=" in name:
        return ClientQuotaEntity.parse(name)
    return ClientQuotaEntity(None, name)


def quota_configs(settings: dict[str, Any]) -> Any:
    """The broker's :class:`QuotaConfigs` holding the what-if quotas."""
    from ...broker.quota.entity import (
        CONSUMER_BYTE_RATE,
        PRODUCER_BYTE_RATE,
        REQUEST_PERCENTAGE,
        QuotaConfigs,
    )

    configs = QuotaConfigs()
    for key, table in ((PRODUCER_BYTE_RATE, settings["produce"]), (CONSUMER_BYTE_RATE, settings["fetch"]),
                       (REQUEST_PERCENTAGE, settings["request"])):
        for name, value in table.items():
            configs.set(_entity(name), key, value)
    return configs


def quota_user(principal: str) -> str:
    """The quota user of a captured principal, exactly as the broker derives it from the request's principal
    (:attr:`minikafka.broker.request.RequestContext.user`)."""
    from ...broker.request import RequestContext

    return RequestContext(0, 0, 0, None, "", principal=principal).user


def quota_groups(combos: Any, settings: dict[str, Any]) -> dict[tuple[int, str, str, str], int]:
    """Groups of shared replay state: ``combos`` are (broker id, principal, client id, connection id) tuples;
    two share a group when they are on the same broker and either record into one quota sensor (the same
    resolved entity tags, for a quota type with a bound, as the broker's ``ClientQuotaManager.sensors``
    keys them) or share a connection (its mute state).  Returns each combination's group number."""
    from ...broker.quota.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE

    configs = quota_configs(settings)
    combos = [(int(b), str(p), str(c), str(conn)) for b, p, c, conn in combos]
    parent = list(range(len(combos)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple, int] = {}
    users: dict[str, str] = {}
    for i, (broker, principal, client, conn) in enumerate(combos):
        user = users.get(principal)
        if user is None:
            user = users[principal] = quota_user(principal)
        nodes: list[tuple] = [(broker, "connection", conn)]
        for key in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE):
            resolved = configs.resolve(key, user, client)
            if resolved.bound is not None:
                nodes.append((broker, key, resolved.user_tag, resolved.client_tag))
        for node in nodes:
            j = owner.setdefault(node, i)
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    roots: dict[int, int] = {}
    return {combo: roots.setdefault(find(i), len(roots)) for i, combo in enumerate(combos)}


# -- the replay (pure Python: one broker's traffic of clients sharing quota sensors) ---------------
def replay_client(rows: Any, settings: dict[str, Any]) -> Any:
    """Replay one group's requests (a pandas DataFrame with the columns :func:`run` selects) through
    the broker's quota managers; one output row per request (:data:`REPLAY_SCHEMA`).  A group holds
    every request that shares quota sensors or a connection with another of it (:func:`quota_groups`).
    Only the throttling is computed request by request; with no what-if quota of any type nothing can be
    throttled or muted, and the replay is skipped (the broker's managers record nothing then either)."""
    import numpy as np
    import pandas as pd

    from ...broker.quota.entity import (
        CONSUMER_BYTE_RATE,
        PRODUCER_BYTE_RATE,
        REQUEST_PERCENTAGE,
    )

    if rows.empty:
        return pd.DataFrame({c: [] for c in _REPLAY_COLUMNS})
    rows = rows.sort_values(["record_ms", "receive_ms"], kind="stable")
    configs = quota_configs(settings)
    keys = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
    n = len(rows)
    principal = rows["principal"].fillna("").astype(object)
    client = rows["client_id"].fillna("").astype(object)
    conn = rows["connection_id"].fillna("").astype(object)
    users = {p: quota_user(p) for p in principal.unique()}
    user = principal.map(users)
    bounds = {k: tuple(configs.resolve(key, k[0], k[1]).bound for key in keys)
              for k in set(zip(user, client, strict=True))}
    row_bounds = [bounds[k] for k in zip(user, client, strict=True)]
    receive = rows["receive_ms"].to_numpy(dtype="int64")
    record = rows["record_ms"].to_numpy(dtype="int64")
    pbytes = rows["produce_bytes"].fillna(0).to_numpy(dtype="int64")
    fbytes = rows["fetch_bytes"].fillna(0).to_numpy(dtype="int64")
    request_ns = rows["request_ns"].to_numpy(dtype="float64")
    api = rows["api_key"].to_numpy(dtype="int64")
    if any(configs.has_quotas(key) for key in keys):
        pt, ft, rt, delayed, delay, muted = _throttles(rows, settings, configs, list(user), list(client), list(conn),
                                                       receive, record, pbytes, fbytes, request_ns, api)
    else:
        pt = ft = rt = delay = muted = np.zeros(n, dtype="int64")
        delayed = np.zeros(n, dtype=bool)
    throttle = np.maximum(np.maximum(pt, ft), rt)
    out = {
        "broker_id": rows["broker_id"].to_numpy(dtype="int64"), "client_id": client.to_numpy(),
        "principal": principal.to_numpy(), "connection_id": conn.to_numpy(), "api_key": api,
        "api_name": rows["api_name"].to_numpy(), "receive_ms": receive, "record_ms": record,
        "bytes": pbytes + fbytes, "produce_bytes": pbytes, "fetch_bytes": fbytes,
        "request_pct": request_ns * 100 / 1e9, "produce_throttle_ms": pt, "fetch_throttle_ms": ft,
        "request_throttle_ms": rt, "throttle_ms": throttle, "throttled": throttle > 0, "delayed": delayed,
        "delay_ms": delay, "muted_ms": muted,
        "captured_throttle_ms": rows["captured_throttle_ms"].fillna(0).to_numpy(dtype="int64"),
        **{name: np.array([b[i] for b in row_bounds], dtype="float64")
           for i, name in enumerate(("produce_quota", "fetch_quota", "request_quota"))},
        "user": user.to_numpy(),
    }
    return pd.DataFrame(out, columns=_REPLAY_COLUMNS)


def _throttles(rows: Any, settings: dict[str, Any], configs: Any, user: list[str], client: list[str],
               conn: list[str], receive: Any, record: Any, pbytes: Any, fbytes: Any, request_ns: Any,
               api: Any) -> tuple[Any, ...]:
    """The request-by-request part of :func:`replay_client`: each request recorded at its time through the
    broker's own managers; the produce, fetch and request throttle of each, whether it arrived on a muted
    connection, how long it waited there and how long it muted its connection."""
    import numpy as np

    from ...broker.quota import QuotaManagers
    from ...common.clock import ManualClock
    from ...metrics import Metrics

    clock = ManualClock(0)  # each request's time, as recorded
    # The broker's own managers, measuring only: no reaper, nothing is muted here.
    qm = QuotaManagers(configs, Metrics(clock=clock), window_num=settings["window_num"],
                       window_size_s=settings["window_size_s"], clock=clock)
    unrecord = settings["unrecord_throttled_fetch"]
    has_response = rows["has_response"].fillna(False).astype(bool).tolist()
    muted_until: dict[str, int] = {}
    n = len(user)
    pts, fts, rts, delays, muteds = ([0] * n for _ in range(5))
    delayed = [False] * n
    for i, (uid, cid, t, recv, a, req, p, f, answered, c) in enumerate(zip(
            user, client, record.tolist(), receive.tolist(), api.tolist(), request_ns.tolist(), pbytes.tolist(),
            fbytes.tolist(), has_response, conn, strict=True)):
        clock.set_time_ms(t)
        req_ns = None if math.isnan(req) else int(req)
        pt = ft = rt = 0
        if a == _PRODUCE:
            pt = qm.produce.maybe_record_and_get_throttle_time_ms(uid, cid, p, t)
            if req_ns is not None:
                rt = qm.request.maybe_record_request_time(uid, cid, req_ns, t)
        elif a == _FETCH:
            if req_ns is not None:
                rt = qm.request.maybe_record_request_time(uid, cid, req_ns, t)
            if answered:
                ft = qm.fetch.maybe_record_and_get_throttle_time_ms(uid, cid, f, t)
                if unrecord and max(ft, rt) > 0:
                    qm.fetch.unrecord_quota_sensor(uid, cid, f, t)
        elif req_ns is not None:
            rt = qm.request.maybe_record_request_time(uid, cid, req_ns, t)
        pts[i], fts[i], rts[i] = pt, ft, rt = int(pt), int(ft), int(rt)  # ints even with a fractional window
        throttle = max(pt, ft, rt)
        mu = muted_until.get(c)
        if mu is not None and recv < mu:
            delayed[i], delays[i] = True, mu - recv
        if throttle > 0:
            end = t + throttle
            muteds[i] = max(0, end - max(t, mu if mu is not None else t))
            muted_until[c] = max(end, mu if mu is not None else end)
    return (np.array(pts, dtype="int64"), np.array(fts, dtype="int64"), np.array(rts, dtype="int64"),
            np.array(delayed, dtype=bool), np.array(delays, dtype="int64"), np.array(muteds, dtype="int64"))


def bucket_micros(receive_ms: Any, seconds: float) -> Any:
    """The start (microseconds) of the ``seconds``-long bucket of each ``receive_ms``, computed as
    :func:`~.traffic.time_bucket` computes it in Spark (in doubles, floored)."""
    import numpy as np

    bucket_ns = max(1000, round(float(seconds) * 1e9))
    ns = np.asarray(receive_ms, dtype="int64") * 1_000_000
    start_ns = np.floor(ns.astype("float64") / bucket_ns).astype("int64") * bucket_ns
    return np.floor(start_ns.astype("float64") / 1000).astype("int64")


def summarize(replayed: Any, bucket_seconds: float) -> Any:
    """:func:`replay_client`'s rows of one task as :data:`PARTIAL_SCHEMA` rows: per broker, client id and
    principal, and per bucket of those."""
    import pandas as pd

    if replayed.empty:
        return pd.DataFrame({c: [] for c in _PARTIAL_COLUMNS})
    o = replayed.assign(
        delayed_bytes=replayed["bytes"].where(replayed["delayed"], 0),
        throttled=replayed["throttled"].astype("int64"), delayed_requests=replayed["delayed"].astype("int64"),
        captured_throttled_requests=(replayed["captured_throttle_ms"] > 0).astype("int64"),
        bucket_us=bucket_micros(replayed["receive_ms"], bucket_seconds))
    sums = ["bytes", "produce_bytes", "fetch_bytes", "throttle_ms", "throttled", "delayed_bytes",
            "captured_throttle_ms", "produce_throttle_ms", "fetch_throttle_ms", "request_throttle_ms", "muted_ms",
            "delayed_requests", "delay_ms", "captured_throttled_requests"]
    spec = {"user": ("user", "first"), "requests": ("api_key", "size"), **{c: (c, "sum") for c in sums},
            "max_throttle_ms": ("throttle_ms", "max"), "captured_max_throttle_ms": ("captured_throttle_ms", "max"),
            "produce_quota": ("produce_quota", "max"), "fetch_quota": ("fetch_quota", "max"),
            "request_quota": ("request_quota", "max"), "first_ms": ("receive_ms", "min"),
            "last_ms": ("record_ms", "max")}
    keys = ["broker_id", "client_id", "principal"]
    clients = o.groupby(keys, sort=False, dropna=False).agg(**spec).reset_index().assign(kind="c", bucket_us=-1)
    series = (o.groupby([*keys, "bucket_us"], sort=False, dropna=False).agg(**spec).reset_index()
              .assign(kind="s"))
    return pd.concat([clients, series], ignore_index=True)[_PARTIAL_COLUMNS]


def _replay_fn(settings: dict[str, Any], bucket_seconds: float):
    def fn(pdf: Any) -> Any:
        return summarize(replay_client(pdf, settings), bucket_seconds)
    return fn


# -- run ----------------------------------------------------------------------------------------
def _div_ms(ns: Any) -> Any:
    """Integer ns -> ms, floored exactly (a double cannot hold epoch nanoseconds)."""
    from pyspark.sql import functions as F

    return F.floor(ns.cast("decimal(20,0)") / F.lit(1_000_000)).cast("long")


def _unthrottled(rows: Any, bucket_seconds: float) -> Any:
    """:func:`summarize`'s sums of ``rows`` when no what-if quota is set, computed by Spark: nothing can be
    throttled, muted or delayed then (:func:`replay_client` skips the managers too), so the replay is the
    captured traffic summed up, and no Python worker is needed.  The quota bounds are null, as no quota
    resolves; the quota user is :func:`quota_user` of the principal (the text after its first colon, else all
    of it)."""
    from pyspark.sql import functions as F

    from .traffic import time_bucket

    principal = F.col("principal")
    after = F.substring(principal, F.instr(principal, ":") + 1, 1 << 30)
    user = F.when((F.instr(principal, ":") > 0) & (after != ""), after).otherwise(principal)
    zero = F.lit(0).cast("long")
    o = rows.withColumn("bucket_ns", F.col("receive_ms") * F.lit(1_000_000)).select(
        "broker_id", "client_id", "principal", user.alias("user"), "receive_ms", "record_ms",
        (F.col("produce_bytes") + F.col("fetch_bytes")).alias("bytes"), "produce_bytes", "fetch_bytes",
        "captured_throttle_ms", F.unix_micros(time_bucket("bucket_ns", bucket_seconds)).alias("bucket_us"))
    sums = [F.count(F.lit(1)).alias("requests"),
            *(F.sum(c).cast("long").alias(c) for c in ("bytes", "produce_bytes", "fetch_bytes")),
            F.sum("captured_throttle_ms").cast("long").alias("captured_throttle_ms"),
            F.count(F.when(F.col("captured_throttle_ms") > 0, 1)).alias("captured_throttled_requests"),
            F.max("captured_throttle_ms").alias("captured_max_throttle_ms"),
            F.min("receive_ms").alias("first_ms"), F.max("record_ms").alias("last_ms"), F.first("user").alias("user")]
    keys = ["broker_id", "client_id", "principal"]
    clients = o.groupBy(*keys).agg(*sums).withColumns({"kind": F.lit("c"), "bucket_us": F.lit(-1).cast("long")})
    series = o.groupBy(*keys, "bucket_us").agg(*sums).withColumn("kind", F.lit("s"))
    nothing = {c: zero for c in ("throttle_ms", "throttled", "delayed_bytes", "max_throttle_ms", "produce_throttle_ms",
                                 "fetch_throttle_ms", "request_throttle_ms", "muted_ms", "delayed_requests",
                                 "delay_ms")}
    bounds = {c: F.lit(None).cast("double") for c in ("produce_quota", "fetch_quota", "request_quota")}
    return (clients.unionByName(series).withColumns({**nothing, **bounds})
            .select(*(F.col(c) for c in _PARTIAL_COLUMNS)))


def replay(tables: Any, opts: AnalysisOptions, *, in_tasks: bool | None = None) -> Any:
    """The replay of every client request, follower fetches left out, as each task summed it up
    (:data:`PARTIAL_SCHEMA`: per task, broker, client id and principal, and per bucket of those).
    ``in_tasks``: replay in Python tasks through the broker's managers (default: only when a what-if quota
    is set; without one nothing is throttled, and :func:`_unthrottled` sums the traffic up in Spark)."""
    from pyspark.sql import functions as F

    settings = settings_of(opts)
    r = tables.requests
    is_fetch = F.col("api_key") == F.lit(_FETCH)
    follower = is_fetch & (F.coalesce(F.col("replica_id"), F.lit(-1)) >= 0)
    has_resp = F.coalesce(F.col("has_response"), F.lit(False))
    # The broker's time to answer, without the throttle: the captured send time of a throttled response
    # is taken after the connection's mute (or the held response) ended, so the latency includes it.
    recv, sent = F.col("receive_ns"), F.col("send_ns")
    thr_ns = F.coalesce(F.col("throttle_time_ms"), F.lit(0)).cast("long") * F.lit(1_000_000)
    done_ns = (F.when(has_resp & sent.isNotNull() & (sent - recv >= thr_ns), sent - thr_ns)
               .when(has_resp & sent.isNotNull(), sent).otherwise(recv))
    rows = (r.where(~follower)
            .select(F.coalesce(F.col("broker_id"), F.lit(-1)).cast("int").alias("broker_id"),
                    F.coalesce(F.col("client_id"), F.lit("")).alias("client_id"),
                    F.coalesce(F.col("principal"), F.lit("")).alias("principal"),
                    F.coalesce(F.col("connection_id"), F.lit("")).alias("connection_id"),
                    F.col("api_key").cast("int").alias("api_key"), "api_name",
                    _div_ms(recv).alias("receive_ms"),
                    _div_ms(done_ns).alias("record_ms"),
                    F.when(F.col("api_key") == F.lit(_PRODUCE), F.col("request_bytes") - 4)
                    .otherwise(F.lit(0)).cast("long").alias("produce_bytes"),
                    F.coalesce(F.when(is_fetch & has_resp, F.col("response_body_bytes") + 4), F.lit(0))
                    .cast("long").alias("fetch_bytes"),
                    F.when(has_resp, done_ns - recv).cast("double").alias("request_ns"),
                    has_resp.alias("has_response"),
                    F.coalesce(F.col("throttle_time_ms"), F.lit(0)).cast("long").alias("captured_throttle_ms")))
    if in_tasks is None:
        in_tasks = any(settings[kind] for kind in ("produce", "fetch", "request"))
    if not in_tasks:
        return _unthrottled(rows, float(opts.bucket_seconds))
    keys = ["broker_id", "principal", "client_id", "connection_id"]
    combos = [tuple(row) for row in rows.select(*keys).distinct().collect()]
    groups = quota_groups(combos, settings)
    spark = rows.sparkSession
    group_of = spark.createDataFrame(
        [(*combo, g) for combo, g in groups.items()],
        "broker_id int, principal string, client_id string, connection_id string, quota_group int")
    return (rows.join(F.broadcast(group_of), on=keys, how="inner")
            .groupBy("broker_id", "quota_group")
            .applyInPandas(_replay_fn(settings, float(opts.bucket_seconds)), PARTIAL_SCHEMA))


def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    """``quota_clients`` and ``quota_series`` (see the module docstring): the replay's partial sums added up."""
    from pyspark.sql import functions as F

    from .traffic import ordered, total

    sec = float(opts.bucket_seconds)
    part = (replay(tables, opts)
            .withColumn("client_id", F.when(F.col("client_id") == "", F.lit(NO_CLIENT)).otherwise(F.col("client_id")))
            .cache())

    def most(col: str, name: str) -> Any:
        return F.coalesce(F.max(col), F.lit(0)).cast("long").alias(name)

    common = [
        total("requests", "requests"), total("bytes", "bytes"), total("produce_bytes", "produce_bytes"),
        total("fetch_bytes", "fetch_bytes"), total("throttle_ms", "whatif_throttle_ms"),
        total("throttled", "whatif_throttled_requests"), total("delayed_bytes", "delayed_bytes"),
        total("captured_throttle_ms", "captured_throttle_ms"),
    ]
    clients = (part.where(F.col("kind") == "c").groupBy("client_id", "principal")
               .agg(F.first("user").alias("user"),
                    F.countDistinct("broker_id").cast("int").alias("brokers"),
                    *common,
                    most("max_throttle_ms", "whatif_max_throttle_ms"),
                    total("produce_throttle_ms", "whatif_produce_throttle_ms"),
                    total("fetch_throttle_ms", "whatif_fetch_throttle_ms"),
                    total("request_throttle_ms", "whatif_request_throttle_ms"),
                    total("muted_ms", "whatif_muted_ms"),
                    total("delayed_requests", "delayed_requests"),
                    total("delay_ms", "delayed_ms"),
                    total("captured_throttled_requests", "captured_throttled_requests"),
                    most("captured_max_throttle_ms", "captured_max_throttle_ms"),
                    F.max("produce_quota").alias("produce_quota"), F.max("fetch_quota").alias("fetch_quota"),
                    F.max("request_quota").alias("request_quota"),
                    F.min("first_ms").alias("first_ms"), F.max("last_ms").alias("last_ms"))
               .withColumn("duration_s", F.greatest((F.col("last_ms") - F.col("first_ms")) / 1000.0, F.lit(0.001)))
               .withColumn("bytes_per_s", F.col("bytes") / F.col("duration_s"))
               .withColumn("whatif_vs_captured",
                           F.when(F.col("captured_throttle_ms") > 0,
                                  F.col("whatif_throttle_ms") / F.col("captured_throttle_ms")))
               .withColumn("first_ts", F.timestamp_millis("first_ms"))
               .drop("first_ms", "last_ms")
               .transform(ordered, F.desc("whatif_throttle_ms"), F.desc("bytes"), "client_id", "principal"))
    series = (part.where(F.col("kind") == "s").withColumn("bucket_start", F.timestamp_micros("bucket_us"))
              .groupBy("client_id", "principal", "bucket_start")
              .agg(*common, most("max_throttle_ms", "whatif_max_throttle_ms"))
              .withColumn("bytes_per_s", F.col("bytes") / F.lit(sec))
              .transform(ordered, "client_id", "principal", "bucket_start"))
    return {"quota_clients": clients, "quota_series": series}


# -- report -------------------------------------------------------------------------------------
def _fmt_quota(table: dict[str, float], unit: str) -> str:
    if not table:
        return "none"
    return ", ".join(f"{'every client' if k == '*' else k}: {v:,.0f} {unit}" for k, v in sorted(table.items()))


def _series_chart(series: Any, clients: list[tuple[str, str, str]], value: str, title: str,
                  ylabel: str, hline: float | None = None) -> Chart:
    """One line per (client id, principal, label) of ``clients`` (a client's missing buckets bridged)."""
    import pandas as pd

    chart = Chart(title, [], y_label=ylabel)
    if series is None or series.empty or not clients:
        return chart
    times = pd.to_datetime(series["bucket_start"])
    grid = sorted(times.unique())
    chart.x = list((pd.DatetimeIndex(grid) - times.min()).total_seconds())
    for client, principal, label in clients:
        sel = series["client_id"] == client
        if "principal" in series.columns:
            sel &= series["principal"] == principal
        s = series[sel]
        col = pd.Series(s[value].to_numpy(), index=pd.to_datetime(s["bucket_start"])).groupby(level=0).sum()
        chart.add(label, col.reindex(grid).to_numpy(), span_gaps=True)
    if hline is not None:
        chart.reference_line(hline, "what-if quota")
    return chart


def report(results: dict[str, Any], opts: AnalysisOptions) -> list[Section]:
    """What-if throttling per client: explanation, top clients, throttle and byte-rate time series."""
    st = settings_of(opts)
    clients = results.get("quota_clients")
    series = results.get("quota_series")
    s = Section("Quota what-if replay")
    s.text.append(
        f"Kafka's client-quota algorithm (the broker's ClientQuotaManager: a Rate over "
        f"{st['window_num']} samples of {st['window_size_s']} s, throttle = round((rate - quota) / quota x "
        f"window) ms) re-run over the captured traffic of each client, per broker, with these quotas: "
        f"produce {_fmt_quota(st['produce'], 'bytes/s')}; fetch {_fmt_quota(st['fetch'], 'bytes/s')}; "
        f"request {_fmt_quota(st['request'], '%')}.")
    s.text.append(
        "Clients are told apart by client id and principal. The quota user of a request is its principal's "
        "name as the broker derives it (User:alice -> alice; ANONYMOUS without authentication), so user "
        "quotas (user=alice, user=<default>) apply to what each principal did; requests that share a quota "
        "sensor (a user quota over several client ids, a client-id quota over several principals) are "
        "replayed together, as the broker keeps one sensor per quota entity.")
    if not (st["produce"] or st["fetch"] or st["request"]):
        s.text.append("No what-if quota was given (produce_quota / fetch_quota / request_quota): nothing is "
                      "throttled in the replay, and only the captured throttling is shown.")
    s.text.append(
        "Produce counts the request size, consumer Fetch the response size (FetchResponse.sizeOf; a throttled "
        "fetch's bytes are un-recorded as Kafka does); follower fetches are exempt, as in Kafka. The request "
        "quota uses the captured latency as the handler time, which over-estimates it (queueing, long-poll "
        "waits and sending are included). Quotas are per broker: each broker's traffic is replayed apart.")
    s.text.append(
        "Open-loop replay: the captured arrival times are kept, i.e. the clients are assumed not to react to "
        "the throttling they would have received (in reality they would back off and the broker would mute "
        "their connections, spreading the same bytes over a longer time and lowering later throttles). "
        "\"Delayed\" requests/bytes arrived on a connection that the what-if throttle would have muted; "
        "the captured throttle_time_ms columns show what the broker really did at capture time.")
    if clients is not None and not clients.empty:
        cols = ["client_id", "principal", "user", "bytes", "bytes_per_s", "whatif_throttle_ms",
                "whatif_throttled_requests", "whatif_max_throttle_ms", "whatif_muted_ms", "delayed_requests",
                "delayed_bytes", "captured_throttle_ms", "captured_throttled_requests"]
        top = clients.sort_values(["whatif_throttle_ms", "bytes"], ascending=False).head(TOP_N)
        s.tables.append(((f"Top {min(TOP_N, len(clients))} clients (client id and principal) by what-if "
                          f"throttle time ({len(clients)} in all)"), top[[c for c in cols if c in top.columns]]))
        n_thr = int((clients["whatif_throttle_ms"] > 0).sum())
        s.text.append(f"{n_thr} of {len(clients)} client(s) would have been throttled; "
                      f"{int(clients['whatif_throttle_ms'].sum()):,} ms of what-if throttle time in all, against "
                      f"{int(clients['captured_throttle_ms'].sum()):,} ms captured.")
        principal_col = top["principal"] if "principal" in top.columns else [""] * len(top)
        shared = clients["client_id"].value_counts() if "principal" in clients.columns else None
        shown = [(c, p, c if shared is None or shared.get(c, 0) <= 1 else f"{c} ({p})")
                 for c, p in list(zip(top["client_id"], principal_col))[:TOP_SERIES]]
        s.figures.append((f"What-if throttle time per {opts.bucket_seconds:g} s bucket, top clients", _series_chart(
            series, shown, "whatif_throttle_ms", "What-if throttle time per bucket (sum)", "throttle ms")))
        default = st["produce"].get("*") if st["produce"] else None
        s.figures.append((("Byte rate per client (the red dashed line is the default produce quota, if any); the "
                           "quota Rate averages over the whole window, so short peaks above it are allowed"),
                          _series_chart(series, shown, "bytes_per_s", "Quota bytes per second (produce request + "
                                        "fetch response bytes)", "bytes/s", hline=default)))
        s.figures.append(("Throttling the broker actually applied at capture time", _series_chart(
            series, shown, "captured_throttle_ms", "Captured throttle_time_ms per bucket (sum)", "throttle ms")))
    else:
        s.text.append("The capture holds no client requests.")
    return [s]
