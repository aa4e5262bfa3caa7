"""The stores of the cluster's metadata that a broker process's services and a controller process both open
(feature levels, client quotas), and the controller's sweep of expired delegation tokens."""

from __future__ import annotations

from pathlib import Path

import trio

from .config import BrokerConfig, ConfigError, StartupError
from .features import FeatureControlManager, FeatureRecords, FeaturesError
from .quota.entity import QuotaConfigs, QuotaRecords, parse_quota_spec
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


async def token_expiry_loop(tokens: DelegationTokenManager, interval_ms: int) -> None:
    """Remove expired delegation tokens every ``delegation.token.expiry.check.interval.ms`` (the KRaft
    controller's periodic ``sweepExpiredDelegationTokens``); one loop per cluster."""
    while True:
        await trio.sleep(interval_ms / 1000)
        tokens.expire_tokens()
