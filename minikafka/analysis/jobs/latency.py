"""Latency percentiles per API, version and client, overall and over time; Fetch long polls apart.

Latency is the broker's: from the request's arrival to its response leaving
(``send_ns - receive_ns``), so it includes queueing, processing, purgatory
waits (Fetch ``max_wait_ms``, Produce acks=all) and quota throttling the broker
applied by delaying, not the network.  Requests without a response (acks=0
Produce, or a connection closed first) have no latency and are left out.

Percentiles are ``percentile_approx`` with accuracy :data:`ACCURACY` (relative
rank error 1/ACCURACY): for a group of fewer than ACCURACY requests the result
is an exact nearest-rank percentile (an observed latency, not interpolated);
for larger groups its rank is off by at most n/ACCURACY.

Tables:

* ``by_api``: per api and version, per api (``api_version`` null) and over all (``api_name`` "ALL").
* ``by_client``: per client and api, per client (``api_name`` "ALL").
* ``by_api_time``: per time bucket and api, and per bucket over all apis ("ALL").
* ``fetch``: Fetch per role (consumer or follower replica; ShareFetch, KIP-932, as role
  ``share_consumer``: it long-polls the same way), client and ``max_wait_ms``, and per role:
  how many returned at max_wait (a long poll that timed out: latency >= max_wait_ms x (1 -
  ``opts.extra["max_wait_tolerance"]``, default 0.05)), their fraction, and percentiles of all
  fetches, of those that returned early (the latency a consumer sees when data is there), and
  of those that returned at max_wait.
* ``histogram``: per api, request counts in log-spaced latency bins (:data:`BINS_PER_DECADE` per decade).
"""

from __future__ import annotations

import logging
from typing import Any

from . import AnalysisOptions, Section
from .plots import PALETTE, Chart
from .traffic import REPLICA, GroupingSets, Timeline, exprs, ordered, time_bucket, with_client

log = logging.getLogger(__name__)

NAME = "latency"
TITLE = "Latency percentiles"

ACCURACY = 100_000
PERCENTILES = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99_9", 0.999)]
BINS_PER_DECADE = 10
MIN_LATENCY_MS = 0.001  # latencies below go into the lowest bin
ALL = "ALL"
TOP_APIS = 6


def latency_aggs(col: str = "latency_ms", suffix: str = "") -> list[Any]:
    """count, mean, p50, p90, p99, p99.9 and max of ``col`` (nulls ignored), columns suffixed ``suffix``."""
    # SQL text: one call into the JVM per column (the same percentile_approx in each is computed once).
    pct = f"percentile_approx({col}, array({', '.join(f'{q!r}D' for _, q in PERCENTILES)}), {ACCURACY})"
    return exprs(f"CAST(count({col}) AS BIGINT) AS requests{suffix}", f"avg({col}) AS mean_ms{suffix}",
                 *(f"{pct}[{i}] AS {name}_ms{suffix}" for i, (name, _) in enumerate(PERCENTILES)),
                 f"max({col}) AS max_ms{suffix}")


def run(tables: Any, opts: AnalysisOptions) -> dict[str, Any]:
    """The latency tables (see the module docstring)."""
    from pyspark.sql import functions as F

    tol = float(opts.extra.get("max_wait_tolerance", 0.05))
    r = (with_client(tables.requests)
         .where("has_response AND latency_ms IS NOT NULL")
         .withColumn("bucket_start", time_bucket("receive_ns", opts.bucket_seconds)))

    # The three tables' groupings in ONE aggregation (one scan; each request in 7 groups, not 9), split after.
    grouped = GroupingSets(r, {"api_version": ["api_name", "api_version"], "api": ["api_name"], "all": [],
                               "client_api": ["client_id", "api_name"], "client": ["client_id"],
                               "bucket_api": ["bucket_start", "api_name"], "bucket": ["bucket_start"]},
                           *latency_aggs())
    level, aggs = grouped.level, grouped.aggregates

    def all_apis(name: str) -> Any:
        return F.when(grouped.is_level(name), F.lit(ALL)).otherwise(F.col("api_name"))

    by_api = (level("api_version", "api", "all")
              .select(all_apis("all").alias("api_name"), "api_version", *aggs,
                      grouped.is_level("all").cast("int").alias("_ga"),
                      (~grouped.is_level("api_version")).cast("int").alias("_gv"))
              .transform(ordered, F.col("_ga"), "api_name", F.col("_gv").desc(), "api_version")
              .drop("_ga", "_gv"))

    by_client = (level("client_api", "client")
                 .select("client_id", all_apis("client").alias("api_name"), *aggs,
                         grouped.is_level("client").cast("int").alias("_ga"))
                 .transform(ordered, "client_id", F.col("_ga").desc(), "api_name")
                 .drop("_ga"))

    by_api_time = (level("bucket_api", "bucket")
                   .select("bucket_start", all_apis("bucket").alias("api_name"), *aggs)
                   .transform(ordered, "bucket_start", "api_name"))

    # (SQL text below: each expression is parsed in one call into the JVM.)
    at_max = f"coalesce(max_wait_ms, 0) > 0 AND latency_ms >= max_wait_ms * {1.0 - tol!r}D"
    f = (r.where("api_name IN ('Fetch', 'ShareFetch')")
         .selectExpr("*", f"CASE WHEN api_name = 'ShareFetch' THEN 'share_consumer' WHEN {REPLICA} THEN 'replica' "
                          "ELSE 'consumer' END AS role", f"({at_max}) AS at_max_wait")
         .selectExpr("*", "CASE WHEN NOT at_max_wait THEN latency_ms END AS early_ms",
                     "CASE WHEN at_max_wait THEN latency_ms END AS waited_ms"))
    fetch = (f.rollup("role", "client_id", "max_wait_ms")
             .agg(*exprs("CAST(sum(CAST(at_max_wait AS INT)) AS BIGINT) AS at_max_wait",
                         "CAST(sum(CAST(coalesce(record_count, 0) > 0 AS INT)) AS BIGINT) AS with_records"),
                  *latency_aggs(), *latency_aggs("early_ms", "_early"), *latency_aggs("waited_ms", "_at_max_wait"),
                  F.expr("grouping_id() AS _g"))
             .where("_g IN (0, 3)")
             .withColumns({"client_id": F.expr(f"CASE WHEN _g = 3 THEN '{ALL}' ELSE client_id END"),
                           "fraction_at_max_wait": F.expr("at_max_wait / requests")})
             .transform(ordered, "role", F.desc("_g"), "client_id", "max_wait_ms")
             .drop("_g"))
    first = ["role", "client_id", "max_wait_ms", "requests", "at_max_wait", "fraction_at_max_wait", "with_records"]
    fetch = fetch.select(*first, *[c for c in fetch.columns if c not in first and c != "requests"])

    histogram = (r.selectExpr("api_name", f"CAST(floor(log10(greatest(latency_ms, {MIN_LATENCY_MS!r}D)) "
                                          f"* {BINS_PER_DECADE}) AS INT) AS bin")
                 .groupBy("api_name", "bin").agg(F.expr("CAST(count(1) AS BIGINT) AS requests"))
                 .selectExpr("*", f"pow(10.0D, bin / {BINS_PER_DECADE}) AS bin_low_ms",
                             f"pow(10.0D, (bin + 1) / {BINS_PER_DECADE}) AS bin_high_ms")
                 .transform(ordered, "api_name", "bin"))

    return {"by_api": by_api, "by_client": by_client, "by_api_time": by_api_time, "fetch": fetch,
            "histogram": histogram}


# -- report -------------------------------------------------------------------------------------
def _top_apis(by_api: Any, n: int = TOP_APIS) -> list[str]:
    if by_api is None or by_api.empty:
        return []
    per = by_api[(by_api["api_name"] != ALL) & by_api["api_version"].isna()]
    return list(per.sort_values("requests", ascending=False)["api_name"].head(n))


def report(results: dict[str, Any], opts: AnalysisOptions) -> list[Section]:
    """A percentile table per API, p50/p99 over time, a log-scale histogram, Fetch long polls."""
    import numpy as np
    import pandas as pd

    out: list[Section] = []
    by_api = results.get("by_api")
    s = Section("Latency by API and version")
    s.text.append("Broker-side latency: from the request's arrival to its response leaving the broker, in "
                  "milliseconds; requests without a response (acks=0 Produce) are left out. Percentiles are "
                  f"Spark's percentile_approx with accuracy {ACCURACY:,}: exact nearest-rank values for groups "
                  f"under {ACCURACY:,} requests, rank error at most n/{ACCURACY:,} above. Rows with an empty "
                  "version are all versions of the API; ALL is every request.")
    if by_api is not None and not by_api.empty:
        s.tables.append(("Latency (ms) per API and version", by_api))
    else:
        s.text.append("No request with a response in the capture.")
    out.append(s)

    s = Section("Latency over time")
    bat = results.get("by_api_time")
    apis = _top_apis(by_api)
    chart = Chart("Latency percentiles per bucket", [], y_label="latency (ms, log scale)", y_scale="log",
                  height=340)
    if bat is not None and not bat.empty and apis:
        tl = Timeline([bat], float(opts.bucket_seconds))
        full = tl.index()
        chart.x = list(tl.seconds(full))
        for i, api in enumerate(apis):
            d = bat[bat["api_name"] == api].copy()
            d.index = pd.to_datetime(d["bucket_start"])
            d = d.reindex(full)  # buckets without requests are gaps in the lines
            color = PALETTE[i % len(PALETTE)]
            chart.add(f"{api} p50", d["p50_ms"].clip(lower=MIN_LATENCY_MS), color=color)
            chart.add(f"{api} p99", d["p99_ms"].clip(lower=MIN_LATENCY_MS), color=color, dash=True)
    caption = (f"p50 (solid) and p99 (dashed) per {float(opts.bucket_seconds):g} s bucket, "
               f"top {len(apis)} APIs by requests")
    s.figures.append((caption, chart))
    out.append(s)

    s = Section("Latency histogram")
    hist = results.get("histogram")
    chart = Chart("Requests per latency bin", [], x_label="latency (ms, log scale)", y_label="requests",
                  kind="steps", x_scale="log", height=340)
    if hist is not None and not hist.empty and apis:
        lo = int(hist["bin"].min())
        hi = int(hist["bin"].max()) + 1
        chart.x = list(np.power(10.0, np.arange(lo, hi + 1) / BINS_PER_DECADE))  # the bins' edges
        for i, api in enumerate(apis):
            d = hist[hist["api_name"] == api].set_index("bin")["requests"].reindex(range(lo, hi), fill_value=0)
            values = d.to_numpy()
            chart.add(api, np.append(values, values[-1:]), color=PALETTE[i % len(PALETTE)])  # held to the last edge
        if int(hist["requests"].max()) > 100:
            chart.y_scale, chart.y_label = "asinh", "requests (log-like scale)"
    s.figures.append((f"Requests per latency bin ({BINS_PER_DECADE} bins per decade)", chart))
    out.append(s)

    s = Section("Fetch: long polls apart")
    fetch = results.get("fetch")
    tol = float(opts.extra.get("max_wait_tolerance", 0.05))
    s.text.append("A Fetch with max_wait_ms > 0 waits in the broker until min_bytes are there or max_wait_ms "
                  f"has passed; one that took at least max_wait_ms x {1 - tol:g} counts as returned at max_wait "
                  "(its latency is the wait, not the broker's speed). The *_early columns are the fetches that "
                  "returned before max_wait, the *_at_max_wait columns the others. Rows with client ALL are "
                  "per role (consumer or follower replica).")
    if fetch is not None and not fetch.empty:
        for role, d in fetch[fetch["client_id"] == ALL].groupby("role"):
            n = int(d["requests"].sum())
            k = int(d["at_max_wait"].sum())
            s.text.append(f"{role}: {n:,} fetches, {k:,} ({k / n:.1%}) returned at max_wait." if n else role)
        s.tables.append(("Fetch latency (ms)", fetch))
    else:
        s.text.append("No Fetch request in the capture.")
    out.append(s)

    s = Section("Latency by client")
    bc = results.get("by_client")
    if bc is not None and not bc.empty:
        s.tables.append(("Latency (ms) per client and API (ALL: every API of the client)", bc))
    out.append(s)
    return out
