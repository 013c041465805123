"""``PhoenixExporter``: spans to Arize Phoenix over OTLP, then ragtrace's results as Phoenix annotations.

``configure(exporter="phoenix:http://127.0.0.1:6006")`` builds one (``pip install 'ragtrace[phoenix]'``).
Each ``export()`` (on the span processor's export thread) first sends its spans over OTLP/HTTP,
then derives annotations from those finished spans (``_internal/export/annotations.py``: one per figure on
the root and the answer generation, the proxies also on the trace, each retriever and reranker
document's placed and cited marks, and judges' ``record_score`` results on the run's root) and writes them in batches through ``arize-phoenix-client``
(Phoenix's ``/v1/span_annotations``, ``/v1/document_annotations`` and ``/v1/trace_annotations``,
asynchronous inserts that Phoenix holds until their span arrives).

Annotations wait in a bounded queue. When it is full the oldest are dropped, logged once and
counted (``dropped_annotations``, and the ``rag.phoenix.annotations.dropped`` counter of the app's
MeterProvider when one is set). A Phoenix that can't be reached is logged once; its annotations
stay queued and go out with a later export. Nothing here raises into the app or blocks its thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._internal.export import annotations
from .._internal.setup import otel_metrics
from .._internal import names
from .._internal.export.annotations import Annotation

__all__ = ["PhoenixExporter", "PROJECT_ATTRIBUTE"]

_logger = logging.getLogger("ragtrace")

#: The resource attribute Phoenix picks (or creates) a project by.
PROJECT_ATTRIBUTE = "openinference.project.name"
_MISSING_EXTRA = "the Phoenix exporter needs the phoenix extra: pip install 'ragtrace[phoenix]'"


class PhoenixExporter(SpanExporter):
    """Export spans to Phoenix at ``endpoint`` and annotate them with ragtrace's figures and marks.

    ``project`` names the Phoenix project (default ``PHOENIX_PROJECT_NAME``, else Phoenix's
    ``default``); ``configure()`` puts it in the resource, where Phoenix reads it. ``api_key``
    (default ``PHOENIX_API_KEY``) and ``headers`` go with both the OTLP and the annotation requests.
    ``max_queued`` bounds the annotations waiting to be sent; ``batch_size`` is the most sent in
    one request; ``timeout`` (seconds) bounds every request.
    """

    def __init__(
        self,
        endpoint: str = "http://127.0.0.1:6006",
        *,
        project: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        max_queued: int = 10_000,
        batch_size: int = 1_000,
        timeout: float = 10.0,
        max_pending_traces: int = 1_024,
    ) -> None:
        if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"the Phoenix endpoint must be an http(s):// URL, got {endpoint!r}")
        for name, value in (("max_queued", max_queued), ("batch_size", batch_size), ("max_pending_traces", max_pending_traces)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        try:
            import httpx
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from phoenix.client import Client
        except ImportError as error:
            raise ValueError(_MISSING_EXTRA) from error
        self.endpoint = endpoint.rstrip("/")
        self.project = project or os.environ.get("PHOENIX_PROJECT_NAME") or None
        request_headers = dict(headers or {})
        api_key = api_key or os.environ.get("PHOENIX_API_KEY")
        if api_key:
            request_headers["Authorization"] = f"Bearer {api_key}"
        self.max_queued, self.batch_size = max_queued, batch_size
        self._spans = OTLPSpanExporter(endpoint=self.endpoint + "/v1/traces", headers=request_headers or None, timeout=timeout)
        self._http = httpx.Client(base_url=self.endpoint, headers=request_headers, timeout=timeout)
        self._client = Client(http_client=self._http)
        self._transport_errors: tuple[type[BaseException], ...] = (httpx.TransportError,)
        self._status_error = httpx.HTTPStatusError
        self._marks = annotations.DocumentMarks(max_pending_traces)
        self._queue: deque[Annotation] = deque()
        self._lock = threading.Lock()
        self._logged: set[str] = set()
        self._closed = False
        self.dropped_annotations = 0  # dropped from the full queue, oldest first
        self._dropped_counted = 0  # of those, already added to the OTel counter
        self.failed_annotations = 0  # refused by Phoenix (not retried)
        self.sent_annotations = 0

    @property
    def resource_attributes(self) -> dict[str, str]:
        """What ``configure()`` adds to its resource for this exporter: the Phoenix project."""
        return {PROJECT_ATTRIBUTE: self.project} if self.project else {}

    @property
    def queued_annotations(self) -> int:
        return len(self._queue)

    # --- SpanExporter ----------------------------------------------------------------------
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            result = self._spans.export(spans)  # the spans first: Phoenix holds annotations until their span is in
        except Exception:  # noqa: BLE001 - the OTLP exporter's own fault; never raise into the export thread
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self._log_once("spans", "ragtrace: OTLP export to Phoenix at %s failed; further failures are not logged", self.endpoint)
        try:
            with self._lock:
                for span in spans:
                    self._enqueue(self._derive(span))
                self._send()
                self._count_dropped()
        except Exception as error:  # noqa: BLE001 - an exporter never raises
            self._log_once("internal", "ragtrace: Phoenix annotations failed (%s: %s); further failures are not logged", type(error).__name__, error)
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        try:
            with self._lock:
                self._send()
                self._count_dropped()
        except Exception as error:  # noqa: BLE001
            self._log_once("internal", "ragtrace: Phoenix annotations failed (%s: %s); further failures are not logged", type(error).__name__, error)
        return self._spans.force_flush(timeout_millis)

    def shutdown(self) -> None:
        if self._closed:
            return
        self.force_flush()
        self._closed = True
        self._spans.shutdown()
        self._http.close()

    def __repr__(self) -> str:
        return f"PhoenixExporter({self.endpoint!r}, project={self.project!r})"

    # --- annotations -----------------------------------------------------------------------
    def _derive(self, span: ReadableSpan) -> list[Annotation]:
        context = span.get_span_context()
        attributes = span.attributes or {}
        if context is None or not attributes:
            return []
        span_id = annotations.span_hex(context.span_id)
        found = annotations.figure_annotations(span_id, attributes, annotations.trace_hex(context.trace_id))
        found += self._marks.add(context.trace_id, span_id, attributes)
        if attributes.get(names.RAG_STAGE) == names.STAGE_EVALUATION and span.parent is not None:  # record_score
            results = [e.attributes or {} for e in span.events if e.name == names.GEN_AI_EVALUATION_RESULT]
            found += annotations.score_annotations(annotations.span_hex(span.parent.span_id), results)
        return found

    def _enqueue(self, found: list[Annotation]) -> None:
        for annotation in found:
            if len(self._queue) >= self.max_queued:
                self._queue.popleft()
                self.dropped_annotations += 1
                self._log_once(
                    "full",
                    "ragtrace: the Phoenix annotation queue is full (%d); the oldest annotations are dropped. "
                    "Further drops are counted in PhoenixExporter.dropped_annotations, not logged",
                    self.max_queued,
                )
            self._queue.append(annotation)

    def _count_dropped(self) -> None:
        """Add the drops not yet counted to the app's MeterProvider (configured, else global), if any."""
        count, self._dropped_counted = self.dropped_annotations - self._dropped_counted, self.dropped_annotations
        found = otel_metrics.configured_instruments() if count else None
        if found is not None:
            found.dropped_annotations.add(count)

    def _send(self) -> None:
        """Send the queue in batches; on a transport or server error keep the rest for later."""
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(self.batch_size, len(self._queue)))]
            spans, documents, traces = ([a.payload() for a in batch if a.kind == kind] for kind in (annotations.SPAN, annotations.DOCUMENT, annotations.TRACE))
            try:
                if spans:
                    self._client.spans.log_span_annotations(span_annotations=spans, sync=False)
                if documents:
                    self._client.spans.log_document_annotations(document_annotations=documents, sync=False)
                if traces:
                    self._client.traces.log_trace_annotations(trace_annotations=traces, sync=False)
            except Exception as error:  # noqa: BLE001 - never raise into the export thread
                if self._retryable(error):
                    self._queue.extendleft(reversed(batch))  # upserts by name and span: a resend is harmless
                    while len(self._queue) > self.max_queued:
                        self._queue.popleft()
                        self.dropped_annotations += 1
                    self._log_once(
                        "unreachable",
                        "ragtrace: Phoenix at %s can't take annotations (%s); they stay queued (up to %d) and go out "
                        "with a later export. Further failures are not logged",
                        self.endpoint,
                        type(error).__name__,
                        self.max_queued,
                    )
                    return
                self.failed_annotations += len(batch)
                self._log_once("refused", "ragtrace: Phoenix refused %d annotations (%s: %s); further refusals are not logged", len(batch), type(error).__name__, error)
                continue
            self.sent_annotations += len(batch)

    def _retryable(self, error: BaseException) -> bool:
        if isinstance(error, self._transport_errors):
            return True
        return isinstance(error, self._status_error) and error.response.status_code >= 500

    def _log_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._logged:
            self._logged.add(key)
            _logger.warning(message, *args)
