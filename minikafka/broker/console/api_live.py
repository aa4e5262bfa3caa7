"""Console API: live views of the flow control, one snapshot per call (the page polls every second).

``GET /console/api/live`` (DESCRIBE on the CLUSTER) measures, at the moment it is called and per running
broker:

* client quotas (Kafka's ``ClientQuotaManager`` sensors): per entity and quota type (Produce, Fetch,
  Request) the measured rate, its quota and the average throttle time;
* the fetch-session cache (``FetchSessionCache``): slots used and total, partitions cached, evictions,
  and the fetch requests by the context they got (full, incremental, sessionless, error);
* the replication quotas (``ReplicationQuotaManager``): measured byte rate against the throttled rate,
  throttled partitions, recorded bytes and records, and the records of an empty (18-byte) answer;
* requests per API (``RequestStats``, ``RequestMetrics``' ``TotalTimeMs`` histogram): counts, bytes and
  latency percentiles;

and, for the cluster, the KIP-714 metrics clients pushed (``ClientTelemetryStore``).  Counts are
cumulative: the page turns them into rates.  Nothing is computed between calls.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from ..broker import Broker
from ..broker_metrics import api_name
from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from .context import ConsoleContext, api

#: The percentiles the page shows (of Kafka's ``TotalTimeMs`` attributes).
LATENCY_ATTRIBUTES = ("Mean", "50thPercentile", "99thPercentile", "999thPercentile", "Max")


def finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: None instead (a rate or average with no samples yet)."""
    return None if value is None or not math.isfinite(value) else value


def quotas(broker: Broker) -> list[dict[str, Any]]:
    now = broker.clock.time_ms()
    out = []
    for manager in (broker.quotas.produce, broker.quotas.fetch, broker.quotas.request):
        for user, client_id, rate, bound, throttle in manager.entity_snapshot(now):
            out.append({"type": manager.quota_type, "user": user, "client_id": client_id, "rate": finite(rate),
                        "quota": finite(bound), "throttle_time_ms": finite(throttle) or 0.0,
                        "unit": "%" if manager.quota_type == "Request" else "B/s"})
    return out


def fetch_sessions(broker: Broker) -> dict[str, Any]:
    cache = broker.fetch_manager.cache
    metrics = cache.metrics()
    prefix = "kafka.server:type=FetchSessionCache,name="
    return {"slots_used": len(cache.sessions), "slots_total": cache.max_entries,
            "partitions_cached": cache.num_partitions, "evictions": cache.evictions,
            "eviction_rate": finite(metrics[prefix + "IncrementalFetchSessionEvictionsPerSec"]),
            "requests": dict(sorted(broker.fetch_manager.contexts.items()))}


def replication(broker: Broker) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, q in (("leader", broker.leader_quota), ("follower", broker.follower_quota)):
        out[name] = {"rate": finite(q.rate()), "quota": q.quota.bound if q.limited else None,
                     "throttled_partitions": q.throttled_partition_count(), "recorded_bytes": q.recorded_bytes,
                     "recorded_count": q.recorded_count, "empty_answers": q.empty_recorded_count}
    return out


def requests(broker: Broker) -> list[dict[str, Any]]:
    timings = broker.broker_metrics_observer.requests
    out = []
    for key, (count, req_bytes, resp_bytes) in sorted(broker.request_stats.items()):
        name = api_name(key)
        row: dict[str, Any] = {"api": name, "count": count, "request_bytes": req_bytes,
                               "response_bytes": resp_bytes}
        metrics = timings.get(name)
        if metrics is not None and metrics.total_time_ms.count:
            attrs = metrics.total_time_ms.attributes()
            row["latency_ms"] = {a: finite(attrs[a]) for a in LATENCY_ATTRIBUTES}
        out.append(row)
    return out


def client_metrics(ctx: ConsoleContext) -> list[dict[str, Any]]:
    """What each client last pushed (KIP-714), its numbers only (histograms as count and sum)."""
    store = ctx.target.client_telemetry
    out = []
    for client in store.as_json() if store is not None else []:
        values: dict[str, float] = {}
        for metric in client["metrics"]:
            for point in metric["points"]:
                attrs = ",".join(f"{k}={v}" for k, v in sorted(point["attributes"].items()))
                key = metric["name"] + (f"{{{attrs}}}" if attrs else "")
                value = point.get("value", point.get("sum"))
                if isinstance(value, (int, float)) and math.isfinite(value):
                    values[key] = value
        out.append({k: client[k] for k in ("client_instance_id", "client_id", "client_software_name",
                                           "client_software_version", "client_source_address", "pushes",
                                           "last_push_ms")} | {"metrics": values})
    return out


def routes(ctx: ConsoleContext) -> list[BaseRoute]:

    async def live(request: Request) -> Any:
        ctx.require(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
        brokers = []
        for broker_id, broker in sorted(ctx.target.brokers().items()):
            brokers.append({"id": broker_id, "quotas": quotas(broker), "fetch_sessions": fetch_sessions(broker),
                            "replication": replication(broker), "requests": requests(broker)})
        time_ms = next(iter(ctx.target.brokers().values())).clock.time_ms() if brokers else None
        return {"time_ms": time_ms, "brokers": brokers, "client_metrics": client_metrics(ctx)}

    return [Route("/console/api/live", api(ctx, live), methods=["GET"])]
