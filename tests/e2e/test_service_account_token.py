"""Service account tokens for CSI drivers (CSIDriver.spec.tokenRequests,
requiresRepublish, serviceAccountTokenInSecrets) end to end: the kubelet asks the API
server for a token of the pod's service account per requested audience and passes them
to NodePublishVolume as ``csi.storage.k8s.io/serviceAccount.tokens``, in volume_context
or, opted in, in secrets; with requiresRepublish it calls NodePublishVolume again while
the pod runs (at every pod sync), so the driver can see fresh tokens.

The driver's journal keeps whole requests with every token hashed (salted SHA-256, the
salt the driver's own): the tests see that a token arrived and where, never a token.
"""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.storage_v1 import CSIDriver

from csi_harness._internal.core.waiting import wait_for
from csi_harness._internal.deploy.csidriver import TOKEN_MIN_EXPIRATION_SECONDS, TokenRequest
from csi_harness._internal.providers.base import Driver
from tests.e2e.test_workload_info import node_publish_requests, run_pod

pytestmark = [pytest.mark.e2e]

FEATURE = "service account tokens"

TOKENS = "csi.storage.k8s.io/serviceAccount.tokens"
HASHED = "sha256:"
"""How the journal shows a token (any secret) it received."""
TEN_MINUTES = [TokenRequest(expiration_seconds=TOKEN_MIN_EXPIRATION_SECONDS)]
"""Upstream's request: the API server's own audience, the shortest expiry allowed."""


def token_places(request: dict[str, Any]) -> dict[str, str]:
    """Where a NodePublishVolume request carries the tokens, and how (hashed)."""
    places = {
        field: str(request.get(field, {})[TOKENS])
        for field in ("volume_context", "secrets")
        if TOKENS in request.get(field, {})
    }
    assert all(v.startswith(HASHED) for v in places.values()), "a token was kept in clear"
    return places


@pytest.mark.driver(token_requests=None, requires_republish=False, journal_requests="whole")
@pytest.mark.upstream(
    "csi_service_account_token.go",
    "token should not be plumbed down when csiServiceAccountTokenEnabled=false",
)
@pytest.mark.scenario(FEATURE, "no tokenRequests: no token in NodePublishVolume")
def test_without_token_requests_node_publish_gets_no_token(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    pod = run_pod(kube, driver, namespace, pod_node, "app")
    for request in node_publish_requests(driver, pod_node, pod):
        assert token_places(request) == {}


@pytest.mark.driver(
    csidriver=False,
    token_requests=[TokenRequest()],
    requires_republish=True,
    journal_requests="whole",
)
@pytest.mark.upstream(
    "csi_service_account_token.go",
    "token should not be plumbed down when CSIDriver is not deployed",
)
@pytest.mark.scenario(FEATURE, "no CSIDriver object: no token in NodePublishVolume")
def test_without_a_csidriver_object_node_publish_gets_no_token(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    # The token fields of the spec go nowhere: only a CSIDriver object asks for tokens.
    assert not driver.spec.csidriver
    pod = run_pod(kube, driver, namespace, pod_node, "app")
    for request in node_publish_requests(driver, pod_node, pod):
        assert token_places(request) == {}


@pytest.mark.driver(token_requests=TEN_MINUTES, requires_republish=True, journal_requests="whole")
@pytest.mark.upstream(
    "csi_service_account_token.go",
    "token should be plumbed down when csiServiceAccountTokenEnabled=true",
)
@pytest.mark.scenario(
    FEATURE, "tokenRequests and requiresRepublish: the token in volume_context, republished"
)
def test_token_requests_put_the_token_in_volume_context_and_republish_repeats_it(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    pod = run_pod(kube, driver, namespace, pod_node, "app")
    (first, *_) = node_publish_requests(driver, pod_node, pod)
    assert set(token_places(first)) == {"volume_context"}

    # requiresRepublish: the kubelet publishes the mounted volume again at its next
    # sync of the pod (every syncFrequency, 10 s on the local provider).
    def republished() -> tuple[bool, list[dict[str, Any]]]:
        requests = node_publish_requests(driver, pod_node, pod)
        return len(requests) >= 2, requests

    published = wait_for(
        "a second NodePublishVolume for the running pod (requiresRepublish)",
        republished,
        timeout=45,
        interval=0.5,
    )
    assert {request["target_path"] for request in published} == {first["target_path"]}
    for request in published:
        assert set(token_places(request)) == {"volume_context"}


@pytest.mark.driver(
    token_requests=TEN_MINUTES,
    requires_republish=True,
    service_account_token_in_secrets=True,
    journal_requests="whole",
)
@pytest.mark.upstream(
    "csi_service_account_token.go",
    "token should be plumbed down only in secrets when serviceAccountTokenInSecrets=true",
)
@pytest.mark.scenario(FEATURE, "serviceAccountTokenInSecrets: the token in secrets only")
def test_token_in_secrets_puts_the_token_in_node_publish_secrets_only(
    kube: Client, namespace: str, driver: Driver, pod_node: str
) -> None:
    spec = kube.get(CSIDriver, driver.spec.name).spec
    assert spec is not None and spec.serviceAccountTokenInSecrets is True, spec

    pod = run_pod(kube, driver, namespace, pod_node, "app")
    for request in node_publish_requests(driver, pod_node, pod):
        assert set(token_places(request)) == {"secrets"}
