"""What the broker's HTTP port (the admin API and the web console) works on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..common import SYSTEM_CLOCK, Clock
from .broker import Broker, broker_authorizer
from .config import BrokerConfig
from .client_metrics.receiver import ClientTelemetryStore
from .cluster import Cluster
from .faults import FaultInjector
from .metadata import ClusterMetadata
from .security.authorizer import StandardAuthorizer
from .security.delegation_token import DelegationTokenManager
from .security.scram import ScramCredentialStore


@dataclass(slots=True)
class AdminTarget:
    """What the HTTP API works on: the fault rules, the running brokers, the metadata and, for a
    cluster, the cluster (None for a lone broker)."""

    faults: FaultInjector
    brokers: Callable[[], Mapping[int, Broker]]
    metadata: ClusterMetadata
    cluster: Cluster | None = None
    client_telemetry: ClientTelemetryStore | None = None
    # What the console's logins check (:mod:`.console.auth`): the (base) broker config with its SASL
    # listeners, the cluster's ACLs through an authorizer as its brokers have it, and its SCRAM credentials.
    config: BrokerConfig | None = None
    authorizer: StandardAuthorizer | None = None
    scram_credentials: ScramCredentialStore | None = None
    delegation_tokens: DelegationTokenManager | None = None
    clock: Clock = SYSTEM_CLOCK

    @classmethod
    def of(cls, target: Broker | Cluster) -> AdminTarget:
        if isinstance(target, Cluster):
            return cls(target.faults, lambda: dict(target.brokers), target.metadata, target,
                       client_telemetry=target.shared.client_telemetry, config=target.base_config,
                       authorizer=broker_authorizer(target.base_config, target.shared.acls),
                       scram_credentials=target.shared.scram_credentials,
                       delegation_tokens=target.shared.delegation_tokens,
                       clock=target.clock)
        return cls(target.faults, lambda: {target.node_id: target}, target.metadata,
                   client_telemetry=target.client_telemetry, config=target.config, authorizer=target.authorizer,
                   scram_credentials=target.scram_credentials, delegation_tokens=target.delegation_tokens,
                   clock=target.clock)
