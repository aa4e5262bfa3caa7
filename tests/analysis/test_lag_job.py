"""Consumer lag over time, from a capture of a slow kafka-python consumer (Fetch sessions).

The capture (:func:`analysis_helpers.lag_capture`): 1000 messages produced in batches of 10, then a
kafka-python consumer reads them one ~1.2 KB batch per fetch, 10 records per poll, with 20 ms sleeps:
about 100 fetches over a few seconds, lag falling from 1000 to 0.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import pandas as pd
import pytest
from analysis_helpers import LAG_MESSAGES, LAG_TOPIC, decoded, lag_capture

from minikafka.analysis.jobs import AnalysisOptions, lag

pytestmark = [pytest.mark.slow, pytest.mark.clients]

OPTS = AnalysisOptions(bucket_seconds=0.5)
# kafka-python sends its next fetch before handing the records of the last one to the application,
# so the broker can be up to two fetches (20 records) ahead of what the consumer has seen.
PREFETCH = 20


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> tuple[Path, list[tuple[float, int]]]:
    cap = tmp_path_factory.mktemp("lag") / "cap"
    seen = lag_capture(cap)
    assert [o for _, o in seen] == list(range(LAG_MESSAGES))
    return cap, seen


@pytest.fixture(scope="module")
def results(spark, capture) -> dict:
    from minikafka.analysis.tables import load_tables

    t = load_tables(spark, [capture[0]])
    return {k: v.toPandas() for k, v in lag.run(t, OPTS).items()}


def test_lag_per_partition(results, capture) -> None:
    _req, parts = decoded(capture[0])
    fetched = parts[(parts.api_key == 1) & (parts.client_id == "lag-consumer") & parts.in_response]
    lp = results["lag_partitions"]
    assert len(lp) == 1
    p = lp.iloc[0]
    print(f"\n{p.client_id} {p.topic}-{p.partition}: {p.fetches} fetches, {p.records} records; lag before the "
          f"first fetch {p.first_lag_before}, after it {p.first_lag}, max {p.max_lag}, final {p.final_lag}")
    assert (p.client_id, p.topic, p.partition) == ("lag-consumer", LAG_TOPIC, 0)
    assert p.fetches == len(fetched) >= 50
    assert p.records == fetched.record_count.sum() == LAG_MESSAGES
    # The consumer starts at offset 0 with 1000 messages in the log, and ends caught up.
    assert p.first_lag_before == LAG_MESSAGES
    first = fetched.sort_values("receive_ns").iloc[0]
    assert p.first_lag == p.max_lag == LAG_MESSAGES - (first.last_offset + 1) >= LAG_MESSAGES - PREFETCH
    assert p.final_lag == 0 and p.final_high_watermark == LAG_MESSAGES and p.final_position == LAG_MESSAGES


def test_lag_over_time_matches_what_the_consumer_saw(results, capture) -> None:
    """The lag of each bucket's last fetch agrees with the offsets the consumer had received by then:
    at most 1000 - (records seen before the bucket started), at least 1000 - (records seen by its end)
    - PREFETCH."""
    _, seen = capture
    times = [t for t, _ in seen]
    series = results["lag_series"].sort_values("bucket_start")
    assert len(series) >= 4
    epoch = pd.Timestamp("1970-01-01")
    rows = []
    for s in series.itertuples():
        start = (pd.Timestamp(s.bucket_start) - epoch).total_seconds()
        end = start + OPTS.bucket_seconds
        before, by_end = bisect.bisect_left(times, start), bisect.bisect_left(times, end)
        rows.append((round(start - (pd.Timestamp(series.bucket_start.iloc[0]) - epoch).total_seconds(), 1),
                     s.last_lag, LAG_MESSAGES - before, LAG_MESSAGES - by_end))
        assert LAG_MESSAGES - by_end - PREFETCH <= s.last_lag <= LAG_MESSAGES - before
        assert s.max_lag_before <= s.max_lag + 10 + PREFETCH and s.max_lag >= s.last_lag
    print("\n(t, lag at the bucket's last fetch, 1000 - seen at bucket start, 1000 - seen at bucket end):", rows)
    lags = list(series.last_lag)
    assert lags == sorted(lags, reverse=True)  # lag only falls: nothing is produced meanwhile
    assert series.max_lag_before.iloc[0] == LAG_MESSAGES and lags[-1] == 0
    assert series.records.sum() == LAG_MESSAGES
    clients = results["lag_clients"].sort_values("bucket_start")
    assert list(clients.total_lag) == lags and list(clients.max_lag) == list(series.max_lag)
    assert set(clients.partitions) == {1}


def test_report(results) -> None:
    (s,) = lag.report(results, OPTS)
    assert "records-lag" in " ".join(s.text)
    _caption, table = s.tables[0]
    assert table.max_lag.iloc[0] == results["lag_partitions"].max_lag.max()
    assert len(s.figures) == 2
    line = s.figures[0][1].series[0]
    assert line.label == "lag-consumer" and [v for v in line.values if v is not None][-1] == 0
