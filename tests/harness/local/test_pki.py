import stat
from ipaddress import ip_address
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from csi_harness._internal.providers.local.pki import ClientIdentity, ClusterPKI, create_pki

CLIENTS = [
    ClientIdentity("admin", "kubernetes-admin", ("system:masters",)),
    ClientIdentity("kubelet-node-1", "system:node:node-1", ("system:nodes", "extra-group")),
    ClientIdentity("kube-scheduler", "system:kube-scheduler"),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ClusterPKI:
    return create_pki(tmp_path_factory.mktemp("pki") / "pki", clients=CLIENTS)


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def assert_signed_by_ca(cert: x509.Certificate, pki: ClusterPKI) -> None:
    ca = load(pki.ca.cert)
    assert cert.issuer == ca.subject
    public_key = ca.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    assert cert.signature_hash_algorithm is not None
    # Raises InvalidSignature when the certificate was not signed by the CA's key.
    public_key.verify(
        cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
    )


def test_create_pki_writes_ca_apiserver_clients_and_service_account_keys(pki: ClusterPKI) -> None:
    files = [pki.ca.cert, pki.ca.key, pki.apiserver.cert, pki.apiserver.key]
    files += [pki.service_account_key, pki.service_account_pub]
    files += [p for pair in pki.clients.values() for p in (pair.cert, pair.key)]
    assert all(f.is_file() and f.stat().st_size > 0 for f in files)
    assert set(pki.clients) == {c.file_stem for c in CLIENTS}


def test_ca_is_a_self_signed_certificate_authority(pki: ClusterPKI) -> None:
    ca = load(pki.ca.cert)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.value.ca is True
    assert constraints.critical
    assert_signed_by_ca(ca, pki)


def test_apiserver_cert_names_loopback_and_localhost(pki: ClusterPKI) -> None:
    cert = load(pki.apiserver.cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "localhost" in sans.get_values_for_type(x509.DNSName)


def test_apiserver_cert_is_for_server_auth_and_chains_to_ca(pki: ClusterPKI) -> None:
    cert = load(pki.apiserver.cert)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert_signed_by_ca(cert, pki)


@pytest.mark.parametrize("identity", CLIENTS, ids=lambda c: c.file_stem)
def test_client_cert_carries_user_as_cn_and_groups_as_o(
    pki: ClusterPKI, identity: ClientIdentity
) -> None:
    subject = load(pki.clients[identity.file_stem].cert).subject
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [identity.user]
    groups = [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert groups == list(identity.groups)


@pytest.mark.parametrize("identity", CLIENTS, ids=lambda c: c.file_stem)
def test_client_cert_is_for_client_auth_and_chains_to_ca(
    pki: ClusterPKI, identity: ClientIdentity
) -> None:
    cert = load(pki.clients[identity.file_stem].cert)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert_signed_by_ca(cert, pki)


def test_cert_signed_by_another_ca_does_not_verify(pki: ClusterPKI, tmp_path: Path) -> None:
    # Both CAs have the same name: only the signature tells them apart.
    other = create_pki(tmp_path, clients=[])
    with pytest.raises(InvalidSignature):
        assert_signed_by_ca(load(other.apiserver.cert), pki)


def test_key_files_are_readable_by_owner_only(pki: ClusterPKI) -> None:
    keys = [pki.ca.key, pki.apiserver.key, pki.service_account_key]
    keys += [pair.key for pair in pki.clients.values()]
    assert {stat.S_IMODE(k.stat().st_mode) for k in keys} == {0o600}
