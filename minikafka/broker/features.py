"""Cluster-wide feature flags (KIP-584) as a single-controller KRaft cluster of Kafka 4.2 keeps them.

Models three Kafka pieces: the feature definitions (``Feature``, ``MetadataVersion``,
``TransactionVersion``, ``GroupVersion``, ``ShareVersion``, ``KRaftVersion``,
``EligibleLeaderReplicasVersion``), the controller's ``FeatureControlManager`` (UpdateFeatures: which
level changes are allowed) and the brokers' ``FinalizedFeatures`` (what ApiVersions reports, with its
epoch).

What a Kafka 4.2 broker supports, and what a cluster formatted at metadata.version 4.2-IV1 (Kafka 4.2's
latest production level) finalizes by default:

* ``metadata.version`` 7-29 (3.3-IV3 to 4.2-IV1), finalized 29;
* ``kraft.version`` 0-1, finalized 1 (a controller formatted ``--standalone``, KIP-853);
* ``transaction.version`` 0-2, finalized 2 (KIP-890: the producer epoch goes up with every transaction);
* ``group.version`` 0-1, finalized 1 (KIP-848 consumer groups);
* ``eligible.leader.replicas.version`` 0-1, finalized 1 (KIP-966);
* ``share.version`` 0-1, finalized 1 (KIP-932 share groups).

A feature's default level follows the metadata.version the cluster was formatted at (each level's
``bootstrapMetadataVersion``), so ``minikafka.bootstrap.features=metadata.version=4.0-IV3`` formats a
cluster as Kafka 4.0 would (no share groups, no ELR); named features override their default, as
``kafka-storage.sh format --feature transaction.version=1`` does.  With a data dir the levels are
``FeatureLevelRecord`` s of the controller's metadata log, as in Kafka (the finalized features' epoch is the
offset of the last one), which win over the bootstrap settings once written; an earlier version's
``<data_dir>/features.json`` is carried over once.

UpdateFeatures follows ``FeatureControlManager.updateFeatures``: every update is checked (the upgrade type
is known, the level is supported, an upgrade does not lower and a downgrade does not raise a level, a
metadata.version downgrade crosses no version that changed the metadata format, the levels the feature
depends on are finalized) and either all apply, as one metadata change that moves the epoch, or none
(INVALID_UPDATE_VERSION with the reason); ``validate_only`` checks without applying.  A level of 0 removes
the feature from the finalized set.

Deliberate differences: ``streams.version`` is not offered (there is no Kafka Streams group protocol
here); the finalized-features epoch counts feature changes (Kafka reports the metadata log offset, which
every metadata change moves); kraft.version is a recorded level only (there is one controller, no quorum
to reconfigure), and, as Kafka refuses, it cannot be downgraded; a metadata.version downgrade also fails
when another finalized feature depends on a higher metadata.version.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Protocol

from ..protocol.errors import ErrorCode

log = logging.getLogger(__name__)

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
SHARE_VERSION = "share.version"

FEATURES_FILE = "features.json"


@dataclass(frozen=True)
class MetadataVersion:
    """One metadata.version level: its release name (``4.2-IV1``) and whether it changed the metadata
    format (a downgrade across such a version would lose metadata, so Kafka refuses it)."""

    level: int
    name: str
    did_metadata_change: bool

    @property
    def release(self) -> str:
        return self.name.split("-")[0]


METADATA_VERSIONS: tuple[MetadataVersion, ...] = tuple(MetadataVersion(lvl, name, changed) for lvl, name, changed in (
    (7, "3.3-IV3", True), (8, "3.4-IV0", True), (9, "3.5-IV0", False), (10, "3.5-IV1", False),
    (11, "3.5-IV2", True), (12, "3.6-IV0", False), (13, "3.6-IV1", True), (14, "3.6-IV2", True),
    (15, "3.7-IV0", True), (16, "3.7-IV1", False), (17, "3.7-IV2", True), (18, "3.7-IV3", False),
    (19, "3.7-IV4", False), (20, "3.8-IV0", False), (21, "3.9-IV0", False), (22, "4.0-IV0", False),
    (23, "4.0-IV1", True), (24, "4.0-IV2", False), (25, "4.0-IV3", False), (26, "4.1-IV0", False),
    (27, "4.1-IV1", False), (28, "4.2-IV0", False), (29, "4.2-IV1", False),
))
MINIMUM_METADATA_VERSION = METADATA_VERSIONS[0].level  # 3.3-IV3, the oldest a Kafka 4.x cluster runs
LATEST_METADATA_VERSION = METADATA_VERSIONS[-1].level  # 4.2-IV1, Kafka 4.2's latest production level
_MV_BY_LEVEL = {mv.level: mv for mv in METADATA_VERSIONS}
MV_3_9_IV0, MV_4_0_IV0, MV_4_0_IV1, MV_4_0_IV2, MV_4_1_IV0, MV_4_2_IV0 = 21, 22, 23, 24, 26, 28


def metadata_version_name(level: int) -> str:
    mv = _MV_BY_LEVEL.get(level)
    return mv.name if mv is not None else str(level)


def parse_metadata_version(text: str) -> int:
    """A metadata.version given as a level (``29``), a version (``4.2-IV1``) or a release (``4.2``: its
    latest level); ValueError when unknown."""
    text = text.strip()
    if text.isdigit():
        level = int(text)
        if level in _MV_BY_LEVEL:
            return level
    for mv in reversed(METADATA_VERSIONS):
        if text in (mv.name, mv.release):
            return mv.level
    raise ValueError(f"unknown metadata.version {text!r}; supported: {METADATA_VERSIONS[0].name} to "
                     f"{METADATA_VERSIONS[-1].name} (levels {MINIMUM_METADATA_VERSION}-{LATEST_METADATA_VERSION})")


def metadata_changed_between(a: int, b: int) -> bool:
    """Kafka's ``MetadataVersion.checkIfMetadataChanged``: whether a version above the lower of ``a`` and
    ``b``, up to the higher, changed the metadata format."""
    low, high = min(a, b), max(a, b)
    return any(mv.did_metadata_change for mv in METADATA_VERSIONS if low < mv.level <= high)


@dataclass(frozen=True)
class FeatureDefinition:
    """A feature other than metadata.version (Kafka's ``Feature`` and its ``FeatureVersion`` enum):
    levels 0 to ``max_level``; ``bootstrap`` maps each level above 0 to the metadata.version from which
    it is the default of a newly formatted cluster; ``dependencies`` what each level needs finalized."""

    name: str
    max_level: int
    bootstrap: dict[int, int]
    dependencies: dict[int, dict[str, int]] = field(default_factory=dict)
    downgradable: bool = True

    def default_level(self, metadata_version: int) -> int:
        """Kafka's ``Feature.defaultLevel``: the highest level whose bootstrap metadata.version is reached."""
        return max((lvl for lvl, mv in self.bootstrap.items() if mv <= metadata_version), default=0)

    def requirements(self, level: int) -> dict[str, int]:
        return self.dependencies.get(level, {})


FEATURES: dict[str, FeatureDefinition] = {f.name: f for f in (
    # KIP-853 dynamic quorums; Kafka refuses to downgrade it.
    FeatureDefinition(KRAFT_VERSION, 1, {1: MV_3_9_IV0}, {1: {METADATA_VERSION: MV_3_9_IV0}}, downgradable=False),
    # 1: flexible transaction log records; 2: the producer epoch goes up with every transaction (KIP-890).
    FeatureDefinition(TRANSACTION_VERSION, 2, {1: MV_4_0_IV2, 2: MV_4_0_IV2}),
    # 1: the consumer rebalance protocol (KIP-848).
    FeatureDefinition(GROUP_VERSION, 1, {1: MV_4_0_IV0}),
    # 1: eligible leader replicas (KIP-966), which need the metadata records of 4.0-IV1.
    FeatureDefinition(ELIGIBLE_LEADER_REPLICAS_VERSION, 1, {1: MV_4_1_IV0}, {1: {METADATA_VERSION: MV_4_0_IV1}}),
    # 1: share groups (KIP-932).
    FeatureDefinition(SHARE_VERSION, 1, {1: MV_4_2_IV0}),
)}


def supported_features() -> dict[str, tuple[int, int]]:
    """Name -> (min, max) level this broker supports (Kafka's ``BrokerFeatures.defaultSupportedFeatures``)."""
    out = {METADATA_VERSION: (MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION)}
    out.update((f.name, (0, f.max_level)) for f in FEATURES.values())
    return out


class UpgradeType(IntEnum):
    """Kafka's ``FeatureUpdate.UpgradeType`` (UpdateFeatures v1+)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def from_code(cls, code: int) -> UpgradeType:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class FeatureUpdate:
    feature: str
    max_version_level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclass(frozen=True)
class ApiError:
    """An error code with its message (Kafka's ``ApiError``)."""

    code: ErrorCode = ErrorCode.NONE
    message: str | None = None


class FeaturesError(ValueError):
    """Bootstrap features that cannot be finalized (a bad ``minikafka.bootstrap.features``)."""


def parse_bootstrap_features(text: str) -> dict[str, int]:
    """``minikafka.bootstrap.features``: ``name=level`` pairs separated by commas (metadata.version also as
    ``4.2-IV1`` or ``4.2``); FeaturesError when malformed."""
    out: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise FeaturesError(f"expected name=level, got {item!r}")
        try:
            out[name] = parse_metadata_version(value) if name == METADATA_VERSION else int(value)
        except ValueError as exc:
            raise FeaturesError(str(exc)) from None
    return out


def bootstrap_levels(settings: dict[str, int]) -> dict[str, int]:
    """The finalized levels of a newly formatted cluster: metadata.version as given (default Kafka 4.2's
    latest), every other feature at its default for it unless given; FeaturesError when not valid."""
    levels = {METADATA_VERSION: settings.get(METADATA_VERSION, LATEST_METADATA_VERSION)}
    for f in FEATURES.values():
        levels[f.name] = settings.get(f.name, f.default_level(levels[METADATA_VERSION]))
    supported = supported_features()
    for name, level in settings.items():
        if name not in supported:
            raise FeaturesError(f"unknown feature {name}; known: {', '.join(sorted(supported))}")
        low, high = supported[name]
        if not low <= level <= high:
            raise FeaturesError(f"{name} level {level} is not supported (supported: {low}-{high})")
    problem = unmet_dependency(levels)
    if problem:
        raise FeaturesError(problem)
    return {name: level for name, level in levels.items() if level > 0}


def unmet_dependency(levels: dict[str, int], names: Iterable[str] | None = None) -> str | None:
    """Why the features ``names`` (default: all) cannot have their ``levels`` together (a level they
    depend on is not finalized), or None (Kafka's ``Features.validateVersion``)."""
    for name in levels if names is None else names:
        definition = FEATURES.get(name)
        level = levels.get(name, 0)
        if definition is None or level <= 0:
            continue
        for needed, at_least in definition.requirements(level).items():
            if levels.get(needed, 0) < at_least:
                shown = metadata_version_name(at_least) if needed == METADATA_VERSION else str(at_least)
                return f"{name} could not be set to {level} because it depends on {needed} level {shown}"
    return None


class FeatureRecords(Protocol):
    """Where the finalized levels are kept as KRaft's ``FeatureLevelRecord`` s (the controller's metadata log):
    the levels it held when opened and the offset of the last one (None: there is no log), and a change's
    records (returns the offset of the last written)."""

    def replayed_features(self) -> tuple[dict[str, int], int] | None: ...

    def write_features(self, levels: dict[str, int]) -> int: ...


class FeatureControlManager:
    """The cluster's finalized feature levels, their epoch and their changes (one per cluster: the brokers of
    a :class:`~minikafka.broker.cluster.Cluster` share it, as they share Kafka's metadata log)."""

    def __init__(self, data_dir: Path | None = None, bootstrap: dict[str, int] | None = None,
                 records: FeatureRecords | None = None) -> None:
        self.path = Path(data_dir) / FEATURES_FILE if data_dir is not None else None
        self._levels: dict[str, int] = bootstrap_levels(bootstrap or {})
        self.epoch = 1  # the bootstrap levels are the first change
        replayed = records.replayed_features() if records is not None else None
        self.records = records if replayed is not None else None
        if replayed is not None and records is not None:
            if replayed[0]:
                self.replace(*replayed)
                return
            carried = self.path is not None and self.path.exists()
            if carried and self.path is not None:
                self._load(self.path)
            self.epoch = records.write_features(dict(self._levels))  # the cluster's formatting, or the file's
            if carried and self.path is not None:
                self.path.unlink()
            return
        if self.path is not None:
            if self.path.exists():
                self._load(self.path)
            else:
                self._persist()

    @staticmethod
    def parse_settings(text: str) -> dict[str, int]:
        """``minikafka.bootstrap.features`` checked (FeaturesError when the levels are not valid together)."""
        settings = parse_bootstrap_features(text)
        bootstrap_levels(settings)
        return settings

    def replace(self, levels: dict[str, int], epoch: int) -> None:
        """The levels the metadata log holds (replayed at start, or a broker process's copy of its controller's
        log now; ``epoch``: the offset of the last FeatureLevelRecord): taken, written nowhere."""
        if levels:
            self._levels, self.epoch = {k: v for k, v in levels.items() if v > 0}, epoch

    # -- queries (Kafka's FinalizedFeatures) ------------------------------------------------------
    def level(self, name: str) -> int:
        """The finalized level of a feature (0 when not finalized)."""
        return self._levels.get(name, 0)

    def finalized(self) -> dict[str, int]:
        """Every finalized feature (level 1 and up) by name."""
        return dict(self._levels)

    def supported(self) -> dict[str, tuple[int, int]]:
        return supported_features()

    # -- UpdateFeatures (Kafka's FeatureControlManager.updateFeatures) -----------------------------
    def update_features(self, updates: list[FeatureUpdate], validate_only: bool = False) -> ApiError:
        """Check every update against the proposed levels; apply all of them (one epoch) unless one fails or
        ``validate_only``."""
        proposed = dict(self._levels)
        for u in updates:
            proposed[u.feature] = u.max_version_level
        for u in updates:
            problem = self._check(u, proposed)
            if problem:
                message = f"Invalid update version {u.max_version_level} for feature {u.feature}. {problem}"
                log.warning("UpdateFeatures refused: %s", message)
                return ApiError(ErrorCode.INVALID_UPDATE_VERSION, message)
        if validate_only:
            return ApiError()
        for u in updates:
            old = self._levels.get(u.feature, 0)
            if u.max_version_level <= 0:
                self._levels.pop(u.feature, None)
            else:
                self._levels[u.feature] = u.max_version_level
            if old != u.max_version_level:
                shown = metadata_version_name if u.feature == METADATA_VERSION else str
                log.info("finalized %s: %s -> %s", u.feature, shown(old), shown(u.max_version_level))
        if updates:  # each update is a FeatureLevelRecord: the metadata moves on
            if self.records is not None:
                self.epoch = self.records.write_features({u.feature: max(u.max_version_level, 0) for u in updates})
            else:
                self.epoch += 1
                self._persist()
        return ApiError()

    def _check(self, update: FeatureUpdate, proposed: dict[str, int]) -> str | None:
        name, new = update.feature, update.max_version_level
        if update.upgrade_type == UpgradeType.UNKNOWN:
            return "The controller does not support the given upgrade type."
        if new < 0:
            return "A feature version cannot be less than 0."
        supported = supported_features().get(name)
        if supported is None:
            return "The controller does not support this feature."
        if not supported[0] <= new <= supported[1]:
            return f"The controller only supports versions {supported[0]}-{supported[1]}."
        current = self._levels.get(name, 0)
        if new < current and update.upgrade_type == UpgradeType.UPGRADE:
            return "A downgrade needs the upgrade type SAFE_DOWNGRADE or UNSAFE_DOWNGRADE."
        if new > current and update.upgrade_type != UpgradeType.UPGRADE:
            return "A downgrade cannot raise the level."
        if name == METADATA_VERSION:
            if new < current and metadata_changed_between(current, new):
                if update.upgrade_type == UpgradeType.UNSAFE_DOWNGRADE:
                    return "Unsafe metadata.version downgrades are not supported."
                return (f"Downgrading from {metadata_version_name(current)} to {metadata_version_name(new)} "
                        f"could lose metadata: refused.")
            return unmet_dependency(proposed)  # the other features must still have what they need
        definition = FEATURES[name]
        if new < current and not definition.downgradable:
            return f"{name} cannot be downgraded."
        return unmet_dependency(proposed, [name])

    # -- persistence ---------------------------------------------------------------------------------
    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
            levels = {str(k): int(v) for k, v in data["features"].items()}
            epoch = int(data["epoch"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise FeaturesError(f"cannot read the finalized features in {path}: {exc}") from None
        if METADATA_VERSION not in levels:
            raise FeaturesError(f"{path} has no {METADATA_VERSION}")
        self._levels = {k: v for k, v in levels.items() if v > 0}
        self.epoch = epoch

    def _persist(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"epoch": self.epoch, "features": self._levels}, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


__all__ = ["ApiError", "FEATURES", "FeatureControlManager", "FeatureDefinition", "FeatureUpdate", "FeaturesError",
           "GROUP_VERSION", "METADATA_VERSION", "SHARE_VERSION", "TRANSACTION_VERSION", "UpgradeType",
           "supported_features"]
