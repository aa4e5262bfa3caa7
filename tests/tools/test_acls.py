"""`minikafka acls` (kafka-acls.sh) against a secured broker: the tool logs in as a super user with
``--command-config`` (SASL over PLAINTEXT or TLS), adds, lists and removes ACLs, and real clients
(confluent-kafka, logging in as alice, bob or carol) are denied before and allowed after, as the ACLs say.

One broker serves the module: SASL_PLAINTEXT and SASL_SSL listeners (PLAIN and SCRAM-SHA-512 users; the
broker reaches itself as User:broker over SASL_PLAINTEXT, for KIP-890 transaction verification), the
StandardAuthorizer, ``super.users=User:admin;User:broker``, no access without an ACL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from minikafka.testing import BrokerThread
from tls_certs import Pki, make_pki
from tools_helpers import run_cli, run_subprocess

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
              'password="broker-secret" user_broker="broker-secret" user_admin="admin-secret" '
              'user_alice="alice-secret" user_bob="bob-secret" user_carol="carol-secret";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(pki: Pki) -> Iterator[BrokerThread]:
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.pem_file),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "minikafka.scram.users": "admin:SCRAM-SHA-512:admin-secret",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:broker",
        "group.initial.rebalance.delay.ms": "0",
    }
    with BrokerThread(properties=props) as broker:
        yield broker


@pytest.fixture(scope="module")
def admin_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kafka-acls.sh's --command-config for the super user, over SCRAM-SHA-512."""
    path = tmp_path_factory.mktemp("config") / "admin.properties"
    path.write_text("# the admin client's login\n"
                    "security.protocol=SASL_PLAINTEXT\n"
                    "sasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    "username=\"admin\" password=\"admin-secret\";\n")
    return path


def bootstrap(broker: BrokerThread) -> str:
    return broker.bootstrap_for("SASL_PLAINTEXT")


def acls(capsys: pytest.CaptureFixture[str], broker: BrokerThread, config: Path, *argv: str):
    return run_cli(capsys, "acls", "--bootstrap-server", bootstrap(broker), "--command-config", str(config), *argv)


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def client_conf(broker: BrokerThread, user: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap(broker), "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


def produce(broker: BrokerThread, user: str, topic: str, n: int = 3, **extra: str) -> list[KafkaError | None]:
    """Produce ``n`` records as ``user``: the delivery error of each (None when delivered)."""
    p = Producer({**client_conf(broker, user), "message.timeout.ms": 10000, "linger.ms": 0, **extra})
    results: list[KafkaError | None] = []
    for i in range(n):
        p.produce(topic, f"{user}-{i}".encode(), on_delivery=lambda err, _m: results.append(err))
    p.flush(20)
    assert len(results) == n
    return results


def consume(broker: BrokerThread, user: str, topic: str, group: str, n: int) -> tuple[list[bytes], KafkaError | None]:
    """Read up to ``n`` records as ``user`` in ``group``: the values, or the first error the client reports."""
    c = Consumer({**client_conf(broker, user), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(300):
            m = c.poll(0.1)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return values, m.error()
            values.append(m.value())
            if len(values) >= n:
                c.commit(asynchronous=False)
                break
    finally:
        c.close()
    return values, None


def test_producer_and_consumer_acls_take_effect(secured: BrokerThread, admin_config: Path, capsys) -> None:
    topic, group = name("orders"), name("billing")
    secured.create_topic(topic, 1)
    denied = produce(secured, "alice", topic)
    assert {e.code() for e in denied if e is not None} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}

    r = acls(capsys, secured, admin_config, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    assert r.rc == 0, r.err
    assert r.out == (f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, "
                     "patternType=LITERAL)`: \n"
                     " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n"
                     "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
                     "\t(principal=User:alice, host=*, operation=CREATE, permissionType=ALLOW) \n\n")
    assert produce(secured, "alice", topic) == [None, None, None]

    # bob may not read the topic yet; then --consumer gives him READ/DESCRIBE on it and READ on the group.
    values, error = consume(secured, "bob", topic, group, 3)
    assert values == [] and error is not None
    assert error.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
    r = acls(capsys, secured, admin_config, "--add", "--allow-principal", "User:bob", "--consumer", "--topic", topic,
             "--group", group)
    assert r.rc == 0, r.err
    values, error = consume(secured, "bob", topic, group, 3)
    assert (sorted(values), error) == ([b"alice-0", b"alice-1", b"alice-2"], None)

    # A DENY wins over the ALLOW: alice can no longer write.
    r = acls(capsys, secured, admin_config, "--add", "--deny-principal", "User:alice", "--operation", "Write",
             "--topic", topic)
    assert r.rc == 0, r.err
    assert {e.code() for e in produce(secured, "alice", topic, 1) if e is not None} == \
        {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    # Removing the DENY (with --force: no question) lets her write again.
    r = acls(capsys, secured, admin_config, "--remove", "--force", "--deny-principal", "User:alice", "--operation",
             "Write", "--topic", topic)
    assert (r.rc, r.out) == (0, "")
    assert produce(secured, "alice", topic, 1) == [None]


def test_idempotent_transactional_producer(secured: BrokerThread, admin_config: Path, capsys) -> None:
    topic, txn = name("payments"), name("payer")
    secured.create_topic(topic, 1)
    extra = {"transactional.id": txn}
    p = Producer({**client_conf(secured, "carol"), **extra})
    with pytest.raises(Exception, match="(?i)authoriz"):
        p.init_transactions(10)
    r = acls(capsys, secured, admin_config, "--add", "--allow-principal", "User:carol", "--producer", "--idempotent",
             "--topic", topic, "--transactional-id", txn)
    assert r.rc == 0, r.err
    assert "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`: \n" \
           " \t(principal=User:carol, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW) \n" in r.out
    assert (f"Adding ACLs for resource `ResourcePattern(resourceType=TRANSACTIONAL_ID, name={txn}, "
            "patternType=LITERAL)`: \n \t(principal=User:carol, host=*, operation=WRITE, permissionType=ALLOW)\n"
            "\t(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW) \n") in r.out
    p = Producer({**client_conf(secured, "carol"), **extra})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce(topic, b"paid")
    p.commit_transaction(10)
    values, error = consume(secured, "admin", topic, name("audit"), 1)
    assert (values, error) == ([b"paid"], None)


def test_list_and_remove(secured: BrokerThread, admin_config: Path, capsys) -> None:
    prefix = name("metrics") + "-"
    r = acls(capsys, secured, admin_config, "--add", "--allow-principal", "User:alice", "--allow-principal",
             "User:bob", "--allow-host", "10.0.0.1", "--operation", "Read", "--operation", "Describe",
             "--topic", prefix, "--resource-pattern-type", "prefixed")
    assert r.rc == 0, r.err
    resource = f"ResourcePattern(resourceType=TOPIC, name={prefix}, patternType=PREFIXED)"
    entries = [f"(principal=User:{u}, host=10.0.0.1, operation={op}, permissionType=ALLOW)"
               for u in ("alice", "bob") for op in ("READ", "DESCRIBE")]
    expected = f"Current ACLs for resource `{resource}`: \n \t" + "\n\t".join(entries) + " \n\n"
    r = acls(capsys, secured, admin_config, "--list", "--topic", prefix, "--resource-pattern-type", "PREFIXED")
    assert (r.rc, r.out) == (0, expected)
    # MATCH: every ACL that applies to a topic under the prefix; LITERAL: none on that exact name.
    r = acls(capsys, secured, admin_config, "--list", "--topic", prefix + "eu", "--resource-pattern-type", "match")
    assert r.out == expected
    r = acls(capsys, secured, admin_config, "--list", "--topic", prefix + "eu")
    assert (r.rc, r.out) == (0, "")
    # Everything, and one principal's.
    r = acls(capsys, secured, admin_config, "--list")
    assert expected in r.out
    r = acls(capsys, secured, admin_config, "--list", "--topic", prefix, "--resource-pattern-type", "prefixed",
             "--principal", "User:bob")
    assert r.out == (f"ACLs for principal `User:bob`\nCurrent ACLs for resource `{resource}`: \n \t"
                     + "\n\t".join(entries[2:]) + " \n\n")

    # Without --force the tool asks: "n" keeps the ACLs, "y" removes them.
    argv = ["acls", "--bootstrap-server", bootstrap(secured), "--command-config", str(admin_config), "--remove",
            "--topic", prefix, "--resource-pattern-type", "prefixed"]
    kept = run_subprocess(*argv, stdin=b"n\n")
    assert kept.rc == 0 and kept.out == (f"Are you sure you want to delete all ACLs for resource filter "
                                         f"`{resource}`? (y/n)\n")
    assert acls(capsys, secured, admin_config, "--list", "--topic", prefix, "--resource-pattern-type",
                "prefixed").out == expected
    # Removing one principal's READ leaves the rest.
    r = acls(capsys, secured, admin_config, "--remove", "--force", "--allow-principal", "User:alice",
             "--allow-host", "10.0.0.1", "--operation", "Read", "--topic", prefix, "--resource-pattern-type",
             "prefixed")
    assert r.rc == 0, r.err
    left = acls(capsys, secured, admin_config, "--list", "--topic", prefix, "--resource-pattern-type", "prefixed")
    assert left.out == f"Current ACLs for resource `{resource}`: \n \t" + "\n\t".join(entries[1:]) + " \n\n"
    removed = run_subprocess(*argv, stdin=b"y\n")
    assert removed.rc == 0, removed.err
    assert acls(capsys, secured, admin_config, "--list", "--topic", prefix, "--resource-pattern-type",
                "prefixed").out == ""


def test_command_config_over_tls(secured: BrokerThread, pki: Pki, tmp_path: Path, capsys) -> None:
    group = name("tls-group")
    config = tmp_path / "tls.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                      f"ssl.truststore.location={pki.ca_file}\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                      "username='admin' password='admin-secret';\n")
    base = ["acls", "--bootstrap-server", secured.bootstrap_for("SASL_SSL"), "--command-config", str(config)]
    r = run_cli(capsys, *base, "--add", "--allow-principal", "User:*", "--operation", "DESCRIBE", "--group", group)
    assert r.rc == 0, r.err
    r = run_cli(capsys, *base, "--list", "--group", group)
    assert r.out == (f"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name={group}, "
                     "patternType=LITERAL)`: \n \t(principal=User:*, host=*, operation=DESCRIBE, "
                     "permissionType=ALLOW) \n\n")


def test_refusals(secured: BrokerThread, admin_config: Path, tmp_path: Path, capsys) -> None:
    # A user who is no super user may not change ACLs (CLUSTER ALTER).
    alice = tmp_path / "alice.properties"
    alice.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
                     "sasl.password=alice-secret\n")
    r = acls(capsys, secured, alice, "--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "x")
    assert r.rc == 1 and "CLUSTER_AUTHORIZATION_FAILED" in r.err
    r = acls(capsys, secured, alice, "--list")
    assert r.rc == 1 and "CLUSTER_AUTHORIZATION_FAILED" in r.err
    # A wrong password fails the login.
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                     "sasl.password=nope\n")
    r = acls(capsys, secured, wrong, "--list")
    assert r.rc == 1 and "minikafka: error:" in r.err


@pytest.mark.parametrize("argv,message", [
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "any"],
     "A '--resource-pattern-type' value of 'ANY' is not valid when adding acls."),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "principalType:principalName but got alice"),
    (["--add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"],
     "ResourceType CLUSTER only supports operations Create, Alter, Describe, ClusterAction, DescribeConfigs, "
     "AlterConfigs, IdempotentWrite, All"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "unknown operation 'Fly'"),
    (["--add", "--allow-principal", "User:a", "--producer"], "With --producer you must specify a --topic"),
    (["--add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"],
     "The --idempotent option is only available if --producer is set"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "With --consumer you must specify"),
    (["--add", "--allow-principal", "User:a", "--producer", "--operation", "Read", "--topic", "t"],
     "Option \"--producer\" can't be used with option \"--operation\""),
    (["--list", "--allow-principal", "User:a"], "Option \"--list\" can't be used with option \"--allow-principal\""),
    (["--add", "--principal", "User:a", "--topic", "t"], "The --principal option is only available if --list is set"),
])
def test_usage_errors(argv: list[str], message: str, capsys) -> None:
    # Refused before connecting: the bootstrap server is never reached.
    r = run_cli(capsys, "acls", "--bootstrap-server", "127.0.0.1:1", *argv)
    assert r.rc == 1 and message in r.err, r.err


def test_pattern_type_is_checked_by_the_parser(capsys) -> None:
    r = run_cli(capsys, "acls", "--bootstrap-server", "127.0.0.1:1", "--list", "--resource-pattern-type", "regex")
    assert r.rc == 2 and "Unknown resource-pattern-type: regex" in r.err
