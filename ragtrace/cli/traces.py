"""One finished trace -> one row per pipeline run, with the figures of ``figures.compute``.

ragtrace's own spans carry what the figures are computed from (retrieved ids and ranks, recorded
placements, resolved citations), so the rows are rebuilt from those attributes and fed to the very
function the SDK used online: the same inputs give the same figures. Where the root span also
carries the figures recorded online, they are compared and any difference is reported.

Traces from other instrumentations (OpenInference, OpenLLMetry, plain ``gen_ai.*``) record no
inclusion. For those the retrieved chunk text is located in the prompt (``assembly.locate``) and
citations are parsed from the output (``parse_citations``), and every figure is marked *inferred*.
When even that is impossible the row says why, and is not measurable: a trace ragtrace can't read
never scores as perfect.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._internal import names
from .._internal.assembly import Placement, locate
from .._internal.chunks import Chunk, content_hash, to_chunk
from .._internal.citations import parse_citations
from .._internal.figures import Answer, Figures, compute
from .reader import Span, Trace

SOURCE_RAGTRACE = "ragtrace"
SOURCE_OPENINFERENCE = "openinference"
SOURCE_OPENLLMETRY = "openllmetry"
SOURCE_GEN_AI = "gen_ai"
SOURCE_UNKNOWN = "unknown"

# reasons a row is not (fully) measurable, besides the statuses of figures.compute
STATUS_INCOMPLETE = "incomplete_trace"
STATUS_ATTRIBUTES_LOST = "attributes_missing"
STATUS_SPANS_MISSING = "spans_missing"
STATUS_NO_CHUNK_TEXT = "chunk_text_unavailable"
STATUS_NO_PROMPT = "prompt_unavailable"
STATUS_PROMPT_TOO_LARGE = "prompt_too_large"
STATUS_NO_RAG_SPANS = "no_rag_spans"

MAX_PROMPT_CHARS = 1_000_000  # larger prompts are not searched (locate is linear but not free)
_MAX_INDEXED = 10_000  # cap on flattened list attributes (retrieval.documents.{i}...)
_METRIC_KEYS = tuple((metric, names.metric_attribute(metric)) for metric in names.ALL_METRICS)


@dataclass(slots=True)
class Row:
    """One pipeline run: the figures and what the report groups and recommends on."""

    trace_id: str
    span_id: str
    where: str
    time: int = 0  # start of the run, unix nanoseconds (0: unknown)
    pipeline: str | None = None
    labels: dict[str, Any] = field(default_factory=dict)  # rag.pipeline.<key> -> value, by key
    query: str | None = None
    query_id: str | None = None
    query_hash: str | None = None
    content_mode: str | None = None
    source: str = SOURCE_RAGTRACE
    inferred: bool = False
    figures: dict[str, Any] = field(default_factory=dict)
    status: list[str] = field(default_factory=list)
    answers: int = 0
    nonconformant: int = 0  # answers with no parseable citation
    retrievals: int = 0
    empty_retrievals: int = 0
    retrieved_items: int = 0  # chunks returned, duplicates included
    top_k: int | None = None
    retrieved_ids: list[str] = field(default_factory=list)  # best rank first
    placed_depth: int | None = None  # deepest retrieval rank that reached the prompt
    mismatches: list[str] = field(default_factory=list)  # figures that differ from the recorded ones

    @property
    def measurable(self) -> bool:
        return names.METRIC_RECALL_PROXY in self.figures


# --- small decoding helpers -----------------------------------------------------------------------
def _end_order(span: Span) -> tuple[int, int]:
    return (span.end or span.start, span.start)


# --- trace -> runs --------------------------------------------------------------------------------
def rows_of(trace: Trace) -> list[Row]:
    """The rows of one trace: one per ragtrace pipeline run, or one for the whole trace."""
    spans = trace.spans
    stages: list[tuple[Span, str]] = []
    for span in spans:
        stage = span.get_str(names.RAG_STAGE)
        if stage is not None:
            stages.append((span, stage))
    if not stages:
        return [_foreign_row(trace)]

    by_id: dict[str, Span] = {}  # built when a span's parent is not its pipeline (see below)
    pipelines = [span for span, stage in stages if stage == names.STAGE_PIPELINE]
    pipeline_ids = {span.span_id for span in pipelines}
    members: dict[str, list[tuple[Span, str]]] = {span.span_id: [] for span in pipelines}
    implicit: list[tuple[Span, str]] = []
    owner_cache: dict[str, str | None] = {}
    for span, stage in stages:
        if stage == names.STAGE_PIPELINE:
            continue
        if span.parent_id in pipeline_ids:  # a child of its pipeline: _owner's first step, inline
            members[span.parent_id].append((span, stage))
            continue
        if not by_id:
            by_id = {span.span_id: span for span in spans}
        owner, orphan = _owner(span, by_id, pipeline_ids, owner_cache)
        if orphan is not None and not span.local_root:
            span.source.diagnostics.warn(
                "missing parent",
                span.where,
                f"span {span.span_id} ({span.name or stage}): parent span {orphan} is not in the input",
            )
            if owner is None and len(pipelines) == 1:
                owner = pipelines[0].span_id
        if owner is None:
            implicit.append((span, stage))
        else:
            members[owner].append((span, stage))

    rows = [_ragtrace_row(trace, pipeline, members[pipeline.span_id]) for pipeline in pipelines]
    if implicit:
        rows.append(_ragtrace_row(trace, None, implicit))
    return rows


def _owner(
    span: Span, by_id: dict[str, Span], pipeline_ids: set[str], cache: dict[str, str | None]
) -> tuple[str | None, str | None]:
    """(nearest pipeline ancestor's span id, id of a missing parent met on the way up)."""
    seen: list[str] = []
    current = span
    owner: str | None = None
    missing: str | None = None
    for _ in range(256):  # a parent cycle in bad input must not hang
        parent = current.parent_id
        if not parent:
            break
        if parent in cache:
            owner = cache[parent]
            break
        if parent in pipeline_ids:
            owner = parent
            break
        seen.append(parent)
        found = by_id.get(parent)
        if found is None:
            missing = parent
            break
        current = found
    if missing is None:
        for span_id in seen:
            cache[span_id] = owner
    return owner, missing


# --- ragtrace's own spans -------------------------------------------------------------------------
def _ragtrace_row(trace: Trace, pipeline: Span | None, members: list[tuple[Span, str]]) -> Row:
    anchor = pipeline or min((s for s, _ in members), key=lambda s: s.start or 0)
    row = Row(trace.trace_id, anchor.span_id, anchor.where, time=anchor.start)
    if pipeline is not None:
        _pipeline_facts(row, pipeline)
    members.sort(key=lambda item: (item[0].end or item[0].start, item[0].start))  # _end_order
    lost = False

    retrievals: list[list[Chunk]] = []
    unreadable = 0
    for span, stage in members:
        if stage != names.STAGE_RETRIEVE:
            continue
        chunks = _recorded_retrieval(span)
        top_k = span.get_int(names.GEN_AI_RETRIEVAL_TOP_K)
        if top_k is not None:
            row.top_k = max(row.top_k or 0, top_k)
        if row.query is None:
            row.query = span.get_str(names.GEN_AI_RETRIEVAL_QUERY_TEXT)
        if chunks is None:
            if span.has(names.RAG_RETRIEVAL_RESULT_COUNT):
                lost = True
            continue
        retrievals.append(chunks)
        unreadable += span.get_int(names.RAG_UNREADABLE_ITEMS) or 0

    contexts: list[tuple[Span, list[Placement], bool]] = []
    for span, stage in members:
        if stage != names.STAGE_ASSEMBLE:
            continue
        recorded = _recorded_context(span)
        if recorded is None:
            lost = True
            continue
        contexts.append((span, *recorded))

    answers: list[Answer] = []
    answer_spans: list[Span] = []
    used: list[tuple[list[Placement], bool]] = []
    for span, stage in members:
        if stage != names.STAGE_GENERATE or span.get_str(names.RAG_GENERATION_ROLE) != names.ROLE_ANSWER:
            continue
        if not (span.has(names.RAG_CITATION_FORMAT) or span.has(names.metric_attribute(names.METRIC_CITED))):
            continue  # an answer generation that recorded no output: not an answer online either
        cited = [str(c) for c in span.get_list(names.RAG_CITATION_IDS) or ()]
        context = _context_of(span, contexts, cited)
        if context is not None:
            used.append((context[1], context[2]))
        answers.append(
            Answer(
                placements=context[1] if context is not None else None,
                cited_ids=cited,
                invalid_citations=span.get_int(names.RAG_CITATION_INVALID_COUNT) or 0,
            )
        )
        answer_spans.append(span)
        row.answers += 1
        if span.get_bool(names.RAG_CITATION_CONFORMANT) is False:
            row.nonconformant += 1

    unanswered = [] if answers else [placements for _, placements, _ in contexts]
    result = compute(retrievals, answers, contexts=unanswered, unreadable=unreadable)
    tokens_known = all(known for _, known in used) if answers else all(known for _, _, known in contexts)
    if not tokens_known:
        result.values.pop(names.METRIC_WASTED_CONTEXT_TOKENS, None)
    _retrieval_facts(row, retrievals, result, answers, unanswered)
    row.figures, row.status = result.values, list(result.status)
    if pipeline is not None:
        row.mismatches = _mismatches(pipeline, result, retrievals)
    elif len(answer_spans) == 1:  # outside a pipeline the answer span carries the trace's figures
        row.mismatches = _mismatches(answer_spans[0], result, retrievals)
    if set(row.mismatches) - {names.METRIC_DUPLICATE_CHUNKS}:
        _not_measurable(row, STATUS_SPANS_MISSING)
    elif lost:
        _not_measurable(row, STATUS_ATTRIBUTES_LOST)
    elif pipeline is None and not trace.has_root:
        _not_measurable(row, STATUS_INCOMPLETE)
    return row


def _pipeline_facts(row: Row, pipeline: Span) -> None:
    row.pipeline = pipeline.get_str(names.GEN_AI_WORKFLOW_NAME)
    row.query_id = pipeline.get_str(names.RAG_QUERY_ID)
    row.query_hash = pipeline.get_str(names.RAG_QUERY_HASH)
    row.content_mode = pipeline.get_str(names.RAG_CONTENT_MODE)
    row.query = pipeline.get_str(names.OI_INPUT_VALUE)
    prefix = names.RAG_PIPELINE_ATTRIBUTE_PREFIX
    for key in pipeline.attrs:
        if not key.startswith(prefix):
            continue
        value = pipeline.get(key)
        if isinstance(value, (str, int, float, bool)):
            row.labels[key[len(prefix) :]] = value


def _recorded_retrieval(span: Span) -> list[Chunk] | None:
    ids = span.get_list(names.RAG_RETRIEVAL_CHUNK_IDS)
    if ids is None:
        return None
    count = len(ids)
    ranks = span.get_aligned(names.RAG_RETRIEVAL_RANKS, int, count) or range(1, count + 1)
    hashes = span.get_aligned(names.RAG_RETRIEVAL_CONTENT_HASHES, str, count)
    if hashes is None:
        hashes = _hashes_from_documents(span, count)
    tokens = span.get_aligned(names.RAG_RETRIEVAL_CHUNK_TOKENS, int, count)
    # Chunk(id, rank, score, content, metadata, tokens, content_hash), positionally (the hot path)
    return [
        Chunk(
            str(chunk_id),
            ranks[index],
            None,
            None,
            None,
            tokens[index] if tokens is not None else None,
            (hashes[index] or None) if hashes is not None else None,
        )
        for index, chunk_id in enumerate(ids)
    ]


def _hashes_from_documents(span: Span, count: int) -> list[str] | None:
    """Content hashes from the OpenInference document text, where it was exported (full mode).

    Online, duplicates are also found by content; the text of the first ``max_documents`` chunks
    travels in ``retrieval.documents.{i}.document.content``.
    """
    if _DOCUMENT_CONTENT_KEYS[0] not in span.attrs:
        return None
    get_str = span.get_str
    keys = _DOCUMENT_CONTENT_KEYS if count <= len(_DOCUMENT_CONTENT_KEYS) else [_document_content_key(index) for index in range(count)]
    hashes = []
    for index in range(count):
        text = get_str(keys[index])
        hashes.append(content_hash(text) if text is not None else "")
    return hashes


def _document_content_key(index: int) -> str:
    return names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_CONTENT)


_DOCUMENT_CONTENT_KEYS = [_document_content_key(index) for index in range(64)]


def _recorded_context(span: Span) -> tuple[list[Placement], bool] | None:
    """The placements recorded by an assemble span, and whether their token counts are known."""
    ids = span.get_list(names.RAG_CONTEXT_CHUNK_IDS)
    if ids is None:
        return None
    count = len(ids)
    aligned = span.get_aligned
    positions = aligned(names.RAG_CONTEXT_POSITIONS, int, count) or range(1, count + 1)
    labels = aligned(names.RAG_CONTEXT_LABELS, str, count)
    starts = aligned(names.RAG_CONTEXT_CHAR_STARTS, int, count)
    ends = aligned(names.RAG_CONTEXT_CHAR_ENDS, int, count)
    tokens = aligned(names.RAG_CONTEXT_CHUNK_TOKENS, int, count)
    truncated = aligned(names.RAG_CONTEXT_TRUNCATED, bool, count)
    messages = aligned(names.RAG_CONTEXT_MESSAGE_INDEXES, int, count)
    hashes = aligned(names.RAG_CONTEXT_CONTENT_HASHES, str, count)
    # Placement(chunk_id, position, label, start, end, tokens, truncated, message_index, content_hash),
    # positionally (the hot path)
    placements = [
        Placement(
            str(chunk_id),
            positions[i],
            labels[i] if labels else "",
            starts[i] if starts else 0,
            ends[i] if ends else 0,
            tokens[i] if tokens else 0,
            truncated[i] if truncated else False,
            (messages[i] if messages[i] >= 0 else None) if messages else None,
            (hashes[i] or None) if hashes else None,
        )
        for i, chunk_id in enumerate(ids)
    ]
    return placements, tokens is not None


def _context_of(
    generation: Span, contexts: list[tuple[Span, list[Placement], bool]], cited: list[str]
) -> tuple[Span, list[Placement], bool] | None:
    """The assembly an answer was scored against online.

    The SDK records it: ``rag.generation.context_span_id`` is the hex span id of that assemble
    span. When it is set, that span is the answer, or, if it is not among this run's readable
    assemblies (lost spans or attributes), the context is unknown: guessing another one could
    score the answer against the wrong chunks.

    Traces from SDK versions without the attribute fall back to inference: online that was
    ``generate(context=...)`` or else the latest assembly finished before the generation; so the
    latest assembly that ended first, unless the generation's recorded |C| and citations point at
    an earlier one.
    """
    pointed = generation.get_str(names.RAG_GENERATION_CONTEXT_SPAN_ID)
    if pointed:
        pointed = pointed.lower()
        for candidate in contexts:
            if candidate[0].span_id.lower() == pointed:
                return candidate
        return None
    for candidate in contexts:  # generated inside the open assemble block: that assembly
        if candidate[0].span_id == generation.parent_id:
            return candidate
    before = [c for c in contexts if _end_order(c[0]) <= _end_order(generation)]
    if not before:
        return None
    recorded_size = generation.get_int(names.metric_attribute(names.METRIC_IN_CONTEXT))

    def fits(candidate: tuple[Span, list[Placement], bool]) -> bool:
        ids = {p.chunk_id for p in candidate[1]}
        size_ok = recorded_size is None or len(ids) == recorded_size
        return size_ok and all(c in ids for c in cited)

    for candidate in reversed(before):
        if fits(candidate):
            return candidate
    return before[-1]


def _retrieval_facts(
    row: Row,
    retrievals: list[list[Chunk]],
    result: Figures,
    answers: Sequence[Answer],
    unanswered: Sequence[Sequence[Placement]],
) -> None:
    row.retrievals = len(retrievals)
    row.empty_retrievals = sum(1 for r in retrievals if not r)
    row.retrieved_items = sum(len(r) for r in retrievals)
    best: dict[str, int] = {}
    for retrieval in retrievals:
        for chunk in retrieval:
            known = best.get(chunk.id)
            if known is None or chunk.rank < known:
                best[chunk.id] = chunk.rank
    row.retrieved_ids = sorted(best, key=best.__getitem__)  # stable: equal ranks stay in first-seen order
    placed = {p.chunk_id for a in answers if a.placements is not None for p in a.placements}
    placed.update(p.chunk_id for placements in unanswered for p in placements)
    depths = [best[c] for c in placed if c in best]
    row.placed_depth = max(depths) if depths else None


def _mismatches(pipeline: Span, result: Figures, retrievals: list[list[Chunk]]) -> list[str]:
    """Figures recorded online (on the pipeline span, or the one answer span) that differ from the recomputed ones."""
    differ = []
    attrs, values = pipeline.attrs, result.values
    for metric, key in _METRIC_KEYS:
        if key not in attrs:
            continue
        recorded = pipeline.get(key) if metric == names.METRIC_CITED_POSITIONS else pipeline.get_number(key)
        computed = values.get(metric)
        if type(recorded) is type(computed) and recorded == computed:
            continue  # _same's first test, inline: the common case
        if not _same(recorded, computed):
            differ.append(metric)
    if differ == [names.METRIC_DUPLICATE_CHUNKS]:
        hint = ""
        if not any(c.content_hash for r in retrievals for c in r):
            hint = " (content duplicates are only visible offline in hash mode or with document text exported)"
        pipeline.source.diagnostics.warn(
            "figures differ",
            pipeline.where,
            f"trace {pipeline.trace_id}: duplicate_chunks recomputed from the attributes differs from the value recorded online{hint}",
        )
    elif differ:
        pipeline.source.diagnostics.warn(
            "figures differ",
            pipeline.where,
            f"trace {pipeline.trace_id}: {', '.join(differ)} recomputed from the exported spans differ from the values "
            "recorded online: spans or attributes of this run are missing; it is not measured",
        )
    return differ


def _same(recorded: Any, computed: Any) -> bool:
    if type(recorded) is type(computed) and recorded == computed:
        return True  # the common case; NaN and near-equal floats go on below
    if isinstance(recorded, list) or isinstance(computed, list):
        return list(recorded or ()) == list(computed or ())
    if isinstance(recorded, (int, float)) and isinstance(computed, (int, float)):
        return math.isclose(recorded, computed, rel_tol=1e-9, abs_tol=1e-12)
    return recorded == computed


def _not_measurable(row: Row, reason: str) -> None:
    """Keep the sizes, drop every ratio: a partial trace must not look like a measurement."""
    for metric in names.PROXY_METRICS + (names.METRIC_WASTED_CONTEXT_TOKENS, names.METRIC_CITED_POSITIONS):
        row.figures.pop(metric, None)
    if reason not in row.status:
        row.status.insert(0, reason)


# --- other instrumentations -----------------------------------------------------------------------
def _foreign_row(trace: Trace) -> Row:
    spans = trace.spans
    roots = [s for s in spans if s.local_root]
    anchor = min(roots or spans, key=lambda s: s.start or 0)
    row = Row(trace.trace_id, anchor.span_id, anchor.where, time=anchor.start, inferred=True)
    row.source = _source_of(spans)
    row.pipeline = (
        anchor.get_str(names.TRACELOOP_WORKFLOW_NAME) or anchor.get_str(names.GEN_AI_WORKFLOW_NAME) or anchor.name or None
    )
    query = anchor.get_str(names.OI_INPUT_VALUE) if roots else None

    ordered = sorted(spans, key=_end_order)
    retrievals: list[list[Chunk]] = []
    unreadable = 0
    generations: list[Span] = []
    for span in ordered:
        documents = _documents(span)
        if documents is not None:
            chunks = []
            for item in documents:
                chunk = to_chunk(item, len(chunks) + 1)
                if chunk is None:
                    unreadable += 1
                else:
                    chunks.append(chunk)
            retrievals.append(chunks)
            top_k = span.get_int(names.GEN_AI_RETRIEVAL_TOP_K) or span.get_int(names.DB_VECTOR_QUERY_TOP_K)
            if top_k is not None:
                row.top_k = max(row.top_k or 0, top_k)
            if query is None:
                query = span.get_str(names.GEN_AI_RETRIEVAL_QUERY_TEXT) or span.get_str(names.OI_INPUT_VALUE)
        elif _is_generation(span):
            generations.append(span)
    row.query = query
    if row.source == SOURCE_UNKNOWN and not retrievals and not generations:
        row.status = [STATUS_NO_RAG_SPANS]
        return row

    answers, contexts, reason = _infer(retrievals, generations, row)
    result = compute(retrievals, answers, contexts=contexts, unreadable=unreadable)
    _retrieval_facts(row, retrievals, result, answers, contexts)
    row.figures, row.status = result.values, list(result.status)
    if reason is not None:
        row.status = [s for s in row.status if s not in ("no_context", "no_answer")]
        _not_measurable(row, reason)
    elif not trace.has_root:
        _not_measurable(row, STATUS_INCOMPLETE)
    return row


def _source_of(spans: Iterable[Span]) -> str:
    found = SOURCE_UNKNOWN
    for span in spans:
        attrs = span.attrs
        if names.OI_SPAN_KIND in attrs:
            return SOURCE_OPENINFERENCE
        if names.TRACELOOP_SPAN_KIND in attrs or names.LLM_REQUEST_TYPE in attrs or _indexed_key(names.GEN_AI_PROMPT, 0, names.LEGACY_MESSAGE_CONTENT) in attrs:
            found = SOURCE_OPENLLMETRY
        elif found == SOURCE_UNKNOWN and names.GEN_AI_OPERATION_NAME in attrs:
            found = SOURCE_GEN_AI
    return found


def _indexed_key(prefix: str, index: int, suffix: str) -> str:
    return names.indexed(prefix, index, suffix)


def _documents(span: Span) -> list[dict[str, Any]] | None:
    """The retrieved documents of a retrieval span of any known vocabulary, or None."""
    attrs = span.attrs
    kind = span.get(names.OI_SPAN_KIND)
    if kind == names.OI_KIND_RERANKER:
        return None
    first_id = names.indexed(names.OI_RETRIEVAL_DOCUMENTS, 0, names.OI_DOCUMENT_ID)
    first_content = names.indexed(names.OI_RETRIEVAL_DOCUMENTS, 0, names.OI_DOCUMENT_CONTENT)
    if kind == names.OI_KIND_RETRIEVER or first_id in attrs or first_content in attrs:
        documents = []
        for index in range(_MAX_INDEXED):
            keys = [names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, suffix) for suffix in (names.OI_DOCUMENT_ID, names.OI_DOCUMENT_CONTENT, names.OI_DOCUMENT_SCORE)]
            if not any(key in attrs for key in keys):
                break
            documents.append({"id": span.get(keys[0]), "content": span.get(keys[1]), "score": span.get(keys[2])})
        return documents
    if names.GEN_AI_RETRIEVAL_DOCUMENTS in attrs or span.get(names.GEN_AI_OPERATION_NAME) == names.OP_RETRIEVAL:
        raw = span.get(names.GEN_AI_RETRIEVAL_DOCUMENTS)
        parsed = _json(raw, span, names.GEN_AI_RETRIEVAL_DOCUMENTS) if isinstance(raw, str) else raw
        if isinstance(parsed, list):
            return [item for item in parsed if item is not None]
        return [] if raw is None and names.GEN_AI_RETRIEVAL_DOCUMENTS not in attrs else None
    if names.DB_SYSTEM in attrs and span.events:
        documents = []
        for event in span.event_attributes(names.DB_QUERY_RESULT_EVENT):
            ids, texts = event.get(names.DB_QUERY_RESULT_ID), event.get(names.DB_QUERY_RESULT_DOCUMENT)
            scores = event.get(names.DB_QUERY_RESULT_SCORE)
            if scores is None:
                scores = event.get(names.DB_QUERY_RESULT_DISTANCE)
            if isinstance(ids, list):  # one event holding parallel lists
                for index, chunk_id in enumerate(ids):
                    documents.append({"id": chunk_id, "content": _at(texts, index), "score": _at(scores, index)})
            else:
                documents.append({"id": ids, "content": texts, "score": scores})
        return documents if documents else None
    return None


def _at(values: Any, index: int) -> Any:
    return values[index] if isinstance(values, list) and index < len(values) else None


def _json(text: Any, span: Span, key: str) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        span.source.diagnostics.warn("bad attribute", span.where, f"span {span.span_id}: {key} is not valid JSON; ignored")
        return None


def _is_generation(span: Span) -> bool:
    attrs = span.attrs
    if span.get(names.OI_SPAN_KIND) == names.OI_KIND_LLM:
        return True
    if span.get(names.GEN_AI_OPERATION_NAME) in names.GENERATION_OPERATIONS:
        return True
    if span.get(names.LLM_REQUEST_TYPE) in ("chat", "completion"):
        return True
    return (
        names.GEN_AI_INPUT_MESSAGES in attrs
        or _indexed_key(names.GEN_AI_PROMPT, 0, names.LEGACY_MESSAGE_CONTENT) in attrs
        or _indexed_key(names.OI_LLM_INPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT) in attrs
    )


def _messages_from_indexed(span: Span, prefix: str, role_key: str, content_key: str) -> list[dict[str, Any]] | None:
    messages = []
    for index in range(_MAX_INDEXED):
        content = span.get(names.indexed(prefix, index, content_key))
        role = span.get(names.indexed(prefix, index, role_key))
        if content is None and role is None:
            break
        messages.append({"role": role if isinstance(role, str) else "user", "content": content if isinstance(content, str) else ""})
    return messages or None


def _genai_messages(span: Span, key: str) -> list[dict[str, Any]] | None:
    """GenAI ``{role, parts: [{type: text, content}]}`` messages (or ``{role, content}``) as chat messages."""
    parsed = _json(span.get(key), span, key) if key in span.attrs else None
    if not isinstance(parsed, list):
        return None
    messages = []
    for message in parsed:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if not isinstance(content, str):
            pieces = []
            for part in message.get("parts") or ():
                if isinstance(part, dict) and isinstance(part.get("content"), str):
                    pieces.append(part["content"])
            content = "\n".join(pieces)
        messages.append({"role": str(message.get("role") or "user"), "content": content})
    return messages or None


def _prompt(span: Span) -> Any:
    """The prompt of a model call: chat messages or a string, or None."""
    found = (
        _messages_from_indexed(span, names.OI_LLM_INPUT_MESSAGES, names.OI_MESSAGE_ROLE, names.OI_MESSAGE_CONTENT)
        or _genai_messages(span, names.GEN_AI_INPUT_MESSAGES)
        or _messages_from_indexed(span, names.GEN_AI_PROMPT, names.LEGACY_MESSAGE_ROLE, names.LEGACY_MESSAGE_CONTENT)
    )
    if found is not None:
        return found
    value = span.get(names.OI_INPUT_VALUE)
    if isinstance(value, str) and span.get(names.OI_INPUT_MIME_TYPE) == names.MIME_JSON:
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        messages = parsed.get("messages") if isinstance(parsed, dict) else parsed
        if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
            return [{"role": str(m.get("role") or "user"), "content": m.get("content") if isinstance(m.get("content"), str) else ""} for m in messages]
    return value if isinstance(value, str) else None


def _output(span: Span) -> str | None:
    for messages in (
        _messages_from_indexed(span, names.OI_LLM_OUTPUT_MESSAGES, names.OI_MESSAGE_ROLE, names.OI_MESSAGE_CONTENT),
        _genai_messages(span, names.GEN_AI_OUTPUT_MESSAGES),
        _messages_from_indexed(span, names.GEN_AI_COMPLETION, names.LEGACY_MESSAGE_ROLE, names.LEGACY_MESSAGE_CONTENT),
    ):
        if messages:
            return "\n".join(m["content"] for m in messages if m["content"])
    value = span.get(names.OI_OUTPUT_VALUE)
    return value if isinstance(value, str) else None


def _prompt_size(prompt: Any) -> int:
    if isinstance(prompt, str):
        return len(prompt)
    return sum(len(m.get("content") or "") for m in prompt)


def _infer(
    retrievals: list[list[Chunk]], generations: list[Span], row: Row
) -> tuple[list[Answer], list[list[Placement]], str | None]:
    """Answers (and unanswered contexts) inferred by locating chunk text in the prompts.

    Returns the reason the figures can't be inferred, when they can't.
    """
    if not retrievals:
        return [], [], None  # compute says no_retrieval
    unique: dict[str, Chunk] = {}
    for retrieval in retrievals:
        for chunk in retrieval:
            if chunk.content and chunk.id not in unique:
                unique[chunk.id] = chunk
    if not any(retrievals):
        return [], [], None  # compute says empty_retrieval
    if not unique:
        return [], [], STATUS_NO_CHUNK_TEXT
    chunks = sorted(unique.values(), key=lambda c: c.rank)

    located = []  # (generation span, record)
    too_large = False
    for span in generations:
        prompt = _prompt(span)
        if prompt is None:
            continue
        if _prompt_size(prompt) > MAX_PROMPT_CHARS:
            too_large = True
            span.source.diagnostics.warn(
                "huge attribute",
                span.where,
                f"span {span.span_id}: prompt of {_prompt_size(prompt):,} characters is too large to search for chunks; skipped",
            )
            continue
        located.append((span, locate(chunks, prompt)))
    if not located:
        return [], [], STATUS_PROMPT_TOO_LARGE if too_large else STATUS_NO_PROMPT

    with_chunks = [(span, record) for span, record in located if record.placements]
    chosen = with_chunks or [located[-1]]
    answers: list[Answer] = []
    contexts: list[list[Placement]] = []
    for span, record in chosen:
        text = _output(span)
        if text is None:
            contexts.append(record.placements)
            continue
        citations = parse_citations(text, record.label_map())
        answers.append(Answer(record.placements, citations.cited_ids, citations.invalid_count))
        row.answers += 1
        if not citations.conformant:
            row.nonconformant += 1
    return answers, ([] if answers else contexts), None
