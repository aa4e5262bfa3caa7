"""`minikafka serve` start-up mistakes: one line naming the problem, exit status 1, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka.broker.config import BrokerConfig, ConfigError


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka", "serve", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("minikafka: error: ")
    return lines[0]


def test_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_error(serve("--port", str(port)))
    assert f"cannot listen on 127.0.0.1:{port}" in line and "in use" in line


@pytest.mark.parametrize("brokers", ["1", "2"])
def test_data_dir_that_is_a_file(tmp_path: Path, brokers: str) -> None:
    f = tmp_path / "data"
    f.write_text("not a directory")
    line = one_line_error(serve("--port", "0", "--data-dir", str(f), "--brokers", brokers))
    assert f"data dir {f} is not usable" in line


@pytest.mark.parametrize("override,expected", [
    ("num.partitions=abc", "Invalid value abc for configuration num.partitions: Not a number of type INT"),
    ("num.partitions=0", "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
    ("auto.create.topics.enable=maybe",
     "Invalid value maybe for configuration auto.create.topics.enable: Expected value to be either true or false"),
    ("listeners=PLAINTEXT://:99999", "Invalid value 99999 for configuration listeners: Value must be no more than 65535"),
])
def test_wrong_value_types_name_the_key_and_type(override: str, expected: str) -> None:
    assert one_line_error(serve("--port", "0", "-o", override)) == f"minikafka: error: {expected}"


def test_unreadable_config_file(tmp_path: Path) -> None:
    line = one_line_error(serve("--config", str(tmp_path / "missing.properties")))
    assert "cannot read config file" in line and "missing.properties" in line


def test_debug_log_level_shows_the_traceback() -> None:
    proc = serve("--port", "0", "-o", "num.partitions=abc", "--log-level", "DEBUG")
    assert proc.returncode == 1 and "Traceback" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("minikafka: error: Invalid value abc")


def test_config_errors_from_python() -> None:
    cfg = BrokerConfig()
    with pytest.raises(ConfigError, match="configuration message.max.bytes: Not a number of type INT"):
        cfg.set("message.max.bytes", "1MB")
    cfg.set("message.max.bytes", "2048")
    assert cfg.message_max_bytes == 2048
