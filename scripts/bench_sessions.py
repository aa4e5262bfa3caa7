"""Fetch-session benchmark: a 1000-partition consumer-style fetcher, sessionless vs sessions.

    scripts/bench sessions [--seconds 10] [--partitions 1000] [--version 12]

The broker runs as its own process (``python -m minikafka serve``).  For each
scenario -- ``idle`` (nothing produced) and ``trickle`` (a producer sends one
small record every ~10 ms to a random partition with raw Produce requests) --
and each mode -- ``sessionless`` (session id 0, epoch -1: every fetch names
every partition) and ``sessions`` (KIP-227 incremental fetches through
:class:`~minikafka.client.fetch_session.FetchSessionHandler`) -- one fetcher
(replica_id -1, max_wait_ms 500, min_bytes 1) fetches a fresh topic for a fixed
time.  Prints fetches/s, fetch request and response bytes/s (whole frames, size
prefix included) and the broker's CPU time per fetch (user + system of the
broker process over the run / fetches; in ``trickle`` this includes handling
the produce requests), then the sessionless/sessions ratios.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import random
import signal
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass, field

import psutil
import trio
from bench_common import cpu_seconds, free_port, start_broker

from minikafka.client.connection import KafkaConnection
from minikafka.client.fetch_session import FetchSessionHandler, PartitionData
from minikafka.protocol.api import ApiKey
from minikafka.protocol.records import Record, build_batch, iter_batches

log = logging.getLogger(__name__)

MAX_WAIT_MS = 500  # the consumer's fetch.max.wait.ms default
MIN_BYTES = 1
MAX_BYTES = 52428800  # fetch.max.bytes
PARTITION_MAX_BYTES = 1048576  # max.partition.fetch.bytes
PRODUCE_INTERVAL = 0.010


@dataclass
class RunResult:
    scenario: str
    mode: str
    seconds: float
    fetches: int = 0
    incremental: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    records: int = 0
    produced: int = 0
    broker_cpu: float = 0.0
    request_sizes: list[int] = field(default_factory=list)
    response_sizes: list[int] = field(default_factory=list)

    @property
    def median_request(self) -> float:
        return statistics.median(self.request_sizes) if self.request_sizes else float("nan")

    @property
    def median_response(self) -> float:
        return statistics.median(self.response_sizes) if self.response_sizes else float("nan")

    @property
    def fetches_per_s(self) -> float:
        return self.fetches / self.seconds

    @property
    def request_bytes_per_s(self) -> float:
        return self.request_bytes / self.seconds

    @property
    def response_bytes_per_s(self) -> float:
        return self.response_bytes / self.seconds

    @property
    def cpu_ms_per_fetch(self) -> float:
        return 1000 * self.broker_cpu / self.fetches if self.fetches else float("nan")


async def create_topic(conn: KafkaConnection, name: str, partitions: int) -> uuid.UUID:
    resp = await conn.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}], "timeout_ms": 10000})
    t = resp.topics[0]
    if t.error_code:
        raise SystemExit(f"CreateTopics {name}: error {t.error_code}")
    return t.topic_id


async def producer(port: int, topic: str, partitions: int, counter, stop) -> None:
    """One small record every ~10 ms (on a fixed schedule) to a random partition, acks=1,
    until ``stop`` is set; ``counter.value`` counts them."""
    rnd = random.Random(1)
    async with await KafkaConnection.connect("127.0.0.1", port, client_id="bench-producer") as conn:
        n = 0
        start = trio.current_time()
        while not stop.is_set():
            batch = build_batch([Record(offset_delta=0, key=None, value=b"trickle-%08d" % n)],
                                base_timestamp=time.time_ns() // 1_000_000)
            resp = await conn.request(ApiKey.PRODUCE, 8, {
                "acks": 1, "timeout_ms": 1000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": rnd.randrange(partitions), "records": batch}]}]})
            err = resp.responses[0].partition_responses[0].error_code
            if err:
                raise RuntimeError(f"produce error {err}")
            n += 1
            counter.value = n
            await trio.sleep_until(start + n * PRODUCE_INTERVAL)


def producer_process(port: int, topic: str, partitions: int, counter, stop) -> None:
    """The trickle producer in its own process, so the fetcher's CPU use cannot starve it."""
    trio.run(producer, port, topic, partitions, counter, stop)


async def fetcher(conn: KafkaConnection, handler: FetchSessionHandler, topic: str, topic_id: uuid.UUID,
                  partitions: int, version: int, result: RunResult) -> None:
    """Fetch every partition in a loop, advancing positions past the records received."""
    positions = [0] * partitions
    while True:
        builder = handler.new_builder()
        for p in range(partitions):
            data = PartitionData(topic, topic_id, p, positions[p], -1, PARTITION_MAX_BYTES)
            builder.add(data.tp, data)
        data = builder.build()
        body = data.to_request(version, replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=MIN_BYTES,
                               max_bytes=MAX_BYTES)
        corr = next(conn._corr)
        payload = conn.encode_request(ApiKey.FETCH, version, body, corr)
        await conn.send_raw(payload)
        frame = await conn.receive_frame()
        if frame is None:
            raise ConnectionError("broker closed the connection")
        got, resp = conn.decode_response(ApiKey.FETCH, version, frame)
        assert got == corr
        result.fetches += 1
        result.incremental += not data.is_full
        result.request_bytes += 4 + len(payload)
        result.response_bytes += 4 + len(frame)
        result.request_sizes.append(4 + len(payload))
        result.response_sizes.append(4 + len(frame))
        if not handler.handle_response(resp, version):
            log.warning("fetch response not processed (error %s)", resp.error_code)
            continue
        for tp, part in handler.response_data(resp, version).items():
            if part.error_code:
                raise RuntimeError(f"fetch error {part.error_code} on {tp}")
            if part.records:
                for h, _ in iter_batches(bytes(part.records), check_crc=False):
                    positions[tp.partition] = h.base_offset + h.last_offset_delta + 1
                    result.records += h.record_count


async def _create(port: int, topic: str, partitions: int) -> uuid.UUID:
    async with await KafkaConnection.connect("127.0.0.1", port, client_id="bench-admin") as conn:
        return await create_topic(conn, topic, partitions)


async def _fetch_for(port: int, handler: FetchSessionHandler, topic: str, topic_id: uuid.UUID, partitions: int,
                     version: int, seconds: float, result: RunResult) -> None:
    async with await KafkaConnection.connect("127.0.0.1", port, client_id=f"bench-{result.mode}") as conn:
        with trio.move_on_after(seconds):
            await fetcher(conn, handler, topic, topic_id, partitions, version, result)


def run(port: int, proc: psutil.Process, scenario: str, mode: str, seconds: float, partitions: int,
        version: int) -> RunResult:
    """One scenario/mode on a fresh topic: the fetcher for ``seconds`` (and the producer, for trickle)."""
    topic = f"bench-{scenario}-{mode}"
    result = RunResult(scenario, mode, seconds)
    topic_id = trio.run(_create, port, topic, partitions)
    handler = FetchSessionHandler(0, use_sessions=(mode == "sessions"))
    produced = multiprocessing.Value("q", 0)
    stop = multiprocessing.Event()
    prod = None
    if scenario == "trickle":
        prod = multiprocessing.Process(target=producer_process, args=(port, topic, partitions, produced, stop),
                                       daemon=True)
        prod.start()
    try:
        cpu0 = cpu_seconds(proc)
        t0 = time.perf_counter()
        trio.run(_fetch_for, port, handler, topic, topic_id, partitions, version, seconds, result)
        result.seconds = time.perf_counter() - t0
        result.broker_cpu = cpu_seconds(proc) - cpu0
    finally:
        if prod is not None:
            stop.set()
            prod.join(5)
            if prod.is_alive():
                prod.terminate()
    result.produced = produced.value
    return result


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:7.1f} {unit}"
        n /= 1024
    return ""


def report(results: list[RunResult]) -> None:
    print(f"\n{'scenario':8s} {'mode':11s} {'fetches/s':>9s} {'incr.':>6s} {'request/s':>12s} "
          f"{'response/s':>12s} {'median req':>10s} {'median resp':>11s} {'cpu ms/fetch':>12s} {'records':>9s}")
    for r in results:
        print(f"{r.scenario:8s} {r.mode:11s} {r.fetches_per_s:9.1f} {r.incremental:6d} "
              f"{_bytes(r.request_bytes_per_s):>10s}/s {_bytes(r.response_bytes_per_s):>10s}/s "
              f"{r.median_request:8.0f} B {r.median_response:9.0f} B "
              f"{r.cpu_ms_per_fetch:12.3f} {r.records:>4d}/{r.produced:<4d}")
    print("(bytes are whole frames with the size prefix; totals include the first, full fetch of a "
          "session; trickle CPU includes handling the produce requests)")
    print("\nratios sessionless / sessions:")
    by = {(r.scenario, r.mode): r for r in results}
    for scenario in dict.fromkeys(r.scenario for r in results):
        a, b = by.get((scenario, "sessionless")), by.get((scenario, "sessions"))
        if a is None or b is None:
            continue
        def ratio(x: float, y: float) -> str:
            return f"{x / y:8.1f}x" if y else "     inf"
        print(f"  {scenario:8s} fetches/s {ratio(a.fetches_per_s, b.fetches_per_s)}  "
              f"request bytes/s {ratio(a.request_bytes_per_s, b.request_bytes_per_s)}  "
              f"response bytes/s {ratio(a.response_bytes_per_s, b.response_bytes_per_s)}  "
              f"median request {ratio(a.median_request, b.median_request)}  "
              f"broker cpu/fetch {ratio(a.cpu_ms_per_fetch, b.cpu_ms_per_fetch)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10, help="duration of each run (default 10)")
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--version", type=int, default=12, choices=range(7, 14), metavar="7-13",
                    help="Fetch version (default 12)")
    ap.add_argument("--scenarios", default="idle,trickle")
    ap.add_argument("--modes", default="sessionless,sessions")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    port = free_port()
    popen, _ = start_broker(port)
    proc = psutil.Process(popen.pid)
    results = []
    try:
        print(f"broker pid {popen.pid} on port {port}; {args.partitions} partitions, Fetch v{args.version}, "
              f"max_wait_ms {MAX_WAIT_MS}, min_bytes {MIN_BYTES}, {args.seconds:g} s per run")
        for scenario in args.scenarios.split(","):
            for mode in args.modes.split(","):
                r = run(port, proc, scenario, mode, args.seconds, args.partitions, args.version)
                print(f"  {scenario}/{mode}: {r.fetches} fetches ({r.incremental} incremental), "
                      f"{r.records} records of {r.produced} produced", flush=True)
                results.append(r)
    finally:
        popen.send_signal(signal.SIGINT)
        try:
            popen.wait(10)
        except subprocess.TimeoutExpired:
            popen.kill()
    report(results)


if __name__ == "__main__":
    main()
