"""Certificates made at test time with ``cryptography``: a CA, a server certificate for
127.0.0.1/localhost, client certificates with given subjects, as PEM files, PKCS12 stores
and inline PEM strings (the forms Kafka's ``ssl.keystore.*`` / ``ssl.truststore.*`` take).

Imported as ``tls_certs`` (``tests/`` is on the pytest pythonpath).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_PASSWORD = "key-secret"
STORE_PASSWORD = "store-secret"


def _name(**attrs: str) -> x509.Name:
    """A name from attributes in DER order (C first, CN last, as ``openssl req -subj /C=../CN=..``)."""
    oids = {"C": NameOID.COUNTRY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "L": NameOID.LOCALITY_NAME,
            "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "CN": NameOID.COMMON_NAME,
            "emailAddress": NameOID.EMAIL_ADDRESS}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


@dataclass
class Identity:
    """A key and its certificate (signed by the test CA), with the files written for it."""

    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    cert_pem: str  # the certificate then the CA's (the chain)
    key_pem: str  # unencrypted PKCS#8
    encrypted_key_pem: str  # PKCS#8 encrypted with KEY_PASSWORD
    pem_file: Path  # key + chain in one file (ssl.keystore.location with ssl.keystore.type=PEM)
    encrypted_pem_file: Path  # encrypted key + chain
    cert_file: Path  # chain only (a client's ssl.certificate.location)
    key_file: Path  # key only (a client's ssl.key.location)
    p12_file: Path  # PKCS12 key store with STORE_PASSWORD

    @property
    def subject(self) -> str:
        return self.cert.subject.rfc4514_string()


@dataclass
class Pki:
    directory: Path
    ca_key: ec.EllipticCurvePrivateKey
    ca_cert: x509.Certificate
    ca_pem: str
    ca_file: Path
    truststore_p12: Path  # PKCS12 trust store holding the CA, STORE_PASSWORD
    server: Identity
    clients: dict[str, Identity]

    def issue(self, name: str, subject: x509.Name, *, server: bool = False) -> Identity:
        """A new identity signed by this CA (``server``: with 127.0.0.1 and localhost as its names)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self.ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            usage = ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage, ExtendedKeyUsageOID.CLIENT_AUTH]
                                                              if server else [usage]), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode() + self.ca_pem
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
        encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(KEY_PASSWORD.encode())).decode()
        d = self.directory
        files = {"pem_file": d / f"{name}.pem", "encrypted_pem_file": d / f"{name}-encrypted.pem",
                 "cert_file": d / f"{name}-cert.pem", "key_file": d / f"{name}-key.pem", "p12_file": d / f"{name}.p12"}
        files["pem_file"].write_text(key_pem + cert_pem)
        files["encrypted_pem_file"].write_text(encrypted + cert_pem)
        files["cert_file"].write_text(cert_pem)
        files["key_file"].write_text(key_pem)
        files["p12_file"].write_bytes(pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, [self.ca_cert],
            serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
        return Identity(name, key, cert, cert_pem, key_pem, encrypted, **files)

    def client_context(self, identity: Identity | None = None) -> ssl.SSLContext:
        """A Python client context trusting the CA (and presenting ``identity``'s certificate)."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if identity is not None:
            ctx.load_cert_chain(str(identity.pem_file))
        return ctx


def make_pki(directory: Path, clients: dict[str, x509.Name] | None = None) -> Pki:
    """A CA, a server identity ("server") and client identities (default: alice and bob)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(O="minikafka tests", CN="minikafka test CA")
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM).decode()
    ca_file = directory / "ca.pem"
    ca_file.write_text(ca_pem)
    truststore = directory / "truststore.p12"
    truststore.write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca_cert], serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    pki = Pki(directory, ca_key, ca_cert, ca_pem, ca_file, truststore, None, {})  # type: ignore[arg-type]
    pki.server = pki.issue("server", _name(C="US", O="minikafka", CN="localhost"), server=True)
    subjects = clients if clients is not None else {
        "alice": _name(C="US", O="Example", OU="Engineering", CN="alice"),
        "bob": _name(C="US", O="Example", OU="Sales", CN="bob"),
    }
    for name, subject in subjects.items():
        pki.clients[name] = pki.issue(name, subject)
    return pki


name = _name


async def tls_connect(port: int, ctx: ssl.SSLContext, server_hostname: str = "localhost",
                      host: str = "127.0.0.1", client_id: str = "tls-test"):
    """A :class:`~minikafka.client.connection.KafkaConnection` over TLS (handshake done)."""
    import trio

    from minikafka.client.connection import KafkaConnection

    tcp = await trio.open_tcp_stream(host, port)
    tls = trio.SSLStream(tcp, ctx, server_hostname=server_hostname, https_compatible=True)
    try:
        await tls.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(tls)
        raise
    return KafkaConnection(tls, client_id=client_id)
