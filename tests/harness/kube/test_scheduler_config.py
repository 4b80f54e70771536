"""VolumeBinding's scoring shape as a KubeSchedulerConfiguration fragment."""

from csi_harness._internal.kube.scheduler_config import (
    CAPACITY_WEIGHT,
    PACKING_SHAPE,
    capacity_scoring_profile,
    volume_binding_shape,
)


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


def test_a_scoring_profile_in_the_default_shape_keeps_every_plugin() -> None:
    assert capacity_scoring_profile("mine") == {"schedulerName": "mine"}


def test_a_profile_against_a_preference_scores_with_volume_binding_and_node_affinity_alone() -> (
    None
):
    profile = capacity_scoring_profile("mine", PACKING_SHAPE, against_preference=True)
    assert profile["plugins"] == {
        "score": {
            "disabled": [{"name": "*"}],
            "enabled": [
                {"name": "VolumeBinding", "weight": CAPACITY_WEIGHT},
                {"name": "NodeAffinity", "weight": 1},
            ],
        }
    }
    (plugin,) = profile["pluginConfig"]
    assert plugin["args"]["shape"][-1] == {"utilization": 100, "score": 10}


def test_six_points_of_capacity_score_outweigh_a_whole_preference() -> None:
    # NodeAffinity normalizes a preferred node's score to 100 (MaxNodeScore).
    assert 6 * CAPACITY_WEIGHT > 100 * 1


def test_scoring_off_disables_volume_binding_score_in_either_kind_of_profile() -> None:
    assert capacity_scoring_profile("a", scoring=False)["plugins"] == {
        "score": {"disabled": [{"name": "VolumeBinding"}]}
    }
    assert capacity_scoring_profile("b", against_preference=True, scoring=False)["plugins"] == {
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeAffinity", "weight": 1}]}
    }
