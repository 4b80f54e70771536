"""Reaching a pod's HTTP port through the API server's pod proxy, with the credentials
of a kubeconfig.

``api_server_access`` reads the kubeconfig once into what any HTTP client needs: the
server URL, an SSL context (the cluster's CA, the user's client certificate) and the
headers that authenticate the user (a bearer token or basic auth). The API server
consumes the ``Authorization`` header itself, so whatever the pod wants must travel in
headers of its own.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx
from lightkube import KubeConfig
from lightkube.config.kubeconfig import SingleConfig


class KubeconfigUnsupported(ValueError):
    """The kubeconfig authenticates in a way this module does not implement; the
    message names the key."""


@dataclass(frozen=True)
class ApiServerAccess:
    server: str
    """The API server's base URL, without a trailing slash."""
    ssl_context: ssl.SSLContext
    headers: dict[str, str] = field(default_factory=dict)

    def pod_proxy_url(self, namespace: str, pod: str, port: int, *, https: bool = False) -> str:
        """The base URL of ``pod``'s ``port`` through the API server; a path appended to
        it reaches the same path on the pod (``.../proxy`` + ``/healthz``). With
        ``https`` the API server speaks HTTPS to the pod (it does not verify the pod's
        certificate)."""
        scheme = "https:" if https else ""
        return (
            f"{self.server}/api/v1/namespaces/{quote(namespace, safe='')}"
            f"/pods/{scheme}{quote(pod, safe='')}:{port}/proxy"
        )

    def client(self, timeout: float) -> httpx.Client:
        """An HTTP client that reaches the API server as the kubeconfig's user."""
        return httpx.Client(verify=self.ssl_context, headers=self.headers, timeout=timeout)

    def node_proxy_url(self, node: str) -> str:
        """The base URL of ``node``'s kubelet through the API server (``.../proxy`` +
        ``/configz``)."""
        return f"{self.server}/api/v1/nodes/{quote(node, safe='')}/proxy"


def api_server_access(kubeconfig: Path, context: str | None = None) -> ApiServerAccess:
    """The access ``kubeconfig`` (its current context, or ``context``) grants."""
    config = KubeConfig.from_file(kubeconfig).get(context)
    assert config is not None  # get() without a default raises instead
    return ApiServerAccess(
        server=config.cluster.server.rstrip("/"),
        ssl_context=_ssl_context(config),
        headers=_auth_headers(config),
    )


def _file(config: SingleConfig, path: str) -> str:
    """A kubeconfig file reference, relative ones resolved against the kubeconfig."""
    return os.fspath(config.abs_file(path))


def _decoded(data: str, key: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KubeconfigUnsupported(f"{key} is not valid base64: {exc}") from None


def _ssl_context(config: SingleConfig) -> ssl.SSLContext:
    cluster = config.cluster
    if cluster.certificate_auth_data:
        pem = _decoded(cluster.certificate_auth_data, "certificate-authority-data")
        context = ssl.create_default_context(cadata=pem.decode())
    elif cluster.certificate_auth:
        context = ssl.create_default_context(cafile=_file(config, cluster.certificate_auth))
    else:
        context = ssl.create_default_context()
    if cluster.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    user = config.user
    if user is not None and (user.client_cert or user.client_cert_data):
        _load_client_certificate(context, config)
    return context


def _load_client_certificate(context: ssl.SSLContext, config: SingleConfig) -> None:
    user = config.user
    assert user is not None
    if user.client_cert_data is None and user.client_key_data is None:
        assert user.client_cert is not None
        if user.client_key is None:
            raise KubeconfigUnsupported("client-certificate without client-key")
        context.load_cert_chain(_file(config, user.client_cert), _file(config, user.client_key))
        return
    # load_cert_chain reads files only: the inline data goes into a private directory
    # that is gone once the context holds the key.
    with tempfile.TemporaryDirectory(prefix="kubeconfig-") as directory:
        cert = Path(directory) / "client.crt"
        key = Path(directory) / "client.key"
        for path, data, name, reference in (
            (cert, user.client_cert_data, "client-certificate", user.client_cert),
            (key, user.client_key_data, "client-key", user.client_key),
        ):
            if data is not None:
                path.write_bytes(_decoded(data, f"{name}-data"))
            elif reference is not None:
                path.write_bytes(Path(_file(config, reference)).read_bytes())
            else:
                raise KubeconfigUnsupported(f"the user has no {name} or {name}-data")
        context.load_cert_chain(cert, key)


def _auth_headers(config: SingleConfig) -> dict[str, str]:
    user = config.user
    if user is None:
        return {}
    if user.token_file is not None:
        token = Path(_file(config, user.token_file)).read_text().strip()
        return {"Authorization": f"Bearer {token}"}
    if user.token is not None:
        return {"Authorization": f"Bearer {user.token}"}
    if user.username is not None and user.password is not None:
        basic = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
        return {"Authorization": f"Basic {basic}"}
    if user.exec is not None:
        raise KubeconfigUnsupported(
            "users[].user.exec (a credential plugin) is not supported for the pod proxy; "
            "use a kubeconfig with a client certificate or a token"
        )
    if user.auth_provider is not None:
        raise KubeconfigUnsupported("users[].user.auth-provider is not supported")
    return {}
