"""OpenTelemetry metrics: stage durations and the per-trace figures as histograms.

Metrics are recorded for every pipeline, including those whose spans were sampled out, so
dashboards see all traffic while trace storage stays cheap. Labels are bounded: operation, stage,
pipeline name, version and route, data source, model, provider and error type. Never ids or text.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics

from . import names
from .guard import new_locks_after_fork
from .config import INSTRUMENTATION_NAME, VERSION, Config, global_meter_provider, meter_provider_unset

# GenAI semantic-convention bucket boundaries (seconds and tokens); ratio buckets for the proxies.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
RATIO_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# judge scores: 0-1 scores in tenths, then the usual 1-5 and 1-10 scales
SCORE_BUCKETS = RATIO_BUCKETS + (2.0, 3.0, 4.0, 5.0, 10.0, 100.0)


@dataclass(frozen=True, slots=True)
class Instruments:
    duration: metrics.Histogram
    top_score: metrics.Histogram
    context_tokens: metrics.Histogram
    recall_proxy: metrics.Histogram
    context_precision: metrics.Histogram
    empty_retrievals: metrics.Counter
    dropped_annotations: metrics.Counter
    time_to_first_chunk: metrics.Histogram
    time_per_output_chunk: metrics.Histogram


_cache: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def instruments(config: Config) -> Instruments | None:
    """The instruments of the configured (or global) MeterProvider; None when there is none."""
    provider = config.meter_provider or global_meter_provider()
    if meter_provider_unset(provider):
        return None
    found = _cache.get(provider)
    if found is not None:
        return found
    with _cache_lock:
        meter = provider.get_meter(INSTRUMENTATION_NAME, VERSION)
        found = Instruments(
            duration=meter.create_histogram(
                names.METRIC_OPERATION_DURATION, unit="s", description="Duration of each RAG stage",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            top_score=meter.create_histogram(
                names.METRIC_RETRIEVAL_TOP_SCORE, unit="1", description="Score of the top-ranked retrieved chunk"
            ),
            context_tokens=meter.create_histogram(
                names.METRIC_CONTEXT_TOKENS, unit="{token}", description="Context tokens placed in the prompt",
                explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
            ),
            recall_proxy=meter.create_histogram(
                names.METRIC_RECALL_PROXY_HISTOGRAM, unit="1", description="Cited-chunk recall proxy per pipeline",
                explicit_bucket_boundaries_advisory=RATIO_BUCKETS,
            ),
            context_precision=meter.create_histogram(
                names.METRIC_CONTEXT_PRECISION_HISTOGRAM, unit="1", description="In-context / retrieved chunks per pipeline",
                explicit_bucket_boundaries_advisory=RATIO_BUCKETS,
            ),
            empty_retrievals=meter.create_counter(
                names.METRIC_EMPTY_RETRIEVALS, unit="{retrieval}", description="Retrievals that returned nothing"
            ),
            dropped_annotations=meter.create_counter(
                names.METRIC_PHOENIX_DROPPED_ANNOTATIONS, unit="{annotation}", description="Phoenix annotations dropped from a full queue"
            ),
            time_to_first_chunk=meter.create_histogram(
                names.METRIC_TIME_TO_FIRST_CHUNK, unit="s", description="Streamed generations: time to the first chunk",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            time_per_output_chunk=meter.create_histogram(
                names.METRIC_TIME_PER_OUTPUT_CHUNK, unit="s", description="Streamed generations: time between chunks, after the first",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
        )
        try:
            _cache[provider] = found
        except TypeError:
            pass
        return found


_scores: weakref.WeakKeyDictionary[Any, dict[str, metrics.Histogram]] = weakref.WeakKeyDictionary()


def score_histogram(config: Config, name: str) -> metrics.Histogram | None:
    """The ``rag.eval.<name>`` histogram of the configured (or global) MeterProvider, made once."""
    provider = config.meter_provider or global_meter_provider()
    if meter_provider_unset(provider):
        return None
    with _cache_lock:
        try:
            known = _scores.setdefault(provider, {})
        except TypeError:  # a provider that can't be weakly referenced: no cache
            known = {}
        found = known.get(name)
        if found is None:
            meter = provider.get_meter(INSTRUMENTATION_NAME, VERSION)
            found = known[name] = meter.create_histogram(
                names.METRIC_SCORE_PREFIX + name, unit="1", description=f"Scores named {name} given with record_score",
                explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
            )
        return found


def labels(pipeline: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """Bounded metric attributes: the pipeline's name/version plus the stage's own."""
    values = dict(pipeline)
    values.update({k: v for k, v in extra.items() if v is not None})
    return values


new_locks_after_fork(__name__, "_cache_lock")
