"""OpenTelemetry metrics: stage durations, the per-trace figures, and the fleet view's counters.

Metrics are recorded for every pipeline, including those whose spans were sampled out, so
dashboards see all traffic while trace storage stays cheap. Labels are bounded: operation, stage,
pipeline name, version and route, data source, model, provider and error type, plus the fixed enums
rag.metrics.status and rag.citation.kind and the app's score names (rag.eval.name). Never ids or
text, in any content mode. The shipped Grafana dashboard and Prometheus rules
(``ragtrace dashboard``) query exactly these names.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics

from .. import names
from ..core import guard
from ..core.guard import new_locks_after_fork
from .slots import INSTRUMENTATION_NAME, VERSION, global_meter_provider, meter_provider_unset

if TYPE_CHECKING:
    from .config import Config

# GenAI semantic-convention bucket boundaries (seconds and tokens); ratio buckets for the proxies.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
# stage durations: sub-10 ms bounds first, since a vector or cache lookup often takes 1 ms and the
# convention's first bound (10 ms) would put every fast retrieval at an interpolated 9.5 ms
STAGE_DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, *DURATION_BUCKETS)
RATIO_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# judge and retrieval scores: 0-1 scores in tenths, then the usual 1-5 and 1-10 scales
SCORE_BUCKETS = RATIO_BUCKETS + (2.0, 3.0, 4.0, 5.0, 10.0, 100.0)


# Labels whose values the app supplies, from its configuration or from request data (route=
# request.path): each keeps its first ``max_label_values`` distinct values per MeterProvider, and
# later ones fold into LABEL_VALUE_OTHER, so neither ragtrace's memory nor a scrape grows with
# traffic. The other labels are ragtrace's own fixed sets (stage, operation, status, kind).
FOLDED_LABELS = (
    names.GEN_AI_WORKFLOW_NAME, names.RAG_PIPELINE_VERSION, names.RAG_PIPELINE_ROUTE, names.GEN_AI_DATA_SOURCE_ID,
    names.GEN_AI_REQUEST_MODEL, names.GEN_AI_PROVIDER_NAME, names.ERROR_TYPE, names.RAG_EVAL_NAME,
)
MAX_SEEN = 10_000  # label sets remembered as given their zeros; beyond, later sets get none


@dataclass(frozen=True, slots=True)
class Instruments:
    duration: metrics.Histogram
    top_score: metrics.Histogram
    context_tokens: metrics.Histogram
    recall_proxy: metrics.Histogram
    context_precision: metrics.Histogram
    file_recall_proxy: metrics.Histogram
    empty_retrievals: metrics.Counter
    dropped_annotations: metrics.Counter
    time_to_first_chunk: metrics.Histogram
    time_per_output_chunk: metrics.Histogram
    pipeline_runs: metrics.Counter
    citations: metrics.Counter
    wasted_tokens: metrics.Histogram
    eval_score: metrics.Histogram
    seen: set[frozenset[tuple[str, Any]]] = field(default_factory=set)  # label sets given their zeros
    kept: dict[str, set[Any]] = field(default_factory=lambda: {name: set() for name in FOLDED_LABELS})


_cache: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


# The MeterProvider configure() chose (None: the global one), kept current by ``config`` on every
# change: what records outside a pipeline (PhoenixExporter's dropped annotations) counts into, so
# that an exporter never imports the configuration.
_configured_provider: metrics.MeterProvider | None = None


def use_meter_provider(provider: metrics.MeterProvider | None) -> None:
    global _configured_provider
    _configured_provider = provider


def configured_instruments() -> Instruments | None:
    """The instruments of the configured (else global) MeterProvider, outside any pipeline."""
    return instruments_for(_configured_provider or global_meter_provider())


def instruments(config: Config) -> Instruments | None:
    """The instruments of the configured (or global) MeterProvider; None when there is none."""
    return instruments_for(config.meter_provider or global_meter_provider())


def instruments_for(provider: metrics.MeterProvider) -> Instruments | None:
    """The instruments of ``provider``; None when it is the API's placeholder (no SDK installed)."""
    if meter_provider_unset(provider):
        return None
    found = _cache.get(provider)
    if found is not None:
        return found
    with _cache_lock:
        meter = provider.get_meter(INSTRUMENTATION_NAME, VERSION)
        histogram, counter = _maker(meter.create_histogram), _maker(meter.create_counter)
        found = Instruments(
            duration=histogram(names.METRIC_OPERATION_DURATION, STAGE_DURATION_BUCKETS),
            top_score=histogram(names.METRIC_RETRIEVAL_TOP_SCORE, SCORE_BUCKETS),
            context_tokens=histogram(names.METRIC_CONTEXT_TOKENS, TOKEN_BUCKETS),
            recall_proxy=histogram(names.METRIC_RECALL_PROXY_HISTOGRAM, RATIO_BUCKETS),
            context_precision=histogram(names.METRIC_CONTEXT_PRECISION_HISTOGRAM, RATIO_BUCKETS),
            file_recall_proxy=histogram(names.METRIC_FILE_RECALL_PROXY_HISTOGRAM, RATIO_BUCKETS),
            empty_retrievals=counter(names.METRIC_EMPTY_RETRIEVALS),
            dropped_annotations=counter(names.METRIC_PHOENIX_DROPPED_ANNOTATIONS),
            time_to_first_chunk=histogram(names.METRIC_TIME_TO_FIRST_CHUNK, DURATION_BUCKETS),
            time_per_output_chunk=histogram(names.METRIC_TIME_PER_OUTPUT_CHUNK, DURATION_BUCKETS),
            pipeline_runs=counter(names.METRIC_PIPELINE_RUNS),
            citations=counter(names.METRIC_CITATIONS),
            wasted_tokens=histogram(names.METRIC_CONTEXT_WASTED_TOKENS, TOKEN_BUCKETS),
            eval_score=histogram(names.METRIC_EVAL_SCORE, SCORE_BUCKETS),
        )
        try:
            _cache[provider] = found
        except TypeError:
            pass
        return found


_METRIC_INFO = {m.name: m for m in names.METRICS}  # unit and description, written once in names/tables.py


def _maker(create: Any) -> Any:
    """``create(name, [buckets])`` with the unit and description of ``names.METRICS``."""

    def make(name: str, buckets: tuple[float, ...] | None = None) -> Any:
        info = _METRIC_INFO[name]
        extra = {"explicit_bucket_boundaries_advisory": buckets} if buckets is not None else {}
        return create(name, unit=info.unit, description=info.description, **extra)

    return make


def first_seen(found: Instruments, labels: dict[str, Any]) -> bool:
    """True the first time ``labels`` come by, for the first MAX_SEEN label sets (folded labels
    bound them; the cap bounds the product too). A race gives two Trues: a second 0, harmless."""
    key = frozenset(labels.items())
    if key in found.seen or len(found.seen) >= MAX_SEEN:
        return False
    found.seen.add(key)
    return True


def status_label(status: str | None) -> str:
    """``rag.metrics.status`` as a bounded label: measured, or the run's first (most upstream)
    reason, which ``names.METRICS_STATUS_REASONS`` must list (else "other")."""
    if status is None:
        return names.METRICS_STATUS_MEASURED
    first = status.split(",", 1)[0]
    return first if first in names.METRICS_STATUS_REASONS else names.METRICS_STATUS_OTHER


def labels(found: Instruments, limit: int, pipeline: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """Bounded metric attributes: the pipeline's name/version/route plus the stage's own, each
    folded label past its first ``limit`` values (``configure(max_label_values=)``) as "other"."""
    values = dict(pipeline)
    values.update({k: v for k, v in extra.items() if v is not None})
    kept = found.kept
    for name, value in values.items():
        seen = kept.get(name)
        if seen is None or value in seen:
            continue
        if len(seen) < limit:
            seen.add(value)  # two threads may both add past the limit: a value or two more, harmless
            continue
        values[name] = names.LABEL_VALUE_OTHER
        guard.warn_once(
            f"label-folded:{name}",
            "metric label %s has more than %d distinct values (request data in a label, e.g. route=request.path?); "
            "later values are recorded as %r. Raise the limit with configure(max_label_values=...) if they are bounded",
            name, limit, names.LABEL_VALUE_OTHER,
        )
    return values


new_locks_after_fork(__name__, "_cache_lock")
