"""The admin API through the API server's pod proxy: the kubeconfig's credentials reach
the API server (client certificate, token), the admin token travels in its own header,
and every admin path lands under the pod's proxy path. The "API server" here is a small
HTTPS server with the certificates a cluster would have."""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from csi_harness._internal.kube.apiproxy import (
    ApiServerAccess,
    KubeconfigUnsupported,
    api_server_access,
)
from csi_harness._internal.providers.local.pki import ClientIdentity, ClusterPKI, create_pki
from csi_mock.admin.client import AdminClient
from csi_mock.admin.views import TOKEN_HEADER

ADMIN_TOKEN = "admin-token-0123456789abcdef"
POD = "csi-mock-node-x7k2p"
PROXY = f"/api/v1/namespaces/csi-mock/pods/{POD}:9809/proxy"


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    client_cn: str | None


@dataclass
class FakeApiServer:
    url: str
    requests: list[Seen] = field(default_factory=list)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ClusterPKI:
    clients = [ClientIdentity("admin", "kubernetes-admin", ("system:masters",))]
    return create_pki(tmp_path_factory.mktemp("pki"), clients=clients)


@pytest.fixture
def api_server(pki: ClusterPKI) -> Iterator[FakeApiServer]:
    answers = {"/v1/faults": {"rules": []}, "/v1/journal": {"records": []}}
    server_state = FakeApiServer(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            peer = self.connection.getpeercert()  # type: ignore[attr-defined]
            subject = dict(pair[0] for pair in peer["subject"]) if peer else {}
            server_state.requests.append(
                Seen(self.path, dict(self.headers.items()), subject.get("commonName"))
            )
            relative = self.path.split("?")[0].removeprefix(PROXY)
            body = json.dumps(answers.get(relative, {"error": "no such path"})).encode()
            self.send_response(200 if relative in answers else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.apiserver.cert, pki.apiserver.key)
    context.load_verify_locations(pki.ca.cert)
    context.verify_mode = ssl.CERT_OPTIONAL  # a client certificate, or a token
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    server_state.url = f"https://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield server_state
    httpd.shutdown()
    httpd.server_close()


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def admin_client(kubeconfig: Path) -> AdminClient:
    access = api_server_access(kubeconfig)
    return AdminClient(
        url=access.pod_proxy_url("csi-mock", POD, 9809),
        token=ADMIN_TOKEN,
        token_header=TOKEN_HEADER,
        headers=access.headers,
        verify=access.ssl_context,
    )


def test_client_certificate_data_authenticates_and_paths_land_under_the_pod_proxy(
    tmp_path: Path, pki: ClusterPKI, api_server: FakeApiServer
) -> None:
    client = pki.clients["admin"]
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig",
        {"server": api_server.url + "/", "certificate-authority-data": b64(pki.ca.cert)},
        {"client-certificate-data": b64(client.cert), "client-key-data": b64(client.key)},
    )
    assert api_server_access(kubeconfig).server == api_server.url  # no "//api/..."
    with admin_client(kubeconfig) as admin:
        assert admin.faults() == []
        assert admin.journal(method="CreateVolume", limit=5) == []
    faults, journal = api_server.requests
    assert faults.path == f"{PROXY}/v1/faults"
    assert journal.path == f"{PROXY}/v1/journal?method=CreateVolume&limit=5"
    assert faults.client_cn == "kubernetes-admin"
    assert faults.headers[TOKEN_HEADER] == ADMIN_TOKEN
    # The API server would take an Authorization header for its own.
    assert "Authorization" not in faults.headers


def test_token_and_ca_file_relative_to_the_kubeconfig(
    tmp_path: Path, pki: ClusterPKI, api_server: FakeApiServer
) -> None:
    (tmp_path / "ca.crt").write_bytes(pki.ca.cert.read_bytes())
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig",
        {"server": api_server.url, "certificate-authority": "ca.crt"},
        {"token": "k8s-user-token"},
    )
    with admin_client(kubeconfig) as admin:
        admin.faults()
    (seen,) = api_server.requests
    assert seen.headers["Authorization"] == "Bearer k8s-user-token"
    assert seen.headers[TOKEN_HEADER] == ADMIN_TOKEN
    assert seen.client_cn is None


def test_client_certificate_files_are_read_relative_to_the_kubeconfig(
    tmp_path: Path, pki: ClusterPKI, api_server: FakeApiServer
) -> None:
    client = pki.clients["admin"]
    (tmp_path / "me.crt").write_bytes(client.cert.read_bytes())
    (tmp_path / "me.key").write_bytes(client.key.read_bytes())
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig",
        {"server": api_server.url, "certificate-authority-data": b64(pki.ca.cert)},
        {"client-certificate": "me.crt", "client-key": "me.key"},
    )
    with admin_client(kubeconfig) as admin:
        admin.faults()
    assert api_server.requests[0].client_cn == "kubernetes-admin"


def test_an_unknown_ca_is_refused_unless_verification_is_skipped(
    tmp_path: Path, api_server: FakeApiServer
) -> None:
    strict = write_kubeconfig(tmp_path / "strict", {"server": api_server.url}, {"token": "t"})
    with admin_client(strict) as admin, pytest.raises(Exception, match="CERTIFICATE_VERIFY"):
        admin.faults()
    insecure = write_kubeconfig(
        tmp_path / "insecure",
        {"server": api_server.url, "insecure-skip-tls-verify": True},
        {"token": "t"},
    )
    with admin_client(insecure) as admin:
        assert admin.faults() == []


def test_credential_plugins_are_refused_with_the_key_named(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig",
        {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True},
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gcloud"}},
    )
    with pytest.raises(KubeconfigUnsupported, match="exec"):
        api_server_access(kubeconfig)


def test_pod_proxy_url_quotes_names_and_keeps_the_port() -> None:
    access = ApiServerAccess("https://api.example:6443/prefix", ssl.create_default_context())
    assert access.pod_proxy_url("csi-mock", "p", 9809) == (
        "https://api.example:6443/prefix/api/v1/namespaces/csi-mock/pods/p:9809/proxy"
    )


def test_pod_proxy_url_asks_for_https_to_the_pod_with_the_scheme_prefix() -> None:
    access = ApiServerAccess("https://api.example:6443", ssl.create_default_context())
    assert access.pod_proxy_url("kube-system", "kcm", 10257, https=True) == (
        "https://api.example:6443/api/v1/namespaces/kube-system/pods/https:kcm:10257/proxy"
    )
