"""Tests for minikafka.metrics (a model of org.apache.kafka.common.metrics), hand-computed."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.common.clock import ManualClock
from minikafka.metrics import (Avg, CumulativeCount, CumulativeSum, KafkaMetric, Max, Meter, MetricConfig,
                               MetricName, Metrics, Min, Quota, QuotaViolationError, Rate, SimpleRate,
                               TokenBucket, Value, WindowedCount, WindowedSum, bounded_throttle_time_ms,
                               java_round, throttle_time_ms)


def name(n: str, **tags: str) -> MetricName:
    return MetricName.of(n, "test", **tags)


# --------------------------------------------------------------------------- throttle time (SPEC 4)

def test_spec_example_young_metric_throttles_500ms() -> None:
    # 6 samples x 1 s; 55e6 bytes at t=0.  window_size(0) = 0 elapsed, 0 full windows < 5 = samples-1,
    # so 0 + 5 * 1000 = 5000 ms; rate = 55e6 / 5 s = 11e6 B/s > 10e6 quota.
    # throttle = (11e6 - 10e6) / 10e6 * 5000 = 500 ms.
    clock = ManualClock(0)
    metrics = Metrics(clock=clock)
    cfg = MetricConfig(samples=6, time_window_ms=1000, quota=Quota.upper_bound(10e6))
    sensor = metrics.sensor("produce-user1", cfg)
    sensor.add(name("byte-rate", user="u1"), Rate())
    with pytest.raises(QuotaViolationError) as ei:
        sensor.record(55e6, 0)
    e = ei.value
    assert e.value == pytest.approx(11e6) and e.bound == 10e6
    assert isinstance(e.metric, KafkaMetric) and e.metric.metric_name == name("byte-rate", user="u1")
    assert throttle_time_ms(e, 0) == 500
    assert bounded_throttle_time_ms(e, 0, 300) == 300
    assert bounded_throttle_time_ms(e, 0, 10_000) == 500


def test_spec_example_over_real_elapsed_5s() -> None:
    # 3 samples x 2.5 s. 30e6 B at t=0 (sample A starts 0), 25e6 B at t=2500 (A complete -> B starts 2500).
    # At t=5000: expire age 7500, A is 5000 old -> kept; elapsed = 5000 - 0 = 5000, full = 2 = samples-1
    # so no padding: window 5000 ms, rate = 55e6 / 5 = 11e6; throttle = 0.1 * 5000 = 500 ms.
    clock = ManualClock(0)
    metrics = Metrics(clock=clock)
    cfg = MetricConfig(samples=3, time_window_ms=2500, quota=Quota.upper_bound(10e6))
    sensor = metrics.sensor("s", cfg)
    sensor.add(name("byte-rate"), Rate())
    sensor.record(30e6, 0, check_quotas=False)
    sensor.record(25e6, 2500, check_quotas=False)
    rate = metrics.metric(name("byte-rate"))
    assert rate is not None
    assert rate.measurable.window_size(cfg, 5000) == 5000  # type: ignore[attr-defined]
    clock.set_time_ms(5000)
    assert rate.value() == pytest.approx(11e6)
    with pytest.raises(QuotaViolationError) as ei:
        sensor.check_quotas()
    assert throttle_time_ms(ei.value, 5000) == 500


def test_java_round_half_up() -> None:
    assert java_round(2.5) == 3 and java_round(-2.5) == -2 and java_round(2.4999) == 2 and java_round(0.5) == 1


# --------------------------------------------------------------------------- Rate.window_size

def test_window_size_young_metric_pads_to_samples_minus_one_windows() -> None:
    cfg = MetricConfig(samples=11, time_window_ms=1000)
    r = Rate()
    r.record(cfg, 100.0, 100)
    # elapsed 600-100 = 500, full 0 < 10 -> 500 + 10*1000 = 10500
    assert r.window_size(cfg, 600) == 10500
    assert r.measure(cfg, 600) == pytest.approx(100 / 10.5)
    # exactly one window later: elapsed 1000, full 1 -> 1000 + 9*1000 = 10000
    assert r.window_size(cfg, 1100) == 10000


def test_window_size_at_window_boundaries_drops_oldest() -> None:
    cfg = MetricConfig(samples=3, time_window_ms=1000)
    r = Rate()
    for t, v in ((0, 1.0), (1000, 2.0), (2000, 4.0)):  # each record completes the previous sample
        r.record(cfg, v, t)
    assert [s.last_window_ms for s in r.stat.samples] == [0, 1000, 2000]
    # t=2999: sample@0 is 2999 old < 3000 -> kept; elapsed 2999, full 2 -> no padding
    assert r.window_size(cfg, 2999) == 2999
    assert r.measure(cfg, 2999) == pytest.approx(7 / 2.999)
    # t=3000: sample@0 is exactly 3000 = samples*window old -> reset to start at 3000 (value 0);
    # oldest is now sample@1000: elapsed 2000, full 2 = samples-1 -> 2000; rate (2+4)/2 s = 3
    assert r.window_size(cfg, 3000) == 2000
    assert r.measure(cfg, 3000) == pytest.approx(3.0)
    assert r.stat.samples[0].last_window_ms == 3000 and r.stat.samples[0].value == 0.0


def test_window_size_is_at_least_one_ms() -> None:
    # samples=1: min full windows 0, so Kafka would give 0 ms at the sample's first instant; we clamp to 1.
    cfg = MetricConfig(samples=1, time_window_ms=1000)
    r = Rate()
    r.record(cfg, 5.0, 5)
    assert r.window_size(cfg, 5) == 1
    assert r.measure(cfg, 5) == pytest.approx(5 / 0.001)
    assert r.window_size(cfg, 505) == 500


def test_rate_units_and_occurrence_rate() -> None:
    cfg = MetricConfig(samples=2, time_window_ms=1000)
    ms = Rate("milliseconds")
    occ = Rate(WindowedCount())
    for t in (0, 100, 200, 300):
        ms.record(cfg, 50.0, t)
        occ.record(cfg, 50.0, t)
    # window: elapsed 300, full 0 < 1 -> 1300 ms.  200 / 1300 per ms; 4 events / 1.3 s
    assert ms.measure(cfg, 300) == pytest.approx(200 / 1300)
    assert occ.measure(cfg, 300) == pytest.approx(4 / 1.3)
    assert Rate().unit_name() == "second"


def test_simple_rate_window_is_at_least_one_window() -> None:
    cfg = MetricConfig(samples=11, time_window_ms=1000)
    r = SimpleRate()
    r.record(cfg, 100.0, 0)
    assert r.window_size(cfg, 500) == 1000 and r.measure(cfg, 500) == pytest.approx(100.0)
    assert r.window_size(cfg, 5000) == 5000 and r.measure(cfg, 5000) == pytest.approx(20.0)


# --------------------------------------------------------------------------- samples

def test_sample_advance_and_reuse() -> None:
    cfg = MetricConfig(samples=2, time_window_ms=1000)
    s = WindowedSum()
    s.record(cfg, 1.0, 0)        # slot 0 starts at 0
    s.record(cfg, 2.0, 999)      # 999 - 0 < 1000: same sample
    assert len(s.samples) == 1 and s.samples[0].value == 3.0 and s.samples[0].event_count == 2
    s.record(cfg, 4.0, 1000)     # complete -> current = 1, new slot starting 1000
    assert len(s.samples) == 2 and s.current_index == 1
    s.record(cfg, 8.0, 2500)     # complete -> current = (1+1) % 2 = 0: slot 0 reset at 2500 and reused
    assert len(s.samples) == 2 and s.current_index == 0
    assert (s.samples[0].last_window_ms, s.samples[0].value, s.samples[0].event_count) == (2500, 8.0, 1)
    assert s.samples[0].last_event_ms == 2500
    # at 2500 slot 1 (start 1000) is 1500 old < 2000: sum = 4 + 8
    assert s.measure(cfg, 2500) == 12.0


def test_event_window_completes_samples() -> None:
    cfg = MetricConfig(samples=2, time_window_ms=10_000, event_window=2)
    c = WindowedCount()
    for _ in range(3):
        c.record(cfg, 7.0, 0)    # third event: sample 0 has 2 events -> advance
    assert [x.event_count for x in c.samples] == [2, 1]
    for _ in range(2):
        c.record(cfg, 7.0, 0)    # sample 1 reaches 2 with the 4th; the 5th reuses slot 0
    assert [x.event_count for x in c.samples] == [1, 2]
    assert c.measure(cfg, 0) == 3.0


def test_purge_after_silence() -> None:
    cfg = MetricConfig(samples=2, time_window_ms=1000)
    r = Rate()
    r.record(cfg, 100.0, 0)
    # t=1999: age 1999 < 2000 kept; elapsed 1999, full 1 = samples-1 -> 100 / 1.999 s
    assert r.measure(cfg, 1999) == pytest.approx(100 / 1.999)
    # t=2000: age 2000 >= 2000 -> reset at 2000; window 0 + 1*1000 -> rate 0
    assert r.measure(cfg, 2000) == 0.0
    # new traffic starts a young window: sample (reset at 2000) takes it; window 500 + 1000 = 1500
    r.record(cfg, 30.0, 2500)
    assert r.measure(cfg, 2500) == pytest.approx(30 / 1.5)


def test_overlapping_mode_keeps_sample_with_recent_events() -> None:
    # Kafka >= 3.8: samples+1 slots, purge by last event.  Events of 1.0 at 0, 999, 1000; measure at 2500.
    cfg = MetricConfig(samples=2, time_window_ms=1000)
    classic, modern = Rate(), Rate(stat=WindowedSum(overlapping=True))
    for t in (0, 999, 1000):
        classic.record(cfg, 1.0, t)
        modern.record(cfg, 1.0, t)
    # classic: sample@0 started 2500 ago >= 2000 -> purged; oldest @1000: window 1500, rate 1 / 1.5
    assert classic.measure(cfg, 2500) == pytest.approx(1 / 1.5)
    # modern: sample@0's last event (999) is 1501 ago < 2000 -> kept; window 2500, rate 3 / 2.5
    assert modern.measure(cfg, 2500) == pytest.approx(3 / 2.5)
    for t in (2000, 3000):
        modern.record(cfg, 1.0, t)
    assert len(modern.stat.samples) == 3  # one extra slot


def test_kafka_quota_defaults_steady_rate() -> None:
    # quota.window.num = 11, quota.window.size.seconds = 1; 1000 B every 100 ms = 10 kB/s.
    cfg = MetricConfig(samples=11, time_window_ms=1000)
    r = Rate()
    r.record(cfg, 1000.0, 0)
    # first instant: window padded to 10 windows -> 1000 / 10 s = 100 B/s
    assert r.measure(cfg, 0) == pytest.approx(100.0)
    for t in range(100, 20_001, 100):
        r.record(cfg, 1000.0, t)
    # at 20000 the ring holds samples starting 10000..20000 (11 slots); the one at 20000 has one event.
    # elapsed 10000, full 10 -> window 10 s; sum = 10 full seconds * 10 kB + 1 kB = 101 kB -> 10100 B/s
    assert r.window_size(cfg, 20_000) == 10_000
    assert r.measure(cfg, 20_000) == pytest.approx(10_100.0)
    for t in range(20_100, 20_901, 100):
        r.record(cfg, 1000.0, t)
    # at 20900: sample@20000 has 10 events; sum 110 kB over 10.9 s
    assert r.measure(cfg, 20_900) == pytest.approx(110_000 / 10.9)


# --------------------------------------------------------------------------- other stats

def test_avg_max_min_count_sum_value() -> None:
    clock = ManualClock(0)
    m = Metrics(MetricConfig(samples=2, time_window_ms=1000), clock=clock)
    s = m.sensor("s")
    for n, stat in (("avg", Avg()), ("max", Max()), ("min", Min()), ("count", WindowedCount()),
                    ("wsum", WindowedSum()), ("total", CumulativeSum()), ("n", CumulativeCount()),
                    ("last", Value())):
        s.add(name(n), stat)

    def v(n: str) -> float:
        metric = m.metric(name(n))
        assert metric is not None
        return metric.value()

    assert math.isnan(v("avg")) and math.isnan(v("max")) and math.isnan(v("min")) and v("count") == 0
    s.record(1.0, 0)
    s.record(5.0, 500)
    s.record(3.0, 1000)          # second sample
    clock.set_time_ms(1000)
    assert (v("avg"), v("max"), v("min"), v("count"), v("wsum")) == (3.0, 5.0, 1.0, 3.0, 9.0)
    assert (v("total"), v("n"), v("last")) == (9.0, 3.0, 3.0)
    clock.set_time_ms(2000)             # first sample (start 0) is 2000 = 2 * 1000 old: purged
    assert (v("avg"), v("max"), v("min"), v("count"), v("wsum")) == (3.0, 3.0, 3.0, 1.0, 3.0)
    clock.set_time_ms(3000)             # everything purged
    assert math.isnan(v("avg")) and math.isnan(v("max")) and math.isnan(v("min"))
    assert (v("count"), v("wsum"), v("total"), v("n"), v("last")) == (0.0, 0.0, 9.0, 3.0, 3.0)


def test_max_of_negative_values_and_min_of_large() -> None:
    cfg = MetricConfig()
    mx, mn = Max(), Min()
    for x in (-5.0, -2.0):
        mx.record(cfg, x, 0)
        mn.record(cfg, x * 1e300, 0)
    assert mx.measure(cfg, 0) == -2.0 and mn.measure(cfg, 0) == -5e300


def test_meter_registers_rate_and_total() -> None:
    clock = ManualClock(0)
    m = Metrics(MetricConfig(samples=2, time_window_ms=1000), clock=clock)
    s = m.sensor("bytes")
    assert s.add_meter(name("byte-rate"), name("byte-total"))
    c = m.sensor("reqs")
    c.add_meter(name("request-rate"), name("request-total"), rate_stat=WindowedCount())
    for t in (0, 500):
        s.record(300.0, t)
        c.record(300.0, t)
    clock.set_time_ms(500)
    snap = m.snapshot()
    # window 500 + 1000 = 1.5 s
    assert snap["test:/byte-rate"] == pytest.approx(600 / 1.5) and snap["test:/byte-total"] == 600.0
    assert snap["test:/request-rate"] == pytest.approx(2 / 1.5) and snap["test:/request-total"] == 2.0
    with pytest.raises(ValueError):
        Meter(name("a"), name("b"), rate_stat=Avg())  # type: ignore[arg-type]


def test_token_bucket_quota() -> None:
    # quota 5/s, 2 samples x 1 s -> burst 10 credits.  Bucket starts empty at t=0.
    clock = ManualClock(0)
    m = Metrics(clock=clock)
    s = m.sensor("mutations", MetricConfig(samples=2, time_window_ms=1000, quota=Quota.upper_bound(5)))
    s.add(name("tokens"), TokenBucket())
    with pytest.raises(QuotaViolationError) as ei:
        s.record(12.0, 0)        # credits 0 - 12 = -12 < 0
    assert ei.value.value == -12.0
    s.check_quotas(2400)         # refilled 5 * 2.4 = 12 -> 0, not below zero
    metric = m.metric(name("tokens"))
    assert metric is not None and metric.measurable_value(10_000) == 10.0  # capped at burst


# --------------------------------------------------------------------------- sensors

def test_violation_recorded_then_unrecorded() -> None:
    clock = ManualClock(0)
    m = Metrics(clock=clock)
    cfg = MetricConfig(samples=2, time_window_ms=1000, quota=Quota.upper_bound(10))
    s = m.sensor("q", cfg)
    s.add(name("rate"), Rate())
    rate = m.metric(name("rate"))
    assert rate is not None
    s.record(5.0, 0)             # 5 / 1 s (young window padded to 1000 ms) = 5 <= 10
    with pytest.raises(QuotaViolationError) as ei:
        s.record(10.0, 0)        # 15 / 1 s > 10: raised *after* recording
    assert ei.value.value == 15.0 and rate.measurable_value(0) == 15.0
    assert throttle_time_ms(ei.value, 0) == 500   # (15 - 10) / 10 * 1000
    # ClientQuotaManager.unrecordQuotaSensor: record(-value, check_quotas=False)
    s.record(-10.0, 0, check_quotas=False)
    assert rate.measurable_value(0) == 5.0
    s.check_quotas(0)


def test_lower_bound_quota_and_runtime_config_change() -> None:
    clock = ManualClock(0)
    m = Metrics(clock=clock)
    s = m.sensor("low")
    s.add(name("last"), Value(), MetricConfig(quota=Quota.lower_bound(3)))
    s.record(3.0, 0)
    with pytest.raises(QuotaViolationError):
        s.record(2.0, 0)
    metric = m.metric(name("last"))
    assert metric is not None
    metric.config = MetricConfig(quota=Quota.lower_bound(1))   # Kafka: metric.config(newConfig)
    s.record(2.0, 0)
    assert Quota.upper_bound(1).acceptable(1.0) and not Quota.upper_bound(1).acceptable(1.01)
    assert not Quota.upper_bound(1).acceptable(math.nan)


def test_parent_sensors() -> None:
    clock = ManualClock(0)
    m = Metrics(MetricConfig(samples=2, time_window_ms=1000), clock=clock)
    parent = m.sensor("parent")
    parent.add(name("p-sum"), WindowedSum(), MetricConfig(samples=2, time_window_ms=1000, quota=Quota.upper_bound(10)))
    child = m.sensor("child", parents=[parent])
    child.add(name("c-sum"), WindowedSum(), MetricConfig(samples=2, time_window_ms=1000, quota=Quota.upper_bound(5)))
    child.record(4.0, 0)
    assert m.snapshot(0) == {"test:/c-sum": 4.0, "test:/p-sum": 4.0}
    with pytest.raises(QuotaViolationError) as ei:
        child.record(2.0, 0)     # child 6 > 5 raises before the parent records
    assert ei.value.metric.metric_name == name("c-sum")
    assert m.snapshot(0) == {"test:/c-sum": 6.0, "test:/p-sum": 4.0}
    other = m.sensor("other", parents=[parent])
    with pytest.raises(QuotaViolationError) as ei:
        other.record(7.0, 0)     # parent 11 > 10
    assert ei.value.metric.metric_name == name("p-sum")
    # Kafka's checkForest shares one visited set across branches, so a diamond is rejected as "circular"
    g = m.sensor("g")
    a, b = m.sensor("a", parents=[g]), m.sensor("b", parents=[g])
    with pytest.raises(ValueError, match="Circular"):
        m.sensor("diamond", parents=[a, b])
    assert m.get_sensor("diamond") is None


def test_recording_level() -> None:
    m = Metrics(clock=ManualClock(0))
    dbg = m.sensor("dbg", recording_level="DEBUG")
    dbg.add(name("n"), CumulativeCount())
    dbg.record(1.0, 0)
    assert m.snapshot(0)["test:/n"] == 0.0
    m2 = Metrics(MetricConfig(recording_level="DEBUG"), clock=ManualClock(0))
    s2 = m2.sensor("dbg", recording_level="DEBUG")
    s2.add(name("n"), CumulativeCount())
    s2.record(1.0, 0)
    assert m2.snapshot(0)["test:/n"] == 1.0


def test_expired_sensors_removed_with_children_and_metrics() -> None:
    clock = ManualClock(0)
    m = Metrics(clock=clock)
    parent = m.sensor("parent", inactive_sensor_expiration_ms=1000)
    parent.add(name("p"), CumulativeSum())
    child = m.sensor("child", parents=[parent])            # never expires by itself
    child.add(name("c"), CumulativeSum())
    keep = m.sensor("keep")
    keep.add(name("k"), CumulativeSum())
    parent.record(1.0, 500)
    assert m.sensor("parent") is parent and not parent.has_expired(1500)   # 1000 > 1000 is false
    assert m.remove_expired_sensors(1500) == []
    assert parent.has_expired(1501)
    clock.set_time_ms(1501)
    assert not parent.add(name("late"), CumulativeSum())                  # expired sensor refuses
    assert m.remove_expired_sensors() == ["child", "parent"]
    assert m.get_sensor("parent") is None and m.get_sensor("child") is None and m.get_sensor("keep") is keep
    assert set(m.metrics) == {name("k")}
    assert m.sensor("parent") is not parent                               # re-created fresh


def test_registry_metric_names_and_gauges() -> None:
    clock = ManualClock(7)
    m = Metrics(clock=clock)
    a = MetricName("byte-rate", "Produce", (("user", "u"), ("client-id", "c")), "desc")
    b = MetricName("byte-rate", "Produce", (("client-id", "c"), ("user", "u")))
    assert a == b and hash(a) == hash(b) and str(a) == "Produce:user=u,client-id=c/byte-rate"
    assert MetricName.of("x", "g", client_id="c", user="u").tags == (("client-id", "c"), ("user", "u"))
    m.add_metric(a, lambda: 42)
    m.add_metric(name("now"), lambda config, now: now)
    with pytest.raises(ValueError):
        m.add_metric(b, lambda: 0)
    assert m.add_metric_if_absent(b, lambda: 0).value() == 42.0
    assert m.snapshot() == {"Produce:user=u,client-id=c/byte-rate": 42.0, "test:/now": 7.0}
    s = m.sensor("s")
    assert s.add(name("dup"), CumulativeSum()) and s.add(name("dup"), CumulativeSum())  # same name: no-op True
    assert len(s.metrics) == 1
    m.remove_sensor("s")
    assert m.metric(name("dup")) is None and m.remove_metric(a) is not None


# --------------------------------------------------------------------------- property: replay vs reference

def _reference(ops: list[tuple[str, int, float]], samples: int, window: int, event_window: int,
               overlapping: bool) -> list[tuple[float, float, float, float]]:
    """Independent straight-line re-computation of Kafka's SampledStat/Rate algorithm.

    Slots are [start, last_event, count, sum, max, min]; returns (rate/s, count, sum, max) per measure.
    """
    slots: list[list[float]] = []
    cur = 0
    ring = samples + 1 if overlapping else samples
    out = []
    t = 0
    for kind, dt, v in ops:
        t += dt
        fresh = [t, t, 0, 0.0, -math.inf, math.inf]
        if kind == "rec":
            if not slots:
                slots.append(list(fresh))
            s = slots[cur]
            if t - s[0] >= window or s[2] >= event_window:
                cur = (cur + 1) % ring
                if cur >= len(slots):
                    slots.append(list(fresh))
                else:
                    slots[cur] = list(fresh)
                s = slots[cur]
            s[1], s[2], s[3], s[4], s[5] = t, s[2] + 1, s[3] + v, max(s[4], v), min(s[5], v)
        else:
            for i, s in enumerate(slots):
                if t - (s[1] if overlapping else s[0]) >= samples * window:
                    slots[i] = list(fresh)
            if not slots:
                slots.append(list(fresh))
            total = sum(s[3] for s in slots)
            count = sum(s[2] for s in slots)
            elapsed = t - min(s[0] for s in slots)
            full = elapsed // window
            if full < samples - 1:
                elapsed += (samples - 1 - full) * window
            elapsed = max(elapsed, 1)
            mx = max(s[4] for s in slots) if count else math.nan
            out.append((total / (elapsed / 1000), float(count), total, mx))
    return out


ops_strategy = st.lists(
    st.tuples(st.sampled_from(["rec", "rec", "measure"]), st.integers(0, 120),
              st.integers(-50, 1000).map(float)),
    min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops=ops_strategy, samples=st.integers(1, 5), window=st.integers(1, 60),
       event_window=st.sampled_from([1, 2, 3, 10**9]), overlapping=st.booleans())
def test_rate_matches_reference(ops: list[tuple[str, int, float]], samples: int, window: int,
                                event_window: int, overlapping: bool) -> None:
    cfg = MetricConfig(samples=samples, time_window_ms=window, event_window=event_window)
    rate = Rate(stat=WindowedSum(overlapping=overlapping))
    count, total, mx = (WindowedCount(overlapping=overlapping), WindowedSum(overlapping=overlapping),
                        Max(overlapping=overlapping))
    got = []
    t = 0
    for kind, dt, v in ops:
        t += dt
        if kind == "rec":
            for stat in (rate, count, total, mx):
                stat.record(cfg, v, t)
        else:
            w = rate.window_size(cfg, t)
            lo = max((samples - 1) * window, 1)
            hi = (samples + (1 if overlapping else 0)) * window
            assert lo <= w <= max(hi - 1, 1)
            # The reference shares one slot list, which Rate's window_size seeds through
            # oldest(); give the stand-alone stats the same first slot before measuring them.
            for other in (count, total, mx):
                other.oldest(t)
            got.append((rate.measure(cfg, t), count.measure(cfg, t), total.measure(cfg, t), mx.measure(cfg, t)))
    want = _reference(ops, samples, window, event_window, overlapping)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[0] == pytest.approx(w[0], rel=1e-9, abs=1e-9)
        assert g[1:3] == pytest.approx(w[1:3], rel=1e-9, abs=1e-9)
        assert (math.isnan(g[3]) and math.isnan(w[3])) or g[3] == w[3]
