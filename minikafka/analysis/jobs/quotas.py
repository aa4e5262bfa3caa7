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
Kafka entity (``user=alice,client-id=app``) is used as that entity, resolved in
Kafka's precedence order.  With user entities the replay groups by principal
instead of client id (a ``/users/U`` quota is shared by U's clients), so a
``/clients/C`` quota used under several principals is then replayed per
principal.

Tables:

* ``quota_clients``: per client id: bytes, what-if throttle total/max, throttled
  requests, muted time, delayed requests/bytes, and the captured throttling.
* ``quota_series``: per client id and time bucket: bytes, what-if and captured
  throttle time, delayed bytes.
"""

from __future__ import annotations

import math
from typing import Any

from . import AnalysisOptions, Section

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
    "captured_throttle_ms bigint, produce_quota double, fetch_quota double, request_quota double"
)
_REPLAY_COLUMNS = [c.strip().split(" ")[0] for c in REPLAY_SCHEMA.split(",")]


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


def _groups_by_user(settings: dict[str, Any]) -> bool:
    return any(_entity(n).user is not None
               for k in ("produce", "fetch", "request") for n in settings[k])


# -- the replay (pure Python: one broker's traffic of one client or principal) --------------------
def replay_client(rows: Any, settings: dict[str, Any]) -> Any:
    """Replay one group's requests (a pandas DataFrame with the columns :func:`run` selects) through
    the broker's quota managers; one output row per request (:data:`REPLAY_SCHEMA`)."""
    import pandas as pd

    from ...broker.quota import QuotaManagers
    from ...broker.quota.entity import (
        CONSUMER_BYTE_RATE,
        PRODUCER_BYTE_RATE,
        REQUEST_PERCENTAGE,
    )
    from ...broker.request import RequestContext
    from ...metrics import Metrics

    if rows.empty:
        return pd.DataFrame({c: [] for c in _REPLAY_COLUMNS})
    rows = rows.sort_values(["record_ms", "receive_ms"], kind="stable")
    clock = [0]
    metrics = Metrics(clock_ms=lambda: clock[0])
    configs = quota_configs(settings)
    # The broker's own managers, measuring only: no reaper, nothing is muted here.
    qm = QuotaManagers(configs, metrics, window_num=settings["window_num"],
                       window_size_s=settings["window_size_s"], clock_ms=lambda: clock[0])
    unrecord = settings["unrecord_throttled_fetch"]
    users: dict[str, str] = {}
    bounds: dict[tuple[str, str], tuple] = {}
    muted_until: dict[str, int] = {}
    out: list[tuple] = []
    for r in rows.itertuples(index=False):
        principal = r.principal or ""
        user = users.get(principal)
        if user is None:
            user = users[principal] = RequestContext(0, 0, 0, r.client_id, "", principal=principal).user
        cid = r.client_id or ""
        b = bounds.get((user, cid))
        if b is None:
            b = bounds[(user, cid)] = tuple(configs.resolve(k, user, cid).bound
                                            for k in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE))
        t = int(r.record_ms)
        clock[0] = t
        recv = int(r.receive_ms)
        api = int(r.api_key)
        req_ns = None if r.request_ns is None or math.isnan(r.request_ns) else int(r.request_ns)
        pbytes = int(r.produce_bytes or 0)
        fbytes = int(r.fetch_bytes or 0)
        pt = ft = rt = 0
        if api == _PRODUCE:
            pt = qm.produce.maybe_record_and_get_throttle_time_ms(user, cid, pbytes, t)
            if req_ns is not None:
                rt = qm.request.maybe_record_request_time(user, cid, req_ns, t)
        elif api == _FETCH:
            if req_ns is not None:
                rt = qm.request.maybe_record_request_time(user, cid, req_ns, t)
            if bool(r.has_response):
                ft = qm.fetch.maybe_record_and_get_throttle_time_ms(user, cid, fbytes, t)
                if unrecord and max(ft, rt) > 0:
                    qm.fetch.unrecord_quota_sensor(user, cid, fbytes, t)
        elif req_ns is not None:
            rt = qm.request.maybe_record_request_time(user, cid, req_ns, t)
        pt, ft, rt = int(pt), int(ft), int(rt)  # ints even with a fractional window size
        throttle = max(pt, ft, rt)
        conn = r.connection_id or ""
        mu = muted_until.get(conn)
        delayed = mu is not None and recv < mu
        delay = (mu - recv) if delayed and mu is not None else 0
        muted = 0
        if throttle > 0:
            end = t + throttle
            muted = max(0, end - max(t, mu if mu is not None else t))
            muted_until[conn] = max(end, mu if mu is not None else end)
        out.append((int(r.broker_id), cid, principal, conn, api, r.api_name, recv, t, pbytes + fbytes, pbytes,
                    fbytes, (req_ns * 100 / 1e9) if req_ns is not None else None, pt, ft, rt, throttle,
                    throttle > 0, delayed, delay, muted, int(r.captured_throttle_ms or 0), *b))
    return pd.DataFrame.from_records(out, columns=_REPLAY_COLUMNS)


def _replay_fn(settings: dict[str, Any]):
    def fn(pdf: Any) -> Any:
        return replay_client(pdf, settings)
    return fn


# -- run ----------------------------------------------------------------------------------------
def _div_ms(ns: Any) -> Any:
    """Integer ns -> ms, floored exactly (a double cannot hold epoch nanoseconds)."""
    from pyspark.sql import functions as F

    return F.floor(ns.cast("decimal(20,0)") / F.lit(1_000_000)).cast("long")


def replay(tables: Any, opts: AnalysisOptions) -> Any:
    """Per-request replay rows (:data:`REPLAY_SCHEMA`), follower fetches left out."""
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
    key = "principal" if _groups_by_user(settings) else "client_id"
    return rows.groupBy("broker_id", key).applyInPandas(_replay_fn(settings), REPLAY_SCHEMA)


def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    """``quota_clients`` and ``quota_series`` (see the module docstring)."""
    from pyspark.sql import functions as F

    from .traffic import time_bucket

    sec = float(opts.bucket_seconds)
    rep = (replay(tables, opts)
           .withColumn("client_id", F.when(F.col("client_id") == "", F.lit(NO_CLIENT)).otherwise(F.col("client_id")))
           .cache())

    def total(col: Any, name: str) -> Any:
        return F.coalesce(F.sum(col), F.lit(0)).cast("long").alias(name)

    delayed = F.col("delayed")
    common = [
        F.count(F.lit(1)).cast("long").alias("requests"),
        total("bytes", "bytes"), total("produce_bytes", "produce_bytes"), total("fetch_bytes", "fetch_bytes"),
        total("throttle_ms", "whatif_throttle_ms"),
        total(F.col("throttled").cast("int"), "whatif_throttled_requests"),
        total(F.when(delayed, F.col("bytes")), "delayed_bytes"),
        total("captured_throttle_ms", "captured_throttle_ms"),
    ]
    clients = (rep.groupBy("client_id")
               .agg(F.concat_ws(",", F.array_sort(F.collect_set("principal"))).alias("principals"),
                    F.countDistinct("broker_id").cast("int").alias("brokers"),
                    *common,
                    F.coalesce(F.max("throttle_ms"), F.lit(0)).cast("long").alias("whatif_max_throttle_ms"),
                    total("produce_throttle_ms", "whatif_produce_throttle_ms"),
                    total("fetch_throttle_ms", "whatif_fetch_throttle_ms"),
                    total("request_throttle_ms", "whatif_request_throttle_ms"),
                    total("muted_ms", "whatif_muted_ms"),
                    total(delayed.cast("int"), "delayed_requests"),
                    total("delay_ms", "delayed_ms"),
                    total((F.col("captured_throttle_ms") > 0).cast("int"), "captured_throttled_requests"),
                    F.coalesce(F.max("captured_throttle_ms"), F.lit(0)).cast("long").alias("captured_max_throttle_ms"),
                    F.max("produce_quota").alias("produce_quota"), F.max("fetch_quota").alias("fetch_quota"),
                    F.max("request_quota").alias("request_quota"),
                    F.min("receive_ms").alias("first_ms"), F.max("record_ms").alias("last_ms"))
               .withColumn("duration_s", F.greatest((F.col("last_ms") - F.col("first_ms")) / 1000.0, F.lit(0.001)))
               .withColumn("bytes_per_s", F.col("bytes") / F.col("duration_s"))
               .withColumn("whatif_vs_captured",
                           F.when(F.col("captured_throttle_ms") > 0,
                                  F.col("whatif_throttle_ms") / F.col("captured_throttle_ms")))
               .withColumn("first_ts", F.timestamp_millis("first_ms"))
               .drop("first_ms", "last_ms")
               .orderBy(F.desc("whatif_throttle_ms"), F.desc("bytes"), "client_id"))
    series = (rep.withColumn("receive_ns", F.col("receive_ms") * F.lit(1_000_000))
              .withColumn("bucket_start", time_bucket("receive_ns", sec))
              .groupBy("client_id", "bucket_start")
              .agg(*common, F.coalesce(F.max("throttle_ms"), F.lit(0)).cast("long").alias("whatif_max_throttle_ms"))
              .withColumn("bytes_per_s", F.col("bytes") / F.lit(sec))
              .orderBy("client_id", "bucket_start"))
    return {"quota_clients": clients, "quota_series": series}


# -- report -------------------------------------------------------------------------------------
def _fmt_quota(table: dict[str, float], unit: str) -> str:
    if not table:
        return "none"
    return ", ".join(f"{'every client' if k == '*' else k}: {v:,.0f} {unit}" for k, v in sorted(table.items()))


def _series_plot(fig: Any, series: Any, clients: list[str], value: str, title: str, ylabel: str,
                 hline: float | None = None) -> None:
    import pandas as pd

    ax = fig.subplots()
    if series is None or series.empty or not clients:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    else:
        t0 = pd.to_datetime(series["bucket_start"]).min()
        for c in clients:
            s = series[series["client_id"] == c].sort_values("bucket_start")
            x = (pd.to_datetime(s["bucket_start"]) - t0).dt.total_seconds()
            ax.plot(x, s[value], marker=".", label=str(c))
        if hline is not None:
            ax.axhline(hline, color="red", linestyle="--", linewidth=1, label="what-if quota")
        ax.legend(fontsize=7, loc="upper right")
        ax.set_xlabel("seconds since the start of the capture")
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def report(results: dict[str, Any], opts: AnalysisOptions) -> list[Section]:
    """What-if throttling per client: explanation, top clients, throttle and byte-rate time series."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

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
        cols = ["client_id", "principals", "bytes", "bytes_per_s", "whatif_throttle_ms", "whatif_throttled_requests",
                "whatif_max_throttle_ms", "whatif_muted_ms", "delayed_requests", "delayed_bytes",
                "captured_throttle_ms", "captured_throttled_requests"]
        top = clients.sort_values(["whatif_throttle_ms", "bytes"], ascending=False).head(TOP_N)
        s.tables.append(((f"Top {min(TOP_N, len(clients))} clients by what-if throttle time "
                         f"({len(clients)} clients)"), top[[c for c in cols if c in top.columns]]))
        n_thr = int((clients["whatif_throttle_ms"] > 0).sum())
        s.text.append(f"{n_thr} of {len(clients)} client(s) would have been throttled; "
                      f"{int(clients['whatif_throttle_ms'].sum()):,} ms of what-if throttle time in all, against "
                      f"{int(clients['captured_throttle_ms'].sum()):,} ms captured.")
        shown = [c for c in top["client_id"].head(TOP_SERIES)]
        fig = Figure(figsize=(10, 4), layout="constrained")
        _series_plot(fig, series, shown, "whatif_throttle_ms", "What-if throttle time per bucket (sum)",
                     "throttle ms")
        s.figures.append((f"What-if throttle time per {opts.bucket_seconds:g} s bucket, top clients", fig))
        fig = Figure(figsize=(10, 4), layout="constrained")
        default = st["produce"].get("*") if st["produce"] else None
        _series_plot(fig, series, shown, "bytes_per_s", "Quota bytes per second (produce request + fetch "
                     "response bytes)", "bytes/s", hline=default)
        s.figures.append((("Byte rate per client (the red line is the default produce quota, if any); the quota "
                          "Rate averages over the whole window, so short peaks above it are allowed"), fig))
        fig = Figure(figsize=(10, 4), layout="constrained")
        _series_plot(fig, series, shown, "captured_throttle_ms", "Captured throttle_time_ms per bucket (sum)",
                     "throttle ms")
        s.figures.append(("Throttling the broker actually applied at capture time", fig))
    else:
        s.text.append("The capture holds no client requests.")
    return [s]
