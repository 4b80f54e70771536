from pathlib import Path

import yaml

from csi_harness._internal.deploy.spec import DriverDeployment
from csi_harness._internal.upstream.run import MAX_VOLUME_SIZE, upstream_driver, write_testdriver
from csi_harness._internal.upstream.testdriver import STORAGE_CLASS, driver_definition

COMMITTED = Path(__file__).resolve().parents[3] / "deploy" / "e2e" / "testdriver.yaml"


def test_the_committed_testdriver_is_what_the_default_deployment_generates() -> None:
    committed = yaml.safe_load(COMMITTED.read_text())

    assert committed == driver_definition(DriverDeployment(), max_size=MAX_VOLUME_SIZE)


def test_both_topology_keys_are_declared() -> None:
    spec = DriverDeployment(name="d1.csi-mock")

    keys = driver_definition(spec, max_size="1Gi")["DriverInfo"]["TopologyKeys"]

    assert keys == ["topology.d1.csi-mock/node", "topology.d1.csi-mock/zone"]


def test_block_is_declared_and_capacity_follows_the_csidriver() -> None:
    with_capacity = driver_definition(DriverDeployment(), max_size="1Gi")["DriverInfo"]
    no_capacity = DriverDeployment(storage_capacity=False)
    without = driver_definition(no_capacity, max_size="1Gi")["DriverInfo"]

    assert with_capacity["Capabilities"]["block"] is True
    assert with_capacity["Capabilities"]["capacity"] is True
    assert without["Capabilities"]["capacity"] is False


def test_the_written_storage_class_is_the_deployments_wait_for_first_consumer_class(
    tmp_path: Path,
) -> None:
    spec = upstream_driver()

    driver_file = write_testdriver(spec, tmp_path)

    definition = yaml.safe_load(driver_file.read_text())
    storage_class = yaml.safe_load(Path(definition["StorageClass"]["FromFile"]).read_text())
    assert storage_class["metadata"]["name"] == spec.storage_class(STORAGE_CLASS)
    assert storage_class["provisioner"] == spec.name
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class["allowVolumeExpansion"] is True


def test_snapshots_clones_and_modify_are_declared_only_where_the_deployment_has_them(
    tmp_path: Path,
) -> None:
    plain = driver_definition(DriverDeployment(), max_size="1Gi")
    spec = upstream_driver()

    definition = yaml.safe_load(write_testdriver(spec, tmp_path).read_text())

    for capability in ("snapshotDataSource", "pvcDataSource"):
        assert plain["DriverInfo"]["Capabilities"][capability] is False
        assert definition["DriverInfo"]["Capabilities"][capability] is True
    assert "SnapshotClass" not in plain and "VolumeAttributesClass" not in plain
    assert definition["SnapshotClass"] == {"FromName": True}
    attributes = yaml.safe_load(Path(definition["VolumeAttributesClass"]["FromFile"]).read_text())
    assert attributes["kind"] == "VolumeAttributesClass"
    assert attributes["driverName"] == spec.name
    # A value the driver takes (controller.modify.mutable_parameters).
    assert spec.mutable_parameters is not None
    for name, value in attributes["parameters"].items():
        assert value in spec.mutable_parameters[name]
