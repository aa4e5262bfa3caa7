"""Fetch-session savings from captures: the seed experiment (SPEC section 3) and a real client."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from minikafka.analysis.jobs import AnalysisOptions, sessions
from minikafka.analysis.tables import load_tables
from minikafka.broker.config import BrokerConfig
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread, ClusterThread
from waiting import wait_for, wait_for_no_connections

FAST = dict(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)


def _wait(pred, timeout: float = 20) -> None:
    wait_for(pred, timeout)


def seed_capture(cap: Path, version: int, fetches: int = 8) -> None:
    """Two brokers, topic `test` with 1000 partitions and RF 2, nothing produced, capture on, until each
    broker handled ``fetches`` follower fetches."""
    with ClusterThread(2, replica_fetch_request_version=version, capture_dir=cap, **FAST) as ct:
        ct.call(lambda: ct.cluster.broker(0).create_topic("test", 1000, 2))
        _wait(lambda: ct.call(lambda: all(ct.cluster.broker(b).request_stats.get(ApiKey.FETCH, [0])[0] >= fetches
                                          for b in (0, 1))))


@pytest.mark.slow
def test_seed_experiment_from_its_capture(spark, tmp_path: Path) -> None:
    """Follower fetches of the seed: 12043-byte full fetch, 33-byte incremental ones, each of which a
    sessionless fetch would have sent as 12043 bytes: 365x (12043 / 33) per incremental fetch."""
    seed_capture(tmp_path / "v8", 8)
    seed_capture(tmp_path / "v6", 6, fetches=4)
    res = sessions.run(load_tables(spark, [tmp_path / "v8"]), AnalysisOptions())
    per_fetch = res["per_fetch"].where("replica_id >= 0").toPandas()
    assert set(per_fetch.replica_id) == {0, 1}
    for _rid, f in per_fetch.groupby("replica_id"):
        f = f.sort_values("receive_ns")
        assert list(f.fetch_kind[:1]) == ["full"] and set(f.fetch_kind[1:]) == {"incremental"}
        assert f.request_body_bytes.iloc[0] == 12043
        assert set(f.request_body_bytes.iloc[1:]) == {33}
        assert len(f) >= 4
        # Sessionless, every one of them would have been the full 500-partition request.
        assert set(f.full_request_body_bytes) == {12043}
        assert set(f.session_partitions) == {500}
        # ... and answered with all 500 partitions, as the full fetch was (nothing changes: no data).
        assert set(f.full_response_body_bytes) == {f.response_body_bytes.iloc[0]}
        assert (f.response_body_bytes.iloc[1:] < 20).all()
    sess = res["per_session"].where("replica_id >= 0").toPandas()
    assert len(sess) == 2
    for s in sess.itertuples():
        assert s.full_request_size == 12043 and s.median_incremental_request_size == 33
        assert s.incremental_saving_ratio == pytest.approx(12043 / 33)  # 364.9x
        n = s.fetches
        assert s.request_saving_ratio == pytest.approx(n * 12043 / (12043 + (n - 1) * 33))
        full_resp = per_fetch[per_fetch.replica_id == s.replica_id].response_body_bytes.max()
        assert full_resp >= 500 * 38  # index 4, error 2, HW 8, LSO 8, log start 8, aborted 4, records 4
        assert s.response_saving_ratio == pytest.approx(n * full_resp / s.response_bytes)
    # Pinned to v6 there are no sessions: every follower fetch is 12031 bytes, nothing saved.
    v6 = sessions.run(load_tables(spark, [tmp_path / "v6"]), AnalysisOptions())["per_client"].toPandas()
    v6 = v6[v6.follower]
    assert set(v6.full_request_size.dropna()) <= {12031} and (v6.request_saving_ratio == 1.0).all()
    assert (v6.request_bytes == v6.fetches * 12031).all()


@pytest.mark.clients
def test_kafka_python_consumer_sessions_reconstructed(spark, tmp_path: Path) -> None:
    """kafka-python (Fetch v12, KIP-227 sessions) reading 8 partitions: every incremental fetch's
    counterfactual is the 8-partition full request its session started with."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    n = 800
    with BrokerThread(BrokerConfig(port=0, capture_dir=tmp_path / "cap")) as bt:
        bt.call(lambda: bt.broker.create_topic("s8", 8))
        p = Producer({"bootstrap.servers": bt.bootstrap, "linger.ms": 5})
        for i in range(n):
            p.produce("s8", b"v%d" % i, partition=i % 8)
        assert p.flush(10) == 0
        del p
        c = KafkaConsumer(bootstrap_servers=bt.bootstrap, client_id="kp-sessions", fetch_max_wait_ms=50,
                          enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=50)
        c.assign([TopicPartition("s8", i) for i in range(8)])
        got = 0
        deadline = time.monotonic() + 20
        while got < n and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(200).values())
        for _ in range(5):  # idle fetches: incremental, naming nothing
            c.poll(100)
        c.close()
        assert got == n
        wait_for_no_connections(bt)
    res = sessions.run(load_tables(spark, [tmp_path / "cap"]), AnalysisOptions())
    f = res["per_fetch"].where("client_id = 'kp-sessions'").toPandas().sort_values("receive_ns")
    assert set(f.api_version) == {12}
    full = f[f.fetch_kind == "full"]
    incr = f[f.fetch_kind == "incremental"]
    assert len(full) >= 1 and len(incr) >= 5
    # Like Java's, kafka-python's fetcher forgets a partition while it still holds records of it, and
    # adds it back later: the session shrinks and grows, and each counterfactual follows it.
    assert set(incr.session_partitions) <= set(range(1, 9))
    whole = incr[incr.session_partitions == 8]
    assert len(whole) >= 5  # at least the idle fetches at the end
    assert set(whole.full_request_body_bytes) == {full.request_body_bytes.iloc[0]}
    assert (incr[incr.session_partitions < 8].full_request_body_bytes < full.request_body_bytes.iloc[0]).all()
    assert (incr.request_body_bytes < full.request_body_bytes.iloc[0]).all()
    sess = res["per_session"].where("client_id = 'kp-sessions'").toPandas()
    assert sess.fetches.sum() == len(full) + len(incr)
    assert (sess.request_saving_ratio > 1).all() and (sess.incremental_saving_ratio > 1).all()
