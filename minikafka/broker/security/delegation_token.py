"""Delegation tokens (KIP-48, KIP-373): creating, renewing, expiring and describing them, and the SCRAM
credentials a client logs in with.

Models four Kafka pieces at once:

* ``TokenInformation`` / ``DelegationToken``: a token is its id (Kafka's random ``Uuid`` string), owner,
  requester (KIP-373: who created it, when that is not the owner), renewers, issue time, expiry time
  (when it stops working unless renewed) and max time (past which no renewal helps); its HMAC (the
  password) is ``HMAC-SHA512(delegation.token.secret.key, token id)``, never stored: every broker of a
  cluster with the same secret computes the same HMAC (Kafka's ``DelegationTokenManager.createHmac``).
* ``DelegationTokenControlManager``: CreateDelegationToken, RenewDelegationToken and ExpireDelegationToken
  with Kafka's rules and errors (DELEGATION_TOKEN_AUTH_DISABLED without a secret, DELEGATION_TOKEN_NOT_FOUND
  for an unknown HMAC, DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH when the principal is
  neither owner nor renewer, INVALID_PRINCIPAL_TYPE for a renewer that is not a ``User``; lifetimes capped
  by ``delegation.token.max.lifetime.ms`` and ``delegation.token.expiry.time.ms``; a negative expiry
  period removes the token at once) and ``sweepExpiredDelegationTokens``
  (``delegation.token.expiry.check.interval.ms``).
* ``DelegationTokenCache``: tokens by id and by HMAC, and the SCRAM credentials of each token, derived as
  Kafka derives them (``ScramFormatter.generateCredential`` over the Base64 HMAC, for SCRAM-SHA-256 and
  SCRAM-SHA-512, 4096 iterations) for the SCRAM server's ``tokenauth`` logins.  Deliberate difference: Kafka
  derives both credentials when it caches a token; here each is derived on the first login with it and then
  kept, so creating or loading tokens costs no PBKDF2 on the event loop.
* ``DelegationTokenManager.filterToken``: which tokens DescribeDelegationToken shows
  (:func:`filter_token`).

One manager serves a whole cluster (as KRaft's metadata image does); with a data dir its tokens (without
HMACs) are ``DelegationTokenRecord`` s of the controller's metadata log (:class:`TokenRecords`), as in KRaft; an
earlier version's ``<data_dir>/__scram_credentials/delegation_tokens.json`` is carried over once.  A manager
given only a ``path`` keeps them there as compact JSON, rewritten atomically (and fsynced) on every change.

Deliberate differences: principals are ``"Type:name"`` strings; no ``metadata.version`` gate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac as hmac_module
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from ...common import SYSTEM_CLOCK, Clock
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from .scram import (DIR_NAME, MIN_ITERATIONS, ScramCredential, ScramMechanism, generate_credential,
                    read_json_file, write_json_file)

log = logging.getLogger(__name__)

__all__ = ["TokenInformation", "DelegationToken", "CreateTokenResult", "DelegationTokenManager", "create_hmac",
           "filter_token", "ERROR_TIMESTAMP", "TOKENS_FILE_NAME", "USER_TYPE"]

ERROR_TIMESTAMP = -1
"""Kafka's ``DelegationTokenManager.ErrorTimestamp``: the timestamps of a refused request."""
TOKENS_FILE_NAME = "delegation_tokens.json"
USER_TYPE = "User"
_MAX_LONG = 2**63 - 1


def create_hmac(token_id: str, secret_key: str) -> bytes:
    """``HmacSHA512(secret key, token id)``, both as UTF-8 (Kafka's ``DelegationTokenManager.createHmac``)."""
    return hmac_module.new(secret_key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def _random_token_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes as URL-safe Base64 without padding, never
    starting with ``-``."""
    while True:
        token_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")
        if not token_id.startswith("-"):
            return token_id


def _sum(now: int, duration: int) -> int:
    """``now + duration``, saturating at Long.MAX_VALUE (Kafka's ``DelegationTokenControlManager.sum``)."""
    return _MAX_LONG if now > _MAX_LONG - duration else now + duration


def _principal_name(principal: str) -> str:
    return principal.partition(":")[2]


@dataclass(frozen=True)
class TokenInformation:
    """Kafka's ``TokenInformation``: everything about a token but its HMAC."""

    token_id: str
    owner: str  # "User:alice"
    token_requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ``ownerOrRenewer``: the owner, the requester or a renewer (who may describe it)."""
        return principal == self.owner or principal == self.token_requester or principal in self.renewers

    def allowed_to_renew(self, principal: str) -> bool:
        """Kafka's ``DelegationTokenControlManager.allowedToRenew``: the owner or a renewer."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    def to_json(self) -> dict[str, object]:
        return {"token_id": self.token_id, "owner": self.owner, "token_requester": self.token_requester,
                "renewers": list(self.renewers), "issue_timestamp": self.issue_timestamp,
                "max_timestamp": self.max_timestamp, "expiry_timestamp": self.expiry_timestamp}

    @classmethod
    def from_json(cls, obj: dict) -> TokenInformation:
        return cls(str(obj["token_id"]), str(obj["owner"]), str(obj["token_requester"]),
                   tuple(str(r) for r in obj["renewers"]), int(obj["issue_timestamp"]), int(obj["max_timestamp"]),
                   int(obj["expiry_timestamp"]))


@dataclass(frozen=True)
class DelegationToken:
    """Kafka's ``DelegationToken``: the information and the HMAC."""

    info: TokenInformation
    hmac: bytes

    def __repr__(self) -> str:
        return f"DelegationToken({self.info!r}, hmac=[hidden])"


@dataclass(frozen=True)
class CreateTokenResult:
    """What CreateDelegationToken answers (Kafka's ``CreateTokenResult``)."""

    error: ErrorCode
    owner: str
    token_requester: str
    issue_timestamp: int = 0
    expiry_timestamp: int = 0
    max_timestamp: int = 0
    token_id: str = ""
    hmac: bytes = b""


def filter_token(requester: str, owners: list[str] | None, token: TokenInformation,
                 authorize_token: Callable[[str], bool], authorize_requester: Callable[[str], bool]) -> bool:
    """Kafka's ``DelegationTokenManager.filterToken``: whether DescribeDelegationToken shows ``token``.

    Tokens none of ``owners`` owns, requested or may renew are left out; the requester sees its own tokens
    (as owner, requester or renewer), others with DESCRIBE on the DELEGATION_TOKEN (``authorize_token(id)``)
    or DESCRIBE_TOKENS on the owning USER (``authorize_requester("User:owner")``)."""
    if owners is not None and not any(token.owner_or_renewer(owner) for owner in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return authorize_token(token.token_id) or authorize_requester(token.owner)


#: A token as KRaft's DelegationTokenRecord carries it: id, owner, requester, renewers, issue, max and expiry times.
TokenValue = tuple[str, str, str, tuple[str, ...], int, int, int]


class TokenRecords(Protocol):
    """Where the tokens are kept as KRaft's records (the controller's metadata log): those it held when opened
    (None: there is no log), and what a change writes (``DelegationTokenRecord`` for a token created or renewed,
    ``RemoveDelegationTokenRecord`` for one expired)."""

    def replayed_tokens(self) -> list[TokenValue] | None: ...

    def write_tokens(self, upserted: list[TokenValue], removed: list[str]) -> None: ...


class DelegationTokenManager:
    """The cluster's delegation tokens (see the module docstring).

    ``secret_key`` empty disables them (every request answers DELEGATION_TOKEN_AUTH_DISABLED, no token logs
    in).  ``records`` (a data dir's metadata log) keeps them as records, as KRaft does (an earlier version's
    file at ``path`` carried over once); else ``path``, or memory when None.  ``clock`` gives the wall-clock
    times.  Not thread-safe (Trio).
    """

    def __init__(self, secret_key: str = "", *, max_lifetime_ms: int = 7 * 24 * 3600 * 1000,
                 expiry_time_ms: int = 24 * 3600 * 1000, path: Path | None = None,
                 clock: Clock = SYSTEM_CLOCK, records: TokenRecords | None = None) -> None:
        self.secret_key = secret_key
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self.path = path
        self.clock = clock
        self._tokens: dict[str, TokenInformation] = {}
        self._hmacs: dict[str, bytes] = {}  # token id -> HMAC
        self._by_hmac: dict[bytes, str] = {}  # HMAC -> token id
        # token id -> the SCRAM credentials derived so far (on the first login with each mechanism)
        self._credentials: dict[str, dict[ScramMechanism, ScramCredential]] = {}
        replayed = records.replayed_tokens() if records is not None else None
        self.records = records if replayed is not None else None
        if replayed is None:
            if path is not None:
                self._load()
            return
        self._take([TokenInformation(*value) for value in replayed], "the metadata log")
        if not replayed and path is not None and path.exists():
            self._load()  # an earlier version's file: its tokens written as records, then it goes
            self._save(upserted=list(self._tokens))
            path.unlink()

    @classmethod
    def from_config(cls, config: BrokerConfig, data_dir: Path | None, *, clock: Clock = SYSTEM_CLOCK,
                    records: TokenRecords | None = None) -> DelegationTokenManager:
        """The manager of a broker or cluster: ``delegation.token.*`` settings, tokens in ``records`` (else in
        ``data_dir``)."""
        path = None if data_dir is None else Path(data_dir) / DIR_NAME / TOKENS_FILE_NAME
        return cls(config.delegation_token_secret_key, max_lifetime_ms=config.delegation_token_max_lifetime_ms,
                   expiry_time_ms=config.delegation_token_expiry_time_ms, path=path, clock=clock, records=records)

    @property
    def enabled(self) -> bool:
        """Kafka's ``tokenAuthEnabled``: a non-empty ``delegation.token.secret.key``."""
        return bool(self.secret_key)

    # -- the cache (DelegationTokenCache) ------------------------------------------------------------------
    def _add(self, info: TokenInformation) -> None:
        """Cache a token with its HMAC (Kafka's ``DelegationTokenManager.updateCache``); its SCRAM credentials
        come later, from :meth:`credential`."""
        old = self._hmacs.get(info.token_id)
        self._tokens[info.token_id] = info
        if old is not None:  # a renewal or an expiry change: same HMAC, same credentials
            return
        mac = create_hmac(info.token_id, self.secret_key)
        self._hmacs[info.token_id] = mac
        self._by_hmac[mac] = info.token_id

    def _remove(self, token_id: str) -> None:
        self._tokens.pop(token_id, None)
        self._credentials.pop(token_id, None)
        mac = self._hmacs.pop(token_id, None)
        if mac is not None:
            self._by_hmac.pop(mac, None)

    def _token_for_request(self, mac: bytes) -> tuple[ErrorCode, TokenInformation | None]:
        """The token a renew or expire request names by its HMAC, or the error Kafka answers before looking
        further: DELEGATION_TOKEN_AUTH_DISABLED without a secret key, DELEGATION_TOKEN_NOT_FOUND for an unknown
        HMAC."""
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, None
        token_id = self._by_hmac.get(bytes(mac))
        info = None if token_id is None else self._tokens.get(token_id)
        return (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, None) if info is None else (ErrorCode.NONE, info)

    def _set_expiry(self, info: TokenInformation, expiry_timestamp: int) -> None:
        """A renewed or expiry-changed token, cached and saved."""
        self._add(replace(info, expiry_timestamp=expiry_timestamp))
        self._save(upserted=[info.token_id])

    def token(self, token_id: str) -> TokenInformation | None:
        """The token with this id (the SCRAM server's ``tokenCache.token``)."""
        return self._tokens.get(token_id)

    def owner(self, token_id: str) -> str | None:
        """The owner's name (not its type) of a token (Kafka's ``DelegationTokenCache.owner``)."""
        info = self._tokens.get(token_id)
        return None if info is None else _principal_name(info.owner)

    def credential(self, token_id: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """The SCRAM credential a client proves it holds the token's HMAC with: derived from the Base64 HMAC
        (4096 iterations, a random salt) on the first login with ``mechanism``, then kept with the token."""
        mac = self._hmacs.get(token_id)
        if mac is None or not self.enabled:
            return None
        derived = self._credentials.setdefault(token_id, {})
        credential = derived.get(mechanism)
        if credential is None:
            credential = generate_credential(mechanism, base64.b64encode(mac).decode("ascii"), MIN_ITERATIONS)
            derived[mechanism] = credential
        return credential

    def hmac(self, token_id: str) -> bytes | None:
        return self._hmacs.get(token_id)

    def all_tokens(self) -> list[TokenInformation]:
        return list(self._tokens.values())

    def tokens(self, eligible: Callable[[TokenInformation], bool]) -> list[DelegationToken]:
        """The tokens ``eligible`` accepts, with their HMACs (Kafka's ``getTokens``)."""
        return [DelegationToken(info, self._hmacs[info.token_id])
                for info in self._tokens.values() if eligible(info)]

    # -- CreateDelegationToken / RenewDelegationToken / ExpireDelegationToken (DelegationTokenControlManager) --
    def create_token(self, owner: str, requester: str, renewers: Iterable[tuple[str, str]],
                     max_lifetime_ms: int) -> CreateTokenResult:
        """A new token for ``owner`` (``"User:alice"``) requested by ``requester``; ``renewers`` as
        (principal type, name); ``max_lifetime_ms`` <= 0: ``delegation.token.max.lifetime.ms``."""
        now = self.clock.time_ms()
        if not self.enabled:
            return CreateTokenResult(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, owner, requester)
        max_life = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            max_life = min(max_life, max_lifetime_ms)
        max_timestamp = _sum(now, max_life)
        expiry_timestamp = min(max_timestamp, _sum(now, self.expiry_time_ms))
        renewer_principals: list[str] = []
        for principal_type, name in renewers:
            if principal_type != USER_TYPE:
                return CreateTokenResult(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
            renewer_principals.append(f"{principal_type}:{name}")
        token_id = _random_token_id()
        info = TokenInformation(token_id, owner, requester, tuple(renewer_principals), now, max_timestamp,
                                expiry_timestamp)
        self._add(info)
        self._save(upserted=[token_id])
        log.info("Created delegation token %s for owner %s (requested by %s), expiring at %d, max %d",
                 token_id, owner, requester, expiry_timestamp, max_timestamp)
        return CreateTokenResult(ErrorCode.NONE, owner, requester, now, expiry_timestamp, max_timestamp, token_id,
                                 self._hmacs[token_id])

    def renew_token(self, principal: str, mac: bytes, renew_period_ms: int) -> tuple[ErrorCode, int]:
        """(error, new expiry timestamp); ``renew_period_ms`` <= 0: ``delegation.token.expiry.time.ms``."""
        now = self.clock.time_ms()
        error, info = self._token_for_request(mac)
        if info is None:
            return error, 0
        if info.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, 0
        if not info.allowed_to_renew(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, 0
        renew_life = self.expiry_time_ms
        if renew_period_ms > 0:
            renew_life = min(renew_life, renew_period_ms)
        expiry_timestamp = min(info.max_timestamp, now + renew_life)
        self._set_expiry(info, expiry_timestamp)
        log.info("Renewed delegation token %s of %s (by %s) until %d", info.token_id, info.owner, principal,
                 expiry_timestamp)
        return ErrorCode.NONE, expiry_timestamp

    def expire_token(self, principal: str, mac: bytes, expiry_period_ms: int) -> tuple[ErrorCode, int]:
        """(error, new expiry timestamp); a negative period removes the token now."""
        now = self.clock.time_ms()
        error, info = self._token_for_request(mac)
        if info is None:
            return error, 0
        if not info.allowed_to_renew(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, 0
        if expiry_period_ms < 0:  # expire immediately
            self._remove(info.token_id)
            self._save(removed=[info.token_id])
            log.info("Expired delegation token %s of %s (by %s)", info.token_id, info.owner, principal)
            return ErrorCode.NONE, now
        if info.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, 0
        expiry_timestamp = min(info.max_timestamp, _sum(now, expiry_period_ms))
        self._set_expiry(info, expiry_timestamp)
        log.info("Delegation token %s of %s (by %s) now expires at %d", info.token_id, info.owner, principal,
                 expiry_timestamp)
        return ErrorCode.NONE, expiry_timestamp

    def expire_tokens(self) -> list[str]:
        """Remove every token past its expiry or max timestamp (Kafka's ``sweepExpiredDelegationTokens``);
        the ids removed."""
        now = self.clock.time_ms()
        removed = [info for info in self._tokens.values() if info.expired(now)]
        for info in removed:
            log.info("Delegation token expired for token: %s for owner: %s", info.token_id, info.owner)
            self._remove(info.token_id)
        if removed:
            self._save(removed=[info.token_id for info in removed])
        return [info.token_id for info in removed]

    # -- persistence ----------------------------------------------------------------------------------------
    def _load(self) -> None:
        assert self.path is not None
        infos = read_json_file(self.path, lambda data: [TokenInformation.from_json(obj) for obj in data["tokens"]],
                               "delegation tokens")
        if infos is not None:
            self._take(infos, str(self.path))

    def replace(self, values: list[TokenValue]) -> None:
        """The tokens a broker process's copy of its controller's metadata log holds now: taken, written
        nowhere."""
        self._tokens, self._hmacs, self._by_hmac, self._credentials = {}, {}, {}, {}
        self._take([TokenInformation(*value) for value in values], "")

    def _take(self, infos: list[TokenInformation], where: str) -> None:
        if not self.enabled:
            if infos:
                log.warning("%d delegation token(s) in %s are unusable: delegation.token.secret.key is not set",
                            len(infos), where)
            self._tokens = {info.token_id: info for info in infos}
            return
        for info in infos:
            self._add(info)
        if infos and where:
            log.info("loaded %d delegation token(s) from %s", len(infos), where)

    def _save(self, upserted: Sequence[str] = (), removed: Sequence[str] = ()) -> None:
        """Keep a change: the tokens ``upserted`` (by id) and ``removed`` as records of the metadata log, else
        every token in the file."""
        if self.records is not None:
            tokens = [self._tokens[i] for i in upserted]
            self.records.write_tokens([(t.token_id, t.owner, t.token_requester, t.renewers, t.issue_timestamp,
                                        t.max_timestamp, t.expiry_timestamp) for t in tokens], list(removed))
            return
        if self.path is None:
            return
        data = {"version": 1, "tokens": [info.to_json() for info in self._tokens.values()]}
        write_json_file(self.path, data, indent=None)  # rewritten on every change: compact, quick to encode
