"""Broker security: SASL mechanisms (:mod:`.sasl`), SCRAM credentials (:mod:`.scram`), JAAS values (:mod:`.jaas`),
listeners, TLS and ACLs (their own modules).

The names below are re-exported lazily: ``broker.config`` imports :mod:`.listeners`, which runs this
package first, and :mod:`.sasl` needs ``broker.config`` (eager imports here would be a cycle).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .jaas import JaasConfigError, JaasEntry, parse_jaas_config, server_jaas_entries
    from .sasl import (OAuthBearerSaslServer, PlainSaslServer, SaslAuthenticationError, SaslMechanism,
                       ScramSaslServer, UnsupportedSaslMechanism, create_mechanism, enabled_mechanisms,
                       invalid_credentials_message, validate_jaas_configs)
    from .scram import ScramCredential, ScramCredentialStore, ScramMechanism

_EXPORTS = {
    "jaas": ["JaasConfigError", "JaasEntry", "parse_jaas_config", "server_jaas_entries"],
    "sasl": ["OAuthBearerSaslServer", "PlainSaslServer", "SaslAuthenticationError", "SaslMechanism",
             "ScramSaslServer", "UnsupportedSaslMechanism", "create_mechanism", "enabled_mechanisms",
             "invalid_credentials_message", "validate_jaas_configs"],
    "scram": ["ScramCredential", "ScramCredentialStore", "ScramMechanism"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
