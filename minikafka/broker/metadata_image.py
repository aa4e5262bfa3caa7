"""The cluster metadata besides the topic registry, as the ``__cluster_metadata`` log's records leave it (Kafka's
``MetadataImage`` parts): what a controller replays when it starts and a broker process applies as it fetches.
No I/O, nothing heavy imported: every :class:`~minikafka.broker.metadata.ClusterMetadata` holds one."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..protocol.metadata_records import MetadataRecord

#: An ACL as an AccessControlEntryRecord holds it: resource type, name, pattern type, principal, host, operation,
#: permission type (the ACL store's ``AclCodes``).
AclValue = tuple[int, str, int, str, str, int, int]
#: A SCRAM credential as a UserScramCredentialRecord holds it: salt, stored key, server key, iterations.
ScramValue = tuple[bytes, bytes, bytes, int]
#: A broker's registration as the log has it: broker epoch, listener -> (host, port), rack, fenced.
BrokerValue = tuple[int, dict[str, tuple[str, int]], str | None, bool]
#: A delegation token as a DelegationTokenRecord holds it: id, owner, requester, renewers, issue, max and expiry.
TokenValue = tuple[str, str, str, tuple[str, ...], int, int, int]
#: A client quota entity as a ClientQuotaRecord names it: (entity type, name or None for the default) pairs.
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class SnapshotPolicy:
    """When a controller snapshots its metadata log and what of the log it keeps (Kafka's
    ``metadata.log.max.record.bytes.between.snapshots``, ``metadata.log.max.snapshot.interval.ms``,
    ``metadata.log.segment.bytes``, ``metadata.max.retention.bytes`` and ``metadata.max.retention.ms``)."""

    max_bytes_between: int = 20 * 1024 * 1024
    max_interval_ms: int = 3600 * 1000
    segment_bytes: int = 1024 * 1024 * 1024
    retention_bytes: int = 100 * 1024 * 1024
    retention_ms: int = 7 * 24 * 3600 * 1000


@dataclass
class MetadataState:
    """What the metadata log holds besides the topic registry, as its records leave it (Kafka's ``AclsImage``,
    ``ScramImage``, ``DelegationTokenImage``, ``FeaturesImage``, ``ConfigurationsImage`` of other resources than
    topics, ``ClientQuotasImage``, ``ProducerIdsImage`` and the registered brokers of ``ClusterImage``)."""

    acls: dict[uuid.UUID, AclValue] = field(default_factory=dict)
    scram: dict[tuple[str, int], ScramValue] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    features_offset: int = -1  # of the last FeatureLevelRecord (-1: none)
    configs: dict[int, dict[str, dict[str, str]]] = field(default_factory=dict)  # type -> name -> key -> value
    tokens: dict[str, TokenValue] = field(default_factory=dict)  # delegation tokens by id
    quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    next_producer_id: int = 0  # the last ProducerIdsRecord's (0: none)
    # The brokers registered (fenced or not): id -> (broker epoch, listener -> (host, port), rack, fenced).
    brokers: dict[int, BrokerValue] = field(default_factory=dict)

    def apply(self, offset: int, rec: MetadataRecord) -> str | None:
        """Apply one record (not the topic registry's); returns what it changed: ``acls``, ``scram``,
        ``tokens``, ``features``, ``configs``, ``quotas``, ``producer_ids`` or ``brokers`` (None: nothing)."""
        d, name = rec.data, rec.name
        if name == "AccessControlEntryRecord":
            self.acls[d.id] = acl_value(d)
        elif name == "RemoveAccessControlEntryRecord":
            self.acls.pop(d.id, None)
        elif name == "UserScramCredentialRecord":
            self.scram[(d.name, d.mechanism)] = scram_value(d)
        elif name == "RemoveUserScramCredentialRecord":
            self.scram.pop((d.name, d.mechanism), None)
        elif name == "DelegationTokenRecord":
            self.tokens[d.token_id] = token_value(d)
        elif name == "RemoveDelegationTokenRecord":
            self.tokens.pop(d.token_id, None)
        elif name == "FeatureLevelRecord":
            self.features[d.name], self.features_offset = d.feature_level, offset
        elif name == "ConfigRecord":
            of_type = self.configs.setdefault(d.resource_type, {})
            entries = of_type.setdefault(d.resource_name, {})
            if d.value is None:
                entries.pop(d.name, None)
                if not entries:  # a resource without configs is gone
                    del of_type[d.resource_name]
            else:
                entries[d.name] = d.value
        elif name == "ClientQuotaRecord":
            entity = tuple((e.entity_type, e.entity_name) for e in d.entity)
            values = self.quotas.setdefault(entity, {})
            if d.remove:
                values.pop(d.key, None)
                if not values:
                    del self.quotas[entity]
            else:
                values[d.key] = d.value
        elif name == "ProducerIdsRecord":
            self.next_producer_id = max(self.next_producer_id, d.next_producer_id)
        elif name == "RegisterBrokerRecord":
            self.brokers[d.broker_id] = (d.broker_epoch, {e.name: (e.host, e.port) for e in d.end_points}, d.rack,
                                         bool(d.fenced))
        elif name in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            registered = self.brokers.get(d.id)
            if registered is not None:
                self.brokers[d.id] = (*registered[:3], name == "FenceBrokerRecord")
        elif name == "UnregisterBrokerRecord":
            self.brokers.pop(d.broker_id, None)
        else:
            return None
        return RECORD_KINDS[name]


#: What each record :meth:`MetadataState.apply` takes changes.
RECORD_KINDS = {"AccessControlEntryRecord": "acls", "RemoveAccessControlEntryRecord": "acls",
                "UserScramCredentialRecord": "scram", "RemoveUserScramCredentialRecord": "scram",
                "DelegationTokenRecord": "tokens", "RemoveDelegationTokenRecord": "tokens",
                "FeatureLevelRecord": "features", "ConfigRecord": "configs", "ClientQuotaRecord": "quotas",
                "ProducerIdsRecord": "producer_ids", "RegisterBrokerRecord": "brokers",
                "FenceBrokerRecord": "brokers", "UnfenceBrokerRecord": "brokers", "UnregisterBrokerRecord": "brokers"}


def acl_value(d: Any) -> AclValue:
    """An AccessControlEntryRecord's ACL."""
    return (d.resource_type, d.resource_name, d.pattern_type, d.principal, d.host, d.operation, d.permission_type)


def scram_value(d: Any) -> ScramValue:
    """A UserScramCredentialRecord's credential."""
    return bytes(d.salt), bytes(d.stored_key), bytes(d.server_key), d.iterations


def token_value(d: Any) -> TokenValue:
    """A DelegationTokenRecord's token."""
    return (d.token_id, d.owner, d.requester, tuple(d.renewers), d.issue_timestamp, d.max_timestamp,
            d.expiration_timestamp)
