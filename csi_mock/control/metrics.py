"""Prometheus metrics: RPC counts and latencies, pool bytes, faults fired."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from csi_mock.model.pool import Pool
from csi_mock.observe.calls import CallRecord

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class _PoolCollector(Collector):
    def __init__(self, pools: Callable[[], Sequence[Pool]]) -> None:
        self._pools = pools

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {
            "total": GaugeMetricFamily(
                "csi_mock_pool_total_bytes", "Pool size in bytes", labels=["pool"]
            ),
            "used": GaugeMetricFamily(
                "csi_mock_pool_used_bytes", "Bytes allocated to volumes", labels=["pool"]
            ),
            "external": GaugeMetricFamily(
                "csi_mock_pool_external_bytes", "Bytes consumed outside CSI", labels=["pool"]
            ),
            "free": GaugeMetricFamily(
                "csi_mock_pool_free_bytes", "Bytes free for new volumes", labels=["pool"]
            ),
        }
        for pool in self._pools():
            families["total"].add_metric([pool.name], pool.total)
            families["used"].add_metric([pool.name], pool.used)
            families["external"].add_metric([pool.name], pool.external)
            families["free"].add_metric([pool.name], pool.free())
        yield from families.values()


class Metrics:
    """A private registry (no process-global state) fed as a RecordSink."""

    def __init__(self, pools: Callable[[], Sequence[Pool]] = lambda: ()) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "csi_mock_rpc_total",
            "CSI RPCs handled, by method and status code",
            ["method", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "csi_mock_rpc_duration_seconds",
            "CSI RPC latency, by method and status code",
            ["method", "code"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.faults = Counter(
            "csi_mock_faults_fired_total",
            "Fault rules fired, by rule id and method",
            ["rule", "method"],
            registry=self.registry,
        )
        self.registry.register(_PoolCollector(pools))
        # labels() validates and locks on every use; a call needs only a dict lookup.
        self._series: dict[tuple[str, str], tuple[Counter, Histogram]] = {}

    def __call__(self, record: CallRecord) -> None:
        key = (record.method, record.code)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.calls.labels(*key), self.latency.labels(*key))
        count, latency = series
        count.inc()
        latency.observe(record.duration_ms / 1000)
        if record.fault:
            self.faults.labels(record.fault, record.method).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
