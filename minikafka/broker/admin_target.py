"""What the broker's HTTP port (the admin API and the web console) works on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .broker import Broker
from .client_metrics.receiver import ClientTelemetryStore
from .cluster import Cluster
from .faults import FaultInjector
from .metadata import ClusterMetadata


@dataclass(slots=True)
class AdminTarget:
    """What the HTTP API works on: the fault rules, the running brokers, the metadata and, for a
    cluster, the cluster (None for a lone broker)."""

    faults: FaultInjector
    brokers: Callable[[], Mapping[int, Broker]]
    metadata: ClusterMetadata
    cluster: Cluster | None = None
    client_telemetry: ClientTelemetryStore | None = None

    @classmethod
    def of(cls, target: Broker | Cluster) -> AdminTarget:
        if isinstance(target, Cluster):
            return cls(target.faults, lambda: dict(target.brokers), target.metadata, target,
                       client_telemetry=target.client_telemetry)
        return cls(target.faults, lambda: {target.node_id: target}, target.metadata,
                   client_telemetry=target.client_telemetry)
