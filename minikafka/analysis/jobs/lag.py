"""Consumer lag over time, from the high watermarks and last stable offsets in consumer Fetch responses.

For every partition of every consumer Fetch response (``replica_id < 0``, no
error) the broker tells the high watermark (HW) and, from Fetch v4, the last
stable offset (LSO: below it every transaction is decided, KIP-98).  The
consumer's position after that fetch is the fetch offset plus what the
response returned (last offset + 1 of the batches, whole batches as sent,
control batches -- transaction markers -- included: the consumer's position
moves past them too), and

    lag = max(0, end offset - position after the fetch)

where the end offset is the HW for a fetch with ``isolation_level`` 0
(read_uncommitted) and the LSO for ``isolation_level`` 1 (read_committed),
which is what Kafka's consumer reports as ``records-lag`` (its
``FetchCollector`` takes the LSO as the end under read_committed; HW or LSO
minus the position once the fetched records are handed over;
``records-lag-max`` is its maximum).  ``lag_before = max(0, end offset - fetch
offset)`` is the lag when the request was sent.  A read_committed response
without a last stable offset (-1) gives no lag row, as the consumer then has
no lag either.  Every lag row says which ``isolation_level`` it used
(``read_committed`` or ``read_uncommitted``; the tables group by it, so a
client that switched has a row per level).  Fetch sessions (KIP-227): an
incremental request names only the partitions whose fetch offset changed, so
a partition in the response but not in the request keeps the fetch offset last
sent for it on that connection.  The broker only sees fetches: records a
client fetched but had not yet processed count as consumed, so this is a lower
bound of the application's lag.  Committed offsets (OffsetCommit,
TxnOffsetCommit) are not in the decoded tables: the position is the consumed
one, not the committed one.  KIP-848 consumers (``group.protocol=consumer``)
fetch as classic ones do, so their lag is computed alike (their OffsetCommit
v9+ with member epochs is not read, as no commit is); share-group consumers
(ShareFetch) have no position and no lag here.

Tables:

* ``lag_series``: per client id, topic, partition and time bucket: fetches,
  records returned, max/avg/last lag, max lag_before, last HW and position;
  then the isolation level, last LSO, control batches and commit/abort
  markers returned, aborted transactions listed.
* ``lag_clients``: per client id and time bucket: partitions, max lag over its
  partitions (records-lag-max), total lag (sum of each partition's last lag in
  the bucket); then the isolation level.
* ``lag_partitions``: per client id, topic, partition: first lag (before the
  first fetch), max lag, final lag, records returned, final HW and position;
  then the isolation level, final LSO, control batches, commit/abort markers
  and aborted transactions.

"Records" are data records; transaction markers are control batches, counted
apart.  New columns come after the ones earlier versions had.
"""

from __future__ import annotations

from typing import Any

from . import AnalysisOptions, Section
from .plots import series_lines

NAME = "lag"
TITLE = "Consumer lag over time"

NO_CLIENT = "(none)"
TOP_N = 15
TOP_SERIES = 8
_FETCH = 1
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


def has_input(facts: dict[str, Any]) -> bool:
    """The tables come from consumer Fetch partitions."""
    return _FETCH in facts.get("api_keys", (_FETCH,))


def lag_rows(tables: Any) -> Any:
    """One row per partition of a consumer Fetch response: fetch offset, position after, HW, LSO, the
    isolation level and the end offset it makes the lag from (``end_offset``), lags."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    consumer = (F.col("api_key") == F.lit(_FETCH)) & (F.coalesce(F.col("replica_id"), F.lit(-1)) < 0)
    w = (Window.partitionBy("broker_id", "connection_id", "topic", "partition")
         .orderBy("receive_ns", "correlation_id").rowsBetween(Window.unboundedPreceding, Window.currentRow))
    committed = F.coalesce(F.col("isolation_level"), F.lit(0)) == 1
    p = (tables.partitions.where(consumer & (F.col("in_request") | F.col("in_response")))
         .select("broker_id", "connection_id", "client_id", "correlation_id", "receive_ns", "fetch_kind", "topic",
                 "partition", "in_response", "fetch_offset", "high_watermark", "error_code", "record_bytes",
                 "record_count", "last_offset", "last_stable_offset", "isolation_level", "batch_count",
                 "control_batch_count", "commit_markers", "abort_markers", "aborted_transactions")
         .withColumn("offset", F.last("fetch_offset", ignorenulls=True).over(w))
         .withColumn("end_offset", F.when(committed, F.col("last_stable_offset")).otherwise(F.col("high_watermark")))
         .withColumn("isolation_level", F.when(committed, F.lit(READ_COMMITTED)).otherwise(F.lit(READ_UNCOMMITTED)))
         .where(F.col("in_response") & (F.coalesce(F.col("error_code"), F.lit(0)) == 0)
                & F.col("end_offset").isNotNull() & (F.col("end_offset") >= 0) & F.col("offset").isNotNull()))
    # Any batch, data or control: a consumer's position moves past transaction markers too.
    returned = ((F.coalesce(F.col("batch_count"), F.lit(0)) + F.coalesce(F.col("control_batch_count"), F.lit(0)) > 0)
                & F.col("last_offset").isNotNull())
    return (p.withColumn("client_id", F.coalesce(F.col("client_id"), F.lit(NO_CLIENT)))
            .withColumn("position", F.when(returned, F.greatest(F.col("offset"), F.col("last_offset") + 1))
                        .otherwise(F.col("offset")))
            .withColumn("lag", F.greatest(F.col("end_offset") - F.col("position"), F.lit(0)))
            .withColumn("lag_before", F.greatest(F.col("end_offset") - F.col("offset"), F.lit(0))))


def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    """``lag_series``, ``lag_clients`` and ``lag_partitions`` (see the module docstring)."""
    from pyspark.sql import functions as F

    from .traffic import ordered, time_bucket, total

    sec = float(opts.bucket_seconds)
    rows = lag_rows(tables).withColumn("bucket_start", time_bucket("receive_ns", sec)).cache()
    key = ["client_id", "topic", "partition"]
    level = "isolation_level"
    records = total("record_count", "records")
    txn = [total("control_batch_count", "control_batches"), total("commit_markers", "commit_markers"),
           total("abort_markers", "abort_markers"), total("aborted_transactions", "aborted_transactions")]
    txn_cols = ["control_batches", "commit_markers", "abort_markers", "aborted_transactions"]
    series_cols = [*key, "bucket_start", "fetches", "records", "max_lag", "avg_lag", "last_lag", "max_lag_before",
                   "last_high_watermark", "last_position", level, "last_lso", *txn_cols]
    series = (rows.groupBy(*key, "bucket_start", level)
              .agg(F.count(F.lit(1)).cast("long").alias("fetches"), records,
                   F.max("lag").alias("max_lag"), F.avg("lag").alias("avg_lag"),
                   F.max_by("lag", "receive_ns").alias("last_lag"), F.max("lag_before").alias("max_lag_before"),
                   F.max_by("high_watermark", "receive_ns").alias("last_high_watermark"),
                   F.max_by("position", "receive_ns").alias("last_position"),
                   F.max_by("last_stable_offset", "receive_ns").alias("last_lso"), *txn)
              .select(*series_cols)
              .transform(ordered, *key, "bucket_start", level)
              .cache())
    clients = (series.groupBy("client_id", "bucket_start", level)
               .agg(F.count(F.lit(1)).cast("long").alias("partitions"), F.sum("fetches").alias("fetches"),
                    F.sum("records").alias("records"), F.max("max_lag").alias("max_lag"),
                    F.sum("last_lag").alias("total_lag"))
               .select("client_id", "bucket_start", "partitions", "fetches", "records", "max_lag", "total_lag", level)
               .transform(ordered, "client_id", "bucket_start", level))
    partitions = (rows.groupBy(*key, level)
                  .agg(F.count(F.lit(1)).cast("long").alias("fetches"), records,
                       F.min_by("lag_before", "receive_ns").alias("first_lag_before"),
                       F.min_by("lag", "receive_ns").alias("first_lag"),
                       F.max("lag").alias("max_lag"), F.avg("lag").alias("avg_lag"),
                       F.max_by("lag", "receive_ns").alias("final_lag"),
                       F.max_by("high_watermark", "receive_ns").alias("final_high_watermark"),
                       F.max_by("position", "receive_ns").alias("final_position"),
                       F.min("receive_ns").alias("_first"), F.max("receive_ns").alias("_last"),
                       F.max_by("last_stable_offset", "receive_ns").alias("final_lso"), *txn)
                  .withColumn("first_ts", F.timestamp_micros(F.floor(F.col("_first") / 1000).cast("long")))
                  .withColumn("last_ts", F.timestamp_micros(F.floor(F.col("_last") / 1000).cast("long")))
                  .select(*key, "fetches", "records", "first_lag_before", "first_lag", "max_lag", "avg_lag",
                          "final_lag", "final_high_watermark", "final_position", "first_ts", "last_ts", level,
                          "final_lso", *txn_cols)
                  .transform(ordered, *key, level))
    return {"lag_series": series, "lag_clients": clients, "lag_partitions": partitions}


# -- report -------------------------------------------------------------------------------------
def _labels(df: Any, cols: list[str]) -> list[str]:
    """``cols``, plus the isolation level when some group of ``cols`` has rows at both levels."""
    if df is None or df.empty or "isolation_level" not in df.columns:
        return cols
    if (df.groupby(cols)["isolation_level"].nunique() > 1).any():
        return [*cols, "isolation_level"]
    return cols



def report(results: dict[str, Any], opts: AnalysisOptions) -> list[Section]:
    """Lag definition, the partitions with the most lag, lag over time per client and per partition."""
    sec = float(opts.bucket_seconds)
    parts = results.get("lag_partitions")
    series = results.get("lag_series")
    clients = results.get("lag_clients")
    s = Section("Consumer lag")
    s.text.append(
        "Lag = end offset - the consumer's position after each fetch (fetch offset + the batches returned, "
        "transaction markers included), as Kafka's records-lag; the end offset is the high watermark for "
        "read_uncommitted fetches and the last stable offset (LSO) for read_committed ones (isolation_level 1), "
        "and every row says which isolation level it used; lag_before = end offset - fetch offset, when the "
        "request was sent. From consumer Fetch responses (replica_id < 0); a partition an incremental fetch "
        "request left out keeps the fetch offset last sent. Records fetched but not yet processed by the "
        "application count as consumed, so this is a lower bound of the application's lag. Committed offsets "
        "are not analysed.")
    if parts is None or parts.empty:
        s.text.append("The capture holds no consumer fetch responses.")
        return [s]
    top = parts.sort_values(["max_lag", "final_lag"], ascending=False)
    s.tables.append((f"Top {min(TOP_N, len(top))} partitions by max lag ({len(top)} client partitions)",
                     top.head(TOP_N)))
    if "isolation_level" in top.columns:
        committed = int((top["isolation_level"] == READ_COMMITTED).sum())
        if committed:
            s.text.append(f"{committed} of {len(top)} client partition(s) fetched read_committed: their lag is "
                          "measured to the last stable offset.")
    lagging = top[top["final_lag"] > 0]
    s.text.append(f"{len(lagging)} of {len(top)} client partition(s) still lag at their last fetch"
                  + (f", {int(lagging['final_lag'].sum()):,} records in all." if len(lagging) else "."))
    s.figures.append(("Lag per client over time", series_lines(
        clients, _labels(clients, ["client_id"]), "total_lag", y_label="records",
        title=f"Total lag per client ({sec:g} s buckets: sum of each partition's last lag)")))
    labels = _labels(parts, ["client_id", "topic", "partition"])
    keys = [tuple(r) for r in top[labels].head(TOP_SERIES).itertuples(index=False)]
    s.figures.append((f"Lag over time, top {len(keys)} partitions by max lag", series_lines(
        series, labels, "max_lag", keys, title="Max lag per bucket (client topic partition)", y_label="records")))
    return [s]
