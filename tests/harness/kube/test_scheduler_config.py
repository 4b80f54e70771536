"""VolumeBinding's scoring shape as a KubeSchedulerConfiguration fragment."""

from csi_harness._internal.kube.scheduler_config import PACKING_SHAPE, volume_binding_shape


def test_the_shape_goes_into_volume_binding_args_of_the_default_profile() -> None:
    config = volume_binding_shape(PACKING_SHAPE, bindTimeoutSeconds=600)
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    (plugin,) = profile["pluginConfig"]
    assert plugin == {
        "name": "VolumeBinding",
        "args": {
            "bindTimeoutSeconds": 600,
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
        },
    }
