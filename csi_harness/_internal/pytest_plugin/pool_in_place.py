"""What a pooled driver can be changed to in place, and how: the fields a test may ask
for that do not make it need a driver of its own (``IN_PLACE``).

- ``max_volumes_per_node``: set on every node instance (``PATCH /v1/limits``); the
  instance then registers with the kubelet again (``POST /v1/registration/renew``),
  which asks NodeGetInfo again and rewrites the CSINode entry. A registration takes
  seconds on a loaded node, so a driver keeps the limit its test had while it is idle
  and changes it only for a test that asks for another.
- ``attach_limit``: set on every instance that runs the controller service (``PATCH
  /v1/limits``), which refuses ControllerPublishVolume beyond it from the answer on.
  Nothing in the cluster holds it (the attacher asks the driver each time), so there
  is nothing to wait for; the reset (``POST /v1/reset``) puts the configured one back.
- ``CSIDRIVER_IN_PLACE``: fields that only shape the CSIDriver object and that the API
  server lets change (it refuses a change of ``attachRequired`` or
  ``volumeLifecycleModes``); they are patched to what the wanted spec makes.
  Only ``storageCapacity`` is listed: the scheduler requeues a pod when a CSIDriver's
  storageCapacity changes, so a scheduler that sees the change a moment late still
  places the pod by the new value, whereas the kubelet reads fields such as
  ``podInfoOnMount`` at mount time, and nothing shows when its informer has the new
  object.

Each change says what the cluster shows once it has taken effect (a ``ClusterView``):
the pool waits for that before it hands the driver out and, after the test has had the
deployed fields put back (the node limit aside, ``KEPT_WHILE_IDLE``), before it pools
the driver again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.storage_v1 import CSIDriver
from lightkube.types import PatchType

from csi_harness._internal.core.waiting import WaitTimeout, wait_for
from csi_harness._internal.deploy.spec import DriverDeployment, csidriver_object
from csi_harness._internal.providers.base import Driver
from csi_harness._internal.pytest_plugin.driver_view import ClusterView
from csi_mock.admin import AdminClient, AdminError

CSIDRIVER_IN_PLACE: Mapping[str, str] = {"storage_capacity": "storageCapacity"}
"""CSIDriver fields a pooled driver takes in place (see the module docstring): the
deployment's field and the CSIDriver spec's."""
IN_PLACE = frozenset({"max_volumes_per_node", "attach_limit", *CSIDRIVER_IN_PLACE})
"""Every field a pooled driver can be changed to in place."""


KEPT_WHILE_IDLE = frozenset({"max_volumes_per_node"})
"""The ``IN_PLACE`` fields a reset leaves as the test had them (the others it puts back)."""


def kept_while_idle(spec: DriverDeployment) -> dict[str, Any]:
    """The fields of ``spec`` an idle driver keeps from its test (``KEPT_WHILE_IDLE``),
    as JSON values: compared with what the next test asks for."""
    return spec.model_dump(mode="json", include=set(KEPT_WHILE_IDLE))


class NotReusable(Exception):
    """Why a driver cannot be handed to another test."""


def csidriver_differs(one: DriverDeployment, other: DriverDeployment) -> bool:
    """Whether the two specs make CSIDriver objects that differ in a field of
    ``CSIDRIVER_IN_PLACE`` (no CSIDriver at all: never)."""
    return one.csidriver and any(
        getattr(one, name) != getattr(other, name) for name in CSIDRIVER_IN_PLACE
    )


def set_node_limit(driver: Driver, limit: int) -> None:
    """Every node instance reports ``limit`` in NodeGetInfo from now on."""
    _on_every_node(
        driver, "limit refused", lambda admin: admin.set_limits(max_volumes_per_node=limit)
    )


def set_attach_limit(driver: Driver, limit: int) -> None:
    """Every instance that runs the controller service refuses ControllerPublishVolume
    beyond ``limit`` attachments per node from now on. An instance that runs the node
    service too (distributed provisioning) is given its own node limit in the same
    patch, which would otherwise follow the attach limit (hostpathplugin's rule)."""

    def set_where_a_controller_runs(admin: AdminClient) -> None:
        limits = admin.limits()
        if limits.attach_limit is not None:  # None: no controller service here
            admin.set_limits(attach_limit=limit, max_volumes_per_node=limits.max_volumes_per_node)

    _on_each(driver, driver.instances(), "attach limit refused", set_where_a_controller_runs)


def register_again(driver: Driver) -> None:
    """Every node instance registers with its kubelet again (which asks NodeGetInfo)."""
    _on_every_node(driver, "registration not renewed", lambda admin: admin.renew_registration())


def _on_every_node(driver: Driver, refused: str, call: Callable[[AdminClient], object]) -> None:
    """``call`` on every node instance's admin API (``_on_each``)."""
    _on_each(driver, [node.name for node in driver.nodes], refused, call)


def _on_each(
    driver: Driver,
    instances: Sequence[str],
    refused: str,
    call: Callable[[AdminClient], object],
) -> None:
    """``call`` on the admin API of each of ``instances``; the first refusal makes the
    driver ``NotReusable`` ("<refused> on <instance>: <error>")."""
    for instance in instances:
        try:
            with driver.admin(instance) as admin:
                call(admin)
        except AdminError as error:
            raise NotReusable(f"{refused} on {instance}: {error}") from None


def patch_csidriver(kube: Client, spec: DriverDeployment) -> Mapping[str, Any]:
    """Patch the ``CSIDRIVER_IN_PLACE`` fields of the driver's CSIDriver to what ``spec``
    makes (a field it leaves out is removed); the CSIDriver's spec as the API server
    keeps it (with its defaults), which is what ``observe`` reads."""
    made = csidriver_object(spec)["spec"]
    patch = {"spec": {key: made.get(key) for key in CSIDRIVER_IN_PLACE.values()}}
    try:
        live = kube.patch(CSIDriver, spec.name, patch, patch_type=PatchType.MERGE)
    except ApiError as error:
        message = error.status.message if error.status else str(error)
        raise NotReusable(f"CSIDriver {spec.name} not patched: {message}") from None
    return live.spec.to_dict() if live.spec else {}


def csidriver_labels(kube: Client, name: str) -> Mapping[str, str] | None:
    """The labels of the CSIDriver ``name`` as the deployment made it (None: there is
    none); ``put_back_csidriver`` makes it again with them, so that the provider still
    finds it to remove."""
    try:
        live = kube.get(CSIDriver, name)
    except ApiError as error:
        if error.status and error.status.code == 404:
            return None
        raise
    return dict((live.metadata.labels if live.metadata else None) or {})


def put_back_csidriver(
    kube: Client,
    deployed: DriverDeployment,
    spec: Mapping[str, Any] | None,
    labels: Mapping[str, str],
) -> None:
    """Make the CSIDriver of ``deployed`` what its deployment made: ``spec`` as the API
    server kept it, with ``labels`` (``spec`` None: no CSIDriver). The ``IN_PLACE``
    fields are patched back (whether the pool changed them for the test or the test
    did); what a patch cannot put back is replaced: a test that flipped
    ``attachRequired`` had to delete the object and create another (the API server
    refuses the change), one that tests a driver without a CSIDriver deletes it. With
    no volume left (the reset checked), a replaced object leaves the cluster as a new
    deployment would. Nothing is written when the live object already is as deployed."""
    name = deployed.name
    if spec is None and deployed.csidriver:
        # observe() reads an API error as "no CSIDriver": a put-back would delete it.
        raise NotReusable(f"CSIDriver {name} was not seen after the deployment")
    try:
        live = kube.get(CSIDriver, name)
        live_spec: Mapping[str, Any] | None = live.spec.to_dict() if live.spec else {}
    except ApiError as error:
        if not (error.status and error.status.code == 404):
            raise NotReusable(f"CSIDriver {name} not read: {error}") from None
        live_spec = None
    if live_spec is not None and deployed.csidriver and live_spec != spec:
        live_spec = patch_csidriver(kube, deployed)  # a patch that changes nothing writes nothing
    if live_spec == spec:
        return
    try:
        if live_spec is not None:
            kube.delete(CSIDriver, name)
        if spec is not None:
            wait_for(
                f"CSIDriver {name} to be made again",
                lambda: _create_csidriver(kube, name, spec, labels),
                timeout=PUT_BACK_SECONDS,
                interval=0.2,
            )
    except (ApiError, WaitTimeout) as error:
        raise NotReusable(f"CSIDriver {name} not put back: {error}") from None


PUT_BACK_SECONDS = 10.0
"""How long a deleted CSIDriver may take to go before its replacement can be made (it
has no finalizers: at once, unless the API server is slow)."""


def _create_csidriver(
    kube: Client, name: str, spec: Mapping[str, Any], labels: Mapping[str, str]
) -> tuple[bool, str]:
    obj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": dict(spec),
    }
    try:
        kube.create(cast(CSIDriver, CSIDriver.from_dict(obj)))
    except ApiError as error:
        if error.status and error.status.code == 409:  # the old one is still going
            return False, "the deleted one is still there"
        raise
    return True, ""


def with_node_limit(view: ClusterView, max_volumes_per_node: int) -> ClusterView:
    """``view`` as the cluster shows it once every node has registered the driver with
    ``max_volumes_per_node`` (0: no allocatable count, as the kubelet writes it)."""
    entries: dict[str, Mapping[str, Any]] = {}
    for node, entry in view.csinode_entries.items():
        changed = {key: value for key, value in entry.items() if key != "allocatable"}
        if max_volumes_per_node > 0:
            changed["allocatable"] = {"count": max_volumes_per_node}
        entries[node] = changed
    return dataclasses.replace(view, csinode_entries=entries)
