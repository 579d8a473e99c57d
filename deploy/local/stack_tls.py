"""A throwaway certificate authority for the secured local stack (tests/security).

A CA and certificates it signs, rather than self-signed server certificates, so every client
verifies a chain and a host name exactly as it would against a production deployment
(`sslmode=verify-full`, librdkafka's `ssl.ca.location`, an HTTPS registry URL). A second CA is
just another instance: a client trusting it must fail to connect. EC P-256 keys: fast to make,
and accepted by OpenSSL (PostgreSQL, librdkafka, Python) and Java (Kafka, the registry) alike.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
VALIDITY = datetime.timedelta(days=2)


class TlsFiles(NamedTuple):
    """PEM files for one server: its certificate, its private key, the CA that signed it."""

    cert: Path
    key: Path
    ca: Path

    def keystore(self) -> Path:
        """Key then certificate in one PEM file: Kafka's `ssl.keystore.type=PEM` layout."""
        path = self.cert.with_suffix(".keystore.pem")
        path.write_bytes(self.key.read_bytes() + self.cert.read_bytes())
        path.chmod(0o600)
        return path


class CertificateAuthority:
    """Writes `<name>-ca.pem` into `directory`; `issue` adds server certificates beside it."""

    def __init__(self, directory: Path, name: str = "pgkb-test") -> None:
        self.directory = directory
        self.name = name
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
        self._subject = subject
        self._cert = (
            _builder(subject, subject, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert_path = directory / f"{name}-ca.pem"
        self.cert_path.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, hosts: Sequence[str] = LOOPBACK_NAMES) -> TlsFiles:
        """A server certificate valid for `hosts` (IP addresses and DNS names)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (
            _builder(subject, self._subject, key.public_key())
            .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        cert_path = self.directory / f"{name}.crt"
        key_path = self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,  # the only unencrypted form Kafka reads
                serialization.NoEncryption(),
            )
        )
        key_path.chmod(0o600)
        return TlsFiles(cert_path, key_path, self.cert_path)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # tolerate clock skew
        .not_valid_after(now + VALIDITY)
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=not ca,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
