"""``s3tm metrics serve``: the platform's figures for Prometheus, read from the lakehouse.

One exporter reads the Delta tables the stream, the remap and the monitor already write
(through delta-rs: no JVM), so none of them needs network code of its own, and a restarted
Spark driver loses nothing: the counters are sums over committed rows. A table is read
again only when its Delta version moved since the last scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from s3tm.monitoring.figures import (
    Metric,
    monitor_metrics,
    quarantine_metrics,
    routing_metrics,
    stream_batch_metrics,
    stream_health_metrics,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from prometheus_client.registry import Collector
    from prometheus_client.samples import Sample  # noqa: F401

    from spark_jobs.lake.delta_io import Lakehouse

log = logging.getLogger(__name__)

# each table and the figures made of it
SOURCES: dict[str, Callable[[pa.Table | None], list[Metric]]] = {
    "stream.batches": stream_batch_metrics,
    "stream.health": stream_health_metrics,
    "routing.versions": routing_metrics,
    "stream.monitor": monitor_metrics,
    "silver.posts_quarantine": quarantine_metrics,
}


@dataclass
class _Cached:
    version: int | None
    metrics: list[Metric]


@dataclass
class LakehouseFigures:
    """The metrics of every source table, re-read when the table's version moved."""

    lakehouse: Lakehouse
    _cache: dict[str, _Cached] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    read_errors: int = 0

    def metrics(self) -> tuple[list[Metric], dict[str, int | None]]:
        """Every metric, and the Delta version each table was read at (None: absent)."""
        out: list[Metric] = []
        versions: dict[str, int | None] = {}
        with self._lock:  # one scrape reads at a time
            for name, figures in SOURCES.items():
                cached = self._read(name, figures)
                versions[name] = cached.version
                out += cached.metrics
        return out, versions

    def _read(self, name: str, figures: Callable[[pa.Table | None], list[Metric]]) -> _Cached:
        lake = self.lakehouse
        held = self._cache.get(name)
        try:
            version = lake.version(name) if lake.exists(name) else None
            if held is not None and held.version == version:
                return held
            table = lake.read_arrow(name) if version is not None else None
            fresh = _Cached(version, figures(table))
        except Exception as error:  # a scrape reports what it can; the error is counted
            self.read_errors += 1
            log.warning("metrics: reading %s failed: %s", name, error)
            return held if held is not None else _Cached(None, figures(None))
        self._cache[name] = fresh
        return fresh


def collector(figures: LakehouseFigures) -> Collector:
    """A prometheus_client collector serving ``figures`` on each scrape."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )
    from prometheus_client.core import (
        Metric as Family,
    )
    from prometheus_client.registry import Collector

    class _LakehouseCollector(Collector):
        def collect(self) -> Iterator[Family]:
            started = time.perf_counter()
            metrics, versions = figures.metrics()
            for metric in metrics:
                if metric.kind == "histogram":
                    histogram = HistogramMetricFamily(
                        metric.name, metric.help, labels=metric.labels
                    )
                    for labels, (buckets, total) in sorted(metric.buckets.items()):
                        histogram.add_metric(list(labels), buckets, total)
                    yield histogram
                    continue
                family: CounterMetricFamily | GaugeMetricFamily
                if metric.kind == "counter":
                    family = CounterMetricFamily(metric.name, metric.help, labels=metric.labels)
                else:
                    family = GaugeMetricFamily(metric.name, metric.help, labels=metric.labels)
                for labels, value in sorted(metric.samples.items()):
                    family.add_metric(list(labels), value)
                yield family
            table_version = GaugeMetricFamily(
                "s3tm_exporter_table_version",
                "the Delta version of each table the exporter read (-1: no table yet)",
                labels=["table"],
            )
            for name, version in versions.items():
                table_version.add_metric([name], -1 if version is None else version)
            yield table_version
            errors = CounterMetricFamily(
                "s3tm_exporter_read_errors", "table reads that failed (the last figures stand)"
            )
            errors.add_metric([], figures.read_errors)
            yield errors
            took = GaugeMetricFamily(
                "s3tm_exporter_scrape_seconds", "seconds this scrape spent reading the tables"
            )
            took.add_metric([], time.perf_counter() - started)
            yield took

    return _LakehouseCollector()


def exposition(lakehouse: Lakehouse) -> str:
    """The metrics in Prometheus' text format, once (``s3tm metrics show``)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(collector(LakehouseFigures(lakehouse)))
    return generate_latest(registry).decode("utf-8")


@dataclass(frozen=True)
class Serving:
    """A running exporter: the port it bound (the one asked for, or the one it chose for
    0) and how to stop it."""

    port: int
    stop: Callable[[], None]


def serve(lakehouse: Lakehouse, host: str, port: int) -> Serving:
    """Serve ``/metrics`` on ``host:port`` in a background thread (``port`` 0: a free port
    the server binds; read it from the result)."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    registry.register(collector(LakehouseFigures(lakehouse)))
    server, thread = start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return Serving(int(server.server_port), stop)
