"""The broker's SASL mechanisms, sans-I/O: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER exchanges driven by
real client-side code (scramp's client, kafka-python's SCRAM client, hand-built PLAIN and OAUTHBEARER
messages), refusals with Kafka's messages, JAAS values and which mechanisms a listener enables."""

from __future__ import annotations

import base64
import json

import pytest
import scramp

from minikafka.broker.config import BrokerConfig, ConfigError
from minikafka.broker.security import jaas
from minikafka.broker.security.jaas import JaasConfigError, JaasEntry, parse_jaas_config, server_jaas_entries
from minikafka.broker.security.sasl import (OAuthBearerSaslServer, PlainSaslServer, SaslAuthenticationError,
                                            ScramSaslServer, UnsupportedSaslMechanism, create_mechanism,
                                            enabled_mechanisms, validate_jaas_configs)
from minikafka.broker.security.scram import ScramCredentialStore, ScramMechanism, generate_credential
from minikafka.common.clock import ManualClock

LISTENER = "SASL_PLAINTEXT"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
              '    username="admin" password="admin-secret"\n'
              '    user_admin="admin-secret" user_alice="alice-secret";')


def config(**extra: str) -> BrokerConfig:
    cfg = BrokerConfig()
    cfg.extra.update(extra)
    return cfg


def plain_config(**extra: str) -> BrokerConfig:
    return config(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS, **extra})


def refused(mechanism, token: bytes) -> SaslAuthenticationError:
    with pytest.raises(SaslAuthenticationError) as info:
        mechanism.evaluate(token)
    return info.value


def generic(mechanism: str, re: bool = False) -> str:
    during = "re-authentication" if re else "authentication"
    return f"Authentication failed during {during} due to invalid credentials with SASL mechanism {mechanism}"


# -- JAAS values ---------------------------------------------------------------------------------------------
def test_jaas_value_with_several_modules_quotes_escapes_and_comments():
    entries = parse_jaas_config(
        "org.example.First required a=b c='single quoted' /* a comment */ d=\"with \\\"escape\\\" and ; = chars\";\n"
        "// a line comment\n"
        "org.example.Second OPTIONAL;")
    assert entries == [
        JaasEntry("org.example.First", "required",
                  {"a": "b", "c": "single quoted", "d": 'with "escape" and ; = chars'}),
        JaasEntry("org.example.Second", "optional", {}),
    ]
    assert "secret" not in repr(parse_jaas_config('M required password="secret";'))


@pytest.mark.parametrize("value,message", [
    ("", "Login module not specified in JAAS config"),
    ("org.example.M", "Login module control flag not specified in JAAS config"),
    ("org.example.M mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
    ("org.example.M required a=;", "Value not specified for key 'a' in JAAS config"),
    ("org.example.M required a", "Value not specified for key 'a' in JAAS config"),
    ("org.example.M required a=b", "JAAS config entry not terminated by semi-colon"),
])
def test_jaas_value_errors_are_kafkas(value, message):
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(value)


def test_server_jaas_entries_take_the_most_specific_key():
    other = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
    settings = {
        "sasl.jaas.config": other + " " + PLAIN_JAAS.replace("alice", "bob"),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    (entry,) = server_jaas_entries(settings, "SASL_PLAINTEXT", "PLAIN")
    assert entry.options["user_alice"] == "alice-secret"
    # Another listener falls back to the generic key, keeping only PLAIN's login module.
    (entry,) = server_jaas_entries(settings, "OTHER", "PLAIN")
    assert entry.login_module == jaas.PLAIN_LOGIN_MODULE and "user_bob" in entry.options
    assert server_jaas_entries(settings, "OTHER", "OAUTHBEARER") == []
    assert server_jaas_entries({"plain.sasl.jaas.config": PLAIN_JAAS}, "ANY", "PLAIN")[0].options["user_admin"]


def test_a_jaas_value_that_does_not_parse_stops_the_start():
    validate_jaas_configs({"listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS})
    with pytest.raises(ConfigError, match="listener.name.sasl_ssl.plain.sasl.jaas.config.*semi-colon") as info:
        validate_jaas_configs({"listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS.rstrip(";")})
    assert "admin-secret" not in str(info.value)


# -- which mechanisms ------------------------------------------------------------------------------------------
def test_default_mechanisms_leave_out_plain_without_users():
    assert enabled_mechanisms(config(), LISTENER) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert enabled_mechanisms(plain_config(), LISTENER) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert enabled_mechanisms(plain_config(), "SASL_SSL") == ["SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


def test_configured_mechanisms_per_listener_and_unknown_ones_dropped():
    cfg = plain_config(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512, GSSAPI,PLAIN",
                          "listener.name.sasl_ssl.sasl.enabled.mechanisms": "OAUTHBEARER"})
    assert enabled_mechanisms(cfg, LISTENER) == ["SCRAM-SHA-512", "PLAIN"]
    assert enabled_mechanisms(cfg, "SASL_SSL") == ["OAUTHBEARER"]
    with pytest.raises(UnsupportedSaslMechanism) as info:
        create_mechanism("SCRAM-SHA-256", LISTENER, cfg, ScramCredentialStore(), ManualClock())
    assert info.value.enabled == ["SCRAM-SHA-512", "PLAIN"]
    with pytest.raises(UnsupportedSaslMechanism):
        create_mechanism("GSSAPI", LISTENER, cfg, ScramCredentialStore(), ManualClock())
    assert isinstance(create_mechanism("OAUTHBEARER", "SASL_SSL", cfg, ScramCredentialStore(), ManualClock()),
                      OAuthBearerSaslServer)


# -- PLAIN ------------------------------------------------------------------------------------------------------
def plain() -> PlainSaslServer:
    m = create_mechanism("PLAIN", LISTENER, plain_config(), ScramCredentialStore(), ManualClock())
    assert isinstance(m, PlainSaslServer)
    return m


def test_plain_exchange():
    m = plain()
    assert not m.complete
    assert m.evaluate(b"\0alice\0alice-secret") == b""
    assert m.complete and m.authorization_id == "alice" and m.session_lifetime_ms is None
    same = plain()
    assert same.evaluate(b"admin\0admin\0admin-secret") == b"" and same.authorization_id == "admin"


@pytest.mark.parametrize("token,message", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0admin\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0\0alice-secret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"a\0b\0c\0d\0e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"bob\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
])
def test_plain_refusals_say_what_kafka_says(token, message):
    m = plain()
    err = refused(m, token)
    assert err.client_message() == message == str(err)
    assert not m.complete


# -- SCRAM ------------------------------------------------------------------------------------------------------
@pytest.fixture
def store() -> ScramCredentialStore:
    s = ScramCredentialStore()
    s.seed("alice:SCRAM-SHA-512:alice-secret,alice:SCRAM-SHA-256:alice-256,bob:SCRAM-SHA-256:b0b:with:colons")
    return s


def scram(store: ScramCredentialStore, mechanism: str) -> ScramSaslServer:
    m = create_mechanism(mechanism, LISTENER, config(), store, ManualClock())
    assert isinstance(m, ScramSaslServer)
    return m


@pytest.mark.parametrize("mechanism,user,password", [
    ("SCRAM-SHA-512", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "alice", "alice-256"),
    ("SCRAM-SHA-256", "bob", "b0b:with:colons"),
])
def test_scram_exchange_with_scramps_client(store, mechanism, user, password):
    server = scram(store, mechanism)
    client = scramp.ScramClient([mechanism], user, password)
    server_first = server.evaluate(client.get_client_first().encode())
    assert not server.complete
    client.set_server_first(server_first.decode())  # checks the nonce, reads salt and iterations
    server_final = server.evaluate(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # the server proved it knows the credential
    assert server.complete and server.authorization_id == user and server.session_lifetime_ms is None


def test_scram_exchange_with_kafka_pythons_client(store):
    from kafka.net.sasl.scram import SaslMechanismScram

    client = SaslMechanismScram(sasl_plain_username="alice", sasl_plain_password="alice-secret",
                                sasl_mechanism="SCRAM-SHA-512", security_protocol="SASL_SSL")
    server = scram(store, "SCRAM-SHA-512")
    while not client.is_done():
        client.receive(server.evaluate(client.auth_bytes()))  # raises if the server's signature is wrong
    assert server.complete and server.authorization_id == "alice"


def failed_exchange(store: ScramCredentialStore, mechanism: str, user: str, password: str) -> SaslAuthenticationError:
    server = scram(store, mechanism)
    client = scramp.ScramClient([mechanism], user, password)
    try:
        client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
        return refused(server, client.get_client_final().encode())
    except SaslAuthenticationError as exc:
        return exc


@pytest.mark.parametrize("mechanism,user,password,detail", [
    ("SCRAM-SHA-512", "alice", "wrong", "Invalid client credentials"),
    ("SCRAM-SHA-512", "alice", "alice-256", "Invalid client credentials"),  # the other mechanism's password
    ("SCRAM-SHA-512", "bob", "b0b:with:colons", "Authentication failed: Invalid user credentials"),
    ("SCRAM-SHA-256", "mallory", "x", "Authentication failed: Invalid user credentials"),
])
def test_scram_refusals_withhold_the_reason(store, mechanism, user, password, detail):
    err = failed_exchange(store, mechanism, user, password)
    assert str(err) == err.client_message() == generic(mechanism)
    assert err.client_message(reauthentication=True) == generic(mechanism, re=True)
    assert detail in err.detail


def test_scram_refuses_delegation_tokens_and_other_authorization_ids(store):
    server = scram(store, "SCRAM-SHA-512")
    err = refused(server, b"n,,n=alice,r=abcdefgh,tokenauth=true")
    assert str(err) == generic("SCRAM-SHA-512") and "Token Authentication failed" in err.detail
    server = scram(store, "SCRAM-SHA-512")
    err = refused(server, b"n,a=bob,n=alice,r=abcdefgh")
    assert str(err) == "Authentication failed: Client requested an authorization id that is different from username"
    # Kafka would go on with these; scramp (stricter RFC 5802) refuses an authzid and multi-letter extensions.
    for first in (b"n,a=alice,n=alice,r=abcdefgh", b"n,,n=alice,r=abcdefgh,unknownext=1"):
        err = refused(scram(store, "SCRAM-SHA-512"), first)
        assert str(err) == generic("SCRAM-SHA-512") and "scramp" in err.detail
    assert scram(store, "SCRAM-SHA-512").evaluate(b"n,,n=alice,r=abcdefgh,x=1").startswith(b"r=abcdefgh")


@pytest.mark.parametrize("first", [b"y,,n=alice,r=abc", b"p=tls-unique,,n=alice,r=abc", b"n,,r=abc", b"garbage",
                                   b"\xff\xfe"])
def test_scram_malformed_client_first(store, first):
    err = refused(scram(store, "SCRAM-SHA-512"), first)
    assert str(err) == generic("SCRAM-SHA-512") and "Invalid SCRAM client first message format" in err.detail


def test_scram_client_final_with_another_nonce_or_format_fails_and_the_exchange_stays_failed(store):
    server = scram(store, "SCRAM-SHA-512")
    client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    final = client.get_client_final()
    forged = final.replace(",p=", "x,p=", 1)  # a nonce that no longer ends with the server's
    err = refused(server, forged.encode())
    assert "Invalid client nonce" in err.detail
    err = refused(server, final.encode())  # too late: the exchange failed
    assert "Unexpected challenge in Sasl server state FAILED" in str(err)
    server = scram(store, "SCRAM-SHA-512")
    server.evaluate(b"n,,n=alice,r=abcdefgh")
    assert "Invalid SCRAM client final message format" in refused(server, b"c=biws,p=").detail


def test_scram_final_nonce_ending_with_the_servers_is_checked_over_the_message_as_sent(store):
    """librdkafka < 2.6.1 repeats its nonce in client-final (librdkafka#4895); Kafka 3.8.1-3.9 accepted it.
    The proof is verified over the message as sent: a prefixed nonce with the proof of the real message
    fails, so the relaxed check is no way around the password."""
    server = scram(store, "SCRAM-SHA-512")
    client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    forged = client.get_client_final().replace(",r=", ",r=x", 1)
    assert "Invalid client credentials" in refused(server, forged.encode()).detail


def test_scram_credential_below_kafkas_minimum_iterations_is_unusable():
    store = ScramCredentialStore()
    store.upsert("old", ScramMechanism.SCRAM_SHA_256, generate_credential(ScramMechanism.SCRAM_SHA_256, "pw", 1024))
    err = failed_exchange(store, "SCRAM-SHA-256", "old", "pw")
    assert "Iterations 1024 is less than the minimum 4096 for SCRAM-SHA-256" in err.detail


def test_scram_password_never_reaches_the_credential(store):
    cred = store.credential("alice", "SCRAM-SHA-512")
    assert cred is not None and cred.iterations == 4096
    assert b"alice-secret" not in cred.salt + cred.stored_key + cred.server_key
    assert "hidden" in repr(cred) and "alice-secret" not in repr(cred)


# -- OAUTHBEARER (Kafka's unsecured validator) ----------------------------------------------------------------
NOW_MS = 1_700_000_000_000


def b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def jwt(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}.{signature}"


def client_first(token: str, authzid: str = "", extensions: str = "") -> bytes:
    """What Kafka's OAuthBearerSaslClient sends: gs2 header, then auth=Bearer, extensions, two ^A."""
    ext = f"\x01{extensions}" if extensions else ""
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}{ext}\x01\x01".encode()


def oauth(clock: ManualClock | None = None, **options: str) -> OAuthBearerSaslServer:
    value = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required " + \
        " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"
    cfg = config(**{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": value})
    m = create_mechanism("OAUTHBEARER", LISTENER, cfg, ScramCredentialStore(), clock or ManualClock(NOW_MS))
    assert isinstance(m, OAuthBearerSaslServer)
    return m


def test_oauthbearer_exchange_bounds_the_session_by_the_tokens_expiry():
    clock = ManualClock(NOW_MS)
    m = oauth(clock)
    token = jwt({"sub": "carol", "iat": NOW_MS / 1000 - 5, "exp": NOW_MS / 1000 + 300, "scope": "a b"})
    assert m.evaluate(client_first(token, extensions="traceId=123")) == b""
    assert m.complete and m.authorization_id == "carol"
    assert m.session_lifetime_ms == 300_000 and m.credential_expiration_ms == NOW_MS + 300_000
    assert m.extensions == {"traceId": "123"}
    clock.sleep(1000)
    assert m.session_lifetime_ms == 300_000  # fixed when the exchange completed


def refusal_challenge(m: OAuthBearerSaslServer, token: str) -> dict:
    """The JSON challenge for a refused token; the client's ^A then fails the exchange with it."""
    challenge = m.evaluate(client_first(token))
    assert not m.complete
    err = refused(m, b"\x01")
    assert str(err) == err.client_message() == challenge.decode()
    return json.loads(challenge)


@pytest.mark.parametrize("claims", [
    {"sub": "carol", "exp": NOW_MS / 1000 - 1},  # expired
    {"sub": "carol", "exp": NOW_MS / 1000},  # expires right now: "on or after"
    {"sub": "carol"},  # no exp
    {"sub": "carol", "exp": "tomorrow"},
    {"exp": NOW_MS / 1000 + 60},  # no principal
    {"sub": "  ", "exp": NOW_MS / 1000 + 60},
    {"sub": "carol", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 30},  # issued in the future
    {"sub": "carol", "exp": NOW_MS / 1000 + 60, "scope": 7},
])
def test_oauthbearer_refuses_bad_claims_with_invalid_token(claims):
    assert refusal_challenge(oauth(), jwt(claims)) == {"status": "invalid_token"}


@pytest.mark.parametrize("token", [
    jwt({"sub": "carol", "exp": NOW_MS / 1000 + 60}, header={"alg": "HS256"}),
    jwt({"sub": "carol", "exp": NOW_MS / 1000 + 60}, header={"typ": "JWT"}),
    jwt({"sub": "carol", "exp": NOW_MS / 1000 + 60}, signature="c2ln"),
    b64url({"alg": "none"}) + "." + b64url({"sub": "carol"}),
    "bm9wZQ.bm9wZQ.",
])
def test_oauthbearer_refuses_signed_or_malformed_jwts(token):
    assert refusal_challenge(oauth(), token) == {"status": "invalid_token"}


def test_oauthbearer_clock_skew_principal_claim_and_required_scope_options():
    expired_a_second_ago = {"user": "dave", "exp": NOW_MS / 1000 - 1, "scope": ["kafka", "read"]}
    m = oauth(unsecuredValidatorPrincipalClaimName="user", unsecuredValidatorAllowableClockSkewMs="2000")
    assert m.evaluate(client_first(jwt(expired_a_second_ago))) == b"" and m.authorization_id == "dave"
    assert m.session_lifetime_ms == 0
    m = oauth(unsecuredValidatorPrincipalClaimName="user", unsecuredValidatorAllowableClockSkewMs="2000",
              unsecuredValidatorRequiredScope="kafka write")
    assert refusal_challenge(m, jwt(expired_a_second_ago)) == {"status": "insufficient_scope",
                                                                "scope": "[kafka, write]"}


def test_oauthbearer_a_new_token_after_a_refusal_is_evaluated_afresh():
    m = oauth()
    assert m.evaluate(client_first(jwt({"sub": "carol", "exp": 1}))) == b'{"status":"invalid_token"}'
    assert m.evaluate(client_first(jwt({"sub": "carol", "exp": NOW_MS / 1000 + 9}))) == b""
    assert m.authorization_id == "carol"


@pytest.mark.parametrize("first,detail", [
    (b"n,,auth=Bearer abc\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01user=x\x01\x01", "'auth' not specified"),
    (b"n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
    (b"n,,\x01auth=Basic YWxpY2U\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
    (b"\x01", "Invalid OAUTHBEARER client first message"),  # ^A before any error challenge
])
def test_oauthbearer_malformed_client_first_withholds_the_reason(first, detail):
    err = refused(oauth(), first)
    assert str(err) == generic("OAUTHBEARER") and detail in err.detail


def test_oauthbearer_authorization_id_must_be_the_principal():
    token = jwt({"sub": "carol", "exp": NOW_MS / 1000 + 60})
    assert oauth().evaluate(client_first(token, authzid="carol")) == b""
    err = refused(oauth(), client_first(token, authzid="admin"))
    assert str(err) == ("Authentication failed: Client requested an authorization id (admin) that is different "
                        "from the token's principal name (carol)")


def test_oauthbearer_misconfigured_validator_fails_without_telling_the_client():
    err = refused(oauth(unsecuredValidatorAllowableClockSkewMs="-5"),
                  client_first(jwt({"sub": "carol", "exp": NOW_MS / 1000 + 60})))
    assert str(err) == generic("OAUTHBEARER") and "must not be negative" in err.detail


def test_kafka_pythons_oauthbearer_client_message_is_understood():
    from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

    token = jwt({"sub": "erin", "exp": NOW_MS / 1000 + 60})

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return token

        def extensions(self) -> dict[str, str]:
            return {"logicalCluster": "lkc-1"}

    client = SaslMechanismOAuth(sasl_oauth_token_provider=Provider())
    m = oauth()
    client.receive(m.evaluate(client.auth_bytes()))
    assert client.is_authenticated()
    assert m.authorization_id == "erin" and m.extensions == {"logicalCluster": "lkc-1"}
    # A refused token: the client answers the JSON challenge with ^A and the server fails the exchange.
    token = jwt({"sub": "erin", "exp": 1})
    client, m = SaslMechanismOAuth(sasl_oauth_token_provider=Provider()), oauth()
    client.receive(m.evaluate(client.auth_bytes()))
    assert str(refused(m, client.auth_bytes())) == '{"status":"invalid_token"}'
