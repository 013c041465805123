"""The stage handles: one span per stage, the attributes it carries, and what it tells the state.

Each handle is a context manager (sync and async) and is also driven by the decorators through
``open`` / ``close``. Everything ragtrace does inside a handle runs behind the guard; the user's
own exceptions are recorded on the span and pass through untouched.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from . import config as config_module
from . import figures as figures_module
from . import names, otel_metrics, state as state_module
from .assembly import ContextBuilder, ContextRecord, Labeller, Prompt, locate
from .chunks import Accessors, Chunk, NO_ACCESSORS, normalize
from .citations import CitationPattern, CitationResult, parse_citations
from .config import Config
from .guard import call_guarded, guard, warn_once
from .spans import Attributes, finite_or_nan, json_messages_within, message_text, messages_json, record_error, trim_text, value_length_limit
from .tokens import Tokenizer


class Stage:
    """Base of all handles: span lifecycle, context attachment, error recording."""

    stage: str = ""
    span_kind: SpanKind = SpanKind.INTERNAL
    oi_kind: str = ""
    operation: str | None = None

    def __init__(self, tracer_provider: trace.TracerProvider | None = None, config: Config | None = None) -> None:
        self._provider = tracer_provider
        self.config = config or _effective_config()
        self.span: Span = trace.INVALID_SPAN
        self.attrs: Attributes | None = None
        self.state: state_module.PipelineState | None = None
        self._token: object | None = None
        self._closed = False
        self._started = 0.0

    # -- lifecycle -------------------------------------------------------------------------------
    def span_name(self) -> str:
        return self.operation or self.stage

    def start_attributes(self) -> dict[str, Any]:
        """Attributes known at span start (the sampling-relevant ones among them)."""
        return {}

    def open(self) -> None:
        self._started = time.perf_counter()
        with guard("span start"):
            start = {names.RAG_STAGE: self.stage, names.GEN_AI_OPERATION_NAME: self.operation}
            start.update(self.start_attributes())
            if self.config.openinference:
                start[names.OI_SPAN_KIND] = self.oi_kind
            start = {k: v for k, v in start.items() if v is not None}
            pipeline = state_module.current()
            provider = self._provider or (pipeline.tracer_provider if pipeline is not None else None)
            tracer = config_module.tracer(provider)
            self.span = tracer.start_span(self.span_name(), kind=self.span_kind, attributes=start)
            self.attrs = Attributes(self.span, self.config.content)
            for key in (names.RAG_STAGE, names.GEN_AI_OPERATION_NAME, names.OI_SPAN_KIND):
                if key in start:
                    self.attrs.essential(key, start[key])
            self.state = self.find_state()
            self.on_open()

    def find_state(self) -> state_module.PipelineState | None:
        return state_module.for_span(self.span, self.config)

    def on_open(self) -> None:
        """Stage-specific work once the span exists (inputs known at start)."""

    def on_close(self) -> None:
        """Stage-specific work before the span ends (results, figures)."""

    def attach(self) -> None:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))

    def detach(self) -> None:
        if self._token is not None:
            token, self._token = self._token, None
            with guard("context detach"):
                otel_context.detach(token)  # type: ignore[arg-type]

    def close(self, error: BaseException | None = None) -> None:
        """End the span once: record the user's error, finish the stage's attributes."""
        if self._closed:
            return
        self._closed = True
        if error is not None:
            with guard("error recording"):
                record_error(self.span, error, self.config.content)
        with guard(f"{self.stage} bookkeeping"):
            self.on_close()
        with guard("metrics"):
            self._record_metrics(error)
        with guard("span end"):
            if self.attrs is not None:
                self.attrs.reassert()
            self.span.end()

    def _record_metrics(self, error: BaseException | None) -> None:
        found = otel_metrics.instruments(self.config)
        if found is None:
            return
        labels = otel_metrics.labels(
            self.state.labels if self.state is not None else {},
            **{
                names.GEN_AI_OPERATION_NAME: self.operation,
                names.RAG_STAGE: self.stage,
                names.ERROR_TYPE: type(error).__qualname__ if error is not None else None,
            },
            **self.metric_labels(),
        )
        found.duration.record(time.perf_counter() - self._started, labels)
        self.record_stage_metrics(found, labels)

    def metric_labels(self) -> dict[str, Any]:
        """Bounded, stage-specific metric attributes (model, provider, data source)."""
        return {}

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

    def _oi_content(self, key: str, text: str | None) -> bool:
        return self.config.openinference and self._content(key, text)

    def _oi_value(self, key: str, value: str | None, *, json_value: bool = False) -> None:
        """``input.value``/``output.value`` plus its mime type, the type only when the value went out.

        A JSON value must come from ``_prompt_json`` (policy applied, sized to fit the limits).
        """
        if not self.config.openinference or self.attrs is None:
            return
        if json_value:
            sent = value is not None and self.attrs.recording
            self.attrs.set(key, value)
        else:
            sent = self._content(key, value)
        if sent:
            mime_key = names.OI_INPUT_MIME_TYPE if key == names.OI_INPUT_VALUE else names.OI_OUTPUT_MIME_TYPE
            self.attrs.set(mime_key, names.MIME_JSON if json_value else names.MIME_TEXT)


def _effective_config() -> Config:
    state = state_module.current()
    return state.config if state is not None else config_module.current()


def _int_or_none(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        warn_once(f"int:{what}", "%s should be an int, got %s; ignored", what, type(value).__name__)
        return None
    if not -(2**63) <= value < 2**63:  # OTLP carries int64: a bigger int would fail the whole export batch
        warn_once(f"int64:{what}", "%s does not fit in 64 bits; ignored", what)
        return None
    return value


def _float_or_none(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except OverflowError:  # an int beyond float range
        return None


def _as_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None


# --- embed ------------------------------------------------------------------------------------
class Embed(Stage):
    stage = names.STAGE_EMBED
    span_kind = SpanKind.CLIENT
    oi_kind = names.OI_KIND_EMBEDDING
    operation = names.OP_EMBEDDINGS

    def __init__(self, model: str | None = None, provider: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model, self.provider = model, provider

    def span_name(self) -> str:
        return f"{self.operation} {self.model}" if self.model else str(self.operation)

    def start_attributes(self) -> dict[str, Any]:
        attributes = {names.GEN_AI_PROVIDER_NAME: self.provider, names.GEN_AI_REQUEST_MODEL: self.model}
        if self.config.openinference:
            attributes[names.OI_EMBEDDING_MODEL_NAME] = self.model
        return attributes

    def metric_labels(self) -> dict[str, Any]:
        return {names.GEN_AI_REQUEST_MODEL: self.model, names.GEN_AI_PROVIDER_NAME: self.provider}

    def record(
        self,
        vectors: Any = None,
        *,
        dimensions: int | None = None,
        input_tokens: int | None = None,
        text: str | Sequence[str] | None = None,
    ) -> None:
        """Record the embedding result: dimensions (or the vectors to read them from), tokens, input."""
        with guard("embed record"):
            if dimensions is None and vectors is not None:
                dimensions = _dimensions(vectors)
            if self.attrs is None:  # the span could not be started
                return
            self.attrs.set(names.GEN_AI_EMBEDDINGS_DIMENSION_COUNT, _int_or_none(dimensions, "dimensions"))
            tokens = _int_or_none(input_tokens, "input_tokens")
            self.attrs.set(names.GEN_AI_USAGE_INPUT_TOKENS, tokens)
            if self.config.openinference and tokens is not None:
                self.attrs.set(names.OI_LLM_TOKEN_COUNT_PROMPT, tokens)
                self.attrs.set(names.OI_LLM_TOKEN_COUNT_TOTAL, tokens)
            if text is not None:
                joined = text if isinstance(text, str) else "\n".join(t for t in text if isinstance(t, str)) if isinstance(text, (list, tuple)) else None
                self._oi_value(names.OI_INPUT_VALUE, joined)


def _dimensions(vectors: Any) -> int | None:
    """Length of a vector, or of the first vector in a batch (lists, tuples, numpy arrays)."""
    shape = getattr(vectors, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[-1])
    if isinstance(vectors, Sequence) and vectors:
        first = vectors[0]
        if isinstance(first, (int, float)):
            return len(vectors)
        inner = getattr(first, "shape", None)
        if inner is not None and len(inner) == 1:
            return int(inner[0])
        if isinstance(first, Sequence):
            return len(first)
    return None


# --- retrieve ---------------------------------------------------------------------------------
class Retrieve(Stage):
    stage = names.STAGE_RETRIEVE
    span_kind = SpanKind.CLIENT
    oi_kind = names.OI_KIND_RETRIEVER
    operation = names.OP_RETRIEVAL

    def __init__(
        self,
        query: str | None = None,
        *,
        data_source: str | None = None,
        top_k: int | None = None,
        accessors: Accessors = NO_ACCESSORS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.query, self.data_source, self.top_k, self.accessors = query, data_source, top_k, accessors
        self.chunks: list[Chunk] = []
        self.recorded = False

    def span_name(self) -> str:
        return f"{self.operation} {self.data_source}" if self.data_source else str(self.operation)

    def start_attributes(self) -> dict[str, Any]:
        return {
            names.GEN_AI_DATA_SOURCE_ID: self.data_source,
            names.GEN_AI_RETRIEVAL_TOP_K: _int_or_none(self.top_k, "top_k"),
        }

    def on_open(self) -> None:
        self.set_query(self.query)

    def metric_labels(self) -> dict[str, Any]:
        return {names.GEN_AI_DATA_SOURCE_ID: self.data_source}

    def record_stage_metrics(self, found: otel_metrics.Instruments, labels: dict[str, Any]) -> None:
        if not self.recorded:
            return
        if not self.chunks:
            found.empty_retrievals.add(1, labels)
        elif self.chunks[0].score is not None:
            found.top_score.record(self.chunks[0].score, labels)

    def set_query(self, query: Any) -> None:
        text = _as_text(query)
        if text is not None:
            self.query = text
            self._content(names.GEN_AI_RETRIEVAL_QUERY_TEXT, text)
            self._oi_value(names.OI_INPUT_VALUE, text)

    def record(self, results: Any) -> None:
        """Record what the retriever returned (any common document shape, in rank order)."""
        with guard("document normalisation"):
            normalized = normalize(results, self.accessors)
            if normalized.unreadable:
                warn_once(
                    "unreadable:retrieve",
                    "%d retrieved item(s) could not be read as chunks (no id and no text); pass id_of=/content_of=",
                    normalized.unreadable,
                )
            chunks = normalized.chunks
            if self.state is not None:
                canonical = self.state.add_retrieval(chunks, normalized.unreadable)
                chunks = [c if c.id == k.id else _with_id(c, k.id) for c, k in zip(chunks, canonical)]
            self.chunks = chunks
            self.recorded = True
            self._attributes(chunks, normalized.unreadable)

    def _attributes(self, chunks: list[Chunk], unreadable: int) -> None:
        attrs = self.attrs
        if attrs is None or not attrs.recording:
            return
        ids = [c.id for c in chunks]
        attrs.set_many(
            {
                names.RAG_RETRIEVAL_CHUNK_IDS: ids,
                names.RAG_RETRIEVAL_SCORES: [finite_or_nan(c.score) for c in chunks],
                names.RAG_RETRIEVAL_RANKS: [c.rank for c in chunks],
                names.RAG_RETRIEVAL_RESULT_COUNT: len(chunks),
                names.RAG_RETRIEVAL_TOP_SCORE: chunks[0].score if chunks else None,
                names.RAG_UNREADABLE_ITEMS: unreadable or None,
            }
        )
        tokens = [c.tokens for c in chunks]
        if chunks and all(t is not None for t in tokens):
            attrs.set(names.RAG_RETRIEVAL_CHUNK_TOKENS, tokens)
        if self.config.content.hashes:
            attrs.set(names.RAG_RETRIEVAL_CONTENT_HASHES, [c.content_hash or "" for c in chunks])
        attrs.json_list(names.GEN_AI_RETRIEVAL_DOCUMENTS, [{"id": c.id, "score": c.score} for c in chunks])
        if self.config.openinference:
            _oi_documents(self, names.OI_RETRIEVAL_DOCUMENTS, chunks)


def _with_id(chunk: Chunk, chunk_id: str) -> Chunk:
    return Chunk(chunk_id, chunk.rank, chunk.score, chunk.content, chunk.metadata, chunk.tokens, chunk.content_hash)


def _oi_documents(stage: Stage, prefix: str, chunks: Sequence[Chunk]) -> None:
    """OpenInference's flattened document list, capped so the attribute limit is not exhausted."""
    assert stage.attrs is not None
    policy, limit = stage.config.content, stage.config.max_content_chars
    values: dict[str, Any] = {}
    for index, chunk in enumerate(chunks[: stage.config.max_documents]):
        values[names.indexed(prefix, index, names.OI_DOCUMENT_ID)] = chunk.id
        values[names.indexed(prefix, index, names.OI_DOCUMENT_SCORE)] = chunk.score
        content = policy.text(chunk.content) if chunk.content is not None else None
        if content is not None:
            values[names.indexed(prefix, index, names.OI_DOCUMENT_CONTENT)] = trim_text(content, limit)
    stage.attrs.set_many(values)


# --- rerank -----------------------------------------------------------------------------------
class Rerank(Stage):
    stage = names.STAGE_RERANK
    span_kind = SpanKind.CLIENT
    oi_kind = names.OI_KIND_RERANKER
    operation = names.OP_RERANK

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: str | None = None,
        top_n: int | None = None,
        query: str | None = None,
        accessors: Accessors = NO_ACCESSORS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model, self.provider, self.top_n, self.query, self.accessors = model, provider, top_n, query, accessors
        self.chunks: list[Chunk] = []

    def span_name(self) -> str:
        return f"{self.operation} {self.model}" if self.model else str(self.operation)

    def start_attributes(self) -> dict[str, Any]:
        top_n = _int_or_none(self.top_n, "top_n")
        attributes = {
            names.GEN_AI_PROVIDER_NAME: self.provider,
            names.GEN_AI_REQUEST_MODEL: self.model,
            names.RAG_RERANK_TOP_N: top_n,
        }
        if self.config.openinference:
            attributes[names.OI_RERANKER_MODEL_NAME] = self.model
            attributes[names.OI_RERANKER_TOP_K] = top_n
        return attributes

    def on_open(self) -> None:
        self.set_query(self.query)

    def metric_labels(self) -> dict[str, Any]:
        return {names.GEN_AI_REQUEST_MODEL: self.model, names.GEN_AI_PROVIDER_NAME: self.provider}

    def set_query(self, query: Any) -> None:
        text = _as_text(query)
        if text is not None:
            self.query = text
            self._oi_content(names.OI_RERANKER_QUERY, text)
            self._oi_value(names.OI_INPUT_VALUE, text)

    def record(self, output: Any, *, candidates: Any = None) -> None:
        """Record the reranked results (new order); ``candidates`` defaults to the last retrieval."""
        with guard("document normalisation"):
            kept = normalize(output, self.accessors)
            state = self.state
            if candidates is not None:
                inputs = normalize(candidates, self.accessors).chunks
            elif state is not None and state.retrievals:
                inputs = state.retrievals[-1]
            else:
                inputs = []
            if state is not None:
                kept.chunks[:] = [state.canonical(c) for c in kept.chunks]
                inputs = [state.canonical(c) for c in inputs]
                kept_ids = {c.id for c in kept.chunks}
                state.reranked = True
                state.reranked_out.update(c.id for c in inputs if c.id not in kept_ids)
                state.reranked_out.difference_update(kept_ids)
            self.chunks = kept.chunks
            self._attributes(inputs, kept.chunks, kept.unreadable)

    def _attributes(self, inputs: list[Chunk], outputs: list[Chunk], unreadable: int) -> None:
        attrs = self.attrs
        if attrs is None or not attrs.recording:
            return
        attrs.set_many(
            {
                names.RAG_RERANK_INPUT_COUNT: len(inputs),
                names.RAG_RERANK_OUTPUT_COUNT: len(outputs),
                names.RAG_RERANK_INPUT_IDS: [c.id for c in inputs],
                names.RAG_RERANK_OUTPUT_IDS: [c.id for c in outputs],
                names.RAG_RERANK_OUTPUT_SCORES: [finite_or_nan(c.score) for c in outputs],
                names.RAG_UNREADABLE_ITEMS: unreadable or None,
            }
        )
        if self.config.openinference:
            _oi_documents(self, names.OI_RERANKER_INPUT_DOCUMENTS, inputs)
            _oi_documents(self, names.OI_RERANKER_OUTPUT_DOCUMENTS, outputs)


# --- assemble ---------------------------------------------------------------------------------
class Assemble(Stage):
    """Builds the prompt (``add``/``drop``/``render``) and records exactly what landed where."""

    stage = names.STAGE_ASSEMBLE
    oi_kind = names.OI_KIND_PROMPT

    def __init__(
        self,
        max_tokens: int | None = None,
        *,
        labeller: Labeller = "index",
        chunk_format: str | None = None,
        separator: str = "\n\n",
        truncate: bool = True,
        tokenizer: Tokenizer | None = None,
        accessors: Accessors = NO_ACCESSORS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        builder_options: dict[str, Any] = {"chunk_format": chunk_format} if chunk_format is not None else {}
        self.builder = ContextBuilder(
            max_tokens=_int_or_none(max_tokens, "max_tokens"),
            tokenizer=tokenizer or self.config.tokenizer,
            labeller=labeller,
            separator=separator,
            truncate=truncate,
            accessors=accessors,
            **builder_options,
        )
        self.record_: ContextRecord | None = None
        self._located: ContextRecord | None = None

    def span_name(self) -> str:
        return names.ASSEMBLE_SPAN_NAME

    def add(self, chunk: Any) -> bool:
        """Place a chunk in the context; returns False when it did not land (duplicate, budget)."""
        return bool(call_guarded("assembly bookkeeping", self._add, chunk, default=False))

    def _add(self, chunk: Any) -> bool:
        chunk = self._canonical(chunk)
        return self.builder.add(chunk) if chunk is not None else False

    def drop(self, chunk: Any, reason: str = names.DROP_FILTERED) -> None:
        """Record that ``chunk`` was left out on purpose, with a reason."""
        with guard("assembly bookkeeping"):
            found = self._canonical(chunk)
            if found is not None:
                self.builder.drop(found, reason)

    def _canonical(self, item: Any) -> Chunk | None:
        from .chunks import to_chunk

        chunk = to_chunk(item, 0, self.builder.accessors)
        if chunk is None:
            self.builder.unreadable += 1
            return None
        return self.state.canonical(chunk) if self.state is not None else chunk

    def render(self, template: str | Sequence[Mapping[str, Any]] | None = None, **variables: Any) -> Prompt:
        """Render the prompt with ``{context}`` and ``{variables}`` filled (see ContextBuilder)."""
        try:
            return self.builder.render(template, **variables)
        except Exception as error:  # noqa: BLE001 - a prompt must still come back
            call_guarded("assembly bookkeeping", _raise, error)
            # the same prompt, rendered without the bookkeeping that failed
            return call_guarded("assembly bookkeeping", _render_plain, self.builder, template, variables, default="")  # type: ignore[return-value]

    @property
    def prompt(self) -> Prompt:
        prompt = self.builder._prompt
        return prompt if prompt is not None else self.render()

    def observe(self, chunks: Any, prompt: Any) -> None:
        """For prompts the user built: locate ``chunks`` in ``prompt`` (inclusion_method=located)."""
        with guard("assembly bookkeeping"):
            normalized = normalize(chunks, self.builder.accessors)
            inputs = [self.state.canonical(c) for c in normalized.chunks] if self.state else normalized.chunks
            self.builder.unreadable += normalized.unreadable
            self._located = locate(inputs, prompt, self.builder.tokenizer)

    def snapshot(self) -> ContextRecord:
        """The inclusion facts so far (final once the assemble block has closed)."""
        if self.record_ is not None:
            return self.record_
        return self._located if self._located is not None else self.builder.record()

    def on_close(self) -> None:
        record = self._located if self._located is not None else self.builder.record()
        state = self.state
        if state is not None:
            _explain_missing(record, state)
            state.contexts.append(record)
        self.record_ = record
        self._attributes(record)

    def record_stage_metrics(self, found: otel_metrics.Instruments, labels: dict[str, Any]) -> None:
        if self.record_ is not None:
            found.context_tokens.record(self.record_.total_tokens, labels)

    def _attributes(self, record: ContextRecord) -> None:
        attrs = self.attrs
        if attrs is None or not attrs.recording:
            return
        placements = record.placements
        values: dict[str, Any] = {
            names.RAG_CONTEXT_INCLUSION_METHOD: record.method,
            names.RAG_CONTEXT_CHUNK_IDS: [p.chunk_id for p in placements],
            names.RAG_CONTEXT_POSITIONS: [p.position for p in placements],
            # a label other than the position or id (a title found in a user-built prompt) is content
            names.RAG_CONTEXT_LABELS: [
                p.label if p.label in ("", p.chunk_id, str(p.position)) else self.config.content.text(p.label) or ""
                for p in placements
            ],
            names.RAG_CONTEXT_CHAR_STARTS: [p.start for p in placements],
            names.RAG_CONTEXT_CHAR_ENDS: [p.end for p in placements],
            names.RAG_CONTEXT_CHUNK_TOKENS: [p.tokens for p in placements],
            names.RAG_CONTEXT_TRUNCATED: [p.truncated for p in placements],
            names.RAG_CONTEXT_TRUNCATED_COUNT: record.truncated_count,
            names.RAG_CONTEXT_TOTAL_TOKENS: record.total_tokens,
            names.RAG_CONTEXT_MAX_TOKENS: record.max_tokens,
            names.RAG_CONTEXT_DROPPED_IDS: [d.chunk_id for d in record.dropped],
            names.RAG_CONTEXT_DROPPED_REASONS: [d.reason for d in record.dropped],
            names.RAG_UNREADABLE_ITEMS: self.builder.unreadable or None,
        }
        if any(p.message_index is not None for p in placements):
            values[names.RAG_CONTEXT_MESSAGE_INDEXES] = [-1 if p.message_index is None else p.message_index for p in placements]
        if self.config.content.hashes:
            values[names.RAG_CONTEXT_CONTENT_HASHES] = [p.content_hash or "" for p in placements]
        attrs.set_many(values)
        attrs.essential(names.RAG_CONTEXT_INCLUSION_METHOD, record.method)
        if self.config.openinference and record.prompt is not None:
            if isinstance(record.prompt, str):
                self._oi_value(names.OI_OUTPUT_VALUE, record.prompt)
            else:  # declared JSON, so it must stay valid JSON under every length limit
                self._oi_value(names.OI_OUTPUT_VALUE, _prompt_json(self, record.prompt), json_value=True)


def _raise(error: BaseException) -> None:
    raise error


def _prompt_json(stage: Stage, messages: Any) -> str | None:
    """A chat prompt as ``[{role, content}]`` JSON that fits the limits whole; each message's text
    passes the content policy."""
    policy = stage.config.content
    if not policy.captures or not isinstance(messages, Sequence):
        return None
    pairs = []
    for message in messages:
        text = policy.text(message_text(message)) if isinstance(message, Mapping) else None
        if text is None:
            return None
        pairs.append((message.get("role"), text))
    limit, span_limit = stage.config.max_content_chars, value_length_limit(stage.span)
    return json_messages_within(pairs, limit if span_limit is None else min(limit, span_limit))


def _render_plain(builder: ContextBuilder, template: Any, variables: Mapping[str, Any]) -> Prompt:
    """What ``ContextBuilder.render`` returns, without its placement bookkeeping."""
    from .assembly import DEFAULT_TEMPLATE, _render_messages, _render_text

    block, _ = builder.context_block()
    if template is None:
        template = DEFAULT_TEMPLATE if "question" in variables else "{context}"
    if isinstance(template, str):
        return _render_text(template, block, variables)[0]
    return _render_messages(template, block, variables)[0]


def _explain_missing(record: ContextRecord, state: state_module.PipelineState) -> None:
    """Every retrieved chunk that did not land gets a reason (reranked out, or never offered)."""
    accounted = {p.chunk_id for p in record.placements} | {d.chunk_id for d in record.dropped}
    from .assembly import Drop

    for chunk_id in dict.fromkeys(c.id for r in state.retrievals for c in r):
        if chunk_id not in accounted:
            reason = names.DROP_RERANKED_OUT if chunk_id in state.reranked_out else names.DROP_NOT_ADDED
            record.dropped.append(Drop(chunk_id, reason))


# --- generate ---------------------------------------------------------------------------------
class Generate(Stage):
    """An LLM call. Answer generations are scored: citations parsed against their context."""

    stage = names.STAGE_GENERATE
    span_kind = SpanKind.CLIENT
    oi_kind = names.OI_KIND_LLM
    operation = names.OP_CHAT

    def __init__(
        self,
        model: str | None = None,
        provider: str | None = None,
        *,
        prompt: Any = None,
        context: Any = None,
        role: str = names.ROLE_ANSWER,
        citation_pattern: CitationPattern | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model, self.provider, self.role = model, provider, role
        self.context, self.citation_pattern = context, citation_pattern
        self.temperature, self.max_tokens = temperature, max_tokens
        self.prompt: Any = prompt
        self.text: str | None = None
        self.pieces: list[str] | None = None
        self.citations: CitationResult | None = None
        self.metrics: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}

    def span_name(self) -> str:
        return f"{self.operation} {self.model}" if self.model else str(self.operation)

    def start_attributes(self) -> dict[str, Any]:
        temperature = self.temperature if isinstance(self.temperature, (int, float)) and not isinstance(self.temperature, bool) else None
        attributes = {
            names.GEN_AI_PROVIDER_NAME: self.provider,
            names.GEN_AI_REQUEST_MODEL: self.model,
            names.GEN_AI_REQUEST_TEMPERATURE: _float_or_none(temperature),
            names.GEN_AI_REQUEST_MAX_TOKENS: _int_or_none(self.max_tokens, "max_tokens"),
            names.RAG_GENERATION_ROLE: str(self.role),
        }
        if self.config.openinference:
            attributes[names.OI_LLM_MODEL_NAME] = self.model
            attributes[names.OI_LLM_PROVIDER] = self.provider
        return attributes

    def metric_labels(self) -> dict[str, Any]:
        return {names.GEN_AI_REQUEST_MODEL: self.model, names.GEN_AI_PROVIDER_NAME: self.provider}

    @property
    def is_answer(self) -> bool:
        return self.role == names.ROLE_ANSWER

    def set_prompt(self, prompt: Any) -> None:
        """The prompt sent to the model: a string or a list of chat messages."""
        self.prompt = prompt

    def record(
        self,
        output: Any,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        response_model: str | None = None,
    ) -> None:
        """Record the model output: a string, an OpenAI-style completion (object or dict), or pieces."""
        with guard("generation record"):
            text, usage = _completion(output)
            if text is not None:
                self.text = text
            self._usage.update({k: v for k, v in usage.items() if v is not None})
            for key, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens), ("response_model", response_model)):
                if value is not None:
                    self._usage[key] = value

    def add_piece(self, piece: Any) -> None:
        """One streamed piece (a string or an OpenAI-style chunk); pieces are joined at the end."""
        with guard("generation record"):
            text = _piece_text(piece)
            if text:
                if self.pieces is None:
                    self.pieces = []
                self.pieces.append(text)
            if not isinstance(piece, str):
                self._usage.update({k: v for k, v in _chunk_metadata(piece).items() if v is not None})

    def stream_done(self, pieces: Iterable[Any]) -> None:
        """A whole stream that was already consumed (the generator decorator's collected pieces)."""
        self._usage["stream"] = True
        for piece in pieces:
            self.add_piece(piece)

    def stream(self, pieces: Iterable[Any]) -> Iterator[Any]:
        """Pass a stream through unchanged while collecting its text."""
        self._usage["stream"] = True
        for piece in pieces:
            self.add_piece(piece)
            yield piece

    async def astream(self, pieces: AsyncIterable[Any]) -> AsyncIterator[Any]:
        self._usage["stream"] = True
        async for piece in pieces:
            self.add_piece(piece)
            yield piece

    def on_close(self) -> None:
        if self.text is None and self.pieces is not None:
            self.text = "".join(self.pieces)
        context = self._context()
        state = self.state
        if self.is_answer and self.text is not None:
            labels = context.label_map() if context is not None else {}
            self.citations = call_guarded(
                "citation parsing", parse_citations, self.text, labels, pattern=self.citation_pattern
            )
            answer = figures_module.Answer(
                placements=context.placements if context is not None else None,
                cited_ids=self.citations.cited_ids if self.citations else (),
                invalid_citations=self.citations.invalid_count if self.citations else 0,
            )
            if state is not None:
                state.answers.append(answer)
                state.answer_text = self.text
            retrievals = state.retrievals if state is not None else []
            result = figures_module.compute(retrievals, [answer], unreadable=state.unreadable if state else 0)
            self.metrics = dict(result.values)
            with guard("figure attributes"):
                set_figures(self, result)
        self._attributes(context)

    def _context(self) -> ContextRecord | None:
        given = self.context
        if isinstance(given, Assemble):
            return given.snapshot()
        if isinstance(given, ContextRecord):
            return given
        if given is not None:
            warn_once("context-type", "generate(context=...) takes an assemble handle; got %s", type(given).__name__)
        return self.state.latest_context() if self.state is not None else None

    def _attributes(self, context: ContextRecord | None) -> None:
        attrs = self.attrs
        if attrs is None or not attrs.recording:
            return
        usage = self._usage
        attrs.set_many(
            {
                names.GEN_AI_USAGE_INPUT_TOKENS: _int_or_none(usage.get("input_tokens"), "input_tokens"),
                names.GEN_AI_USAGE_OUTPUT_TOKENS: _int_or_none(usage.get("output_tokens"), "output_tokens"),
                names.GEN_AI_RESPONSE_MODEL: _as_text(usage.get("response_model")),
                names.GEN_AI_RESPONSE_ID: _as_text(usage.get("response_id")),
                names.GEN_AI_RESPONSE_FINISH_REASONS: usage.get("finish_reasons"),
                names.GEN_AI_REQUEST_STREAM: usage.get("stream"),
            }
        )
        if self.config.openinference:
            prompt_tokens = _int_or_none(usage.get("input_tokens"), "input_tokens")
            completion_tokens = _int_or_none(usage.get("output_tokens"), "output_tokens")
            attrs.set(names.OI_LLM_TOKEN_COUNT_PROMPT, prompt_tokens)
            attrs.set(names.OI_LLM_TOKEN_COUNT_COMPLETION, completion_tokens)
            if prompt_tokens is not None and completion_tokens is not None:
                attrs.set(names.OI_LLM_TOKEN_COUNT_TOTAL, _int_or_none(prompt_tokens + completion_tokens, "total_tokens"))
        citations = self.citations
        if citations is not None:
            attrs.set_many(
                {
                    names.RAG_CITATION_IDS: list(citations.cited_ids),
                    names.RAG_CITATION_VALID_COUNT: citations.valid_count,
                    names.RAG_CITATION_INVALID_COUNT: citations.invalid_count,
                    # an invalid label is a piece of the completion ("[123-45-6789]"): content
                    names.RAG_CITATION_INVALID_LABELS: [t for t in map(self.config.content.text, citations.invalid_labels) if t],
                    names.RAG_CITATION_FORMAT: citations.format,
                    names.RAG_CITATION_CONFORMANT: citations.conformant,
                }
            )
        self._content_attributes()

    def _content_attributes(self) -> None:
        assert self.attrs is not None
        messages = _prompt_messages(self.prompt)
        limit = self.config.max_content_chars
        if messages is not None:
            as_json = messages_json(messages, self.config.content, limit)
            if as_json is not None:
                self.attrs.json_list(names.GEN_AI_INPUT_MESSAGES, as_json)
            if self.config.openinference:
                for index, message in enumerate(messages[: self.config.max_documents]):
                    prefix = names.indexed(names.OI_LLM_INPUT_MESSAGES, index, "")
                    self.attrs.set(prefix + names.OI_MESSAGE_ROLE, str(message.get("role", "user")))
                    self._content(prefix + names.OI_MESSAGE_CONTENT, message_text(message))
                if isinstance(self.prompt, str):
                    self._oi_value(names.OI_INPUT_VALUE, self.prompt)
                else:
                    self._oi_value(names.OI_INPUT_VALUE, _prompt_json(self, messages), json_value=True)
        if self.text is not None:
            output = messages_json([{"role": "assistant", "content": self.text}], self.config.content, limit)
            if output is not None:
                output[0]["finish_reason"] = (self._usage.get("finish_reasons") or ["stop"])[0]
                self.attrs.json_list(names.GEN_AI_OUTPUT_MESSAGES, output)
            if self.config.openinference:
                prefix = names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, "")
                self.attrs.set(prefix + names.OI_MESSAGE_ROLE, "assistant")
                self._content(prefix + names.OI_MESSAGE_CONTENT, self.text)
                self._oi_value(names.OI_OUTPUT_VALUE, self.text)


def _prompt_messages(prompt: Any) -> list[Mapping[str, Any]] | None:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, Sequence) and prompt and all(isinstance(m, Mapping) for m in prompt):
        return list(prompt)
    return None


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _completion(output: Any) -> tuple[str | None, dict[str, Any]]:
    """Text and usage from a string, a list of pieces, or an OpenAI-style chat completion."""
    if output is None:
        return None, {}
    if isinstance(output, str):
        return output, {}
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace"), {}
    choices = _get(output, "choices")
    if choices is not None:
        first = choices[0] if isinstance(choices, Sequence) and choices else None
        message = _get(first, "message") if first is not None else None
        text = _get(message, "content") if message is not None else _get(first, "text")
        text = message_text({"content": text}) if isinstance(text, list) else _as_text(text)
        return text, _chunk_metadata(output)
    if isinstance(output, Iterable) and not isinstance(output, Mapping):
        return "".join(_piece_text(p) or "" for p in output), {}
    return None, {}


def _chunk_metadata(chunk: Any) -> dict[str, Any]:
    """Usage, model, id and finish reason carried by an OpenAI-style stream chunk (often the last)."""
    usage = _get(chunk, "usage")
    choices = _get(chunk, "choices")
    reasons = (
        [r for r in (_get(c, "finish_reason") for c in choices) if isinstance(r, str)]
        if isinstance(choices, Sequence)
        else []
    )
    return {
        "input_tokens": _get(usage, "prompt_tokens") if usage is not None else None,
        "output_tokens": _get(usage, "completion_tokens") if usage is not None else None,
        "response_model": _get(chunk, "model"),
        "response_id": _get(chunk, "id"),
        "finish_reasons": reasons or None,
    }


def _piece_text(piece: Any) -> str | None:
    if isinstance(piece, str):
        return piece
    choices = _get(piece, "choices")
    if isinstance(choices, Sequence) and choices:
        delta = _get(choices[0], "delta")
        return _as_text(_get(delta, "content")) if delta is not None else _as_text(_get(choices[0], "text"))
    return None


# --- figures on spans -------------------------------------------------------------------------
def set_figures(stage: Stage, result: figures_module.Figures, *, events: bool = False) -> None:
    """``rag.metrics.*`` (and, on the root, evaluation events and OpenInference evaluations)."""
    attrs = stage.attrs
    if attrs is None or not attrs.recording:
        return
    values: dict[str, Any] = {names.metric_attribute(k): v for k, v in result.values.items()}
    values[names.RAG_METRICS_STATUS] = result.status_text
    proxies = [(k, float(result.values[k])) for k in names.PROXY_METRICS if k in result.values]
    if events:
        for index, (metric, score) in enumerate(proxies):
            evaluation_name = names.EVALUATION_NAME_PREFIX + metric
            stage.span.add_event(
                names.GEN_AI_EVALUATION_RESULT,
                {
                    names.GEN_AI_EVALUATION_NAME: evaluation_name,
                    names.GEN_AI_EVALUATION_SCORE_VALUE: score,
                    names.GEN_AI_EVALUATION_SCORE_LABEL: figures_module.label(score),
                },
            )
            if stage.config.openinference:
                attrs.set_many(
                    {
                        names.indexed(names.OI_TRACE_EVALUATIONS, index, names.OI_EVALUATION_NAME): evaluation_name,
                        names.indexed(names.OI_TRACE_EVALUATIONS, index, names.OI_EVALUATION_SCORE): score,
                        names.indexed(names.OI_TRACE_EVALUATIONS, index, names.OI_EVALUATION_LABEL): figures_module.label(score),
                        names.indexed(names.OI_TRACE_EVALUATIONS, index, names.OI_EVALUATION_ANNOTATOR_KIND): names.ANNOTATOR_CODE,
                    }
                )
    # the figures go last so the SDK's evict-the-oldest limit can't drop them
    for key, value in values.items():
        if value is not None:
            attrs.essential(key, value)


def query_hash(query: str) -> str:
    """Joins traces to a golden set when query text is redacted: sha256 of the normalised query."""
    normalized = " ".join(query.lower().split())
    return hashlib.sha256(normalized.encode("utf-8", "surrogatepass")).hexdigest()[:16]

