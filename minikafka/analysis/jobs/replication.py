"""Replication traffic, replication lag and phantom throttled bytes (SPEC section 5).

Follower fetches are the Fetch requests with ``replica_id >= 0`` (the follower's
broker id); the broker that answered is the leader.  Per (leader, follower)
and time bucket: fetches (full / incremental / sessionless, KIP-227), request
and response bytes on the wire, and the record bytes replicated (the record
batches in the responses).

Phantom throttled bytes: on every follower fetch the leader records into its
leader replication quota (``leader.replication.throttled.rate``) the size of a
FetchResponse of the request's version holding only the response's throttled
partitions, plus 4 (Kafka's ``KafkaApis.sizeOfThrottledPartitions`` =
``FetchResponse.sizeOf``).  With no throttled partition in the response that
is still an empty response: 12 bytes at Fetch v4-v6, 18 at v7-v11, 16 at
v12-v13.  The sizes here come from the broker's own function
(:func:`minikafka.broker.fetch_response.size_of_throttled_partitions`, with
the leader's ``ReplicationQuotaManager`` configured from
``AnalysisOptions.leader_throttled_replicas``), applied to the partitions each
captured response held.  ``recorded_bytes`` is what the leader records;
``throttled_record_bytes`` the record batches of throttled partitions in it
(real replication data); ``phantom_bytes = recorded_bytes -
throttled_record_bytes``: the bytes counted against the leader's quota that
carry no replicated data (the empty response on every fetch, and the
topic/partition headers of throttled partitions).  With no throttled replicas
every recorded byte is phantom.  ``phantom_share_of_rate`` is the phantom
bytes per second over ``leader_throttled_rate`` (the leader quota is per
leader broker, shared by its followers).

Throttled replicas are ``topic:partition:broker`` (the broker being the leader,
as in Kafka's ``leader.replication.throttled.replicas`` lists) or ``topic:*``.

Replication lag per partition: ``hw_lag = max(0, leader high watermark -
follower fetch offset)`` from each follower fetch response (the fetch offset
of partitions an incremental request left out is the one last sent on that
connection).  For an in-sync follower the leader advances the high watermark
to the follower's fetch offset, so this is mostly 0; ``fetched_ahead`` (last
offset returned + 1 - fetch offset, a lower bound of the leader's log end
minus the follower's) shows how far behind the follower was when it fetched.

Transactions (KIP-98): record bytes and records are those of data batches; the
control batches a leader replicates (transaction markers) are counted apart
(``control_bytes``, ``control_batches``, ``commit_markers``, ``abort_markers``;
they are real replicated data, so ``throttled_record_bytes`` and the throttled
sizes count their bytes too), and the partition tables carry the leader's last
stable offset beside its high watermark (``last_lso``, ``max_lso``).  These
columns come after the ones earlier versions had.

Tables: ``replication_pairs``, ``replication_leaders``, ``replication_series``,
``replication_partitions``, ``replication_lag``, ``replication_empty_sizes``.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any

from . import AnalysisOptions, Section
from .plots import series_lines

NAME = "replication"
TITLE = "Replication traffic and phantom throttled bytes"

TOP_N = 15
TOP_SERIES = 8
FETCH_VERSIONS = range(4, 14)
_FETCH = 1

_ZERO_ID = uuid.UUID(int=0)
_zeros = memoryview(b"")


# -- throttled replicas ---------------------------------------------------------------------------
def throttled_replica_configs(specs: list[str]) -> dict[str, str]:
    """``topic:partition:broker`` / ``topic:*`` items as Kafka's per-topic
    ``leader.replication.throttled.replicas`` values (``p:b,p:b`` or ``*``)."""
    from ...broker.quota.replication_quota_manager import validate_throttled_replicas

    per_topic: dict[str, list[str]] = {}
    for spec in specs or ():
        for item in str(spec).split(","):
            item = item.strip()
            if not item:
                continue
            topic, sep, rest = item.partition(":")
            if not sep or not topic or not rest:
                raise ValueError(f"bad throttled replica {item!r}: expected topic:partition:broker or topic:*")
            per_topic.setdefault(topic, []).append(rest.strip())
    out: dict[str, str] = {}
    for topic, items in per_topic.items():
        value = "*" if "*" in items else ",".join(items)
        validate_throttled_replicas(value)
        out[topic] = value
    return out


def _rules_frame(spark: Any, configs: dict[str, str]) -> Any:
    """(topic, partition or null = all, leader broker or null = any): a superset preselection in Spark;
    the exact choice is the broker's ``is_throttled`` in :func:`throttled_size`."""
    rows: list[tuple] = []
    for topic, value in configs.items():
        if value == "*":
            rows.append((topic, None, None))
        else:
            for item in value.split(","):
                p, b = (int(x) for x in item.split(":"))
                rows.append((topic, p, b))
    return spark.createDataFrame(rows, "r_topic string, r_partition int, r_broker int")


# -- sizes: the broker's own computation --------------------------------------------------------
_leaders: dict[tuple, Any] = {}


def _leader_quota(broker_id: int, configs: dict[str, str]) -> Any:
    """The leader ``broker_id``'s ``ReplicationQuotaManager`` with the given throttled replicas."""
    from ...broker.quota.replication_quota_manager import (
        LEADER_REPLICATION,
        ReplicationQuotaManager,
    )
    from ...common.clock import ManualClock
    from ...metrics import Metrics

    key = (broker_id, tuple(sorted(configs.items())))
    quota = _leaders.get(key)
    if quota is None:
        quota = ReplicationQuotaManager(LEADER_REPLICATION, Metrics(clock=ManualClock(0)))
        for topic, value in configs.items():
            quota.update_topic(topic, value, broker_id)
        _leaders[key] = quota
    return quota


def _records(n: int) -> memoryview:
    global _zeros
    if len(_zeros) < n:
        _zeros = memoryview(bytes(max(n, 2 * len(_zeros))))
    return _zeros[:n]


def _uuid(value: Any) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError):
        return _ZERO_ID


def throttled_size(broker_id: int, version: int, parts: list[Any], configs: dict[str, str]) -> int:
    """What the leader ``broker_id`` records into its leader quota for one follower fetch response of
    ``version`` holding ``parts`` (rows with topic, topic_id, partition, record_bytes)."""
    from ...broker.fetch_session import FetchPartitionData, PartitionKey
    from ...broker.fetch_response import size_of_throttled_partitions

    names: dict[uuid.UUID, str] = {}
    selected: OrderedDict = OrderedDict()
    for p in sorted(parts or (), key=lambda p: (str(p["topic"]), int(p["partition"]))):
        tid = _uuid(p["topic_id"]) if version >= 13 else None
        if tid is not None and p["topic"] is not None:
            names[tid] = p["topic"]
        size = int(p["record_bytes"] or 0)
        selected[PartitionKey(tid, p["topic"], int(p["partition"]))] = FetchPartitionData(
            int(p["partition"]), high_watermark=0, records=_records(size), size=size)
    return int(size_of_throttled_partitions(_leader_quota(int(broker_id), configs), names.get, int(version),
                                            selected))


def empty_sizes() -> dict[int, int]:
    """Per Fetch version, the bytes recorded for a follower fetch with no throttled partition."""
    return {v: throttled_size(0, v, [], {}) for v in FETCH_VERSIONS}


# -- run ----------------------------------------------------------------------------------------
def has_input(facts: dict[str, Any]) -> bool:
    """Every table comes from follower fetches (``replication_empty_sizes`` from no data at all)."""
    return facts.get("follower_fetches", 1) > 0


_TXN_COLS = ["control_bytes", "control_batches", "commit_markers", "abort_markers"]


def _txn_last(df: Any) -> Any:
    """``df`` with the transaction columns moved after the others (columns are only ever appended)."""
    return df.select(*[c for c in df.columns if c not in _TXN_COLS], *[c for c in _TXN_COLS if c in df.columns])


def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    """The replication tables (see the module docstring)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from .traffic import IS_ERROR, ordered, time_bucket, total

    sec = float(opts.bucket_seconds)
    rate = float(opts.leader_throttled_rate) if opts.leader_throttled_rate else None
    configs = throttled_replica_configs(opts.leader_throttled_replicas)
    spark = tables.requests.sparkSession
    sizes = empty_sizes()
    size_map = F.create_map(*[x for v, n in sizes.items() for x in (F.lit(v), F.lit(n))])

    follower = (F.col("api_key") == F.lit(_FETCH)) & (F.coalesce(F.col("replica_id"), F.lit(-1)) >= 0)
    key = ["broker_id", "connection_id", "correlation_id", "receive_ns"]
    has_resp = F.coalesce(F.col("has_response"), F.lit(False))
    f = (tables.requests.where(follower)
         .select(*key, "send_ns", "replica_id", "api_version", "fetch_kind", "request_bytes", "response_bytes",
                 "has_response", "record_bytes", "record_count", "control_bytes", "control_batch_count",
                 "commit_markers", "abort_markers")
         .withColumn("empty_bytes", F.when(has_resp, F.element_at(size_map, F.col("api_version"))).otherwise(0)))
    # The whole records field of a partition, data and control batches: what the leader sends and sizes.
    parts = tables.partitions.where(follower).withColumn(
        "batch_bytes", F.coalesce(F.col("record_bytes"), F.lit(0)) + F.coalesce(F.col("control_bytes"), F.lit(0)))
    if configs:
        rules = F.broadcast(_rules_frame(spark, configs))
        cond = ((F.col("topic") == F.col("r_topic"))
                & (F.col("r_partition").isNull() | (F.col("r_partition") == F.col("partition")))
                & (F.col("r_broker").isNull() | (F.col("r_broker") == F.col("broker_id"))))
        candidates = parts.where(F.col("in_response")).join(rules, cond, "left_semi")
        udf = F.udf(lambda b, v, ps: throttled_size(b, v, ps, configs), "long")
        thr = (candidates.groupBy(*key, "api_version")
               .agg(F.collect_list(F.struct("topic", "topic_id", "partition",
                                            F.col("batch_bytes").alias("record_bytes"))).alias("tparts"),
                    total("batch_bytes", "throttled_record_bytes"))
               .withColumn("throttled_size", udf(F.col("broker_id"), F.col("api_version"), F.col("tparts")))
               .drop("tparts", "api_version"))
        f = (f.join(thr, on=key, how="left")
             .withColumn("recorded_bytes", F.when(has_resp, F.coalesce(F.col("throttled_size"), F.col("empty_bytes")))
                         .otherwise(0))
             .withColumn("throttled_record_bytes", F.coalesce(F.col("throttled_record_bytes"), F.lit(0)))
             .drop("throttled_size"))
    else:
        f = f.withColumn("recorded_bytes", F.col("empty_bytes")).withColumn("throttled_record_bytes", F.lit(0))
    f = (f.withColumn("phantom_bytes", F.col("recorded_bytes") - F.col("throttled_record_bytes"))
         .withColumnRenamed("broker_id", "leader_id").withColumnRenamed("replica_id", "follower_id")
         .cache())

    fetch_aggs = [
        F.count(F.lit(1)).cast("long").alias("fetches"),
        total("CAST(fetch_kind = 'full' AS INT)", "full_fetches"),
        total("CAST(fetch_kind = 'incremental' AS INT)", "incremental_fetches"),
        total("CAST(fetch_kind = 'sessionless' AS INT)", "sessionless_fetches"),
        total("request_bytes", "request_bytes"), total("response_bytes", "response_bytes"),
        total("record_bytes", "record_bytes"), total("record_count", "records"),
        total("recorded_bytes", "recorded_bytes"), total("throttled_record_bytes", "throttled_record_bytes"),
        total("phantom_bytes", "phantom_bytes"), total("empty_bytes", "empty_response_bytes"),
        total("control_bytes", "control_bytes"), total("control_batch_count", "control_batches"),
        total("commit_markers", "commit_markers"), total("abort_markers", "abort_markers"),
    ]
    span = [F.min("receive_ns").alias("_first"), F.expr("max(coalesce(send_ns, receive_ns)) AS _last")]

    def per_second(df: Any) -> Any:
        # Three projections of SQL text, not a chain of seven withColumn (each link is analysed).
        share = (lambda c: f"{c} / {rate!r}D") if rate else (lambda c: "CAST(NULL AS DOUBLE)")
        for cols in ({"duration_s": "greatest((_last - _first) / 1e9, 0.001D)",
                      "first_ts": "timestamp_micros(CAST(floor(_first / 1000) AS BIGINT))"},
                     {f"{c}_per_s": f"{c} / duration_s" for c in ("fetches", "recorded_bytes", "phantom_bytes")},
                     {f"{c}_share_of_rate": share(f"{c}_bytes_per_s") for c in ("phantom", "recorded")}):
            df = df.withColumns({name: F.expr(sql) for name, sql in cols.items()})
        return df.drop("_first", "_last")

    pairs = per_second(f.groupBy("leader_id", "follower_id").agg(
        *fetch_aggs, *span,
        F.concat_ws(",", F.array_sort(F.collect_set(F.col("api_version").cast("string")))).alias("fetch_versions"))
    ).transform(_txn_last).transform(ordered, "leader_id", "follower_id")
    leaders = per_second(f.groupBy("leader_id").agg(
        F.countDistinct("follower_id").cast("int").alias("followers"), *fetch_aggs, *span)
    ).transform(_txn_last).transform(ordered, "leader_id")
    series = (f.withColumn("bucket_start", time_bucket("receive_ns", sec))
              .groupBy("leader_id", "follower_id", "bucket_start").agg(*fetch_aggs)
              .withColumn("record_bytes_per_s", F.col("record_bytes") / F.lit(sec))
              .withColumn("phantom_bytes_per_s", F.col("phantom_bytes") / F.lit(sec))
              .withColumn("recorded_bytes_per_s", F.col("recorded_bytes") / F.lit(sec))
              .transform(_txn_last)
              .transform(ordered, "leader_id", "follower_id", "bucket_start"))

    # Per partition: replicated records and lag.
    w = (Window.partitionBy("broker_id", "connection_id", "topic", "partition")
         .orderBy("receive_ns", "correlation_id").rowsBetween(Window.unboundedPreceding, Window.currentRow))
    pr = (parts.where(F.col("in_request") | F.col("in_response"))
          .withColumn("offset", F.last("fetch_offset", ignorenulls=True).over(w))
          .where(F.col("in_response"))
          .withColumn("ok", (F.coalesce(F.col("error_code"), F.lit(0)) == 0) & F.col("high_watermark").isNotNull()
                      & (F.col("high_watermark") >= 0) & F.col("offset").isNotNull())
          .withColumn("hw_lag", F.when(F.col("ok"), F.greatest(F.col("high_watermark") - F.col("offset"), F.lit(0))))
          .withColumn("fetched_ahead", F.when(F.col("ok") & (F.coalesce(F.col("batch_count"), F.lit(0))
                                                             + F.coalesce(F.col("control_batch_count"), F.lit(0)) > 0)
                                              & F.col("last_offset").isNotNull(),
                                              F.greatest(F.col("last_offset") + 1 - F.col("offset"), F.lit(0)))
                      .when(F.col("ok"), F.lit(0)))
          .withColumnRenamed("broker_id", "leader_id").withColumnRenamed("replica_id", "follower_id")
          .withColumn("bucket_start", time_bucket("receive_ns", sec)))
    part_key = ["leader_id", "follower_id", "topic", "partition"]
    partitions = (pr.groupBy(*part_key)
                  .agg(F.count(F.lit(1)).cast("long").alias("responses"),
                       total("record_bytes", "record_bytes"), total("record_count", "records"),
                       F.max("hw_lag").alias("max_hw_lag"), F.max("fetched_ahead").alias("max_fetched_ahead"),
                       F.max_by("high_watermark", "receive_ns").alias("last_high_watermark"),
                       F.max_by("offset", "receive_ns").alias("last_fetch_offset"),
                       total(f"CAST({IS_ERROR} AS INT)", "error_responses"),
                       F.max_by("last_stable_offset", "receive_ns").alias("last_lso"),
                       total("control_bytes", "control_bytes"), total("control_batch_count", "control_batches"),
                       total("commit_markers", "commit_markers"), total("abort_markers", "abort_markers"))
                  .transform(ordered, *part_key))
    lag = (pr.where(F.col("ok")).groupBy(*part_key, "bucket_start")
           .agg(F.count(F.lit(1)).cast("long").alias("responses"),
                F.max("hw_lag").alias("max_hw_lag"), F.avg("hw_lag").alias("avg_hw_lag"),
                F.max("fetched_ahead").alias("max_fetched_ahead"), total("record_bytes", "record_bytes"),
                F.max("high_watermark").alias("max_high_watermark"),
                F.max("last_stable_offset").alias("max_lso"), total("control_bytes", "control_bytes"))
           .transform(ordered, *part_key, "bucket_start"))
    empty = spark.createDataFrame([(v, n) for v, n in sizes.items()], "fetch_version int, empty_response_bytes int")
    return {"replication_pairs": pairs, "replication_leaders": leaders, "replication_series": series,
            "replication_partitions": partitions, "replication_lag": lag, "replication_empty_sizes": empty}


# -- report -------------------------------------------------------------------------------------


def report(results: dict[str, Any], opts: AnalysisOptions) -> list[Section]:
    """Replication traffic per leader/follower, phantom bytes against the leader quota, lag."""
    sec = float(opts.bucket_seconds)
    pairs = results.get("replication_pairs")
    leaders = results.get("replication_leaders")
    series = results.get("replication_series")
    partitions = results.get("replication_partitions")
    lag = results.get("replication_lag")
    out: list[Section] = []

    s = Section("Replication traffic")
    s.text.append("Follower fetches are the Fetch requests with replica_id >= 0 (the follower's broker id), "
                  "answered by the leader. Bytes are whole frames on the wire; record bytes are the record "
                  "batches the leader returned (the data replicated). Full/incremental are KIP-227 fetch-session "
                  "kinds.")
    if pairs is None or pairs.empty:
        s.text.append("The capture holds no follower fetches (a single broker, or replication not captured).")
        out.append(s)
        return out
    s.tables.append(("Per leader and follower", pairs[[c for c in (
        "leader_id", "follower_id", "fetches", "full_fetches", "incremental_fetches", "sessionless_fetches",
        "fetch_versions", "request_bytes", "response_bytes", "record_bytes", "records", "fetches_per_s",
        "duration_s") if c in pairs.columns]]))
    pair = ["leader_id", "follower_id"]
    s.figures.append(("Follower fetches and replicated bytes per (leader, follower)", [
        series_lines(series, pair, "fetches", title=f"Follower fetches per {sec:g} s bucket (leader follower)",
                     y_label="fetches", height=260),
        series_lines(series, pair, "record_bytes_per_s", title="Record bytes replicated per second",
                     y_label="bytes/s", height=260)]))
    out.append(s)

    s = Section("Phantom throttled bytes (leader replication quota)")
    thr = throttled_replica_configs(opts.leader_throttled_replicas)
    sizes = empty_sizes()
    s.text.append(
        "On every follower fetch the leader records into its leader replication quota 4 + the size of a "
        "FetchResponse of the request's version holding only the throttled partitions of the response "
        "(Kafka's sizeOfThrottledPartitions), computed here with the broker's own function. With no throttled "
        "partition that is the empty response: "
        + ", ".join(f"v{v}: {n} B" for v, n in sizes.items()) + ". Phantom bytes are recorded bytes that carry "
        "no replicated records (the empty response of every fetch, and headers of throttled partitions).")
    s.text.append("Throttled replicas: " + (", ".join(f"{t}={v}" for t, v in sorted(thr.items())) if thr else
                                            "none (every recorded byte is phantom)") + ". Leader throttled rate: "
                  + (f"{opts.leader_throttled_rate:,.0f} bytes/s." if opts.leader_throttled_rate else "not set."))
    cols = ["leader_id", "follower_id", "fetches", "recorded_bytes", "throttled_record_bytes", "phantom_bytes",
            "phantom_bytes_per_s", "recorded_bytes_per_s", "phantom_share_of_rate"]
    s.tables.append(("Per leader and follower", pairs[[c for c in cols if c in pairs.columns]]))
    if leaders is not None and not leaders.empty:
        s.tables.append(("Per leader (the leader quota is shared by its followers)",
                         leaders[[c for c in ["leader_id", "followers"] + cols[2:] if c in leaders.columns]]))
        if opts.leader_throttled_rate:
            worst = leaders.sort_values("phantom_share_of_rate", ascending=False).iloc[0]
            s.text.append(f"Phantom bytes eat up to {100 * float(worst['phantom_share_of_rate']):.3g}% of the "
                          f"leader throttled rate (leader {int(worst['leader_id'])}).")
    chart = series_lines(series, pair, "phantom_bytes_per_s", y_label="bytes/s",
                         title="Phantom bytes recorded per second into the leader quota")
    if opts.leader_throttled_rate and not chart.empty:
        chart.reference_line(float(opts.leader_throttled_rate), "leader throttled rate")
        chart.y_scale, chart.y_label = "log", "bytes/s (log scale)"
    s.figures.append(("Phantom bytes/s per (leader, follower)", chart))
    out.append(s)

    s = Section("Replication lag")
    s.text.append("hw_lag = max(0, leader high watermark - follower fetch offset) per follower fetch response "
                  "(0 for an in-sync follower: the leader moves the high watermark to its fetch offset); "
                  "fetched_ahead = last offset returned + 1 - fetch offset, how far behind the leader's log end "
                  "the follower was at least when it fetched.")
    if partitions is not None and not partitions.empty:
        top = partitions.sort_values(["max_fetched_ahead", "max_hw_lag", "record_bytes"], ascending=False)
        s.tables.append((f"Top {min(TOP_N, len(top))} partitions by lag ({len(top)} partition replicas)",
                         top.head(TOP_N)))
        keys = [tuple(r) for r in top[["leader_id", "follower_id", "topic", "partition"]].head(TOP_SERIES)
                .itertuples(index=False)]
        replica = ["leader_id", "follower_id", "topic", "partition"]
        s.figures.append((f"Replication lag over time, top {len(keys)} partition replicas", [
            series_lines(lag, replica, "max_fetched_ahead", keys, y_label="records", height=260,
                         title="Max fetched_ahead per bucket (leader follower topic partition)"),
            series_lines(lag, replica, "max_hw_lag", keys, title="Max hw_lag per bucket", y_label="records",
                         height=260)]))
    out.append(s)
    return out
