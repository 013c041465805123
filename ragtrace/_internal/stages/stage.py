"""The base of every stage handle: span lifecycle, context attachment, errors, metrics, figures.

Each handle is a context manager (sync and async) and is also driven by the decorators through
``open`` / ``close``. Everything ragtrace does inside a handle runs behind the guard; the user's
own exceptions are recorded on the span and pass through untouched.
"""

from __future__ import annotations

import time

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import _internal as _metrics_api
from opentelemetry.trace import Span, SpanKind

from ..setup import config as config_module
from ..core import figures as figures_module
from .. import names
from ..setup import otel_metrics
from . import state as state_module
from ..setup.config import Config
from ..core.guard import guard, report, set_content_check, warn_once
from ..core.keyed import query_digest
from ..core.outputs import as_text
from .spans import Attributes, all_passed, json_messages_within, record_error, trim_text, value_length_limit


_ESSENTIAL_AT_START = (names.RAG_STAGE, names.GEN_AI_OPERATION_NAME, names.OI_SPAN_KIND)

# The stage whose span a context made current. It stays in the contexts other instrumentors derive
# from that one (OpenLLMetry's span made current inside ours), where the current span no longer says.
STAGE_KEY = otel_context.create_key("ragtrace_stage")


class Stage:
    """Base of all handles: span lifecycle, context attachment, error recording."""

    stage: str = ""
    span_kind: SpanKind = SpanKind.INTERNAL
    oi_kind: str = ""
    operation: str | None = None

    # per-handle state; class-level defaults, so that a handle that stays inert sets none of them
    span: Span = trace.INVALID_SPAN
    attrs: Attributes | None = None
    state: state_module.PipelineState | None = None
    _token: object | None = None
    _closed = False
    _started = 0.0
    start_time: int | None = None  # epoch ns, for a stage opened after the fact (integrations)
    end_time: int | None = None  # epoch ns, for a stage ended at another span's end (``auto_root``)
    inert = False  # neither traces nor metrics are on: the handle does no bookkeeping
    auto_root: Any = None  # the automatic root (``auto_root``) this stage joined, if any
    stream_keep: int | None = None  # items of a returned stream kept for the record (None: all)

    def __init__(self, tracer_provider: trace.TracerProvider | None = None, config: Config | None = None) -> None:
        self._provider = tracer_provider
        if config is None:
            state = state_module.current()
            config = state.config if state is not None else config_module._config
        self.config = config

    # -- lifecycle -------------------------------------------------------------------------------
    # set by subclasses that have them; they name the span and label the metrics
    model: str | None = None
    provider: str | None = None
    query: str | None = None
    query_keys: tuple[str, ...] = ()  # content attributes that carry the query, besides input.value
    query_derived = False  # Phoenix derives input.value from the query key: no second copy
    release_span = True  # drop the ended span; the pipeline run keeps its own (``run.span``)
    joins_auto_root = True  # outside any pipeline, join the context's automatic root (``auto_root``)

    def span_name(self) -> str:
        """``{operation} {target}`` as the GenAI conventions name client spans."""
        target = self.span_target()
        operation = self.operation or self.stage
        return f"{operation} {target}" if target else operation

    def span_target(self) -> str | None:
        return self.model

    def start_attributes(self) -> dict[str, Any]:
        """Attributes known at span start (the sampling-relevant ones among them)."""
        return {}

    def open(self) -> None:
        provider = self._provider
        if (
            not config_module.PROVIDERS_GIVEN and provider is None and trace._TRACER_PROVIDER is None and _metrics_api._METER_PROVIDER is None
        ) or not config_module.telemetry_on(provider or self.config.tracer_provider):
            self.inert = True  # nothing could see a span, a figure or a metric: skip all of it
            return
        self._started = time.perf_counter()
        if self.start_time is not None:
            self._started -= max(0, time.time_ns() - self.start_time) / 1e9
        # one flat path (no guard objects): an internal error skips the rest of the opening, as
        # ``guard("span start")`` did, and the stage goes on without a span
        try:
            config = self.config
            # the automatic root (``auto_root``) this stage goes into: one preset by the root, else
            # the open root of this context when no pipeline is active; ``admit`` may refuse it
            root = self.auto_root
            if root is None and self.joins_auto_root and state_module.current() is None:
                root = state_module.auto_root()
            if root is not None:
                root = self.auto_root = root.admit(self)
            # the essentials first, then the stage's own: one mapping for the SDK, no None in it
            operation = self.operation
            start = {names.RAG_STAGE: self.stage} if operation is None else {names.RAG_STAGE: self.stage, names.GEN_AI_OPERATION_NAME: operation}
            essentials = start.copy()
            for key, value in self.start_attributes().items():
                if value is not None:
                    start[key] = value
            if config.openinference and self.oi_kind is not None:
                start[names.OI_SPAN_KIND] = essentials[names.OI_SPAN_KIND] = self.oi_kind
            tracer = config_module.tracer(provider or config.tracer_provider)
            context = root.context if root is not None else None
            self.span = span = tracer.start_span(self.span_name(), context=context, kind=self.span_kind, attributes=start, start_time=self.start_time)
            self.attrs = Attributes(span, config.content, essentials, len(start))
            self.state = root.state if root is not None else self.find_state()
            self.on_open()
        except Exception as error:  # noqa: BLE001 - ragtrace's own fault: logged once, never raised
            report("span start", error)

    def find_state(self) -> state_module.PipelineState | None:
        return state_module.for_span(self.span, self.config)

    def on_open(self) -> None:
        """Stage-specific work once the span exists (inputs known at start)."""
        self.set_query(self.query)

    def set_query(self, query: Any) -> None:
        """The stage's query text: a content attribute, also OpenInference's ``input.value``."""
        text = as_text(query)
        if text is None:
            return
        self.query = text
        sent = False
        for key in self.query_keys:
            sent = self._content(key, text) or sent
        if not (sent and self.query_derived):
            self._oi_value(names.OI_INPUT_VALUE, text)

    @property
    def digests(self) -> dict[str, str] | None:
        """The pipeline's memo of content digests (``chunks.digest_of``); None outside a pipeline."""
        return self.state.digests if self.state is not None else None

    def on_close(self) -> None:
        """Stage-specific work before the span ends (results, figures)."""

    def item_arrived(self) -> None:
        """A decorated generator yielded an item (the generate stage times its stream)."""

    def attach(self) -> None:
        if not self.inert:
            self._token = otel_context.attach(self.in_context(self.span))

    def in_context(self, span: Span) -> otel_context.Context:
        """The current context with ``span`` (this stage's, or a stand-in for it) current and this
        stage under ``STAGE_KEY``."""
        return otel_context.set_value(STAGE_KEY, self, trace.set_span_in_context(span))

    def detach(self) -> None:
        if self._token is not None:
            token, self._token = self._token, None
            with guard("context detach"):
                otel_context.detach(token)  # type: ignore[arg-type]

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, error: BaseException | None = None) -> None:
        """End the span once: record the user's error, finish the stage's attributes.

        Each step is guarded on its own (an internal error in one skips that step only, logged
        once), with ``try`` blocks rather than guard objects: this runs for every stage."""
        if self._closed:
            return
        self._closed = True
        if self.inert:
            return
        if error is not None:
            try:
                record_error(self.span, error, self.config.content, self.config.max_content_chars)
            except Exception as failure:  # noqa: BLE001
                report("error recording", failure)
        try:
            self.on_close()
        except Exception as failure:  # noqa: BLE001
            report(f"{self.stage} bookkeeping", failure)
        try:
            self._record_metrics(error)
        except Exception as failure:  # noqa: BLE001
            report("metrics", failure)
        if self.attrs is not None:
            try:
                self.attrs.flush()
            except Exception as failure:  # noqa: BLE001
                report("attribute writing", failure)
        try:
            self.span.end(self.end_time)
        except Exception as failure:  # noqa: BLE001
            report("span end", failure)
        self.attrs = None
        root = self.auto_root
        if root is not None:
            self.auto_root = None
            try:
                root.stage_closed(self, error)
            except Exception as failure:  # noqa: BLE001
                report("automatic root", failure)
        if self.release_span:  # the handle may outlive its block (``r.chunks`` is read later)
            self.span = trace.INVALID_SPAN

    def _record_metrics(self, error: BaseException | None) -> None:
        found = otel_metrics.instruments(self.config)
        if found is None:
            return
        labels = otel_metrics.labels(
            found,
            self.config.max_label_values,
            self.state.labels if self.state is not None else {},
            **{
                names.GEN_AI_OPERATION_NAME: self.operation,
                names.RAG_STAGE: self.stage,
                names.ERROR_TYPE: type(error).__qualname__ if error is not None else None,
            },
            **self.metric_labels(),
        )
        elapsed = time.perf_counter() - self._started
        if self.end_time is not None:  # ended after the fact: the span's end, not now
            elapsed -= max(0, time.time_ns() - self.end_time) / 1e9
        found.duration.record(elapsed, labels)
        self.record_stage_metrics(found, labels)

    def metric_labels(self) -> dict[str, Any]:
        """Bounded, stage-specific metric attributes (model, provider, data source)."""
        return {names.GEN_AI_REQUEST_MODEL: self.model, names.GEN_AI_PROVIDER_NAME: self.provider}

    def record_stage_metrics(self, found: otel_metrics.Instruments, labels: dict[str, Any]) -> None:
        """Stage-specific histograms and counters beyond the duration."""

    # -- context manager protocol ----------------------------------------------------------------
    def __enter__(self) -> Any:
        self.open()
        self.attach()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.detach()
        self.close(exc)

    async def __aenter__(self) -> Any:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- helpers ---------------------------------------------------------------------------------
    def _content(self, key: str, text: str | None) -> bool:
        return self.attrs is not None and self.attrs.content(key, text, self.config.max_content_chars)

    def _gated(self, key: str, text: str | None) -> bool:
        """Content that already passed the policy (``gate_messages``): trimmed, not gated again."""
        if text is None or self.attrs is None or not self.attrs.recording:
            return False
        self.attrs.set(key, trim_text(text, self.config.max_content_chars))
        return True

    def _oi_value(self, key: str, value: str | None, *, json_value: bool = False, gated: bool = False) -> None:
        """``input.value``/``output.value`` plus its mime type, the type only when the value went out.

        A JSON value must come from ``prompt_json`` (policy applied, sized to fit the limits);
        ``gated`` text has passed the policy already.
        """
        if not self.config.openinference or self.attrs is None:
            return
        if json_value:
            sent = value is not None and self.attrs.recording
            self.attrs.set(key, value)
        else:
            sent = self._gated(key, value) if gated else self._content(key, value)
        if sent:
            mime_key = names.OI_INPUT_MIME_TYPE if key == names.OI_INPUT_VALUE else names.OI_OUTPUT_MIME_TYPE
            self.attrs.set(mime_key, names.MIME_JSON if json_value else names.MIME_TEXT)


def effective_config() -> Config:
    state = state_module.current()
    return state.config if state is not None else config_module.current()


set_content_check(lambda: effective_config().content.captures)  # ragtrace's own log lines obey the policy too


def int_or_none(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        warn_once(f"int:{what}", "%s should be an int, got %s; ignored", what, type(value).__name__)
        return None
    if not -(2**63) <= value < 2**63:  # OTLP carries int64: a bigger int would fail the whole export batch
        warn_once(f"int64:{what}", "%s does not fit in 64 bits; ignored", what)
        return None
    return value


def float_or_none(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except OverflowError:  # an int beyond float range
        return None


# --- figures on spans -------------------------------------------------------------------------
def set_figures(stage: Stage, result: figures_module.Figures, *, events: bool = False, inclusion_method: str | None = None) -> None:
    """``rag.metrics.*`` (and, on the root, one ``gen_ai.evaluation.result`` event per proxy), with
    how the context they rest on was known (``rag.metrics.inclusion_method``)."""
    attrs = stage.attrs
    if attrs is None or not attrs.recording:
        return
    prefix = names.RAG_METRICS_PREFIX  # names.metric_attribute, inline: a dozen figures, twice a pipeline
    values: dict[str, Any] = {prefix + k: v for k, v in result.values.items()}
    values[names.RAG_METRICS_STATUS] = result.status_text
    # a qualifier, not a figure: under a tight attribute-count limit the figures win the room
    attrs.set(names.RAG_METRICS_INCLUSION_METHOD, inclusion_method)
    if events:
        for metric in names.EMITTED_PROXY_METRICS:
            if metric in result.values:
                score = float(result.values[metric])
                stage.span.add_event(
                    names.GEN_AI_EVALUATION_RESULT,
                    {
                        names.GEN_AI_EVALUATION_NAME: names.EVALUATION_NAME_PREFIX + metric,
                        names.GEN_AI_EVALUATION_SCORE_VALUE: score,
                        names.GEN_AI_EVALUATION_SCORE_LABEL: figures_module.label(score),
                    },
                )
    # the figures go last so the SDK's evict-the-oldest limit can't drop them
    attrs.essential_many(values)


def query_hash(query: str) -> str:
    """Joins traces to a golden set when query text is redacted: the keyed digest of the
    normalised query (``keyed``), so it can't be recomputed from a guessed query without the key."""
    return query_digest(query)



def prompt_json(stage: Stage, gated: list[tuple[str, str | None]] | None) -> str | None:
    """A chat prompt (see ``gate_messages``) as ``[{role, content}]`` JSON that fits the limits
    whole; None unless every message passed the content policy."""
    passed = all_passed(gated)
    if passed is None:
        return None
    return json_messages_within(passed, content_limit(stage))


def content_limit(stage: Stage) -> int:
    """The most characters a JSON content value of ``stage`` may have: the content cap, or the
    span's value-length limit when that is smaller (a cut would break the JSON)."""
    limit, span_limit = stage.config.max_content_chars, value_length_limit(stage.span)
    return limit if span_limit is None else min(limit, span_limit)
