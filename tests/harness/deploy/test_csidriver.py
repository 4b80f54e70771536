"""The CSIDriver fields of a DriverDeployment: validated naming the field, rendered by
the one csidriver_object that local and in-cluster deployments use."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import codecs
from pydantic import ValidationError

from csi_harness._internal.deploy.incluster_objects import cluster_scoped_objects
from csi_harness._internal.deploy.spec import DriverDeployment, csidriver_object


def rendered_spec(**fields: Any) -> dict[str, Any]:
    return csidriver_object(DriverDeployment(**fields))["spec"]


def test_defaults_keep_the_published_csidriver() -> None:
    spec = rendered_spec()

    assert spec == {
        "attachRequired": False,
        "storageCapacity": True,
        "podInfoOnMount": True,
        "fsGroupPolicy": "File",
        "volumeLifecycleModes": ["Persistent", "Ephemeral"],
    }


def test_every_field_is_rendered_under_its_kubernetes_name() -> None:
    spec = rendered_spec(
        pod_info_on_mount=False,
        fs_group_policy="ReadWriteOnceWithFSType",
        token_requests=[{"audience": "vault", "expiration_seconds": 3600}, {"audience": ""}],
        requires_republish=True,
        service_account_token_in_secrets=True,
        se_linux_mount=True,
        volume_lifecycle_modes=["Ephemeral"],
    )

    assert spec == {
        "attachRequired": False,
        "storageCapacity": True,
        "podInfoOnMount": False,
        "fsGroupPolicy": "ReadWriteOnceWithFSType",
        "tokenRequests": [{"audience": "vault", "expirationSeconds": 3600}, {"audience": ""}],
        "requiresRepublish": True,
        "serviceAccountTokenInSecrets": True,
        "seLinuxMount": True,
        "volumeLifecycleModes": ["Ephemeral"],
    }


def test_an_unset_fs_group_policy_leaves_the_field_to_kubernetes() -> None:
    assert "fsGroupPolicy" not in rendered_spec(fs_group_policy=None)


def test_the_rendered_csidriver_loads_as_a_kubernetes_object() -> None:
    obj = csidriver_object(
        DriverDeployment(
            token_requests=[{"audience": "a", "expiration_seconds": 600}],
            requires_republish=True,
            se_linux_mount=False,
            fs_group_policy="None",
        )
    )

    loaded = codecs.from_dict(obj)

    assert loaded.spec.tokenRequests[0].expirationSeconds == 600  # type: ignore[union-attr]
    assert loaded.spec.fsGroupPolicy == "None"  # type: ignore[union-attr]


def test_the_in_cluster_objects_carry_the_same_csidriver() -> None:
    spec = DriverDeployment(se_linux_mount=True, pod_info_on_mount=False)

    (csidriver,) = [o for o in cluster_scoped_objects(spec) if o["kind"] == "CSIDriver"]

    assert csidriver == csidriver_object(spec)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"fs_group_policy": "Files"}, "fs_group_policy"),
        ({"token_requests": [{"audience": "a", "expiration_seconds": 599}]}, "token_requests"),
        ({"token_requests": [{"audience": "a", "expiry": 600}]}, "token_requests"),
        ({"token_requests": [{"audience": "a"}, {"audience": "a"}]}, "token_requests"),
        ({"volume_lifecycle_modes": ["Persistent", "Inline"]}, "volume_lifecycle_modes"),
        ({"volume_lifecycle_modes": []}, "volume_lifecycle_modes"),
        ({"volume_lifecycle_modes": ["Ephemeral", "Ephemeral"]}, "volume_lifecycle_modes"),
        ({"pod_info_on_mount": "sometimes"}, "pod_info_on_mount"),
        ({"requires_republish": "often"}, "requires_republish"),
        ({"se_linux_mount": [True]}, "se_linux_mount"),
    ],
)
def test_a_bad_csidriver_field_is_refused_naming_it(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        DriverDeployment(**fields)

    assert raised.value.errors()[0]["loc"][0] == field


def test_token_in_secrets_without_token_requests_is_refused_as_kubernetes_does() -> None:
    with pytest.raises(ValidationError, match="service_account_token_in_secrets is set but no"):
        DriverDeployment(service_account_token_in_secrets=False)
