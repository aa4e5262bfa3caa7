"""Traffic by API, client and topic over time.

Tables (all from the ``requests`` table unless said otherwise; sizes are whole
frames on the wire including the 4-byte size prefix, as in
:mod:`minikafka.analysis.decode`; a request counts in the time bucket of its
``receive_ns``, its response too):

* ``by_api_time``: per time bucket and api: requests, request/response bytes and their rates per second.
* ``by_client``: per client id, api and principal: requests, responses, bytes, error responses,
  first/last request (``principal``, appended last: two principals using one client id are two rows).
* ``connections``: per connection: client id, broker, peer, requests, responses, bytes, the apis used;
  then (appended) the connection's ``principal`` (that of its latest request, i.e. after any SASL
  authentication) and its ``listener``.
* ``by_topic_time`` (``partitions`` table): per time bucket and topic: Produce record bytes/records as
  sent, Fetch record bytes/records as returned to consumers and to follower replicas; then (KIP-98)
  the transactional batches/records produced, the control batches (transaction markers: bytes,
  batches, commit and abort markers) returned to consumers and to followers, the transactional records
  and the aborted transactions listed in consumer fetches.
* ``by_topic``: the same per topic over the whole capture.

Record bytes and records are those of data batches; control batches are counted apart (their bytes
are not in the record bytes).  Columns added later come after the ones earlier versions had: then
(KIP-932) the record bytes/records of ShareFetch responses and the records they handed to share-group
members (``share_acquired_records``: acquired ranges, a subset of the batches returned).
* ``groups``: per group (the ``group_id`` of group requests: classic, KIP-848 consumer and KIP-932 share
  groups): the protocols its requests used (``classic``: JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
  ``consumer``: ConsumerGroupHeartbeat/Describe, ``share``: the share-group apis), members (distinct member
  ids), requests, heartbeats (Heartbeat, ConsumerGroupHeartbeat, ShareGroupHeartbeat), joins (JoinGroup, and
  heartbeats with member epoch 0), epoch bumps (heartbeat responses giving a member a higher epoch than
  the one it sent: its assignment changed), the highest member epoch or generation handed out, offset
  commits, error responses and their names.
* ``share_groups`` (``partitions`` table): per share group and topic, over ShareFetch and ShareAcknowledge:
  members, ShareFetch responses, the record bytes/records/batches returned, the records acquired (and
  of those, redelivered: delivery count above 1), the highest delivery count, the records acknowledged
  as accepted/released/rejected, and the partitions answered with an acknowledgement error.
* ``summary``: per api: requests, responses, bytes (frame and body), error responses, decode errors,
  and the error names with their counts.
* ``errors``: per api and error name: responses whose (first) error is that one, and all non-zero
  error codes in those responses (a response can carry one per partition).

Requests without a client id are grouped under ``(none)``.
"""

from __future__ import annotations

import logging
from typing import Any

from . import AnalysisOptions, Section
from .plots import PALETTE, Chart

log = logging.getLogger(__name__)

NAME = "traffic"
TITLE = "Traffic by API, client and topic"

NO_CLIENT = "(none)"
TOP_SERIES = 8  # series shown in a stacked plot; the rest are summed as "other"
#: SQL conditions: a response with an error; a request of a follower replica.
IS_ERROR = "(coalesce(error_code, 0) != 0)"
REPLICA = "(coalesce(replica_id, -1) >= 0)"


# -- helpers shared with the latency job --------------------------------------------------------
def time_bucket_sql(ns_col: str, seconds: float) -> str:
    """SQL text of a timestamp: the start of the ``seconds``-long bucket (aligned to the epoch) of ``ns_col``."""
    bucket_ns = max(1000, round(float(seconds) * 1e9))
    return f"timestamp_micros(CAST(floor(floor({ns_col} / {bucket_ns}) * {bucket_ns} / 1000) AS BIGINT))"


def time_bucket(ns_col: str, seconds: float) -> Any:
    """:func:`time_bucket_sql` as a column (parsed in one call into the JVM)."""
    from pyspark.sql import functions as F

    return F.expr(time_bucket_sql(ns_col, seconds))


def with_client(df: Any) -> Any:
    """``client_id`` with nulls replaced by :data:`NO_CLIENT`."""
    from pyspark.sql import functions as F

    return df.withColumn("client_id", F.coalesce(F.col("client_id"), F.lit(NO_CLIENT)))


def ordered(df: Any, *cols: Any) -> Any:
    """``df`` in one partition sorted by ``cols``: a small result in order without ``orderBy``'s
    range-partitioning (a sampling job per result)."""
    return df.coalesce(1).sortWithinPartitions(*cols)


class GroupingSets:
    """ONE aggregation of ``df`` over several named grouping sets (each a list of columns), cached: tables that
    group the same rows differently scan them once and are split from it after (:meth:`level`).  The frame
    holds every set's key columns (null where a set leaves a key out), ``aggs`` and ``_g``, Spark's grouping id
    (:meth:`is_level` tells the sets apart)."""

    def __init__(self, df: Any, sets: dict[str, list[str]], *aggs: Any) -> None:
        from pyspark.sql import functions as F

        keys = list(dict.fromkeys(k for cols in sets.values() for k in cols))
        # grouping_id(): a bit per key, the first key the highest, set where the grouping set leaves it out
        self._gid = {name: sum(1 << (len(keys) - 1 - i) for i, k in enumerate(keys) if k not in cols)
                     for name, cols in sets.items()}
        self.frame = df.groupingSets(list(sets.values()), *keys).agg(*aggs, F.grouping_id().alias("_g")).cache()
        self.aggregates = [c for c in self.frame.columns if c not in keys and c != "_g"]

    def is_level(self, name: str) -> Any:
        """A column: whether the row is one of grouping set ``name``."""
        from pyspark.sql import functions as F

        return F.col("_g") == F.lit(self._gid[name])

    def level(self, *names: str) -> Any:
        """The rows of the grouping sets ``names``."""
        from pyspark.sql import functions as F

        return self.frame.where(F.col("_g").isin(*[self._gid[n] for n in names]))


def exprs(*items: Any) -> list[Any]:
    """Columns from SQL text, each parsed in one call into the JVM (a Column built call by call costs some twenty
    round trips); Columns pass through."""
    from pyspark.sql import functions as F

    return [F.expr(i) if isinstance(i, str) else i for i in items]


def total(value: Any, name: str) -> Any:
    """``sum(value)`` as a long, 0 over no rows, named ``name``.  ``value``: SQL text (a column name, or an
    expression such as ``CASE WHEN ... END``), parsed in one call into the JVM, or a Column (built call by call:
    some twenty round trips)."""
    from pyspark.sql import functions as F

    if isinstance(value, str):
        return F.expr(f"CAST(coalesce(sum({value}), 0) AS BIGINT) AS `{name}`")
    return F.coalesce(F.sum(value), F.lit(0)).cast("long").alias(name)


# -- run ----------------------------------------------------------------------------------------
def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    """The traffic tables (see the module docstring)."""
    from pyspark.sql import functions as F

    sec = float(opts.bucket_seconds)
    r = with_client(tables.requests).withColumn("bucket_start", time_bucket("receive_ns", sec))
    count = F.count(F.lit(1)).cast("long").alias("requests")
    responses = total("CAST(has_response AS INT)", "responses")
    req_bytes = total("request_bytes", "request_bytes")
    resp_bytes = total("response_bytes", "response_bytes")
    errors = total(f"CAST({IS_ERROR} AS INT)", "error_responses")

    # Four tables' groupings of the requests in ONE aggregation (one scan), split after; the connections (sets
    # of apis, the latest principal) are grouped apart.
    grouped = GroupingSets(r, {"bucket": ["bucket_start", "api_name"], "client": ["client_id", "api_name", "principal"],
                               "api": ["api_key", "api_name"], "error": ["api_name", "error_name"]},
                           count, responses, req_bytes, resp_bytes, errors,
                           total("request_body_bytes", "request_body_bytes"),
                           total("response_body_bytes", "response_body_bytes"),
                           F.count("decode_error").cast("long").alias("decode_errors"),
                           F.min("receive_ts").alias("first_ts"), F.max("receive_ts").alias("last_ts"),
                           F.max("send_ts").alias("last_send_ts"),
                           F.expr(f"CAST(count(CASE WHEN {IS_ERROR} THEN 1 END) AS BIGINT) AS error_requests"),
                           total(f"CASE WHEN {IS_ERROR} THEN error_count END", "error_codes"))
    level = grouped.level

    by_api_time = (level("bucket").select("bucket_start", "api_name", "requests", "request_bytes", "response_bytes")
                   .withColumns({f"{c}_per_s": F.col(c) / F.lit(sec)
                                 for c in ("requests", "request_bytes", "response_bytes")})
                   .transform(ordered, "bucket_start", "api_name"))

    by_client = (level("client")
                 .select("client_id", "api_name", "requests", "responses", "request_bytes", "response_bytes",
                         "error_responses", "first_ts", "last_ts", "principal")
                 .transform(ordered, "client_id", "api_name", "principal"))

    connections = (r.groupBy("client_id", "broker_id", "connection_id", "peer")
                   .agg(count, responses, req_bytes, resp_bytes, errors,
                        F.min("receive_ns").alias("first_ns"),
                        F.min("receive_ts").alias("first_ts"), F.max("receive_ts").alias("last_ts"),
                        F.concat_ws(",", F.array_sort(F.collect_set("api_name"))).alias("apis"),
                        F.max_by("principal", "receive_ns").alias("principal"),
                        F.max_by("listener", "receive_ns").alias("listener"))
                   .transform(ordered, "first_ns", "connection_id"))

    err = (level("error").where(F.col("error_requests") > 0)
           .select("api_name", "error_name", F.col("error_requests").alias("responses"), "error_codes"))
    err_text = (err.groupBy("api_name").agg(F.concat_ws(", ", F.array_sort(F.collect_list(
        F.concat(F.col("error_name"), F.lit("="), F.col("responses").cast("string"))))).alias("errors")))
    summary = (level("api")
               .select("api_key", "api_name", "requests", "responses", "request_bytes", "response_bytes",
                       "request_body_bytes", "response_body_bytes", "error_responses", "decode_errors", "first_ts",
                       F.col("last_send_ts").alias("last_ts"))
               .join(err_text, on="api_name", how="left")
               .withColumn("errors", F.coalesce(F.col("errors"), F.lit("")))
               .select("api_key", "api_name", "requests", "responses", "request_bytes", "response_bytes",
                       "request_body_bytes", "response_body_bytes", "error_responses", "errors",
                       "decode_errors", "first_ts", "last_ts")
               .transform(ordered, "api_key"))

    p = tables.partitions.withColumn("bucket_start", time_bucket("receive_ns", sec))
    produce, fetch = "api_name = 'Produce' AND in_request", "api_name = 'Fetch' AND in_response"
    consumer, follower = f"{fetch} AND NOT {REPLICA}", f"{fetch} AND {REPLICA}"
    share_fetch = "api_name = 'ShareFetch' AND in_response"

    def when(cond: str, col: str, name: str) -> Any:
        return total(f"CASE WHEN {cond} THEN {col} END", name)

    def topic_aggs() -> list[Any]:
        return [when(produce, "record_bytes", "produce_record_bytes"), when(produce, "record_count", "produce_records"),
                when(consumer, "record_bytes", "fetch_record_bytes"), when(consumer, "record_count", "fetch_records"),
                when(follower, "record_bytes", "replica_fetch_record_bytes"),
                when(follower, "record_count", "replica_fetch_records")]

    def txn_aggs() -> list[Any]:
        return [
            when(produce, "transactional_batch_count", "produce_transactional_batches"),
            when(produce, "transactional_record_count", "produce_transactional_records"),
            when(consumer, "control_bytes", "fetch_control_bytes"),
            when(consumer, "control_batch_count", "fetch_control_batches"),
            when(consumer, "commit_markers", "fetch_commit_markers"),
            when(consumer, "abort_markers", "fetch_abort_markers"),
            when(consumer, "transactional_record_count", "fetch_transactional_records"),
            when(consumer, "aborted_transactions", "fetch_aborted_transactions"),
            when(follower, "control_bytes", "replica_fetch_control_bytes"),
            when(follower, "control_batch_count", "replica_fetch_control_batches"),
        ]

    def share_aggs() -> list[Any]:
        return [when(share_fetch, "record_bytes", "share_fetch_record_bytes"),
                when(share_fetch, "record_count", "share_fetch_records"),
                when(share_fetch, "acquired_records", "share_acquired_records")]

    txn_cols = ["produce_transactional_batches", "produce_transactional_records", "fetch_control_bytes",
                "fetch_control_batches", "fetch_commit_markers", "fetch_abort_markers", "fetch_transactional_records",
                "fetch_aborted_transactions", "replica_fetch_control_bytes", "replica_fetch_control_batches"]
    share_cols = ["share_fetch_record_bytes", "share_fetch_records", "share_acquired_records"]
    tp = (p.where(f"({produce}) OR ({fetch}) OR ({share_fetch})")
          .withColumn("topic", F.coalesce(F.col("topic"), F.lit("(unknown)"))))
    # One scan of the partitions: sums per bucket, topic and partition (cached), added up per bucket and topic
    # and per topic (whose partitions are counted there).
    per_partition = (tp.groupBy("bucket_start", "topic", "partition").agg(*topic_aggs(), *txn_aggs(), *share_aggs())
                     .cache())
    topic_cols = [c for c in per_partition.columns if c not in ("bucket_start", "topic", "partition", *txn_cols,
                                                                *share_cols)]

    def added(cols: list[str]) -> list[Any]:
        return [total(c, c) for c in cols]

    by_topic_time = (per_partition.groupBy("bucket_start", "topic")
                     .agg(*added(topic_cols), *added(txn_cols), *added(share_cols))
                     .withColumn("produce_bytes_per_s", F.col("produce_record_bytes") / F.lit(sec))
                     .withColumn("fetch_bytes_per_s", F.col("fetch_record_bytes") / F.lit(sec)))
    later = txn_cols + share_cols
    by_topic_time = (by_topic_time.select(*[c for c in by_topic_time.columns if c not in later], *later)
                     .transform(ordered, "bucket_start", "topic"))
    by_topic = (per_partition.groupBy("topic")
                .agg(*added(topic_cols), F.countDistinct("partition").cast("long").alias("partitions"),
                     *added(txn_cols), *added(share_cols))
                .transform(ordered, "topic"))

    return {"summary": summary, "errors": err.transform(ordered, "api_name", "error_name"), "by_api_time": by_api_time,
            "by_client": by_client, "connections": connections.drop("first_ns"),
            "by_topic_time": by_topic_time, "by_topic": by_topic,
            "groups": group_table(r), "share_groups": share_group_table(tables.partitions)}


CLASSIC_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup")
CONSUMER_APIS = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")
SHARE_APIS = ("ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge",
              "DescribeShareGroupOffsets", "AlterShareGroupOffsets", "DeleteShareGroupOffsets")
HEARTBEAT_APIS = ("Heartbeat", "ConsumerGroupHeartbeat", "ShareGroupHeartbeat")


def group_table(requests: Any) -> Any:
    """The ``groups`` table (see the module docstring) from the ``requests`` table."""
    from pyspark.sql import functions as F

    name = F.col("api_name")
    protocol = (F.when(name.isin(*CLASSIC_APIS), F.lit("classic")).when(name.isin(*CONSUMER_APIS), F.lit("consumer"))
                .when(name.isin(*SHARE_APIS), F.lit("share")))
    heartbeat = name.isin("ConsumerGroupHeartbeat", "ShareGroupHeartbeat")
    joins = (name == "JoinGroup") | (heartbeat & (F.col("member_epoch") == 0))
    bumps = heartbeat & (F.col("member_epoch") > 0) & (F.col("response_member_epoch") > F.col("member_epoch"))
    g = requests.where(F.col("group_id").isNotNull())
    err_names = (g.where(IS_ERROR).groupBy("group_id", "error_name").agg(F.count(F.lit(1)).alias("n"))
                 .groupBy("group_id").agg(F.concat_ws(", ", F.array_sort(F.collect_list(
                     F.concat(F.col("error_name"), F.lit("="), F.col("n").cast("string"))))).alias("errors")))
    return (g.withColumn("protocol", protocol)
            .groupBy("group_id")
            .agg(F.concat_ws(",", F.array_sort(F.collect_set("protocol"))).alias("protocols"),
                 F.countDistinct(F.when(F.col("member_id") != "", F.col("member_id"))).cast("long").alias("members"),
                 F.count(F.lit(1)).cast("long").alias("requests"),
                 total(name.isin(*HEARTBEAT_APIS).cast("int"), "heartbeats"),
                 total(joins.cast("int"), "joins"), total(bumps.cast("int"), "epoch_bumps"),
                 F.max(F.when(heartbeat | (name == "JoinGroup"), F.col("response_member_epoch"))).alias("max_epoch"),
                 total(name.isin("OffsetCommit", "TxnOffsetCommit").cast("int"), "offset_commits"),
                 total(f"CAST({IS_ERROR} AS INT)", "error_responses"),
                 F.min("receive_ts").alias("first_ts"), F.max("receive_ts").alias("last_ts"))
            .join(err_names, on="group_id", how="left")
            .withColumn("errors", F.coalesce(F.col("errors"), F.lit("")))
            .transform(ordered, "group_id"))


def share_group_table(partitions: Any) -> Any:
    """The ``share_groups`` table (see the module docstring) from the ``partitions`` table."""
    from pyspark.sql import functions as F

    name = F.col("api_name")
    fetched = (name == "ShareFetch") & F.col("in_response")
    return (partitions.where(name.isin("ShareFetch", "ShareAcknowledge"))
            .withColumn("group_id", F.coalesce(F.col("group_id"), F.lit(NO_CLIENT)))
            .withColumn("topic", F.coalesce(F.col("topic"), F.col("topic_id"), F.lit("(unknown)")))
            .groupBy("group_id", "topic")
            .agg(F.countDistinct("member_id").cast("long").alias("members"),
                 total(fetched.cast("int"), "fetch_responses"),
                 total(F.when(fetched, F.col("record_bytes")), "record_bytes"),
                 total(F.when(fetched, F.col("record_count")), "records"),
                 total(F.when(fetched, F.col("batch_count")), "batches"),
                 total("acquired_records", "acquired_records"), total("redelivered_records", "redelivered_records"),
                 F.max("max_delivery_count").alias("max_delivery_count"),
                 total("accepted_records", "accepted_records"), total("released_records", "released_records"),
                 total("rejected_records", "rejected_records"),
                 total("CAST(coalesce(acknowledge_error_code, 0) != 0 AS INT)",
                      "acknowledge_errors"))
            .transform(ordered, "group_id", "topic"))


# -- report -------------------------------------------------------------------------------------
class Timeline:
    """The x axis of the time plots: the capture's buckets, as seconds since its first one."""

    def __init__(self, frames: list[Any], bucket_seconds: float) -> None:
        import pandas as pd

        self.step = pd.Timedelta(seconds=float(bucket_seconds))
        times = [pd.to_datetime(f["bucket_start"]) for f in frames if f is not None and not f.empty]
        self.start = min(t.min() for t in times) if times else None
        self.end = max(t.max() for t in times) if times else None

    def index(self) -> Any:
        import pandas as pd

        return pd.date_range(self.start, self.end, freq=self.step)

    def seconds(self, index: Any) -> Any:
        import pandas as pd

        return (pd.DatetimeIndex(index) - self.start).total_seconds().to_numpy()


def _rate_frame(df: Any, series: str, value: str, tl: Timeline, top: int = TOP_SERIES) -> Any:
    """A bucket x series frame of ``value`` over the whole timeline (missing buckets 0), the top series by
    total first, the rest summed as "other"."""
    import pandas as pd

    if df is None or df.empty or tl.start is None:
        return pd.DataFrame()
    wide = df.pivot_table(index="bucket_start", columns=series, values=value, aggfunc="sum", fill_value=0)
    wide.index = pd.to_datetime(wide.index)
    order = list(wide.sum().sort_values(ascending=False).index)
    if len(order) > top:
        wide = pd.concat([wide[order[: top - 1]], wide[order[top - 1:]].sum(axis=1).rename("other")], axis=1)
    else:
        wide = wide[order]
    return wide.reindex(tl.index().union(wide.index), fill_value=0).astype(float)


def _colors(*frames: Any) -> dict[str, str]:
    """One colour per series name over several charts, the largest series first."""
    import pandas as pd

    totals = pd.concat([f.sum() for f in frames if not f.empty]) if any(not f.empty for f in frames) else None
    names = [] if totals is None else list(totals.groupby(level=0).sum().sort_values(ascending=False).index)
    return {str(n): PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def _stacked(wide: Any, tl: Timeline, title: str, ylabel: str, colors: dict[str, str]) -> Chart:
    """A stacked step chart of ``wide``'s columns (each bucket drawn over its whole width)."""
    import numpy as np

    chart = Chart(title, [], y_label=ylabel, kind="stacked", height=260)
    if wide.empty or not len(wide.columns):
        return chart
    t = tl.seconds(wide.index)
    chart.x = list(np.append(t, t[-1] + tl.step.total_seconds()))  # the last bucket's end
    for c in wide.columns:
        chart.add(str(c), np.append(wide[c].to_numpy(), wide[c].to_numpy()[-1]),
                  color=colors.get(str(c), "#888888"))
    return chart


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def report(results: dict[str, Any], opts: AnalysisOptions) -> list[Section]:
    """Summary tables, stacked bytes/s charts per API and per topic, a bar chart per client."""
    sec = float(opts.bucket_seconds)
    summary = results.get("summary")
    out: list[Section] = []

    s = Section("Requests and bytes by API")
    if summary is not None and not summary.empty:
        tot_req = int(summary["requests"].sum())
        tot_in = int(summary["request_bytes"].sum())
        tot_out = int(summary["response_bytes"].sum())
        s.text.append(f"{tot_req:,} requests: {_human(tot_in)} received and {_human(tot_out)} sent by the "
                      f"broker(s), frames including their 4-byte size prefix. Requests count in the "
                      f"{sec:g}-second bucket they arrived in.")
        s.tables.append(("Totals per API", summary))
    else:
        s.text.append("The capture holds no requests.")
    errs = results.get("errors")
    if errs is not None and not errs.empty:
        caption = ("Error responses by API and error name (first error of each response; "
                   "error_codes counts every non-zero code in them)")
        s.tables.append((caption, errs))
    out.append(s)

    bat = results.get("by_api_time")
    btt = results.get("by_topic_time")
    tl = Timeline([bat, btt], sec)
    s = Section("Bytes per second by API")
    frames = [_rate_frame(bat, "api_name", v, tl) for v in
              ("request_bytes_per_s", "response_bytes_per_s", "requests_per_s")]
    colors = _colors(*frames)
    s.figures.append((f"Stacked per API, {sec:g} s buckets", [
        _stacked(frames[0], tl, "Request bytes/s (to the broker)", "bytes/s", colors),
        _stacked(frames[1], tl, "Response bytes/s (from the broker)", "bytes/s", colors),
        _stacked(frames[2], tl, "Requests/s", "requests/s", colors)]))
    out.append(s)

    s = Section("Record bytes per second by topic")
    frames = [_rate_frame(btt, "topic", v, tl) for v in ("produce_bytes_per_s", "fetch_bytes_per_s")]
    colors = _colors(*frames)
    caption = f"Stacked per topic, {sec:g} s buckets (record batches only, not the request/response framing)"
    s.figures.append((caption, [
        _stacked(frames[0], tl, "Produce: record bytes/s sent", "bytes/s", colors),
        _stacked(frames[1], tl, "Fetch: record bytes/s returned to consumers", "bytes/s", colors)]))
    bt = results.get("by_topic")
    if bt is not None and not bt.empty:
        s.tables.append(("Per topic", bt))
        if "fetch_control_batches" in bt.columns:
            txn = {c: int(bt[c].sum()) for c in ("produce_transactional_records", "fetch_control_batches",
                                                 "fetch_commit_markers", "fetch_abort_markers",
                                                 "fetch_aborted_transactions", "replica_fetch_control_batches")}
            if any(txn.values()):
                s.text.append(
                    f"Transactions: {txn['produce_transactional_records']:,} transactional records produced; "
                    f"consumers fetched {txn['fetch_control_batches']:,} control batches "
                    f"({txn['fetch_commit_markers']:,} commit and {txn['fetch_abort_markers']:,} abort markers, "
                    f"{txn['fetch_aborted_transactions']:,} aborted transactions listed), followers "
                    f"{txn['replica_fetch_control_batches']:,}. Record bytes and records are data batches only; "
                    "control batches are counted apart.")
    out.append(s)

    s = Section("Clients")
    bc = results.get("by_client")
    if bc is not None and not bc.empty:
        per = (bc.groupby("client_id", dropna=False)[["requests", "request_bytes", "response_bytes"]].sum()
               .sort_values("request_bytes", ascending=False))
        top = per.head(20)
        chart = Chart("Request and response bytes per client id", list(range(len(top))), x_label="client id",
                      y_label="bytes", kind="bars", categories=[str(c) for c in top.index])
        chart.add("request bytes", top["request_bytes"])
        chart.add("response bytes", top["response_bytes"])
        s.figures.append(("Bytes per client id" + (" (top 20 by request bytes)" if len(per) > 20 else ""), chart))
        s.tables.append(("Per client id and API", bc))
    conns = results.get("connections")
    if conns is not None and not conns.empty:
        s.tables.append((f"Connections ({len(conns)})", conns))
    out.append(s)
    groups = results.get("groups")
    shares = results.get("share_groups")
    if (groups is not None and not groups.empty) or (shares is not None and not shares.empty):
        s = Section("Groups")
        if groups is not None and not groups.empty:
            s.text.append("Groups by the requests naming them: classic (JoinGroup/SyncGroup/Heartbeat), KIP-848 "
                          "consumer groups (ConsumerGroupHeartbeat) and KIP-932 share groups; epoch bumps are "
                          "heartbeat responses that gave a member a new epoch (its assignment changed).")
            s.tables.append((f"Per group ({len(groups)})", groups))
        if shares is not None and not shares.empty:
            s.text.append(
                f"Share groups consumed {_human(float(shares['record_bytes'].sum()))} in "
                f"{int(shares['records'].sum()):,} records returned by ShareFetch; "
                f"{int(shares['acquired_records'].sum()):,} records were acquired by members "
                f"({int(shares['redelivered_records'].sum()):,} redelivered), "
                f"{int(shares['accepted_records'].sum()):,} accepted, {int(shares['released_records'].sum()):,} "
                f"released and {int(shares['rejected_records'].sum()):,} rejected.")
            s.tables.append(("Share-group consumption per group and topic", shares))
        out.append(s)
    return out
