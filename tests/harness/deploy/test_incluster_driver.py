"""InClusterDriver against a stand-in API (tests/harness/deploy/fake_api.py): what it
deletes and applies in which order, what it waits for and how a failed wait reads, and
how it finds, calls and stops the components of a deployment."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any, cast

import pytest
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from csi_harness._internal.core.waiting import WaitTimeout
from csi_harness._internal.deploy.incluster import DriverPodsFailed, InClusterDriver
from csi_harness._internal.deploy.spec import NODE_TOPOLOGY_KEY, DriverDeployment
from csi_harness._internal.kube.csinode import CSINodeResource
from csi_harness._internal.providers.base import ClusterNode
from csi_mock.admin.views import TOKEN_HEADER
from tests.harness.deploy.fake_api import (
    Event,
    FakeApi,
    api_error,
    ready_status,
    write_kubeconfig,
)

NODES = [ClusterNode("worker", "zone-a", True), ClusterNode("worker2", "zone-b", True)]
SIDECARS = {
    "csi-provisioner": "csi-mock.local/csi-provisioner:v6",
    "csi-attacher": "csi-mock.local/csi-attacher:v4",
    "csi-resizer": "csi-mock.local/csi-resizer:v1",
}


class RecordingRunner:
    def __init__(self, reply: str = "{}") -> None:
        self.reply = reply
        self.calls: list[list[str]] = []

    def __call__(self, argv: Any) -> str:
        self.calls.append(list(argv))
        return self.reply


def make_driver(
    api: FakeApi,
    tmp_path: Path,
    *,
    runner: RecordingRunner | None = None,
    timeout: float = 10,
    **fields: Any,
) -> InClusterDriver:
    return InClusterDriver(
        DriverDeployment(**fields),
        nodes=NODES,
        kube=cast(Any, api),
        kubeconfig=write_kubeconfig(tmp_path / "kubeconfig"),
        kubectl="/opt/kubectl",
        image="csi-mock.local/csi-mock:dev",
        sidecar_images=SIDECARS,
        generation="3",
        timeout=timeout,
        run=runner or RecordingRunner(),
    )


@pytest.fixture
def api() -> FakeApi:
    return FakeApi(nodes=[n.name for n in NODES])


def verbs(events: list[Event], verb: str) -> list[str]:
    return [f"{e.kind}/{e.name}" for e in events if e.verb == verb]


Key = tuple[str, str, str]
"""(kind, namespace, name) as FakeApi.objects keys them; namespace "" at cluster scope."""


def keys(events: list[Event], *verbs: str) -> set[Key]:
    return {(e.kind, e.namespace or "", e.name) for e in events if e.verb in verbs}


def own(tag: str) -> dict[str, str]:
    """The name and suffix of a deployment beside others, as the pytest plugin makes them."""
    return {"name": f"{tag}.csi-mock", "suffix": f"-{tag}"}


def snapshot(api: FakeApi, which: set[Key]) -> dict[Key, dict[str, Any]]:
    return {key: copy.deepcopy(api.objects[key]) for key in which if key in api.objects}


def deployed(api: FakeApi, driver: InClusterDriver) -> set[Key]:
    """Deploy ``driver``; what it applied."""
    api.events.clear()
    driver.deploy()
    return keys(api.events, "apply")


def settle(api: FakeApi) -> None:
    """Let the namespace controller and the kubelets finish what they do later."""
    for _ in range(api.termination_polls + api.deregistration_polls + 1):
        api.list(Namespace)
        api.list(CSINodeResource)


# -- deploy ----------------------------------------------------------------------------


def test_deploy_applies_everything_and_returns_once_ready(api: FakeApi, tmp_path: Path) -> None:
    make_driver(api, tmp_path).deploy()
    applied = verbs(api.events, "apply")
    assert applied[0] == "Namespace/csi-mock"
    # Configuration before the pods that read it.
    assert applied.index("ConfigMap/csi-mock-config") < applied.index("DaemonSet/csi-mock-node")
    assert applied.index("Secret/csi-mock-admin") < applied.index("Deployment/csi-mock-controller")
    assert api.registered == {"worker": {"csi-mock.example"}, "worker2": {"csi-mock.example"}}
    assert len(api.pod_names("node")) == 2


def test_deploy_first_removes_the_previous_deployment_and_waits_for_its_deregistration(
    api: FakeApi, tmp_path: Path
) -> None:
    make_driver(api, tmp_path, name="old.example", attach_required=True).deploy()
    old_pods = set(api.pod_names("node"))
    api.events.clear()
    make_driver(api, tmp_path).deploy()
    deleted = verbs(api.events, "delete")
    first_apply = next(i for i, e in enumerate(api.events) if e.verb == "apply")
    assert all(i < first_apply for i, e in enumerate(api.events) if e.verb == "delete")
    # The kubelets dropped the old driver before anything new was applied.
    gone = [(e.name, e.body) for e in api.events[:first_apply] if e.verb == "deregistered"]
    assert sorted(gone) == [("worker", "old.example"), ("worker2", "old.example")]
    assert {
        "DaemonSet/csi-mock-node",
        "Deployment/csi-mock-controller",
        "CSIDriver/old.example",
        "StorageClass/csi-mock",
        "ConfigMap/csi-mock-config",
    } <= set(deleted)
    assert [d for d in deleted if d.startswith("CSIStorageCapacity/")]
    assert not old_pods & set(api.pod_names("node"))
    assert api.registered == {"worker": {"csi-mock.example"}, "worker2": {"csi-mock.example"}}
    assert api.objects[("CSIDriver", "", "csi-mock.example")]["spec"]["attachRequired"] is False
    assert ("CSIDriver", "", "old.example") not in api.objects


def test_a_missing_image_ends_the_wait_at_once_naming_the_container(tmp_path: Path) -> None:
    def status(role: str, node: str) -> dict[str, Any]:
        if role != "controller":
            return ready_status(role, node)
        waiting = {
            "reason": "ErrImageNeverPull",
            "message": "image not present with pull policy Never",
        }
        return {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "csi-attacher",
                    "image": "csi-mock.local/csi-attacher:v4",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": waiting},
                }
            ],
        }

    api = FakeApi(nodes=["worker", "worker2"], pod_status=status)
    started = time.monotonic()
    with pytest.raises(DriverPodsFailed, match=r"csi-attacher.*ErrImageNeverPull") as failure:
        make_driver(api, tmp_path, timeout=60).deploy()
    assert time.monotonic() - started < 10
    assert "csi-mock-controller" in str(failure.value)  # every pod is listed


def test_a_timeout_says_what_was_seen_of_each_pod(tmp_path: Path) -> None:
    def status(role: str, node: str) -> dict[str, Any]:
        if role != "node" or node != "worker2":
            return ready_status(role, node)
        return {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "csi-mock",
                    "image": "i",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
            ],
        }

    api = FakeApi(nodes=["worker", "worker2"], pod_status=status)
    with pytest.raises(WaitTimeout) as failure:
        make_driver(api, tmp_path, timeout=1).deploy()
    message = str(failure.value)
    assert "csi-mock-node-worker2" in message  # the component not ready
    assert "on worker2: Pending; csi-mock: waiting ContainerCreating" in message


# -- finding and calling instances -----------------------------------------------------


def test_instances_and_components_follow_the_provisioning_mode(
    api: FakeApi, tmp_path: Path
) -> None:
    central = make_driver(api, tmp_path)
    assert central.instances() == ["controller", "worker", "worker2"]
    assert "csi-attacher" in central.components()
    assert "csi-resizer" in central.components()
    distributed = make_driver(api, tmp_path, provisioner_mode="distributed")
    assert distributed.instances() == ["worker", "worker2"]
    assert "csi-provisioner-worker2" in distributed.components()
    with pytest.raises(ValueError, match="no csi-mock instance"):
        distributed.admin("controller")


def test_admin_goes_through_the_pod_proxy_of_the_instances_pod(
    api: FakeApi, tmp_path: Path
) -> None:
    driver = make_driver(api, tmp_path)
    driver.deploy()
    (pod,) = [
        p["metadata"]["name"]
        for p in api.pods
        if p["metadata"]["labels"]["app.kubernetes.io/component"] == "node"
        and p["spec"]["nodeName"] == "worker2"
    ]
    with driver.admin("worker2") as admin:
        assert admin.endpoint.base_url == (
            f"https://10.1.2.3:6443/api/v1/namespaces/csi-mock/pods/{pod}:9809/proxy"
        )
        assert admin.endpoint.headers == {
            "Authorization": "Bearer k8s-token",
            TOKEN_HEADER: driver.admin_token,
        }


def test_get_capacity_asks_the_controller_pod(api: FakeApi, tmp_path: Path) -> None:
    runner = RecordingRunner(
        '{"available_capacity": "5368709120", "maximum_volume_size": "1073741824"}'
    )
    driver = make_driver(api, tmp_path, runner=runner)
    driver.deploy()
    assert driver.get_capacity({NODE_TOPOLOGY_KEY: "worker"}, {"kind": "striped"}) == (
        5 << 30,
        1 << 30,
    )
    (argv,) = runner.calls
    assert argv[argv.index("exec") + 1] == api.pod_names("controller")[0]
    assert "--container=csi-mock" in argv


def test_distributed_get_capacity_asks_the_segments_node(api: FakeApi, tmp_path: Path) -> None:
    runner = RecordingRunner('{"available_capacity": "1"}')
    driver = make_driver(api, tmp_path, runner=runner, provisioner_mode="distributed")
    driver.deploy()
    assert driver.get_capacity({NODE_TOPOLOGY_KEY: "worker2"}, {}) == (1, 0)
    pod = runner.calls[0][runner.calls[0].index("exec") + 1]
    (node,) = [p["spec"]["nodeName"] for p in api.pods if p["metadata"]["name"] == pod]
    assert node == "worker2"
    with pytest.raises(ValueError, match=NODE_TOPOLOGY_KEY):
        driver.get_capacity({"topology.csi-mock.example/zone": "zone-a"}, {})


# -- stopping components ---------------------------------------------------------------


class PausingAdmin:
    """Stands in for the controller's admin client: records the programs paused."""

    def __init__(self) -> None:
        self.paused: list[str] = []

    def __enter__(self) -> PausingAdmin:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def pause_neighbour(self, name: str) -> None:
        self.paused.append(name)


def test_stopping_the_attacher_pauses_it_in_the_controllers_pod_and_keeps_its_log(
    api: FakeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = make_driver(api, tmp_path)
    driver.deploy()
    (controller,) = api.pod_names("controller")
    api.logs[(controller, "csi-attacher")] = "I attached things\n"
    admin = PausingAdmin()
    asked: list[str] = []
    monkeypatch.setattr(driver, "admin", lambda instance: asked.append(instance) or admin)
    pods = [p["metadata"]["name"] for p in api.pods]
    api.events.clear()

    driver.stop_component("csi-attacher")

    assert (asked, admin.paused) == (["controller"], ["csi-attacher"])
    assert verbs(api.events, "patch") == []  # no pod replaced: the others keep their state
    assert [p["metadata"]["name"] for p in api.pods] == pods
    assert driver.component_log("csi-attacher") == "I attached things\n"
    assert driver.failed_component() == "stopped: csi-attacher"
    driver.stop_component("csi-attacher")  # once stopped, stopped
    assert admin.paused == ["csi-attacher"]


def test_stopping_the_controller_scales_its_pod_to_zero_and_its_sidecars_with_it(
    api: FakeApi, tmp_path: Path
) -> None:
    driver = make_driver(api, tmp_path, resizer=False)
    driver.deploy()
    (controller,) = api.pod_names("controller")
    api.logs[(controller, "csi-provisioner")] = "I provisioned things\n"

    driver.stop_component("csi-mock-controller")

    assert verbs(api.events, "patch")[-1] == "Deployment/csi-mock-controller"
    assert api.pod_names("controller") == []
    assert driver.failed_component() == (
        "stopped: csi-attacher, csi-mock-controller, csi-provisioner"
    )
    assert driver.component_log("csi-provisioner") == "I provisioned things\n"


def test_stopping_a_nodes_provisioner_takes_only_that_node_out(
    api: FakeApi, tmp_path: Path
) -> None:
    driver = make_driver(api, tmp_path, provisioner_mode="distributed")
    driver.deploy()
    nodes_before = len(api.pod_names("node"))
    driver.stop_component("csi-provisioner-worker2")
    remaining = [
        p["spec"]["nodeName"]
        for p in api.pods
        if p["metadata"]["labels"]["app.kubernetes.io/component"] == "provisioner"
    ]
    assert remaining == ["worker"]
    assert len(api.pod_names("node")) == nodes_before
    driver.stop_component("csi-provisioner-worker")
    assert api.pod_names("provisioner") == []
    (patch, patch_type) = [e.body for e in api.events if e.verb == "patch"][-1]
    assert patch_type is PatchType.MERGE
    # The second patch still excludes the first node.
    terms = patch["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert all(len(t["matchFields"]) == 2 for t in terms)


def test_an_unknown_component_is_refused_with_the_known_ones(api: FakeApi, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="csi-attacher"):
        make_driver(api, tmp_path, provisioner_mode="distributed").stop_component("csi-attacher")


# -- deployments side by side ----------------------------------------------------------


def test_suffixed_deployments_run_side_by_side_without_touching_each_other(
    api: FakeApi, tmp_path: Path
) -> None:
    a = deployed(api, make_driver(api, tmp_path, **own("a")))
    a_objects = snapshot(api, a)
    a_pods = api.pod_names("node", "csi-mock-a")
    b = deployed(api, make_driver(api, tmp_path, **own("b")))
    assert {ns for _, ns, _ in a} == {"", "csi-mock-a"}
    assert {ns for _, ns, _ in b} == {"", "csi-mock-b"}
    assert not a & b
    # b's deploy found nothing of its own to clear, and left a as it was.
    assert verbs(api.events, "delete") == [] and verbs(api.events, "patch") == []
    assert snapshot(api, a) == a_objects
    assert api.pod_names("node", "csi-mock-a") == a_pods
    assert api.registered == {
        "worker": {"a.csi-mock", "b.csi-mock"},
        "worker2": {"a.csi-mock", "b.csi-mock"},
    }
    for capacity in api.capacities:
        driver = capacity["metadata"]["labels"]["csi.storage.k8s.io/drivername"]
        assert capacity["metadata"]["namespace"] == "csi-mock-" + driver.split(".")[0]


def test_removing_a_suffixed_deployment_leaves_nothing_of_it_and_spares_the_others(
    api: FakeApi, tmp_path: Path
) -> None:
    make_driver(api, tmp_path).deploy()
    a_driver = make_driver(api, tmp_path, **own("a"))
    a = deployed(api, a_driver)
    make_driver(api, tmp_path, **own("b")).deploy()
    others = {k: copy.deepcopy(v) for k, v in api.objects.items() if k not in a}
    other_pods = [p for p in api.pods if p["metadata"]["namespace"] != "csi-mock-a"]
    other_capacities = [c for c in api.capacities if c["metadata"]["namespace"] != "csi-mock-a"]
    api.events.clear()
    a_driver.remove()
    touched = keys(api.events, "delete", "patch", "apply")
    # Its topology labels come off the nodes: kubelets never remove them.
    assert {k for k in touched if k[0] == "Node"} == {
        ("Node", "", "worker"),
        ("Node", "", "worker2"),
    }
    assert {k for k in touched if k[0] != "Node"} <= a
    # Nothing waited for the kubelets: its names are never used again.
    assert "a.csi-mock" in api.registered["worker"]
    settle(api)
    assert not a & set(api.objects)
    assert api.namespaced("csi-mock-a") == []
    assert api.objects == others
    assert api.pods == other_pods
    assert api.capacities == other_capacities
    assert api.registered == {
        "worker": {"csi-mock.example", "b.csi-mock"},
        "worker2": {"csi-mock.example", "b.csi-mock"},
    }


def test_the_unsuffixed_deploy_replaces_only_the_deployment_of_the_shared_namespace(
    api: FakeApi, tmp_path: Path
) -> None:
    make_driver(api, tmp_path, name="old.example").deploy()
    a = deployed(api, make_driver(api, tmp_path, **own("a")))
    a_objects = snapshot(api, a)
    a_capacities = [c for c in api.capacities if c["metadata"]["namespace"] == "csi-mock-a"]
    api.events.clear()
    make_driver(api, tmp_path).deploy()
    assert ("CSIDriver", "", "old.example") in keys(api.events, "delete")
    assert not keys(api.events, "delete", "patch") & a
    assert snapshot(api, a) == a_objects
    assert [c for c in api.capacities if c["metadata"]["namespace"] == "csi-mock-a"] == (
        a_capacities
    )
    assert api.registered == {
        "worker": {"csi-mock.example", "a.csi-mock"},
        "worker2": {"csi-mock.example", "a.csi-mock"},
    }


def test_a_suffixed_deploy_first_clears_its_own_leftovers_only(
    api: FakeApi, tmp_path: Path
) -> None:
    b = deployed(api, make_driver(api, tmp_path, **own("b")))
    b_objects = snapshot(api, b)
    interrupted = deployed(api, make_driver(api, tmp_path, **own("a")))  # never removed
    api.events.clear()
    make_driver(api, tmp_path, **own("a")).deploy()
    first_apply = next(i for i, e in enumerate(api.events) if e.verb == "apply")
    before = api.events[:first_apply]
    # Its namespace terminated and its node plugins deregistered before anything new.
    assert Event("terminated", "Namespace", "csi-mock-a") in before
    assert {(e.name, e.body) for e in before if e.verb == "deregistered"} == {
        ("worker", "a.csi-mock"),
        ("worker2", "a.csi-mock"),
    }
    assert keys(before, "delete") <= interrupted
    assert snapshot(api, b) == b_objects
    assert api.registered == {
        "worker": {"a.csi-mock", "b.csi-mock"},
        "worker2": {"a.csi-mock", "b.csi-mock"},
    }


def test_a_suffixed_deployment_is_reached_in_its_own_namespace(
    api: FakeApi, tmp_path: Path
) -> None:
    runner = RecordingRunner('{"available_capacity": "1"}')
    driver = make_driver(api, tmp_path, runner=runner, provisioner_mode="distributed", **own("a"))
    driver.deploy()
    key = driver.spec.node_topology_key
    assert driver.get_capacity({key: "worker2"}, {}) == (1, 0)
    (argv,) = runner.calls
    assert "--namespace=csi-mock-a" in argv
    assert argv[argv.index("exec") + 1] in api.pod_names("node", "csi-mock-a")
    with pytest.raises(ValueError, match=key):
        driver.get_capacity({NODE_TOPOLOGY_KEY: "worker2"}, {})
    with driver.admin("worker2") as admin:
        assert "/api/v1/namespaces/csi-mock-a/pods/csi-mock-node-" in admin.endpoint.base_url
    api.events.clear()
    driver.stop_component("csi-provisioner-worker2")
    assert keys(api.events, "patch") == {("DaemonSet", "csi-mock-a", "csi-mock-provisioner")}
    assert driver.component_log("csi-provisioner-worker2").startswith("log of ")


def test_removal_goes_on_past_a_failed_delete_and_reports_it(
    api: FakeApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = make_driver(api, tmp_path, **own("a"))
    a = deployed(api, driver)
    delete = api.delete

    def failing(resource: Any, name: str, **kwargs: Any) -> None:
        if resource.__name__ == "ClusterRole":
            raise api_error(500, "etcd is unhappy")
        delete(resource, name, **kwargs)

    monkeypatch.setattr(api, "delete", failing)
    with pytest.raises(ApiError, match="etcd is unhappy"):
        driver.remove()
    settle(api)
    assert {kind for kind, _, _ in a & set(api.objects)} == {"ClusterRole"}
