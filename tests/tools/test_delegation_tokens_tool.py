"""`minikafka delegation-tokens` (kafka-delegation-tokens.sh) against a SASL broker: the tool logs in with
``--command-config`` (SCRAM-SHA-512), creates, describes, renews and expires tokens with Kafka's options and
output, and the token it printed logs in (a ``--command-config`` with ``tokenauth="true"``), after which
the broker refuses token requests on that connection, as Kafka does.  Effects are checked over the wire
with raw requests, not with the tool's own admin client."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from minikafka.client.connection import KafkaConnection
from minikafka.client.security import sasl_authenticate
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread
from tools_helpers import run_cli

USERS = "alice:SCRAM-SHA-512:alice-secret,bob:SCRAM-SHA-512:bob-secret"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "SCRAM-SHA-512", "minikafka.scram.users": USERS,
             "delegation.token.secret.key": "tool-test-secret"}
    with BrokerThread(properties=props) as b:
        yield b


def command_config(tmp_path: Path, name: str, user: str, password: str, token: bool = False,
                   protocol: str = "SASL_PLAINTEXT") -> Path:
    path = tmp_path / f"{name}.properties"
    extra = ' tokenauth="true"' if token else ""
    path.write_text(f"security.protocol={protocol}\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={SCRAM} required username=\"{user}\" password=\"{password}\"{extra};\n")
    return path


def tokens_cli(capsys, broker: BrokerThread, config: Path, *argv: str, listener: str = "SASL_PLAINTEXT"):
    return run_cli(capsys, "delegation-tokens", "--bootstrap-server", broker.bootstrap_for(listener),
                   "--command-config", str(config), *argv)


def rows(out: str) -> list[list[str]]:
    """The token lines of Kafka's printToken layout (after the TOKENID header)."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    start = next(i for i, parts in enumerate(lines) if parts[:2] == ["TOKENID", "HMAC"])
    return lines[start + 1:]


def wire_describe(broker: BrokerThread, user: str, password: str) -> dict[str, object]:
    """DescribeDelegationToken as ``user`` over a raw connection: token id -> token."""
    host, _, port = broker.bootstrap_for("SASL_PLAINTEXT").rpartition(":")

    async def ask() -> dict[str, object]:
        async with await KafkaConnection.connect(host, int(port)) as conn:
            await sasl_authenticate(conn.request, "SCRAM-SHA-512", user, password)
            resp = await conn.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
            assert resp.error_code == 0
            return {t.token_id: t for t in resp.tokens}
    return trio.run(ask)


def test_create_describe_renew_expire(capsys, broker: BrokerThread, tmp_path: Path):
    alice = command_config(tmp_path, "alice", "alice", "alice-secret")
    bob = command_config(tmp_path, "bob", "bob", "bob-secret")
    created = tokens_cli(capsys, broker, alice, "--create", "--max-life-time-period", "-1",
                         "--renewer-principal", "User:bob")
    assert created.rc == 0, created.err
    assert "Calling create token operation with renewers :[User:bob] , max-life-time-period :-1" in created.out
    token_id = re.search(r"Created delegation token with tokenId : (\S+)", created.out).group(1)
    [row] = rows(created.out)
    assert row[0] == token_id and row[2:5] == ["User:alice", "User:alice", "[User:bob]"]
    hmac_b64 = row[1]
    on_wire = wire_describe(broker, "alice", "alice-secret")[token_id]
    assert base64.b64encode(bytes(on_wire.hmac)).decode() == hmac_b64
    assert [(r.principal_type, r.principal_name) for r in on_wire.renewers] == [("User", "bob")]

    described = tokens_cli(capsys, broker, bob, "--describe", "--owner-principal", "User:bob")
    assert described.rc == 0, described.err
    assert "Calling describe token operation for owners: [User:bob]" in described.out
    assert "Total number of tokens : 1" in described.out and rows(described.out)[0][0] == token_id
    mine = tokens_cli(capsys, broker, bob, "--describe")
    assert "Calling describe token operation for current user." in mine.out and "Total number of tokens : 1" in mine.out

    before = on_wire.expiry_timestamp
    renewed = tokens_cli(capsys, broker, bob, "--renew", "--hmac", hmac_b64, "--renew-time-period", "60000")
    assert renewed.rc == 0, renewed.err
    assert "Completed renew operation. New expiry date : " in renewed.out
    assert wire_describe(broker, "bob", "bob-secret")[token_id].expiry_timestamp < before  # one minute, not a day

    expired = tokens_cli(capsys, broker, alice, "--expire", "--hmac", hmac_b64, "--expiry-time-period", "-1")
    assert expired.rc == 0, expired.err
    assert "Completed expire operation. New expiry date : " in expired.out
    assert token_id not in wire_describe(broker, "alice", "alice-secret")
    again = tokens_cli(capsys, broker, alice, "--renew", "--hmac", hmac_b64, "--renew-time-period", "-1")
    assert again.rc == 1 and "DELEGATION_TOKEN_NOT_FOUND" in again.err


def test_the_printed_token_logs_in_and_is_refused_token_requests(capsys, broker: BrokerThread, tmp_path: Path):
    alice = command_config(tmp_path, "alice", "alice", "alice-secret")
    created = tokens_cli(capsys, broker, alice, "--create", "--max-life-time-period", "3600000")
    assert created.rc == 0, created.err
    token_id, hmac_b64 = rows(created.out)[0][:2]
    by_token = command_config(tmp_path, "token", token_id, hmac_b64, token=True)
    refused = tokens_cli(capsys, broker, by_token, "--describe")
    assert refused.rc == 1 and "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in refused.err
    wrong = command_config(tmp_path, "wrong", token_id, "bm90LXRoZS1obWFj", token=True)
    failed = tokens_cli(capsys, broker, wrong, "--describe")
    assert failed.rc == 1 and "SASL_AUTHENTICATION_FAILED" in failed.err


def test_plaintext_and_usage_errors(capsys, broker: BrokerThread, tmp_path: Path):
    plain = tmp_path / "plain.properties"
    plain.write_text("security.protocol=PLAINTEXT\n")
    refused = tokens_cli(capsys, broker, plain, "--describe", listener="PLAINTEXT")
    assert refused.rc == 1 and "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in refused.err
    alice = command_config(tmp_path, "alice", "alice", "alice-secret")
    for argv, message in (
            (("--create",), "Missing required argument \"[max-life-time-period]\""),
            (("--create", "--describe", "--max-life-time-period", "1"), "exactly one action"),
            (("--renew", "--hmac", "AAAA"), "Missing required argument \"[renew-time-period]\""),
            (("--describe", "--hmac", "AAAA"), "can't be used with option \"[hmac]\""),
            (("--create", "--max-life-time-period", "-1", "--renewer-principal", "bob"), "Invalid principal: bob")):
        result = tokens_cli(capsys, broker, alice, *argv)
        assert result.rc == 1 and message in result.err, (argv, result.err)
    missing = run_cli(capsys, "delegation-tokens", "--bootstrap-server", broker.bootstrap, "--describe")
    assert missing.rc == 1 and "command-config" in missing.err
