"""Client quotas from the command line: `minikafka quotas describe|alter`, `serve --quota`,
and the quota keys of server.properties."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from minikafka.broker.broker import Broker
from minikafka.broker.config import BrokerConfig, StartupError
from minikafka.broker.quota import DEFAULT, ClientQuotaEntity
from minikafka.cli import build_config, main
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread

P, C, R = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """``python -m minikafka ARGS`` as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "minikafka", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def serve_args(**kw) -> argparse.Namespace:
    base = dict(config=None, override=[], host=None, port=None, node_id=None, data_dir=None,
                advertised_host=None, quota=[])
    base.update(kw)
    return argparse.Namespace(**base)


def quotas_of(cfg: BrokerConfig) -> dict[ClientQuotaEntity, dict[str, float]]:
    """The quota entries a broker started from ``cfg`` holds."""
    return Broker(cfg).quota_configs.entries


# -- minikafka quotas alter / describe against a running broker ------------------------------

def configured(b: BrokerThread) -> dict[ClientQuotaEntity, dict[str, float]]:
    return b.call(lambda: {e: dict(v) for e, v in b.broker.quota_configs.entries.items()})


def test_quotas_alter_subcommand():
    with BrokerThread(BrokerConfig(port=0, client_quotas=["client-id=boot:consumer_byte_rate=4096"])) as b:
        boot = b.bootstrap
        r = cli("quotas", "alter", "--bootstrap", boot, "--entity", "client-id=app1",
                "--add", "producer_byte_rate=1048576", "--add", "request_percentage=50")
        assert r.returncode == 0, r.stderr
        assert "altered quotas for client-id=app1" in r.stderr
        r = cli("quotas", "alter", "--bootstrap", boot, "--entity", "user=alice,client-id=<default>",
                "--add", "consumer_byte_rate=2000")
        assert r.returncode == 0, r.stderr
        assert configured(b) == {
            ClientQuotaEntity(None, "boot"): {C: 4096.0},
            ClientQuotaEntity(None, "app1"): {P: 1048576.0, R: 50.0},
            ClientQuotaEntity("alice", DEFAULT): {C: 2000.0},
        }

        # --validate-only changes nothing; --add and --delete together change one key, remove another.
        r = cli("quotas", "alter", "--bootstrap", boot, "--entity", "client-id=app1", "--delete",
                "request_percentage", "--validate-only")
        assert r.returncode == 0 and "validated quotas for client-id=app1" in r.stderr
        assert configured(b)[ClientQuotaEntity(None, "app1")] == {P: 1048576.0, R: 50.0}
        r = cli("quotas", "alter", "--bootstrap", boot, "--entity", "client-id=app1", "--add",
                "producer_byte_rate=300000", "--delete", "request_percentage")
        assert r.returncode == 0, r.stderr
        assert configured(b)[ClientQuotaEntity(None, "app1")] == {P: 300000.0}

        # Errors from the broker come back as a non-zero exit with Kafka's message.
        r = cli("quotas", "alter", "--bootstrap", boot, "--entity", "client-id=app1", "--add", "bogus=1")
        assert r.returncode != 0
        assert "INVALID_REQUEST: Invalid configuration key bogus" in r.stderr
        r = cli("quotas", "alter", "--bootstrap", boot, "--entity", "client-id=app1", "--add", f"{P}=0")
        assert r.returncode != 0 and f"Quota {P} must be greater than 0" in r.stderr
        r = cli("quotas", "alter", "--bootstrap", boot, "--entity", "group=g", "--add", f"{P}=1")
        assert r.returncode != 0 and "bad entity" in r.stderr
        r = cli("quotas", "alter", "--bootstrap", boot, "--entity", "client-id=app1", "--add", "no-equals")
        assert r.returncode != 0 and "--add expects KEY=VALUE" in r.stderr
        assert configured(b)[ClientQuotaEntity(None, "app1")] == {P: 300000.0}

        # Removing the last key removes the entity.
        for spec, key in (("client-id=app1", P), ("client-id=boot", C), ("user=alice,client-id=<default>", C)):
            assert cli("quotas", "alter", "--bootstrap", boot, "--entity", spec, "--delete", key).returncode == 0
        assert configured(b) == {}


def test_quotas_describe_with_no_quotas():
    with BrokerThread(BrokerConfig(port=0)) as b:
        r = cli("quotas", "describe", "--bootstrap", b.bootstrap)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "no client quotas"


def test_quotas_describe_subcommand():
    quotas = ["client-id=boot:consumer_byte_rate=4096",
              "client-id=app1:producer_byte_rate=250000,request_percentage=50",
              "user=alice,client-id=<default>:consumer_byte_rate=2000"]
    with BrokerThread(BrokerConfig(port=0, client_quotas=quotas)) as b:
        boot = b.bootstrap
        r = cli("quotas", "describe", "--bootstrap", boot)
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.splitlines()) == sorted([
            "client-id=boot: consumer_byte_rate=4096",
            "client-id=app1: producer_byte_rate=250000, request_percentage=50",
            "user=alice,client-id=<default>: consumer_byte_rate=2000",
        ])
        # Filtered: one entity (exact name), or the default entity of a type.
        r = cli("quotas", "describe", "--bootstrap", boot, "--entity", "client-id=app1")
        assert r.stdout.splitlines() == ["client-id=app1: producer_byte_rate=250000, request_percentage=50"]
        r = cli("quotas", "describe", "--bootstrap", boot, "--entity", "client-id=<default>")
        assert r.stdout.splitlines() == ["user=alice,client-id=<default>: consumer_byte_rate=2000"]


def test_quotas_describe_prints_exact_values():
    with BrokerThread(BrokerConfig(port=0, client_quotas=["client-id=app1:producer_byte_rate=1048576"])) as b:
        r = cli("quotas", "describe", "--bootstrap", b.bootstrap)
        assert r.stdout.splitlines() == ["client-id=app1: producer_byte_rate=1048576"]


# -- serve --quota and server.properties -----------------------------------------------------

def test_serve_quota_flag_builds_the_config():
    specs = ["client-id=app1:producer_byte_rate=1048576",
             "user=alice,client-id=<default>:consumer_byte_rate=2e6,request_percentage=50"]
    cfg = build_config(serve_args(quota=specs))
    assert cfg.client_quotas == specs
    assert quotas_of(cfg) == {
        ClientQuotaEntity(None, "app1"): {P: 1048576.0},
        ClientQuotaEntity("alice", DEFAULT): {C: 2e6, R: 50.0},
    }


@pytest.mark.parametrize("bad", ["client-id=app1", "client-id=app1:bogus=1", "group=g:producer_byte_rate=1",
                                 "client-id=app1:producer_byte_rate=fast"])
def test_serve_rejects_a_bad_quota(bad, capsys):
    with pytest.raises(StartupError):
        build_config(serve_args(quota=[bad]))
    assert main(["serve", "--quota", bad]) == 1
    assert capsys.readouterr().err.startswith("minikafka: error: --quota: bad quota")


def test_server_properties_quota_keys(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text(
        "quota.window.num=10\n"
        "quota.window.size.seconds=2\n"
        "client.quotas=client-id=app1:producer_byte_rate=1048576; user=alice:consumer_byte_rate=500\n"
        "quota.producer.default=3000\n"
        "quota.consumer.default=4000\n"
    )
    cfg = BrokerConfig.from_properties(f)
    assert (cfg.quota_window_num, cfg.quota_window_size_seconds) == (10, 2)
    assert quotas_of(cfg) == {
        ClientQuotaEntity(None, "app1"): {P: 1048576.0},
        ClientQuotaEntity("alice", None): {C: 500.0},
        # Kafka's legacy static defaults are /clients/<default> quotas.
        ClientQuotaEntity(None, DEFAULT): {P: 3000.0, C: 4000.0},
    }
    broker = Broker(cfg)
    assert (broker.quotas.produce.window_num, broker.quotas.produce.window_size_s) == (10, 2)
    assert broker.quotas.fetch.get_max_value_in_quota_window("ANONYMOUS", "x") == 4000 * 9 * 2

    # -o overrides and --quota flags add to what the file says.
    cfg = build_config(serve_args(config=f, override=["quota.window.num=4"],
                                  quota=["client-id=app2:request_percentage=25"]))
    assert cfg.quota_window_num == 4
    assert quotas_of(cfg)[ClientQuotaEntity(None, "app2")] == {R: 25.0}
    assert quotas_of(cfg)[ClientQuotaEntity(None, "app1")] == {P: 1048576.0}


def test_defaults_without_quotas():
    cfg = BrokerConfig()
    assert (cfg.quota_window_num, cfg.quota_window_size_seconds, cfg.client_quotas) == (11, 1, [])
    assert quotas_of(cfg) == {}


async def _describe_all(host: str, port: int):
    async with await KafkaConnection.connect(host, port, client_id="t") as conn:
        return await conn.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})


def test_serve_with_quota_flag_then_describe_it():
    """`minikafka serve --quota ...` in a subprocess; `minikafka quotas describe` sees the quota."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "minikafka", "serve", "--port", "0", "--quota",
         "client-id=app1:producer_byte_rate=100000", "-o", "quota.window.num=5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        m = re.search(r"ready on ([\d.]+):(\d+)", line)
        assert m, (line, proc.poll())
        # Read back with a raw DescribeClientQuotas (independently of `quotas describe`).
        resp = trio.run(_describe_all, m.group(1), int(m.group(2)))
        assert [([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry["values"]})
                for entry in resp.entries] == [([("client-id", "app1")], {P: 100000.0})]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
