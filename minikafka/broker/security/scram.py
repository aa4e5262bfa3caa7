"""SCRAM credentials: the broker's store, and Kafka's rules for altering and describing it (KIP-554).

Models three Kafka pieces at once:

* ``ScramCredential`` / ``ScramFormatter``: a credential is kept *salted* — salt, stored key
  (``H(HMAC(SaltedPassword, "Client Key"))``), server key (``HMAC(SaltedPassword, "Server Key")``) and
  iteration count (RFC 5802) — never the password or the salted password;
* ``ScramControlManager.alterCredentials``: AlterUserScramCredentials' validation and errors
  (UNACCEPTABLE_CREDENTIAL for an empty user name or iterations outside 4096..16384,
  UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND when deleting a credential that does not exist,
  DUPLICATE_RESOURCE for a user named twice in one request), all with Kafka's messages;
* ``ScramImage.describe``: DescribeUserScramCredentials (every user when none is named;
  RESOURCE_NOT_FOUND for a named user without credentials, DUPLICATE_RESOURCE for one named twice).

One store serves a whole cluster (as KRaft's metadata image does); with a data dir each credential is a
``UserScramCredentialRecord`` of the controller's metadata log (:class:`ScramRecords`), as in KRaft; without
one (a store used on its own), JSON in ``<data_dir>/__scram_credentials/credentials.json``, rewritten atomically
on every change.

Start-up seeding (minikafka's own key, so a SASL broker can start without an admin round trip)::

    minikafka.scram.users=alice:SCRAM-SHA-512:alice-secret,bob:SCRAM-SHA-256:bob-secret

Entries are separated by commas; each is ``user:mechanism:password`` (the password is everything after
the second colon, so it may contain colons but not commas).  Seeded credentials use 4096 iterations
(``kafka-configs``' default) and win over a persisted credential with another password; one that the
password already matches is kept as it is.

Deliberate differences: no delegation tokens (Kafka's ``tokenauth`` SCRAM extension), no
``metadata.version`` gate, and a response lists results in request order (deletions, then upsertions,
then errors) where Kafka's follows a hash map's order.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig, ConfigError, StartupError

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["ScramMechanism", "ScramCredential", "ScramCredentialStore", "AlterResult", "DescribeResult",
           "CredentialInfo", "Deletion", "Upsertion", "MIN_ITERATIONS", "MAX_ITERATIONS", "SEED_KEY", "DIR_NAME",
           "FILE_NAME", "salted_password", "credential_from_salted_password", "generate_credential", "read_json_file",
           "write_json_file"]

MIN_ITERATIONS = 4096
"""Kafka's ``ScramMechanism.minIterations()`` (the same for SHA-256 and SHA-512)."""
MAX_ITERATIONS = 16384
"""Kafka's ``ScramControlManager.MAX_ITERATIONS``."""
SEED_KEY = "minikafka.scram.users"
SEED_ITERATIONS = 4096
DIR_NAME = "__scram_credentials"
FILE_NAME = "credentials.json"


class ScramMechanism(IntEnum):
    """Kafka's ``org.apache.kafka.clients.admin.ScramMechanism``: the type byte on the wire."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism name ("SCRAM-SHA-256"); "UNKNOWN" for UNKNOWN."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        """The hashlib name of the mechanism's hash ("sha256", "sha512")."""
        return {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}[self]

    @classmethod
    def from_type(cls, value: int) -> ScramMechanism:
        """The mechanism of a wire type byte, UNKNOWN for any other value (Kafka's ``fromType``)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN

    @classmethod
    def from_mechanism_name(cls, name: str) -> ScramMechanism:
        """The mechanism of a SASL mechanism name ("SCRAM-SHA-512"), UNKNOWN for any other name."""
        for m in cls:
            if m is not cls.UNKNOWN and m.mechanism_name == name:
                return m
        return cls.UNKNOWN


@dataclass(frozen=True)
class ScramCredential:
    """Kafka's ``ScramCredential``: what the server keeps of a password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # as Kafka's ScramCredentialValue.toString: never the keys
        return "ScramCredential(salt=[hidden], stored_key=[hidden], server_key=[hidden], iterations=[hidden])"

    def to_json(self) -> dict[str, object]:
        enc = base64.b64encode
        return {"salt": enc(self.salt).decode(), "stored_key": enc(self.stored_key).decode(),
                "server_key": enc(self.server_key).decode(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, obj: dict) -> ScramCredential:
        dec = base64.b64decode
        return cls(dec(obj["salt"]), dec(obj["stored_key"]), dec(obj["server_key"]), int(obj["iterations"]))


def read_json_file(path: Path, parse: Callable[[Any], T], what: str) -> T | None:
    """``parse`` of the JSON document in ``path``; None when there is no such file.  An unreadable file or
    document (``parse`` raising ValueError, KeyError, TypeError or AttributeError) is a StartupError naming
    ``what``: a store that cannot be read must not start empty."""
    if not path.exists():
        return None
    try:
        return parse(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StartupError(f"{what} in {path} are unreadable: {exc}") from None


def _credentials_from_json(data: Any) -> dict[str, dict[ScramMechanism, ScramCredential]]:
    loaded: dict[str, dict[ScramMechanism, ScramCredential]] = {}
    for user, by_mech in data["credentials"].items():
        for name, cred in by_mech.items():
            mechanism = ScramMechanism.from_mechanism_name(name)
            if mechanism is ScramMechanism.UNKNOWN:
                raise ValueError(f"unknown mechanism {name}")
            loaded.setdefault(user, {})[mechanism] = ScramCredential.from_json(cred)
    return loaded


def write_json_file(path: Path, data: object, indent: int | None = 1) -> None:
    """Replace ``path`` with ``data`` as JSON, durably and atomically: written to a temporary file beside it,
    fsynced, then renamed over it (the SCRAM credential and delegation token stores, which Kafka keeps in its
    metadata log).  ``indent`` None writes compact JSON, several times faster to encode (C encoder) for a
    store rewritten often."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    text = json.dumps(data, indent=indent, sort_keys=True)
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's ``Hi(Normalize(password), salt, i)`` as Kafka computes it (the password's UTF-8 bytes,
    no SASLprep)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(mechanism: ScramMechanism, salt: bytes, salted: bytes,
                                    iterations: int) -> ScramCredential:
    """The credential for a salted password (what ``ScramControlManager.finishUpsertion`` stores)."""
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", mechanism.hash_name).digest()
    return ScramCredential(bytes(salt), stored_key, server_key, iterations)


def generate_credential(mechanism: ScramMechanism, password: str, iterations: int = SEED_ITERATIONS,
                        salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` (Kafka's ``ScramFormatter.generateCredential``; 32 random bytes of
    salt unless given)."""
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                           iterations)


def _matches(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from."""
    again = generate_credential(mechanism, password, credential.iterations, credential.salt)
    return hmac.compare_digest(again.stored_key, credential.stored_key)


@dataclass(frozen=True)
class AlterResult:
    """One user's result of AlterUserScramCredentials."""

    user: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class CredentialInfo:
    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True)
class DescribeResult:
    """One user's result of DescribeUserScramCredentials."""

    user: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    credential_infos: tuple[CredentialInfo, ...] = ()


@dataclass(frozen=True)
class Deletion:
    """An AlterUserScramCredentials deletion (``ScramCredentialDeletion``)."""

    name: str
    mechanism: int


@dataclass(frozen=True)
class Upsertion:
    """An AlterUserScramCredentials upsertion (``ScramCredentialUpsertion``): the salted password, never the
    password."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"Upsertion({self.name!r}, mechanism={self.mechanism}, iterations={self.iterations})"


_DUPLICATE = "A user credential cannot be altered twice in the same request"
_DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "


def _validate_name_and_mechanism(name: str, mechanism: ScramMechanism) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism is ScramMechanism.UNKNOWN:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


#: A credential as KRaft's UserScramCredentialRecord carries it: salt, stored key, server key, iterations.
CredentialValue = tuple[bytes, bytes, bytes, int]


class ScramRecords(Protocol):
    """Where a cluster's SCRAM credentials are kept as KRaft's records (the controller's metadata log): those it
    held when opened, by (user, mechanism type) (None: there is no log), and what a change writes
    (``UserScramCredentialRecord``, ``RemoveUserScramCredentialRecord``)."""

    def replayed_scram(self) -> dict[tuple[str, int], CredentialValue] | None: ...

    def write_scram(self, upserted: dict[tuple[str, int], CredentialValue], removed: list[tuple[str, int]]
                    ) -> None: ...


class ScramCredentialStore:
    """SCRAM credentials by user and mechanism (Kafka's ``CredentialCache`` fed by ``ScramControlManager``).

    ``path`` None keeps them in memory only; else they are loaded from it and rewritten on each change.
    Not thread-safe (Trio: one thread).
    """

    def __init__(self, path: Path | None = None, records: ScramRecords | None = None) -> None:
        """``records``: a data dir's metadata log, where each credential is a ``UserScramCredentialRecord`` as in
        KRaft (an earlier version's file at ``path`` is carried over into it once); else the file at ``path``."""
        self.path = path
        self._credentials: dict[str, dict[ScramMechanism, ScramCredential]] = {}
        replayed = records.replayed_scram() if records is not None else None
        self.records = records if replayed is not None else None
        if replayed is None:
            if path is not None:
                self._load()
            return
        self.replace(replayed)
        if not replayed and path is not None and path.exists():
            self._load()
            self._save(upserted=[(u, m) for u, creds in self._credentials.items() for m in creds])
            path.unlink()

    def replace(self, credentials: dict[tuple[str, int], CredentialValue]) -> None:
        """The credentials the metadata log holds (replayed at start, or a broker process's copy of its
        controller's log now): taken, written nowhere."""
        self._credentials = {}
        for (user, mechanism), (salt, stored_key, server_key, iterations) in credentials.items():
            self._credentials.setdefault(user, {})[ScramMechanism.from_type(mechanism)] = ScramCredential(
                salt, stored_key, server_key, iterations)

    @classmethod
    def for_data_dir(cls, data_dir: Path | None, records: ScramRecords | None = None) -> ScramCredentialStore:
        """The store of a broker or cluster: ``records`` (its metadata log), else
        ``<data_dir>/__scram_credentials/credentials.json``, or memory."""
        return cls(None if data_dir is None else Path(data_dir) / DIR_NAME / FILE_NAME, records)

    @classmethod
    def from_config(cls, config: BrokerConfig, data_dir: Path | None,
                    records: ScramRecords | None = None) -> ScramCredentialStore:
        """The store in ``data_dir`` (or memory), seeded from the config's ``minikafka.scram.users``."""
        store = cls.for_data_dir(data_dir, records)
        spec = config.extra.get(SEED_KEY)
        if spec:
            store.seed(spec)
        return store

    # -- lookups (the SASL/SCRAM server's callback) -------------------------------------------------------
    def credential(self, user: str, mechanism: ScramMechanism | str) -> ScramCredential | None:
        """The credential of ``user`` for ``mechanism`` (a ScramMechanism or a SASL mechanism name)."""
        if isinstance(mechanism, str):
            mechanism = ScramMechanism.from_mechanism_name(mechanism)
        return self._credentials.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        """Every user with at least one credential."""
        return list(self._credentials)

    # -- changes ----------------------------------------------------------------------------------------
    def upsert(self, user: str, mechanism: ScramMechanism, credential: ScramCredential) -> None:
        """Add or replace a credential (no validation: see :meth:`alter_credentials`)."""
        self._credentials.setdefault(user, {})[mechanism] = credential
        self._save(upserted=[(user, mechanism)])

    def delete(self, user: str, mechanism: ScramMechanism) -> bool:
        """Remove a credential; False if there was none."""
        creds = self._credentials.get(user)
        if creds is None or mechanism not in creds:
            return False
        del creds[mechanism]
        if not creds:
            del self._credentials[user]
        self._save(removed=[(user, mechanism)])
        return True

    def set_password(self, user: str, mechanism: ScramMechanism, password: str,
                     iterations: int = SEED_ITERATIONS) -> None:
        """Store a credential for ``password`` (as ``kafka-configs --add-config 'SCRAM-SHA-512=[password=..]'``),
        keeping the existing one if the password already matches it."""
        current = self.credential(user, mechanism)
        if current is not None and current.iterations == iterations and _matches(mechanism, current, password):
            return
        self.upsert(user, mechanism, generate_credential(mechanism, password, iterations))

    def seed(self, spec: str, key: str = SEED_KEY) -> list[str]:
        """Apply a ``minikafka.scram.users`` value (see the module docstring); the users seeded.
        :class:`~minikafka.broker.config.ConfigError` if an entry is malformed."""
        seeded: list[str] = []
        for raw in spec.split(","):
            entry = raw.strip()
            if not entry:
                continue
            parts = entry.split(":", 2)
            if len(parts) != 3 or not parts[0] or not parts[2]:
                raise ConfigError(key, spec, f"entry '{parts[0]}:...' is not user:mechanism:password")
            user, mech_name, password = parts[0].strip(), parts[1].strip().upper(), parts[2]
            mechanism = ScramMechanism.from_mechanism_name(mech_name)
            if mechanism is ScramMechanism.UNKNOWN:
                raise ConfigError(key, spec, f"unknown SCRAM mechanism {mech_name} for user {user} "
                                             "(SCRAM-SHA-256 or SCRAM-SHA-512)")
            self.set_password(user, mechanism, password)
            seeded.append(user)
        if seeded:
            log.info("SCRAM credentials seeded from %s for %s", key, ", ".join(sorted(set(seeded))))
        return seeded

    # -- AlterUserScramCredentials (Kafka's ScramControlManager.alterCredentials) --------------------------
    def alter_credentials(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> list[AlterResult]:
        """Apply a request's deletions and upsertions with Kafka's validation; one result per user named.

        A user named more than once (by deletions and upsertions together) is refused as a whole with
        DUPLICATE_RESOURCE; the other users' changes are applied.
        """
        to_delete: dict[str, Deletion] = {}
        to_upsert: dict[str, Upsertion] = {}
        errors: dict[str, tuple[ErrorCode, str]] = {}
        for d in deletions:
            if d.name in errors:
                continue
            if to_delete.pop(d.name, None) is not None:
                errors[d.name] = (ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE)
                continue
            problem = self._validate_deletion(d)
            if problem is not None:
                errors[d.name] = problem
            else:
                to_delete[d.name] = d
        for u in upsertions:
            if u.name in errors:
                continue
            if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
                errors[u.name] = (ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE)
                continue
            problem = self._validate_upsertion(u)
            if problem is not None:
                errors[u.name] = problem
            else:
                to_upsert[u.name] = u
        results: list[AlterResult] = []
        removed: list[tuple[str, ScramMechanism]] = []
        upserted: list[tuple[str, ScramMechanism]] = []
        for d in to_delete.values():
            mechanism = ScramMechanism.from_type(d.mechanism)
            creds = self._credentials[d.name]
            del creds[mechanism]
            if not creds:
                del self._credentials[d.name]
            removed.append((d.name, mechanism))
            results.append(AlterResult(d.name))
            log.info("SCRAM credential %s of user %s deleted", mechanism.mechanism_name, d.name)
        for u in to_upsert.values():
            mechanism = ScramMechanism.from_type(u.mechanism)
            cred = credential_from_salted_password(mechanism, u.salt, u.salted_password, u.iterations)
            self._credentials.setdefault(u.name, {})[mechanism] = cred
            upserted.append((u.name, mechanism))
            results.append(AlterResult(u.name))
            log.info("SCRAM credential %s of user %s set (%d iterations)", mechanism.mechanism_name, u.name,
                     u.iterations)
        results.extend(AlterResult(user, code, message) for user, (code, message) in errors.items())
        if removed or upserted:
            self._save(upserted, removed)
        return results

    def _validate_deletion(self, d: Deletion) -> tuple[ErrorCode, str] | None:
        mechanism = ScramMechanism.from_type(d.mechanism)
        problem = _validate_name_and_mechanism(d.name, mechanism)
        if problem is not None:
            return problem
        if self.credential(d.name, mechanism) is None:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None

    @staticmethod
    def _validate_upsertion(u: Upsertion) -> tuple[ErrorCode, str] | None:
        problem = _validate_name_and_mechanism(u.name, ScramMechanism.from_type(u.mechanism))
        if problem is not None:
            return problem
        if u.iterations < MIN_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if u.iterations > MAX_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        return None

    # -- DescribeUserScramCredentials (Kafka's ScramImage.describe) ----------------------------------------
    def describe_credentials(self, users: Iterable[str] | None) -> list[DescribeResult]:
        """Every user's mechanisms and iterations (``users`` None or empty: all users with credentials)."""
        wanted: dict[str, bool] = {}  # user -> named twice
        names = list(users) if users is not None else []
        if not names:
            wanted = {user: False for user in self._credentials}
        else:
            for name in names:
                wanted[name] = name in wanted
        results: list[DescribeResult] = []
        for user, duplicate in wanted.items():
            if duplicate:
                results.append(DescribeResult(user, ErrorCode.DUPLICATE_RESOURCE, _DESCRIBE_DUPLICATE_USER + user))
                continue
            creds = self._credentials.get(user, {})
            if not creds:
                results.append(DescribeResult(user, ErrorCode.RESOURCE_NOT_FOUND,
                                              _DESCRIBE_USER_THAT_DOES_NOT_EXIST + user))
                continue
            infos = tuple(CredentialInfo(m, c.iterations) for m, c in sorted(creds.items()))
            results.append(DescribeResult(user, credential_infos=infos))
        return results

    # -- persistence ------------------------------------------------------------------------------------------
    def _load(self) -> None:
        assert self.path is not None
        loaded = read_json_file(self.path, _credentials_from_json, "SCRAM credentials")
        if loaded is None:
            return
        self._credentials = loaded
        log.info("loaded SCRAM credentials of %d user(s) from %s", len(loaded), self.path)

    def _save(self, upserted: Sequence[tuple[str, ScramMechanism]] = (),
              removed: Sequence[tuple[str, ScramMechanism]] = ()) -> None:
        """Keep a change: the ``upserted`` and ``removed`` credentials as records of the metadata log, else the
        whole store in the file."""
        if self.records is not None:
            values: dict[tuple[str, int], CredentialValue] = {}
            for u, m in upserted:
                c = self._credentials[u][m]
                values[(u, int(m))] = (c.salt, c.stored_key, c.server_key, c.iterations)
            self.records.write_scram(values, [(u, int(m)) for u, m in removed])
            return
        if self.path is None:
            return
        data = {"version": 1, "credentials": {
            user: {m.mechanism_name: c.to_json() for m, c in sorted(creds.items())}
            for user, creds in self._credentials.items()}}
        write_json_file(self.path, data)
