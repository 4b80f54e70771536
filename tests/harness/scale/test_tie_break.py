"""The tie-break extender: scores every node it is asked about 0, and says so in the
shape kube-scheduler's extender client reads (HostPriorityList)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from csi_harness._internal.scale.comparisons import KEP1472
from csi_harness._internal.scale.experiment import Setup, cluster_config
from csi_harness._internal.scale.tie_break import TieBreakExtender
from csi_harness._internal.scale.workload import SizeRange


def post(url: str, body: Any) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        return json.loads(answer.read())


def test_every_node_named_is_scored_0_and_the_call_counted() -> None:
    with TieBreakExtender() as extender:
        by_name = post(f"{extender.url}/prioritize", {"Pod": {}, "NodeNames": ["node-2", "node-3"]})
        by_list = post(
            f"{extender.url}/prioritize",
            {"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "node-4"}}]}},
        )
        assert by_name == [{"Host": "node-2", "Score": 0}, {"Host": "node-3", "Score": 0}]
        assert by_list == [{"Host": "node-4", "Score": 0}]
        assert extender.calls == 2


def test_another_verb_or_a_body_that_is_not_extender_args_is_a_400() -> None:
    with TieBreakExtender() as extender:
        for path, body in (("/filter", {"NodeNames": []}), ("/prioritize", {"Nodes": 3})):
            with pytest.raises(urllib.error.HTTPError) as refused:
                post(f"{extender.url}{path}", body)
            assert refused.value.code == 400
        assert extender.calls == 0


def test_the_scheduler_is_given_the_extender_as_an_ignorable_prioritizer() -> None:
    setup = Setup(nodes=2, pool="1Gi", pods=1, sizes=SizeRange.parse("1Gi"), seed=1)
    with TieBreakExtender() as extender:
        config = cluster_config(setup, KEP1472.variants[1], extender.scheduler_config())
    (entry,) = config.scheduler["extenders"]
    assert entry["urlPrefix"] == extender.url and entry["prioritizeVerb"] == "prioritize"
    assert entry["ignorable"] is True and entry["nodeCacheCapable"] is True
    assert config.scheduler["podMaxBackoffSeconds"] == 10
