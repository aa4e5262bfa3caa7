"""Consumer lag over time, from the high watermarks in consumer Fetch responses.

For every partition of every consumer Fetch response (``replica_id < 0``, no
error) the broker tells the high watermark (HW).  The consumer's position
after that fetch is the fetch offset plus what the response returned (last
offset + 1 of the batches, whole batches as sent), and

    lag = max(0, HW - position after the fetch)

which is what Kafka's consumer reports as ``records-lag`` (HW minus the
position once the fetched records are handed over; ``records-lag-max`` is its
maximum).  ``lag_before = max(0, HW - fetch offset)`` is the lag when the
request was sent.  Fetch sessions (KIP-227): an incremental request names
only the partitions whose fetch offset changed, so a partition in the response
but not in the request keeps the fetch offset last sent for it on that
connection.  The HW is the read_uncommitted bound (the last stable offset is
not used).  The broker only sees fetches: records a client fetched but had not
yet processed count as consumed, so this is a lower bound of the application's
lag.  Committed offsets (OffsetCommit) are not in the decoded tables and are
not analysed.

Tables:

* ``lag_series``: per client id, topic, partition and time bucket: fetches,
  records returned, max/avg/last lag, max lag_before, last HW and position.
* ``lag_clients``: per client id and time bucket: partitions, max lag over its
  partitions (records-lag-max), total lag (sum of each partition's last lag in
  the bucket).
* ``lag_partitions``: per client id, topic, partition: first lag (before the
  first fetch), max lag, final lag, records returned, final HW and position.
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


def lag_rows(tables: Any) -> Any:
    """One row per partition of a consumer Fetch response: fetch offset, position after, HW, lags."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    consumer = (F.col("api_key") == F.lit(_FETCH)) & (F.coalesce(F.col("replica_id"), F.lit(-1)) < 0)
    w = (Window.partitionBy("broker_id", "connection_id", "topic", "partition")
         .orderBy("receive_ns", "correlation_id").rowsBetween(Window.unboundedPreceding, Window.currentRow))
    p = (tables.partitions.where(consumer & (F.col("in_request") | F.col("in_response")))
         .select("broker_id", "connection_id", "client_id", "correlation_id", "receive_ns", "fetch_kind", "topic",
                 "partition", "in_response", "fetch_offset", "high_watermark", "error_code", "record_bytes",
                 "record_count", "last_offset")
         .withColumn("offset", F.last("fetch_offset", ignorenulls=True).over(w))
         .where(F.col("in_response") & (F.coalesce(F.col("error_code"), F.lit(0)) == 0)
                & F.col("high_watermark").isNotNull() & (F.col("high_watermark") >= 0) & F.col("offset").isNotNull()))
    returned = (F.coalesce(F.col("record_count"), F.lit(0)) > 0) & F.col("last_offset").isNotNull()
    return (p.withColumn("client_id", F.coalesce(F.col("client_id"), F.lit(NO_CLIENT)))
            .withColumn("position", F.when(returned, F.greatest(F.col("offset"), F.col("last_offset") + 1))
                        .otherwise(F.col("offset")))
            .withColumn("lag", F.greatest(F.col("high_watermark") - F.col("position"), F.lit(0)))
            .withColumn("lag_before", F.greatest(F.col("high_watermark") - F.col("offset"), F.lit(0))))


def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    """``lag_series``, ``lag_clients`` and ``lag_partitions`` (see the module docstring)."""
    from pyspark.sql import functions as F

    from .traffic import time_bucket

    sec = float(opts.bucket_seconds)
    rows = lag_rows(tables).withColumn("bucket_start", time_bucket("receive_ns", sec)).cache()
    key = ["client_id", "topic", "partition"]
    records = F.coalesce(F.sum("record_count"), F.lit(0)).cast("long").alias("records")
    series = (rows.groupBy(*key, "bucket_start")
              .agg(F.count(F.lit(1)).cast("long").alias("fetches"), records,
                   F.max("lag").alias("max_lag"), F.avg("lag").alias("avg_lag"),
                   F.max_by("lag", "receive_ns").alias("last_lag"), F.max("lag_before").alias("max_lag_before"),
                   F.max_by("high_watermark", "receive_ns").alias("last_high_watermark"),
                   F.max_by("position", "receive_ns").alias("last_position"))
              .orderBy(*key, "bucket_start")
              .cache())
    clients = (series.groupBy("client_id", "bucket_start")
               .agg(F.count(F.lit(1)).cast("long").alias("partitions"), F.sum("fetches").alias("fetches"),
                    F.sum("records").alias("records"), F.max("max_lag").alias("max_lag"),
                    F.sum("last_lag").alias("total_lag"))
               .orderBy("client_id", "bucket_start"))
    partitions = (rows.groupBy(*key)
                  .agg(F.count(F.lit(1)).cast("long").alias("fetches"), records,
                       F.min_by("lag_before", "receive_ns").alias("first_lag_before"),
                       F.min_by("lag", "receive_ns").alias("first_lag"),
                       F.max("lag").alias("max_lag"), F.avg("lag").alias("avg_lag"),
                       F.max_by("lag", "receive_ns").alias("final_lag"),
                       F.max_by("high_watermark", "receive_ns").alias("final_high_watermark"),
                       F.max_by("position", "receive_ns").alias("final_position"),
                       F.min("receive_ns").alias("_first"), F.max("receive_ns").alias("_last"))
                  .withColumn("first_ts", F.timestamp_micros(F.floor(F.col("_first") / 1000).cast("long")))
                  .withColumn("last_ts", F.timestamp_micros(F.floor(F.col("_last") / 1000).cast("long")))
                  .drop("_first", "_last")
                  .orderBy(*key))
    return {"lag_series": series, "lag_clients": clients, "lag_partitions": partitions}


# -- report -------------------------------------------------------------------------------------


def report(results: dict[str, Any], opts: AnalysisOptions) -> list[Section]:
    """Lag definition, the partitions with the most lag, lag over time per client and per partition."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    sec = float(opts.bucket_seconds)
    parts = results.get("lag_partitions")
    series = results.get("lag_series")
    clients = results.get("lag_clients")
    s = Section("Consumer lag")
    s.text.append(
        "Lag = high watermark - the consumer's position after each fetch (fetch offset + the records returned), "
        "as Kafka's records-lag; lag_before = high watermark - fetch offset, when the request was sent. From "
        "consumer Fetch responses (replica_id < 0); a partition an incremental fetch request left out keeps the "
        "fetch offset last sent. Records fetched but not yet processed by the application count as consumed, so "
        "this is a lower bound of the application's lag. Committed offsets are not analysed.")
    if parts is None or parts.empty:
        s.text.append("The capture holds no consumer fetch responses.")
        return [s]
    top = parts.sort_values(["max_lag", "final_lag"], ascending=False)
    s.tables.append((f"Top {min(TOP_N, len(top))} partitions by max lag ({len(top)} client partitions)",
                     top.head(TOP_N)))
    lagging = top[top["final_lag"] > 0]
    s.text.append(f"{len(lagging)} of {len(top)} client partition(s) still lag at their last fetch"
                  + (f", {int(lagging['final_lag'].sum()):,} records in all." if len(lagging) else "."))
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax = fig.subplots()
    series_lines(ax, clients, ["client_id"], "total_lag")
    ax.set_title(f"Total lag per client ({sec:g} s buckets: sum of each partition's last lag)", fontsize=10)
    ax.set_ylabel("records")
    ax.set_xlabel("seconds since the start of the capture")
    s.figures.append(("Lag per client over time", fig))
    keys = [tuple(r) for r in top[["client_id", "topic", "partition"]].head(TOP_SERIES).itertuples(index=False)]
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax = fig.subplots()
    series_lines(ax, series, ["client_id", "topic", "partition"], "max_lag", keys)
    ax.set_title("Max lag per bucket (client topic partition)", fontsize=10)
    ax.set_ylabel("records")
    ax.set_xlabel("seconds since the start of the capture")
    s.figures.append((f"Lag over time, top {len(keys)} partitions by max lag", fig))
    return [s]
