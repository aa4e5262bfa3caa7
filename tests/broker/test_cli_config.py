"""`minikafka serve` as a user runs it: config files, flags, start-up and clean shutdown."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from minikafka.broker.config import BrokerConfig, read_properties
from minikafka.cli import build_config, main
from waiting import wait_for


def test_read_properties_handles_comments_and_separators(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# a comment\n! another\nnum.partitions=3\nlog.retention.hours : 2\n\nbroker.id= 7\n")
    assert read_properties(f) == {"num.partitions": "3", "log.retention.hours": "2", "broker.id": "7"}


def test_server_properties_keys_apply(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text(
        "broker.id=3\nnum.partitions=6\nauto.create.topics.enable=false\nmessage.max.bytes=2000\n"
        "socket.request.max.bytes=5000\nlog.segment.bytes=4096\nlog.retention.minutes=5\n"
        "log.retention.bytes=100000\nlisteners=PLAINTEXT://0.0.0.0:19092\ndefault.replication.factor=1\n"
        f"log.dirs={tmp_path / 'logs'}\ngroup.initial.rebalance.delay.ms=0\nsome.unknown.key=1\n"
    )
    cfg = BrokerConfig.from_properties(f)
    assert (cfg.node_id, cfg.num_partitions, cfg.auto_create_topics_enable) == (3, 6, False)
    assert (cfg.message_max_bytes, cfg.socket_request_max_bytes, cfg.log_segment_bytes) == (2000, 5000, 4096)
    assert cfg.log_retention_ms == 5 * 60000 and cfg.log_retention_bytes == 100000
    assert (cfg.host, cfg.port) == ("0.0.0.0", 19092) and cfg.advertised == "localhost"
    assert cfg.data_dir == tmp_path / "logs"
    assert cfg.extra == {"some.unknown.key": "1"}
    assert cfg.topic_defaults()["segment.bytes"] == "4096"


def test_flags_override_config_file(tmp_path):
    import argparse

    f = tmp_path / "server.properties"
    f.write_text("num.partitions=6\nbroker.id=3\n")
    args = argparse.Namespace(config=f, override=["num.partitions=2"], host="127.0.0.1", port=0, node_id=9,
                              data_dir=None, advertised_host="broker.example")
    cfg = build_config(args)
    assert (cfg.num_partitions, cfg.node_id, cfg.port, cfg.advertised) == (2, 9, 0, "broker.example")


def test_bad_override_is_rejected(capsys):
    assert main(["serve", "-o", "no-equals-sign"]) == 1
    assert "--override expects KEY=VALUE" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("with_data_dir", [False, True])
def test_serve_starts_fast_and_stops_cleanly_on_ctrl_c(tmp_path, with_data_dir):
    port = _free_port()
    cmd = [sys.executable, "-m", "minikafka", "serve", "--port", str(port)]
    if with_data_dir:
        cmd += ["--data-dir", str(tmp_path / "d")]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                return True
            except OSError:
                assert proc.poll() is None, proc.communicate()
                return False

        wait_for(listening, 10, "the broker to start", interval=0.01)
        # The 0.5 s start-up target is measured by scripts/bench; here only a generous bound.
        assert time.monotonic() - t0 < 5
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "ready on" in out
    assert "Traceback" not in err
    assert "stopped" in err
    if with_data_dir:
        assert (tmp_path / "d").is_dir()


def test_read_properties_joins_backslash_continued_lines(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
                 "PlainLoginModule required \\\n"
                 "    user_alice=\"alice-secret\" \\\n"
                 "    user_bob=\"bob-secret\";\n"
                 "path=C:\\\\data\\\\\n"  # an even number of backslashes: no continuation
                 "num.partitions=3\n")
    assert read_properties(f) == {
        "listener.name.sasl_ssl.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                                         "required user_alice=\"alice-secret\" "
                                                         "user_bob=\"bob-secret\";",
        "path": "C:\\\\data\\\\", "num.partitions": "3"}
