"""`minikafka log-dirs --describe` (kafka-log-dirs.sh): each broker's log directories, in Kafka's JSON."""

from __future__ import annotations

import json
from pathlib import Path

from tools_helpers import create_topic, produce, run_cli

from minikafka.broker.config import BrokerConfig
from minikafka.testing import ClusterThread
from minikafka.tools.log_dirs import exception_class


def test_describe_the_log_dirs_of_a_clusters_brokers(tmp_path: Path, capsys) -> None:
    cfg = BrokerConfig(port=0, group_initial_rebalance_delay_ms=0)
    cfg.set("log.dirs", f"{tmp_path / 'a'},{tmp_path / 'b'}")
    with ClusterThread(2, cfg) as cluster:
        b = cluster.bootstrap
        create_topic(b, "orders", 4, replication_factor=2)
        create_topic(b, "audit", 1)
        produce(b, "orders", [(p, None, b"v" * (10 * (p + 1))) for p in range(4)])

        r = run_cli(capsys, "log-dirs", "--bootstrap-server", b, "--describe", "--topic-list", "orders")
        assert r.rc == 0, r.err
        assert r.lines[:2] == ["Querying brokers for log directories information",
                               "Received log directory information from brokers 0,1"]
        out = json.loads(r.lines[2])
        assert out["version"] == 1 and [x["broker"] for x in out["brokers"]] == [0, 1]
        for broker in out["brokers"]:
            bid = broker["broker"]
            dirs = {d["logDir"]: d for d in broker["logDirs"]}
            assert list(dirs) == [str(tmp_path / d / f"broker-{bid}") for d in ("a", "b")]
            held = {}
            for path, d in dirs.items():
                assert d["error"] is None
                for p in d["partitions"]:
                    held[p["partition"]] = p
                    files = Path(path) / "logs" / p["partition"]
                    assert p["size"] == sum(f.stat().st_size for f in files.glob("*.log"))
                    assert (p["offsetLag"], p["isFuture"]) == (0, False)
            assert sorted(held) == ["orders-0", "orders-1", "orders-2", "orders-3"]  # audit left out
            assert all(held[f"orders-{p}"]["size"] > 0 for p in range(4))
            # Two per directory: the one with fewer logs takes the next partition.
            assert sorted(len(d["partitions"]) for d in dirs.values()) == [2, 2]

        r = run_cli(capsys, "log-dirs", "--bootstrap-server", b, "--describe", "--broker-list", "1")
        out = json.loads(r.lines[2])
        assert r.lines[1] == "Received log directory information from brokers 1"
        assert [x["broker"] for x in out["brokers"]] == [1]
        names = {p["partition"] for d in out["brokers"][0]["logDirs"] for p in d["partitions"]}
        assert {"orders-0", "orders-3"} <= names

        r = run_cli(capsys, "log-dirs", "--bootstrap-server", b, "--describe", "--broker-list", "1,7")
        assert r.rc == 1
        assert "The given brokers do not exist from --broker-list: 7. Current existent brokers: 0,1" in r.err


def test_error_names_are_kafkas_exception_classes() -> None:
    assert exception_class(0) is None
    assert exception_class(56) == "org.apache.kafka.common.errors.KafkaStorageException"
    assert exception_class(57) == "org.apache.kafka.common.errors.LogDirNotFoundException"
