"""The whole producer on trio's MockClock (rate 0: time moves only when the test jumps it; network I/O
is real): linger.ms holds a batch back until the clock passes it, a full batch goes at once; and
an epoch bump after UNKNOWN_PRODUCER_ID."""

from __future__ import annotations

import trio
import trio.testing

from minikafka.client.producer import KafkaProducer
from minikafka.protocol.errors import ErrorCode

from test_producer_broker import inject_faults, read_all


async def settle() -> None:
    for _ in range(20):
        await trio.testing.wait_all_tasks_blocked()
        await trio.lowlevel.checkpoint()


async def test_linger_holds_batch_until_clock_passes(broker, mock_clock) -> None:
    async with KafkaProducer(f"127.0.0.1:{broker.port}", linger_ms=1000, batch_size=4096) as p:
        await p.partitions_for("linger")
        fut = await p.send("linger", b"lonely")
        await settle()
        assert not fut.done() and p.metrics()["request-total"] == 0
        mock_clock.jump(0.9)
        await settle()
        assert not fut.done()
        mock_clock.jump(0.1)
        meta = await fut.get()
        assert meta.offset == 0
        assert p.metrics()["record-queue-time-avg"] == 1000


async def test_full_batch_is_sent_without_waiting_for_linger(broker, mock_clock) -> None:
    async with KafkaProducer(f"127.0.0.1:{broker.port}", linger_ms=60_000, batch_size=1024) as p:
        await p.partitions_for("full")
        futs = [await p.send("full", b"x" * 100) for _ in range(12)]  # > 1 batch
        first = await futs[0].get()  # no clock jump needed
        assert first.offset == 0
        await settle()
        assert not futs[-1].done()  # the second batch lingers
        await p.flush()  # flush makes it ready now
        assert (await futs[-1].get()).offset == 11


async def test_unknown_producer_id_bumps_epoch_and_keeps_order(broker, monkeypatch) -> None:
    async with KafkaProducer(f"127.0.0.1:{broker.port}", retry_backoff_ms=5, batch_size=256, linger_ms=0) as p:
        await (await p.send("bump", b"warm")).get()
        assert p.producer_id[1] == 0
        inject_faults(broker, monkeypatch, ErrorCode.UNKNOWN_PRODUCER_ID, 1, False, "bump")
        futs = [await p.send("bump", b"%03d" % i + b"." * 40) for i in range(40)]
        await p.flush()
        for f in futs:
            await f.get()
        assert p.producer_id[1] >= 1  # KIP-360 epoch bump
    stored = await read_all(broker.port, "bump")
    assert [r.value for _, r in stored] == [b"warm"] + [b"%03d" % i + b"." * 40 for i in range(40)]
