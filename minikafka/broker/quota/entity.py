"""Quota configuration by (user, client-id) entity, resolved in Kafka's precedence order.

Models what Kafka keeps under ``/config/users`` and ``/config/clients`` and the
entity matching of ``DefaultQuotaCallback``: for a request from user U with
client id C, the first of these that sets the quota wins::

    /users/U/clients/C, /users/U/clients/<default>, /users/U,
    /users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
    /clients/C, /clients/<default>

The matched entity also decides the metric tags, so that clients sharing a
quota share one sensor (a ``/users/U`` quota is shared by all of U's clients;
a ``/clients/<default>`` quota is per client id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, NamedTuple, Protocol

if TYPE_CHECKING:
    from ..metadata_image import QuotaEntity

DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
ENTITY_TYPES = ("user", "client-id")


@dataclass(frozen=True, order=True)
class ClientQuotaEntity:
    """A quota entity: each part is a name, DEFAULT, or None (not part of the entity)."""

    user: str | None = None
    client_id: str | None = None

    def components(self) -> dict[str, str | None]:
        """{entity_type: name or None for the default}, as the quota APIs express entities."""
        out: dict[str, str | None] = {}
        if self.user is not None:
            out["user"] = None if self.user == DEFAULT else self.user
        if self.client_id is not None:
            out["client-id"] = None if self.client_id == DEFAULT else self.client_id
        return out

    @classmethod
    def from_components(cls, parts: dict[str, str | None]) -> "ClientQuotaEntity":
        def val(t: str) -> str | None:
            if t not in parts:
                return None
            return DEFAULT if parts[t] is None else parts[t]

        return cls(val("user"), val("client-id"))

    @classmethod
    def parse(cls, spec: str) -> "ClientQuotaEntity":
        """``user=alice,client-id=app`` (``<default>`` for a default entity)."""
        parts: dict[str, str | None] = {}
        for item in spec.split(","):
            key, sep, value = item.strip().partition("=")
            key = {"clients": "client-id", "client": "client-id", "users": "user"}.get(key, key)
            if not sep or key not in ENTITY_TYPES:
                raise ValueError(f"bad quota entity {spec!r}: expected user=U and/or client-id=C")
            parts[key] = None if value in (DEFAULT, "") else value
        return cls.from_components(parts)

    def __str__(self) -> str:
        parts = []
        if self.user is not None:
            parts.append(f"/users/{self.user}")
        if self.client_id is not None:
            parts.append(f"/clients/{self.client_id}")
        return "".join(parts) or "/"


class ResolvedQuota(NamedTuple):
    """The quota that applies to a (user, client id), and the metric tags its sensor uses."""

    bound: float | None
    user_tag: str
    client_tag: str


class QuotaRecords(Protocol):
    """Where quotas are kept as KRaft's ``ClientQuotaRecord`` s (the controller's metadata log): those it held
    when opened (None: there is no log), and a change's record (value None: the quota is removed)."""

    def replayed_quotas(self) -> dict[QuotaEntity, dict[str, float]] | None: ...

    def write_quota(self, entity: QuotaEntity, key: str, value: float | None) -> None: ...


class QuotaConfigs:
    """Quota values per entity (Kafka's quota entries), with precedence resolution: the configured ones
    (``minikafka.client.quotas``), then those of the metadata log (:meth:`attach`), where a change is written."""

    def __init__(self) -> None:
        self.entries: dict[ClientQuotaEntity, dict[str, float]] = {}
        self.version = 0  # bumped on every change, so managers can refresh their sensors
        self._has: dict[str, bool] = {}  # has_quotas answers at _has_version
        self._has_version = -1
        self.records: QuotaRecords | None = None
        self._configured: dict[ClientQuotaEntity, dict[str, float]] = {}

    def attach(self, records: QuotaRecords) -> None:
        """Take the quotas the metadata log holds (over the configured ones) and write each change there."""
        replayed = records.replayed_quotas()
        if replayed is None:
            return
        self._configured = {e: dict(v) for e, v in self.entries.items()}
        self.replace(replayed)
        self.records = records

    def replace(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        """The configured quotas and over them ``quotas`` (the metadata log's, replayed at start or a broker
        process's copy of its controller's log now): taken, written nowhere."""
        self.entries = {e: dict(v) for e, v in self._configured.items()}
        for entity, values in quotas.items():
            self.entries.setdefault(ClientQuotaEntity.from_components(dict(entity)), {}).update(values)
        self.version += 1

    def set(self, entity: ClientQuotaEntity, key: str, value: float) -> None:
        if key not in QUOTA_KEYS:
            raise ValueError(f"unknown quota key {key!r}")
        self.entries.setdefault(entity, {})[key] = float(value)
        self.version += 1
        if self.records is not None:
            self.records.write_quota(tuple(entity.components().items()), key, float(value))

    def remove(self, entity: ClientQuotaEntity, key: str) -> None:
        values = self.entries.get(entity)
        if values is not None and values.pop(key, None) is not None:
            if not values:
                del self.entries[entity]
            self.version += 1
            if self.records is not None:
                self.records.write_quota(tuple(entity.components().items()), key, None)

    def get(self, entity: ClientQuotaEntity) -> dict[str, float]:
        return dict(self.entries.get(entity, {}))

    def has_quotas(self, key: str) -> bool:
        """Whether any entity sets ``key`` (asked on every request: remembered until the next change)."""
        cached = self._has.get(key) if self._has_version == self.version else None
        if cached is None:
            if self._has_version != self.version:
                self._has, self._has_version = {}, self.version
            cached = self._has[key] = any(key in values for values in self.entries.values())
        return cached

    def resolve(self, key: str, user: str, client_id: str) -> ResolvedQuota:
        """The quota for ``key`` and this (user, client id), in Kafka's precedence order."""
        for entity, tags in self._candidates(user, client_id):
            values = self.entries.get(entity)
            if values is not None and key in values:
                return ResolvedQuota(values[key], *tags)
        return ResolvedQuota(None, "", client_id)

    @staticmethod
    def _candidates(user: str, client_id: str) -> Iterator[tuple[ClientQuotaEntity, tuple[str, str]]]:
        yield ClientQuotaEntity(user, client_id), (user, client_id)
        yield ClientQuotaEntity(user, DEFAULT), (user, client_id)
        yield ClientQuotaEntity(user, None), (user, "")
        yield ClientQuotaEntity(DEFAULT, client_id), (user, client_id)
        yield ClientQuotaEntity(DEFAULT, DEFAULT), (user, client_id)
        yield ClientQuotaEntity(DEFAULT, None), (user, "")
        yield ClientQuotaEntity(None, client_id), ("", client_id)
        yield ClientQuotaEntity(None, DEFAULT), ("", client_id)

    def describe(
        self, filters: list[tuple[str, int, str | None]], strict: bool
    ) -> list[tuple[ClientQuotaEntity, dict[str, float]]]:
        """DescribeClientQuotas matching: (entity type, match type, match); 0 exact, 1 default, 2 any."""
        out = []
        for entity, values in sorted(self.entries.items(), key=lambda kv: str(kv[0])):
            parts = entity.components()
            ok = True
            for etype, mtype, match in filters:
                if etype not in parts:
                    ok = False
                elif mtype == 0:
                    ok = parts[etype] == match and match is not None
                elif mtype == 1:
                    ok = parts[etype] is None
                # mtype 2 ("any specified name"): any entity of this type, default included.
                if not ok:
                    break
            if ok and strict and set(parts) != {f[0] for f in filters}:
                ok = False
            if ok:
                out.append((entity, dict(values)))
        return out


def parse_quota_spec(spec: str) -> tuple[ClientQuotaEntity, dict[str, float]]:
    """``client-id=app1:producer_byte_rate=1048576,consumer_byte_rate=2097152`` -> (entity, values)."""
    entity_part, sep, values_part = spec.partition(":")
    if not sep:
        raise ValueError(f"bad quota {spec!r}: expected ENTITY:key=value[,key=value]")
    values = {}
    for item in values_part.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq or key not in QUOTA_KEYS:
            raise ValueError(f"bad quota {spec!r}: {item!r} is not one of {', '.join(QUOTA_KEYS)}=N")
        try:
            values[key] = float(value)
        except ValueError:
            raise ValueError(f"bad quota {spec!r}: {value!r} is not a number") from None
    return ClientQuotaEntity.parse(entity_part), values
