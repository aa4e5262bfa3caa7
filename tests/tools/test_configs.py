"""`minikafka configs` (kafka-configs.sh): topic and broker configs, the replication throttles included."""

from __future__ import annotations

from tools_helpers import create_topic, run_cli, topic_configs

from minikafka.testing import BrokerThread
from minikafka.tools.configs import parse_add_config, split_top_level

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER = 1, 2, 3


def test_alter_and_describe_topic_configs(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "throttled", 2)
    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics", "--entity-name",
                "throttled", "--add-config", "retention.ms=3600000,leader.replication.throttled.replicas=[0:0,1:0]",
                "--add-config", "follower.replication.throttled.replicas=*")
    assert (r.rc, r.out) == (0, "Completed updating config for topic throttled.\n")
    configs = topic_configs(b, "throttled")
    assert configs["retention.ms"] == ("3600000", DYNAMIC_TOPIC)
    assert configs["leader.replication.throttled.replicas"] == ("0:0,1:0", DYNAMIC_TOPIC)
    assert configs["follower.replication.throttled.replicas"] == ("*", DYNAMIC_TOPIC)

    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--describe", "--topic", "throttled")
    assert r.lines == [
        "Dynamic configs for topic throttled are:",
        "  follower.replication.throttled.replicas=* sensitive=false synonyms={}",
        "  leader.replication.throttled.replicas=0:0,1:0 sensitive=false synonyms={}",
        "  retention.ms=3600000 sensitive=false synonyms={}",
    ]

    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--alter", "--topic", "throttled", "--delete-config",
                "retention.ms,follower.replication.throttled.replicas")
    assert r.rc == 0
    configs = topic_configs(b, "throttled")
    assert configs["retention.ms"][1] != DYNAMIC_TOPIC
    assert configs.get("follower.replication.throttled.replicas", (None, 5))[1] != DYNAMIC_TOPIC
    assert configs["leader.replication.throttled.replicas"] == ("0:0,1:0", DYNAMIC_TOPIC)

    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--describe", "--topic", "throttled", "--all")
    assert r.lines[0] == "All configs for topic throttled are:"
    assert len(r.lines) > 5 and any(line.startswith("  retention.ms=") for line in r.lines)


def test_broker_replication_throttle_rates(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-default",
                "--add-config", "leader.replication.throttled.rate=1048576,follower.replication.throttled.rate=2097152")
    assert (r.rc, r.out) == (0, "Completed updating default config for brokers in the cluster.\n")
    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--describe", "--broker-defaults")
    assert r.lines == ["Default configs for brokers in the cluster are:",
                       "  follower.replication.throttled.rate=2097152 sensitive=false synonyms={}",
                       "  leader.replication.throttled.rate=1048576 sensitive=false synonyms={}"]
    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-name",
                "0", "--add-config", "follower.replication.throttled.rate=4096")
    assert (r.rc, r.out) == (0, "Completed updating config for broker 0.\n")

    configs = topic_configs(b, "0", BROKER)
    assert configs["leader.replication.throttled.rate"] == ("1048576", DYNAMIC_DEFAULT_BROKER)
    assert configs["follower.replication.throttled.rate"] == ("4096", DYNAMIC_BROKER)

    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers",
                "--entity-name", "0")
    assert r.lines == ["Dynamic configs for broker 0 are:",
                       "  follower.replication.throttled.rate=4096 sensitive=false synonyms={}"]

    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--alter", "--broker", "0", "--delete-config",
                "follower.replication.throttled.rate")
    assert r.rc == 0
    assert topic_configs(b, "0", BROKER)["follower.replication.throttled.rate"] == ("2097152", DYNAMIC_DEFAULT_BROKER)


def test_errors_are_one_line(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-name",
                "0", "--add-config", "num.partitions=3")
    assert r.rc == 1
    assert r.err == ("minikafka: error: IncrementalAlterConfigs of '0': INVALID_CONFIG: Cannot update these configs "
                     "dynamically: Set(num.partitions)\n")
    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--describe", "--topic", "nope")
    assert r.rc == 1 and r.err.startswith("minikafka: error: DescribeConfigs of 'nope': UNKNOWN_TOPIC_OR_PARTITION")
    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers",
                "--entity-name", "7")
    assert (r.rc, r.err) == (1, "minikafka: error: broker 7 is not in the cluster (brokers: [0])\n")
    r = run_cli(capsys, "configs", "--bootstrap-server", b, "--alter", "--topic", "t", "--add-config", "novalue")
    assert (r.rc, r.err) == (1, "minikafka: error: --add-config expects KEY=VALUE, got 'novalue'\n")


def test_add_config_parsing() -> None:
    assert split_top_level("a=1, b=[x,y] ,c") == ["a=1", "b=[x,y]", "c"]
    assert parse_add_config(["a=1,b=[0:1,1:2]", "c=x=y"]) == {"a": "1", "b": "0:1,1:2", "c": "x=y"}
