"""Client quotas: configuration by entity, ClientQuotaManager, and the throttled-channel delay queue."""

from .client_quota_manager import ClientQuotaManager, ClientRequestQuotaManager, QuotaManagers
from .entity import DEFAULT, QUOTA_KEYS, ClientQuotaEntity, QuotaConfigs
from .throttle import ThrottleCallback, ThrottledChannelReaper, client_throttles_itself

__all__ = [
    "DEFAULT", "QUOTA_KEYS", "ClientQuotaEntity", "ClientQuotaManager", "ClientRequestQuotaManager",
    "QuotaConfigs", "QuotaManagers", "ThrottleCallback", "ThrottledChannelReaper", "client_throttles_itself",
]
