"""Wire replay of KIP-714 client metrics: the client instance id and subscription id a broker assigns are
mapped, so the replayed PushTelemetry names the target's instance and is answered as in the capture."""

from __future__ import annotations

from pathlib import Path

import trio

from minikafka.capture.recorder import CAPTURE
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.capture.replay import ReplayOptions, run_replay
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.types import ZERO_UUID
from minikafka.testing import BrokerThread


async def _telemetry_capture(cap: Path) -> None:
    async with serve_broker(BrokerConfig(port=0, capture_dir=cap), captures=CAPTURE) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="pusher") as conn:
            await conn.negotiate()
            resp = await conn.request(K.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": 16, "resource_name": "all",
                "configs": [{"name": "metrics", "config_operation": 0, "value": "*"}]}], "validate_only": False})
            assert resp.responses[0].error_code == E.NONE
            sub = await conn.request(K.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO_UUID})
            push = await conn.request(K.PUSH_TELEMETRY, 0, {
                "client_instance_id": sub.client_instance_id, "subscription_id": sub.subscription_id,
                "terminating": False, "compression_type": 0, "metrics": b""})
            assert push.error_code == E.NONE
            # Asked again at once: throttled, in the capture as in the replay.
            again = await conn.request(K.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": sub.client_instance_id})
            assert again.error_code == E.THROTTLING_QUOTA_EXCEEDED
            last = await conn.request(K.PUSH_TELEMETRY, 0, {
                "client_instance_id": sub.client_instance_id, "subscription_id": sub.subscription_id,
                "terminating": True, "compression_type": 0, "metrics": b""})
            assert last.error_code == E.NONE


def test_replayed_telemetry_maps_instance_and_subscription_ids(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    trio.run(_telemetry_capture, cap)
    with BrokerThread(BrokerConfig(port=0)) as target:
        report = run_replay([cap], ReplayOptions("127.0.0.1", target.port, speed=None))
    assert report.failed == 0
    for name, sent in (("GetTelemetrySubscriptions", 2), ("PushTelemetry", 2)):
        st = report.by_name(name)
        assert (st.sent, st.differing) == (sent, 0), (name, st.to_dict())
    assert report.mappings["instance"]["changed"] == 1 and report.mappings["subscription"]["changed"] == 1
    assert report.by_name("PushTelemetry").rewritten == 2
