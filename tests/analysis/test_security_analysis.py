"""Principals in the analysis tables (issue 15), over a capture of real confluent-kafka clients authenticated
with SCRAM-SHA-512 over SASL_SSL (:mod:`security_capture`): alice and bob produce with the same client id,
bob consumes.

The ``requests`` table carries each request's principal and listener; the traffic job's per-client tables
tell principals apart; the quota what-if replay takes the quota user from the principal as the broker does,
so a ``user=alice`` quota throttles alice and not bob although they share a client id, while a client-id
quota is one sensor for both (checked against Kafka's algorithm driven directly, as ``test_quotas_job`` does).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from analysis_helpers import QUOTA_WINDOWS, cached_tables, decoded

from minikafka.analysis.decode import COLUMNS
from minikafka.analysis.jobs import AnalysisOptions, quotas, traffic
from minikafka.broker.request import RequestContext
from minikafka.common.clock import ManualClock
from minikafka.metrics import MetricConfig, MetricName, Metrics, Quota, QuotaViolationError, Rate
from security_capture import BATCH, CLIENT_ID, CONSUMER_ID, N, sasl_ssl_capture
from tls_certs import make_pki

pytestmark = [pytest.mark.slow, pytest.mark.clients]

QUOTA = 50_000  # bytes/s: alice and bob each produce 300 KB in well under a second


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cap = tmp_path_factory.mktemp("secure-analysis") / "cap"
    sasl_ssl_capture(cap, make_pki(tmp_path_factory.mktemp("pki")))
    return cap


@pytest.fixture(scope="module")
def tables(spark, capture: Path):
    yield from cached_tables(spark, capture)


def test_requests_table_has_each_requests_principal_and_listener(tables, capture: Path) -> None:
    names = [c for c, _ in COLUMNS["requests"]]
    # appended after the transaction columns (then issue 14's group columns); earlier positions unchanged
    assert names.index("listener") == names.index("aborted_transactions") + 1 and names[5] == "principal"
    assert tables.requests.columns[:len(names)] == names
    df = tables.requests.select("api_name", "client_id", "principal", "listener").toPandas()
    assert set(df.listener) == {"SASL_SSL"}
    produce = df[df.api_name == "Produce"]
    assert produce.groupby("principal").size().to_dict() == {"User:alice": N // BATCH, "User:bob": N // BATCH}
    assert set(produce.client_id) == {CLIENT_ID}
    assert set(df[df.api_name.isin(["Fetch", "JoinGroup", "SyncGroup"])].principal) == {"User:bob"}
    # ApiVersions before authenticating ran unauthenticated.
    assert "User:ANONYMOUS" in set(df[df.api_name == "ApiVersions"].principal)
    assert set(df[df.api_name != "ApiVersions"].principal) == {"User:alice", "User:bob"}
    # Spark's rows are the plain-Python decoder's.
    req, _ = decoded(capture)
    assert sorted(zip(req.api_name, req.principal, req.listener)) == sorted(zip(df.api_name, df.principal, df.listener))


def test_traffic_tables_tell_principals_apart(tables) -> None:
    res = {k: v.toPandas() for k, v in traffic.run(tables, AnalysisOptions()).items() if k in ("by_client",
                                                                                             "connections")}
    by_client = res["by_client"]
    assert list(by_client.columns)[-1] == "principal"
    produce = by_client[(by_client.client_id == CLIENT_ID) & (by_client.api_name == "Produce")]
    assert dict(zip(produce.principal, produce.requests)) == {"User:alice": N // BATCH, "User:bob": N // BATCH}
    conns = res["connections"]
    assert list(conns.columns)[-2:] == ["principal", "listener"]
    assert set(conns.listener) == {"SASL_SSL"}
    assert set(conns[conns.client_id == CONSUMER_ID].principal) == {"User:bob"}
    assert set(conns[conns.client_id == CLIENT_ID].principal) == {"User:alice", "User:bob"}


def test_quota_user_is_derived_from_the_principal_as_the_broker_does() -> None:
    for principal in ("User:alice", "User:ANONYMOUS", "User:CN=alice,OU=Engineering,O=Example,C=US", ""):
        assert quotas.quota_user(principal) == RequestContext(0, 0, 0, None, "", principal=principal).user
    assert quotas.quota_user("User:alice") == "alice"


def test_quota_groups_follow_the_brokers_sensors() -> None:
    combos = [(0, "User:alice", "shared", "c1"), (0, "User:alice", "other", "c2"), (0, "User:bob", "shared", "c3"),
              (0, "User:ANONYMOUS", "shared", "c3"), (1, "User:alice", "shared", "c4")]

    def groups(**quota: float) -> list[set[str]]:
        g = quotas.quota_groups(combos, quotas.settings_of(AnalysisOptions(produce_quota=quota)))
        out: dict[int, set[str]] = {}
        for (_b, _p, _c, conn), n in g.items():
            out.setdefault(n, set()).add(conn)
        return sorted(out.values(), key=sorted)

    # No quota: only connections tie requests together (a connection's mute state).
    assert groups() == [{"c1"}, {"c2"}, {"c3"}, {"c4"}]
    # /users/alice: one sensor for alice's client ids on a broker; brokers have their own sensors.
    assert groups(**{"user=alice": 1.0}) == [{"c1", "c2"}, {"c3"}, {"c4"}]
    # /clients/shared: one sensor for every principal using it (alice and bob, and bob's ANONYMOUS ApiVersions).
    assert groups(shared=1.0) == [{"c1", "c3"}, {"c2"}, {"c4"}]
    # /users/<default>/clients/<default>: a sensor per (user, client id).
    assert groups(**{"user=<default>,client-id=<default>": 1.0}) == [{"c1"}, {"c2"}, {"c3"}, {"c4"}]


def _produce_rows(capture: Path, principal: str | None) -> list[tuple[int, int, str]]:
    """(time the broker answered in ms, request size, principal) of the shared client id's Produce requests
    (of one principal, or all), decoded in plain Python, as test_quotas_job computes them."""
    req, _ = decoded(capture)
    sel = (req.client_id == CLIENT_ID) & (req.api_key == 0)
    if principal is not None:
        sel &= req.principal == principal
    rows = []
    for r in req[sel].itertuples():
        thr = int(r.throttle_time_ms or 0) * 1_000_000
        done = r.send_ns - thr if r.send_ns - r.receive_ns >= thr else r.send_ns
        rows.append((done // 1_000_000, r.receive_ns // 1_000_000, int(r.request_bytes) - 4, r.principal))
    return [(t, n, p) for t, _recv, n, p in sorted(rows)]


def _kafka_throttles(rows: list[tuple[int, int, str]], quota: float) -> list[int]:
    """Kafka's produce throttle per request, from one Sensor with a Rate bounded by ``quota``."""
    samples, window_s = QUOTA_WINDOWS["quota_window_num"], QUOTA_WINDOWS["quota_window_size_seconds"]
    cfg = MetricConfig(samples=samples, time_window_ms=window_s * 1000, quota=Quota.upper_bound(quota))
    sensor = Metrics(clock=ManualClock(0)).sensor("produce", cfg)
    sensor.add(MetricName.of("byte-rate", "Produce"), Rate(), cfg)
    out = []
    for t, nbytes, _p in rows:
        try:
            sensor.record(nbytes, t)
            out.append(0)
        except QuotaViolationError as e:
            window = e.metric.measurable.window_size(e.metric.config, t)
            out.append(math.floor((e.value - e.bound) / e.bound * window + 0.5))
    return out


def _clients(tables, **quota: float):
    opts = AnalysisOptions(produce_quota=quota, **QUOTA_WINDOWS)
    return quotas.run(tables, opts)["quota_clients"].toPandas().set_index(["client_id", "principal"])


def test_user_quota_throttles_its_principal_and_not_another_with_the_same_client_id(tables, capture: Path) -> None:
    clients = _clients(tables, **{"user=alice": QUOTA})
    alice, bob = clients.loc[(CLIENT_ID, "User:alice")], clients.loc[(CLIENT_ID, "User:bob")]
    expected = _kafka_throttles(_produce_rows(capture, "User:alice"), QUOTA)
    print(f"\nuser=alice quota: alice what-if {alice.whatif_throttle_ms} ms over {alice.whatif_throttled_requests} "
          f"request(s), independent {expected}; bob {bob.whatif_throttle_ms} ms")
    assert alice.user == "alice" and bob.user == "bob"
    assert 290_000 < alice.produce_bytes < 320_000 and 290_000 < bob.produce_bytes < 320_000
    assert alice.whatif_throttle_ms == sum(expected) > 0
    assert alice.whatif_throttled_requests == sum(1 for x in expected if x > 0)
    assert alice.produce_quota == QUOTA
    assert bob.whatif_throttle_ms == 0 and bob.whatif_throttled_requests == 0 and math.isnan(bob.produce_quota)
    assert (clients.captured_throttle_ms == 0).all()  # the capture broker had no quotas


def test_client_id_quota_is_one_sensor_for_every_principal_using_it(tables, capture: Path) -> None:
    clients = _clients(tables, **{CLIENT_ID: QUOTA})
    alice, bob = clients.loc[(CLIENT_ID, "User:alice")], clients.loc[(CLIENT_ID, "User:bob")]
    rows = _produce_rows(capture, None)
    expected = _kafka_throttles(rows, QUOTA)
    per = {p: sum(t for t, (_, _, q) in zip(expected, rows) if q == p) for p in ("User:alice", "User:bob")}
    print(f"\nclient-id={CLIENT_ID} quota: what-if alice {alice.whatif_throttle_ms} ms, "
          f"bob {bob.whatif_throttle_ms} ms; independent (one sensor) {per}")
    assert (alice.whatif_throttle_ms, bob.whatif_throttle_ms) == (per["User:alice"], per["User:bob"])
    assert bob.whatif_throttle_ms > 0  # bob came second and found the shared sensor already over the quota
    assert alice.produce_quota == bob.produce_quota == QUOTA


def test_report_names_principals(tables) -> None:
    opts = AnalysisOptions(produce_quota={"user=alice": QUOTA}, **QUOTA_WINDOWS)
    res = {k: v.toPandas() for k, v in quotas.run(tables, opts).items()}
    (s,) = quotas.report(res, opts)
    _caption, table = s.tables[0]
    assert {"principal", "user"} <= set(table.columns)
    assert (table.client_id.iloc[0], table.principal.iloc[0]) == (CLIENT_ID, "User:alice")
    labels = s.figures[0][1].labels()
    assert f"{CLIENT_ID} (User:alice)" in labels
