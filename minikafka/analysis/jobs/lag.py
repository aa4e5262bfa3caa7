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


def lag_rows(tables: Any, bucket_seconds: float) -> Any:
    """One row per partition of a consumer Fetch response: fetch offset, position after, HW, LSO, the
    isolation level and the end offset it makes the lag from (``end_offset``), lags, and its time bucket.
    (SQL text: each projection is parsed in one call into the JVM.)"""
    from .traffic import IS_ERROR, REPLICA, time_bucket_sql

    committed = "coalesce(isolation_level, 0) = 1"
    # The fetch offset last sent for the partition on the connection (an incremental fetch leaves it out).
    offset = ("last(fetch_offset, true) OVER (PARTITION BY broker_id, connection_id, topic, `partition` "
              "ORDER BY receive_ns, correlation_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")
    # Any batch, data or control: a consumer's position moves past transaction markers too.
    returned = "coalesce(batch_count, 0) + coalesce(control_batch_count, 0) > 0 AND last_offset IS NOT NULL"
    return (tables.partitions
            .where(f"api_key = {_FETCH} AND NOT {REPLICA} AND (in_request OR in_response)")
            .selectExpr("broker_id", "connection_id", f"coalesce(client_id, '{NO_CLIENT}') AS client_id",
                        "correlation_id", "receive_ns", "fetch_kind", "topic", "`partition`", "in_response",
                        "fetch_offset", "high_watermark", "error_code", "record_bytes", "record_count",
                        "last_offset", "last_stable_offset",
                        f"CASE WHEN {committed} THEN '{READ_COMMITTED}' ELSE '{READ_UNCOMMITTED}' END "
                        "AS isolation_level", "batch_count", "control_batch_count", "commit_markers",
                        "abort_markers", "aborted_transactions", f"{offset} AS `offset`",
                        f"CASE WHEN {committed} THEN last_stable_offset ELSE high_watermark END AS end_offset")
            .where(f"in_response AND NOT {IS_ERROR} AND end_offset >= 0 AND `offset` IS NOT NULL")
            .selectExpr("*", f"CASE WHEN {returned} THEN greatest(`offset`, last_offset + 1) ELSE `offset` END "
                        "AS position")
            .selectExpr("*", "greatest(end_offset - position, 0) AS lag",
                        "greatest(end_offset - `offset`, 0) AS lag_before",
                        f"{time_bucket_sql('receive_ns', bucket_seconds)} AS bucket_start"))


def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    """``lag_series``, ``lag_clients`` and ``lag_partitions`` (see the module docstring)."""
    from .traffic import exprs, ordered, total

    rows = lag_rows(tables, float(opts.bucket_seconds)).cache()
    key = ["client_id", "topic", "partition"]
    level = "isolation_level"
    txn_cols = ["control_batches", "commit_markers", "abort_markers", "aborted_transactions"]
    txn_sums = [total(c, a) for c, a in zip(["control_batch_count", "commit_markers", "abort_markers",
                                             "aborted_transactions"], txn_cols)]
    counts = ["CAST(count(1) AS BIGINT) AS fetches", total("record_count", "records")]
    series_cols = [*key, "bucket_start", "fetches", "records", "max_lag", "avg_lag", "last_lag", "max_lag_before",
                   "last_high_watermark", "last_position", level, "last_lso", *txn_cols]
    series = (rows.groupBy(*key, "bucket_start", level)
              .agg(*exprs(*counts, "max(lag) AS max_lag", "avg(lag) AS avg_lag",
                          "max_by(lag, receive_ns) AS last_lag", "max(lag_before) AS max_lag_before",
                          "max_by(high_watermark, receive_ns) AS last_high_watermark",
                          "max_by(position, receive_ns) AS last_position",
                          "max_by(last_stable_offset, receive_ns) AS last_lso", *txn_sums))
              .select(*series_cols)
              .transform(ordered, *key, "bucket_start", level)
              .cache())
    clients = (series.groupBy("client_id", "bucket_start", level)
               .agg(*exprs("CAST(count(1) AS BIGINT) AS partitions", "sum(fetches) AS fetches",
                           "sum(records) AS records", "max(max_lag) AS max_lag", "sum(last_lag) AS total_lag"))
               .select("client_id", "bucket_start", "partitions", "fetches", "records", "max_lag", "total_lag", level)
               .transform(ordered, "client_id", "bucket_start", level))
    partitions = (rows.groupBy(*key, level)
                  .agg(*exprs(*counts, "min_by(lag_before, receive_ns) AS first_lag_before",
                              "min_by(lag, receive_ns) AS first_lag", "max(lag) AS max_lag", "avg(lag) AS avg_lag",
                              "max_by(lag, receive_ns) AS final_lag",
                              "max_by(high_watermark, receive_ns) AS final_high_watermark",
                              "max_by(position, receive_ns) AS final_position",
                              "timestamp_micros(CAST(floor(min(receive_ns) / 1000) AS BIGINT)) AS first_ts",
                              "timestamp_micros(CAST(floor(max(receive_ns) / 1000) AS BIGINT)) AS last_ts",
                              "max_by(last_stable_offset, receive_ns) AS final_lso", *txn_sums))
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
