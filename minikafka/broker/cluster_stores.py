"""The stores of the cluster's metadata that a broker process's services and a controller process both open
(feature levels, client quotas, dynamic broker configs, ACLs), and the controller's sweep of expired delegation
tokens."""

from __future__ import annotations

from pathlib import Path

import trio

from .config import BrokerConfig, ConfigError, StartupError
from .config_ops import ConfigRecords
from .dynamic_config import DynamicConfigStore
from .features import FeatureControlManager, FeatureRecords, FeaturesError
from .quota.entity import QuotaConfigs, QuotaRecords, parse_quota_spec
from .security.authorizer import AclRecords, AclStore, AclStoreError
from .security.delegation_token import DelegationTokenManager


def open_features(config: BrokerConfig, data_dir: Path | None, metadata: FeatureRecords) -> FeatureControlManager:
    """The cluster's feature levels: those saved in ``data_dir``, else ``minikafka.bootstrap.features``
    (ConfigError when that is not valid, StartupError when the saved ones cannot be read)."""
    try:
        settings = FeatureControlManager.parse_settings(config.bootstrap_features)
    except FeaturesError as exc:
        raise ConfigError("minikafka.bootstrap.features", config.bootstrap_features, str(exc)) from None
    try:
        return FeatureControlManager(data_dir, settings, metadata)
    except FeaturesError as exc:
        raise StartupError(str(exc)) from None


def open_quota_configs(config: BrokerConfig, records: QuotaRecords) -> QuotaConfigs:
    """The configured client quotas (``minikafka.client.quotas``), then those of the metadata log."""
    quotas = QuotaConfigs()
    for spec in config.client_quotas:
        entity, values = parse_quota_spec(spec)
        for key, value in values.items():
            quotas.set(entity, key, value)
    quotas.attach(records)
    return quotas


def open_dynamic_configs(records: ConfigRecords) -> DynamicConfigStore:
    """The dynamic broker configs: ConfigRecords of the metadata log (in memory without one)."""
    store = DynamicConfigStore()
    store.attach(records)
    return store


def open_acl_store(data_dir: Path | None, records: AclRecords) -> AclStore:
    """The ACLs kept in ``data_dir``'s metadata log (none in memory); StartupError when they cannot be read."""
    try:
        return AclStore(data_dir, records)
    except AclStoreError as exc:
        raise StartupError(str(exc)) from None


async def token_expiry_loop(tokens: DelegationTokenManager, interval_ms: int) -> None:
    """Remove expired delegation tokens every ``delegation.token.expiry.check.interval.ms`` (the KRaft
    controller's periodic ``sweepExpiredDelegationTokens``); one loop per cluster."""
    while True:
        await trio.sleep(interval_ms / 1000)
        tokens.expire_tokens()
