"""The local cluster's PKI: one CA, the apiserver's serving certificate, a client
certificate per identity, and the service-account signing key pair.

Everything is written as PEM files into one directory; nothing is reused across
runs, so a cluster never trusts a previous cluster's credentials.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class ClientIdentity:
    """A Kubernetes user: CN is the user name, O entries are its groups."""

    file_stem: str
    user: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterPKI:
    ca: KeyPair
    apiserver: KeyPair
    service_account_key: Path
    service_account_pub: Path
    clients: dict[str, KeyPair]


def _ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


def create_pki(
    directory: Path,
    *,
    clients: list[ClientIdentity],
    apiserver_ips: tuple[str, ...] = ("127.0.0.1",),
    apiserver_names: tuple[str, ...] = ("localhost", "kubernetes", "kubernetes.default"),
) -> ClusterPKI:
    """Create a fresh CA and every certificate the local cluster needs in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _ec_key()
    ca_name = _name("csi-harness-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca = KeyPair(directory / "ca.crt", directory / "ca.key")
    ca.cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(ca.key, ca_key)

    def issue(
        stem: str, subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> KeyPair:
        key = _ec_key()
        builder = (
            _builder(subject, ca_name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(pair.key, key)
        return pair

    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in apiserver_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in apiserver_ips]
    apiserver = issue("apiserver", _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans)

    issued = {
        c.file_stem: issue(
            c.file_stem, _name(c.user, c.groups), ExtendedKeyUsageOID.CLIENT_AUTH, []
        )
        for c in clients
    }

    # Service-account tokens are signed with RSA: every Kubernetes version accepts it.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_private = directory / "service-account.key"
    sa_public = directory / "service-account.pub"
    _write_key(sa_private, sa_key)
    sa_public.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return ClusterPKI(ca, apiserver, sa_private, sa_public, issued)
