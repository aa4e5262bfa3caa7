"""A capture of authenticated traffic (issue 15), shared by the capture/replay and analysis tests.

A broker with a PLAINTEXT and a SASL_SSL listener (certificates made at test time by ``tls_certs``, SCRAM
users seeded with ``minikafka.scram.users``) captures real confluent-kafka clients over SASL_SSL with
SCRAM-SHA-512: alice then bob produce :data:`N` values of 1000 bytes each, flushing every :data:`BATCH`, with the
same client id :data:`CLIENT_ID` (one after the other, so the replay appends in the captured order), then bob
consumes them all in a group.

Imported as ``security_capture`` (``tests/`` is on the pytest pythonpath).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tls_certs import Pki

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISM = "SCRAM-SHA-512"
CLIENT_ID = "shared"
CONSUMER_ID = "sec-consumer"
TOPIC = "sec"
N = 300
BATCH = 30
VALUE = b"s" * 1000


def secure_properties(pki: Pki, listeners: str = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                      **extra: str) -> dict[str, str]:
    """``server.properties`` of a broker with a SASL_SSL listener offering SCRAM and PLAIN, alice and bob
    seeded as SCRAM-SHA-512 users (and PLAIN users), and ``extra`` keys."""
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
    return {
        "listeners": listeners,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.pem_file),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain,
        "minikafka.scram.users": ",".join(f"{u}:{m}:{p}" for u, p in USERS.items()
                                          for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")),
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }


def client_conf(bootstrap: str, pki: Pki, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca_file),
            "sasl.mechanism": MECHANISM, "sasl.username": user, "sasl.password": USERS[user], "log_level": 3,
            **extra}


def sasl_ssl_capture(cap: Path, pki: Pki) -> None:
    """Capture the session described in the module docstring into ``cap``."""
    from confluent_kafka import Consumer, Producer

    from minikafka.testing import BrokerThread

    with BrokerThread(properties=secure_properties(pki), capture_dir=cap) as bt:
        bt.create_topic(TOPIC, 1)
        bootstrap = bt.bootstrap_for("SASL_SSL")
        for user in ("alice", "bob"):
            p = Producer(client_conf(bootstrap, pki, user, **{"client.id": CLIENT_ID, "linger.ms": 5}))
            errors: list = []
            for i in range(N):
                p.produce(TOPIC, VALUE, key=b"%s-%d" % (user.encode(), i),
                          on_delivery=lambda err, m: errors.append(err) if err else None)
                if i % BATCH == BATCH - 1:  # one Produce request per BATCH values
                    assert p.flush(30) == 0
            assert p.flush(30) == 0 and not errors, errors
            del p
        c = Consumer(client_conf(bootstrap, pki, "bob", **{
            "client.id": CONSUMER_ID, "group.id": "sec-group", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "fetch.wait.max.ms": 50}))
        c.subscribe([TOPIC])
        got = 0
        deadline = time.monotonic() + 30
        while got < 2 * N:
            assert time.monotonic() < deadline, f"consumed {got} of {2 * N}"
            got += len([m for m in c.consume(500, 0.2) if m.error() is None])
        c.commit(asynchronous=False)
        c.close()


def credentials_file(path: Path) -> Path:
    """A replay credentials file for alice (by principal) and bob (by bare name)."""
    path.write_text(json.dumps({"User:alice": USERS["alice"], "bob": {"username": "bob", "password": USERS["bob"]}}))
    return path
