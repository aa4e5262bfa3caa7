"""Wire replay of delegation tokens (KIP-48): the token id and HMAC a broker makes up are mapped, so the replayed
Renew/Expire name the target's token and every answer compares equal (lifetimes aside: wall-clock times)."""

from __future__ import annotations

from pathlib import Path

import trio

from minikafka.capture.recorder import CAPTURE
from minikafka.broker.broker import serve_broker
from minikafka.capture.replay import ReplayOptions, run_replay
from minikafka.capture.replay.options import ReplaySecurity
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E
from minikafka.testing import BrokerThread
from token_helpers import DAY, PASSWORDS, config, create_token, login, renew, sasl_port


async def _token_capture(cap: Path) -> None:
    cfg = config()
    cfg.capture_dir = cap
    async with serve_broker(cfg, captures=CAPTURE) as broker:
        async with await login(sasl_port(broker), "alice") as alice:
            made = await create_token(alice, renewers=("User:bob",))
            assert made.error_code == E.NONE
            assert (await renew(alice, made.hmac, DAY)).error_code == E.NONE
            described = await alice.request(K.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
            assert [t.token_id for t in described.tokens] == [made.token_id]
            expired = await alice.request(K.EXPIRE_DELEGATION_TOKEN, 2, {"hmac": made.hmac,
                                                                        "expiry_time_period_ms": -1})
            assert expired.error_code == E.NONE
            gone = await alice.request(K.DESCRIBE_DELEGATION_TOKEN, 3, {"owners": None})
            assert gone.tokens == []


def test_replayed_tokens_map_token_ids_and_hmacs(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    trio.run(_token_capture, cap)
    with BrokerThread(config()) as target:
        security = ReplaySecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", PASSWORDS["alice"])
        report = run_replay([cap], ReplayOptions("127.0.0.1", target.broker.listener_ports["SASL_PLAINTEXT"],
                                                 speed=None, security=security))
    assert report.failed == 0, report.summary()
    for name, sent in (("CreateDelegationToken", 1), ("RenewDelegationToken", 1), ("DescribeDelegationToken", 2),
                       ("ExpireDelegationToken", 1)):
        st = report.by_name(name)
        assert (st.sent, st.equal, st.differing) == (sent, sent, 0), (name, st.to_dict())
    assert report.mappings["token"]["changed"] == 1 and report.mappings["hmac"]["changed"] == 1
    assert report.by_name("RenewDelegationToken").rewritten == 1
    assert report.by_name("ExpireDelegationToken").rewritten == 1
