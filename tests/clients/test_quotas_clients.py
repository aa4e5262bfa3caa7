"""Client quotas with real clients: producers and consumers held to their quotas.

How the rates are measured
--------------------------
Kafka's quota Rate pads a young metric's window to (quota.window.num - 1)
windows, so a client running flat out first gets a burst of about
quota x (window_num - 1) x window_size bytes; it is then throttled, and
each time the sample holding a burst expires (window_num x window_size
seconds after it started) another burst goes out.  Throughput is therefore
periodic with period P = quota.window.num x quota.window.size.seconds.

These brokers run with quota.window.num = 10 and quota.window.size.seconds = 1,
so P = 10 s.  Each client's throughput is measured client-side (bytes of
delivered or consumed record values, by the time the client saw them) over
exactly two periods, 20 s, after a warm-up of one period from its first
delivery t0, less one second: the window is [t0 + 9 s, t0 + 29 s).  A burst
goes out when the sample holding the previous one expires, P after that
burst began, never earlier (later by at most the throttle in force then), so
bursts start at t0 + k x P or a little after.  Putting the window's edges a
second before two of those instants keeps the initial burst out and exactly
the next two bursts in, however long a burst takes to deliver (under load
seconds) and however far the burst instants drift; over two whole periods the
average is the quota.  The assertion allows 10%.

Producers send 1000-byte values, with batches of at most 64 KiB (the
quota's granularity is one request: a 1 MB batch adds up to 10% of a
1 MB/s quota per violation), and consumers fetch at most 64 KiB per
partition for the same reason.  Clients start a few seconds apart so that
their bursts do not compete for the CPU (the broker and the clients share the
test process).

Run with ``-s`` to see every measured rate.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaProducer

from minikafka.broker.config import BrokerConfig
from minikafka.client.quotas_cli import alter as cli_alter
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread
from minikafka.broker.request import ResponseObserver
from waiting import wait_for

pytestmark = [pytest.mark.clients, pytest.mark.slow]

MiB = 1024 * 1024
WINDOW_NUM = 10
WINDOW_S = 1
PERIOD = WINDOW_NUM * WINDOW_S            # 10 s
WARMUP = PERIOD - 1.0                     # 9 s: the first period, less a second
MEASURE = 2 * PERIOD                      # 20 s: two whole periods
RUN = WARMUP + MEASURE + 0.5              # how long each client runs after its first delivery
TOLERANCE = 0.10
PAYLOAD = b"q" * 1000


def quota_broker(*quotas: str) -> BrokerThread:
    return BrokerThread(BrokerConfig(port=0, group_initial_rebalance_delay_ms=0, quota_window_num=WINDOW_NUM,
                                     quota_window_size_seconds=WINDOW_S, client_quotas=list(quotas)))


# -- measuring ------------------------------------------------------------------------------------

class Timeline:
    """Bytes a client saw delivered (or consumed), with the time it saw them."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int]] = []  # list.append is atomic: callbacks may run on any thread

    def add(self, nbytes: int) -> None:
        self.events.append((time.monotonic(), nbytes))

    @property
    def t0(self) -> float | None:
        return self.events[0][0] if self.events else None

    def total(self, start: float, end: float) -> int:
        """Bytes seen in [t0 + start, t0 + end)."""
        t0 = self.t0
        assert t0 is not None, "nothing delivered"
        return sum(n for t, n in self.events if t0 + start <= t < t0 + end)

    def rate(self, start: float = WARMUP, end: float = WARMUP + MEASURE) -> float:
        return self.total(start, end) / (end - start)

    def per_second(self, seconds: int) -> list[float]:
        return [round(self.total(i, i + 1) / 1e6, 2) for i in range(seconds)]


class BrokerLog:
    """What the broker answered: (time, client id, api key, throttle_time_ms) per request."""

    def __init__(self) -> None:
        self.entries: list[tuple[float, str | None, int, int]] = []

    def __call__(self, ctx, frame, response) -> None:  # a Broker.request_observers callable
        self.entries.append((time.monotonic(), ctx.client_id, ctx.api_key, ctx.throttle_time_ms))

    def throttles(self, client_id: str, api_key: int, since: float = 0.0) -> list[tuple[float, int]]:
        return [(t, th) for t, c, k, th in list(self.entries) if c == client_id and k == api_key and t >= since]


def check_rate(name: str, timeline: Timeline, quota: float) -> float:
    """Print the measured rate against the quota; assert it is within 10%."""
    rate = timeline.rate()
    print(f"\n{name}: {rate / MiB:.3f} MiB/s over {MEASURE:.0f} s after {WARMUP:.0f} s warm-up, "
          f"quota {quota / MiB:.3f} MiB/s -> {rate / quota:.3f} x quota")
    print(f"  MB per second from the first delivery: {timeline.per_second(int(RUN))}")
    assert abs(rate / quota - 1) <= TOLERANCE, f"{name}: {rate / quota:.3f} x quota"
    return rate


# -- clients ------------------------------------------------------------------------------------

class Worker(threading.Thread):
    """A client on its own thread; failures are re-raised by :meth:`result`."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.timeline = Timeline()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # reported to the test thread
            self.error = exc

    def work(self) -> None:
        raise NotImplementedError

    def running(self, started: float, limit: float = RUN) -> bool:
        """Until ``limit`` s after the first delivery (or 30 s without any)."""
        t0 = self.timeline.t0
        return time.monotonic() < (t0 + limit if t0 is not None else started + 30)

    def result(self, timeout: float = 120) -> "Worker":
        self.join(timeout)
        assert not self.is_alive(), f"{self.name} did not finish"
        if self.error is not None:
            raise self.error
        return self


class CkProducer(Worker):
    """A confluent-kafka producer running flat out; keeps librdkafka's statistics."""

    def __init__(self, bootstrap: str, client_id: str, topic: str, run: float = RUN, **conf) -> None:
        super().__init__(client_id)
        self.run_for = run
        self.stats: list[dict] = []
        self.stop = threading.Event()
        self.conf = {
            "bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 5,
            "compression.type": "none", "batch.size": 65536, "queue.buffering.max.kbytes": 2048,
            "max.in.flight.requests.per.connection": 5, "statistics.interval.ms": 1000,
            "stats_cb": lambda s: self.stats.append(json.loads(s)), **conf,
        }
        self.topic = topic

    def work(self) -> None:
        p = Producer(self.conf)
        started = time.monotonic()

        def delivered(err, msg) -> None:
            if err is None:
                self.timeline.add(len(msg.value()))

        while self.running(started, self.run_for) and not self.stop.is_set():
            try:
                p.produce(self.topic, PAYLOAD, on_delivery=delivered)
            except BufferError:
                p.poll(0.005)
            p.poll(0)
        p.purge(in_queue=True, in_flight=self.stop.is_set())
        p.flush(30)
        # One more statistics interval, so the last responses are in the statistics.
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            p.poll(0.1)

    def librdkafka_throttle(self) -> tuple[int, int]:
        """(sum, count) of the throttle times librdkafka reported, over all statistics windows."""
        total = count = 0
        for s in self.stats:
            for b in s["brokers"].values():
                total += b["throttle"]["sum"]
                count += b["throttle"]["cnt"]
        return total, count


class KpProducer(Worker):
    """A kafka-python producer running flat out (at most 1000 values awaiting delivery)."""

    def __init__(self, bootstrap: str, client_id: str, topic: str) -> None:
        super().__init__(client_id)
        self.bootstrap = bootstrap
        self.topic = topic

    def work(self) -> None:
        p = KafkaProducer(bootstrap_servers=self.bootstrap, client_id=self.name, acks=1, linger_ms=5,
                          enable_idempotence=False)
        window = threading.BoundedSemaphore(1000)  # kafka-python 3 has no buffer.memory: bound it here

        def ok(_md) -> None:
            self.timeline.add(len(PAYLOAD))
            window.release()

        def failed(_exc) -> None:
            window.release()

        started = time.monotonic()
        while self.running(started):
            if window.acquire(timeout=0.1):
                p.send(self.topic, PAYLOAD).add_callback(ok).add_errback(failed)
        p.close(timeout=30)


class CkConsumer(Worker):
    """A confluent-kafka consumer reading a prefilled partition as fast as it may."""

    def __init__(self, bootstrap: str, client_id: str, topic: str) -> None:
        super().__init__(client_id)
        self.conf = {
            "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"{client_id}-group",
            "enable.auto.commit": False, "max.partition.fetch.bytes": 65536, "fetch.wait.max.ms": 100,
            "queued.max.messages.kbytes": 2048,
        }
        self.topic = topic
        self.count = 0

    def work(self) -> None:
        c = Consumer(self.conf)
        c.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        started = time.monotonic()
        try:
            while self.running(started):
                for m in c.consume(1000, 0.1):
                    if m.error() is None:
                        self.timeline.add(len(m.value()))
                        self.count += 1
        finally:
            c.close()


def prefill(bootstrap: str, topic: str, n: int) -> None:
    """``n`` values of 1000 bytes in batches of at most 16 KiB (fetches stay fine-grained)."""
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "prefill", "linger.ms": 20, "batch.size": 16384,
                  "compression.type": "none"})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, PAYLOAD)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0


# -- (a) + (b): a confluent-kafka producer and consumer on one broker ---------------------------------

PREFILL = 60_000  # 60 MB: more than a consumer at 1 MiB/s takes in 30 s, bursts included (about 32 MB)


@dataclass
class ConfluentRun:
    producer: CkProducer
    consumer: CkConsumer
    log: BrokerLog
    metrics: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def confluent_run() -> ConfluentRun:
    """One broker, one warm-up: a producer under producer_byte_rate 1 MiB/s and, 5 s later (half a
    period, so their bursts alternate), a consumer under consumer_byte_rate 1 MiB/s."""
    with quota_broker(f"client-id=ck-producer:producer_byte_rate={MiB}",
                      f"client-id=ck-consumer:consumer_byte_rate={MiB}") as b:
        prefill(b.bootstrap, "to-consume", PREFILL)
        log = BrokerLog()
        b.call(b.broker.observe, ResponseObserver(log))
        producer = CkProducer(b.bootstrap, "ck-producer", "produced")
        consumer = CkConsumer(b.bootstrap, "ck-consumer", "to-consume")
        producer.start()
        time.sleep(PERIOD / 2)  # fixed wait: staggered starts are the scenario (bursts alternate)
        consumer.start()
        producer.result()
        consumer.result()
        return ConfluentRun(producer, consumer, log, b.call(b.broker.metrics))


def test_confluent_producer_held_to_produce_quota(confluent_run):
    """1000-byte values flat out under a 1 MiB/s client-id quota: 1 MiB/s within 10% over two
    periods (see the module docstring for the warm-up and the window)."""
    check_rate("confluent-kafka producer, client-id quota", confluent_run.producer.timeline, MiB)


def test_librdkafka_statistics_report_the_throttles_the_broker_sent(confluent_run):
    """librdkafka's statistics (brokers[*].throttle, a window per statistics interval, holding the
    non-zero throttle_time_ms of the responses it read) add up to what the broker sent."""
    producer, log = confluent_run.producer, confluent_run.log
    sent = [th for _, th in log.throttles("ck-producer", ApiKey.PRODUCE) if th > 0]
    reported_sum, reported_cnt = producer.librdkafka_throttle()
    metric = confluent_run.metrics["Produce:client-id=ck-producer,user=/throttle-time"]
    print(f"\nbroker sent {len(sent)} throttled Produce responses, {sum(sent)} ms in all "
          f"(max {max(sent, default=0)} ms); librdkafka statistics: cnt {reported_cnt}, sum {reported_sum} ms; "
          f"broker throttle-time metric (avg over the last {WINDOW_NUM} windows) {metric:.0f} ms")
    assert sent, "the producer was never throttled"
    assert (reported_sum, reported_cnt) == (sum(sent), len(sent))
    # Every statistics window's max is a throttle time the broker sent.
    maxima = {b["throttle"]["max"] for s in producer.stats for b in s["brokers"].values() if b["throttle"]["cnt"]}
    assert maxima <= set(sent)


def test_confluent_consumer_held_to_consumer_quota(confluent_run):
    """A consumer reading a prefilled 60 MB partition under a 1 MiB/s consumer_byte_rate: 1 MiB/s
    of values within 10% (the quota counts whole fetch responses, so values come a little under)."""
    consumer, log = confluent_run.consumer, confluent_run.log
    check_rate("confluent-kafka consumer, client-id quota", consumer.timeline, MiB)
    print(f"  consumed {consumer.count} of the {PREFILL} prefilled values")
    assert consumer.count < PREFILL, "the consumer ran out of data: the rate was not the quota's doing"
    fetch_throttles = [th for _, th in log.throttles("ck-consumer", ApiKey.FETCH) if th > 0]
    print(f"  broker throttled {len(fetch_throttles)} fetches (empty responses), {sum(fetch_throttles)} ms in all")
    assert fetch_throttles


# -- (c): kafka-python under a default quota; two clients with their own quotas ------------------------

def test_default_quota_and_per_client_quotas_at_the_same_time(caplog):
    """A kafka-python producer falls under the /clients/<default> quota (0.5 MiB/s); at the same
    time a kafka-python producer with a 0.25 MiB/s client-id quota and a confluent-kafka producer
    with a 1 MiB/s one are each held to their own.  Starts are staggered by a third of a period.

    The quotas are modest because everything shares two CPUs and the GIL: kafka-python builds
    records in Python, and a burst that lasts longer than half a period would spill over the
    edges of the measured window."""
    caplog.set_level(logging.ERROR, logger="kafka")  # kafka-python logs every throttled response
    default, small, big = MiB // 2, MiB // 4, MiB
    with quota_broker(f"client-id=<default>:producer_byte_rate={default}",
                      f"client-id=kp-small:producer_byte_rate={small}",
                      f"client-id=ck-big:producer_byte_rate={big}") as b:
        workers = [CkProducer(b.bootstrap, "ck-big", "c"), KpProducer(b.bootstrap, "kp-default", "a"),
                   KpProducer(b.bootstrap, "kp-small", "b")]
        for i, w in enumerate(workers):
            if i:
                time.sleep(PERIOD / 3)  # fixed wait: staggered starts are the scenario (by a third of a quota period)
            w.start()
        for w in workers:
            w.result()
        metrics = b.call(b.broker.metrics)
    # Each client id has its own sensor (a /clients/<default> quota is per client id).
    for cid in ("ck-big", "kp-default", "kp-small"):
        assert f"Produce:client-id={cid},user=/byte-rate" in metrics
    failures = []
    for w, quota, what in ((workers[1], default, "kafka-python producer, <default> client-id quota"),
                           (workers[2], small, "kafka-python producer, its own client-id quota"),
                           (workers[0], big, "confluent-kafka producer, its own client-id quota")):
        try:
            check_rate(what, w.timeline, quota)
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, failures


# -- (d): a quota changed at run time ------------------------------------------------------------

def byte_rate(b: BrokerThread, client_id: str, window: float = WINDOW_S) -> float:
    """The broker's byte-rate metric for ``client_id`` averaged over ``window`` seconds.

    The metric itself is a saw-tooth between the bound and bound x N/(N-1) under steady
    throttling (Rate pads the elapsed time to whole windows); 20 readings smooth that out.
    """
    name = f"Produce:client-id={client_id},user=/byte-rate"
    readings = []
    for _ in range(20):
        readings.append(b.call(b.broker.metrics)[name])
        time.sleep(window / 20)  # fixed wait: sampling a wall-clock rate over ``window``
    return sum(readings) / len(readings)


def first_request_after(log: BrokerLog, client_id: str, since: float, timeout: float = 5) -> tuple[float, int]:
    """(time, throttle_time_ms) of the first Produce from ``client_id`` the broker handled after ``since``."""
    return wait_for(lambda: log.throttles(client_id, ApiKey.PRODUCE, since=since), timeout,
                    "a produce request after the change", interval=0.01)[0]


def test_quota_change_at_run_time_takes_effect_within_one_window():
    """AlterClientQuotas (through `minikafka quotas alter`'s code) moves the bound of the live
    sensor, so the very next request is judged against the new quota.  The throttle in force
    when the quota changes still runs out (at most about one window here), so "within one
    window" is counted from the first request the broker handles after the change.

    0.5 MiB/s -> 2 MiB/s: within one window of that request the producer sends more than the
    old quota allowed in a whole period, and the broker's byte-rate metric reaches the new quota.
    2 MiB/s -> 0.5 MiB/s: that request's response carries Kafka's throttle for the measured rate
    against the new bound, (rate - 0.5) / 0.5 x window, about 30 s with a 10 s window, and
    nothing more gets through: the rate after the change is 0, under the new quota.
    All of it happens in the first period, before the initial burst's sample expires.
    """
    low, high = MiB // 2, 2 * MiB
    with quota_broker(f"client-id=rt:producer_byte_rate={low}") as b:
        log = BrokerLog()
        b.call(b.broker.observe, ResponseObserver(log))
        producer = CkProducer(b.bootstrap, "rt", "rt", run=60.0,
                              **{"request.timeout.ms": 120000, "message.timeout.ms": 0})
        producer.start()
        tl = producer.timeline
        try:
            wait_for(lambda: tl.t0 is not None or not producer.is_alive(), 30, "the first delivery")
            assert tl.t0 is not None, producer.error
            # The initial burst is over: the broker throttles the producer.
            wait_for(lambda: any(th > 0 for _, th in log.throttles("rt", ApiKey.PRODUCE)), 30, "a throttled produce")
            before = byte_rate(b, "rt")
            print(f"\nbefore: byte-rate metric {before / MiB:.3f} MiB/s under a {low / MiB} MiB/s quota")
            assert abs(before / low - 1) <= 0.15

            trio.run(cli_alter, b.bootstrap, "client-id=rt", [f"producer_byte_rate={high}"], [], False)
            changed = time.monotonic()
            first, _ = first_request_after(log, "rt", changed)
            time.sleep(max(0.0, first + WINDOW_S - time.monotonic()) + 0.05)  # fixed wait: the measured quota window
            in_window = tl.total(first - tl.t0, first + WINDOW_S - tl.t0)
            raised = byte_rate(b, "rt")
            print(f"raised to {high / MiB} MiB/s: first request {first - changed:.2f} s after the change; "
                  f"{in_window / 1e6:.2f} MB delivered in the window after it (the old quota allowed "
                  f"{low * PERIOD / 1e6:.2f} MB per period); byte-rate metric then {raised / MiB:.3f} MiB/s")
            assert first - changed < 1.5 * WINDOW_S
            assert in_window > low * PERIOD
            assert abs(raised / high - 1) <= 0.15

            rate_at_change = byte_rate(b, "rt", 0.5)
            trio.run(cli_alter, b.bootstrap, "client-id=rt", [f"producer_byte_rate={low}"], [], False)
            lowered = time.monotonic()
            first, throttle = first_request_after(log, "rt", lowered)
            # Kafka's throttle against the new bound; the window is between N-1 and N windows.
            expect_lo = (rate_at_change / low - 1) * (WINDOW_NUM - 1) * 1000 * 0.8
            expect_hi = (rate_at_change / low - 1) * WINDOW_NUM * 1000 * 1.2
            time.sleep(max(0.0, first + 3 * WINDOW_S - time.monotonic()))  # fixed wait: the measured 3 windows
            after = tl.total(first + 0.1 - tl.t0, first + 3 * WINDOW_S - tl.t0)
            print(f"lowered to {low / MiB} MiB/s: first request {first - lowered:.2f} s after the change, "
                  f"throttled {throttle} ms (byte rate {rate_at_change / MiB:.3f} MiB/s against "
                  f"{low / MiB} MiB/s: expected {expect_lo:.0f}-{expect_hi:.0f} ms); delivered in the next "
                  f"3 s: {after} bytes -> {after / 3 / MiB:.3f} MiB/s")
            assert first - lowered < 1.5 * WINDOW_S
            assert expect_lo <= throttle <= expect_hi
            assert after <= low * 3 * WINDOW_S
        finally:
            producer.stop.set()
            producer.result()
