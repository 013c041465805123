"""One finished trace -> one row per pipeline run, with the figures of ``figures.compute``.

ragtrace's own spans carry what the figures are computed from (retrieved ids and ranks, recorded
placements, resolved citations), so the rows are rebuilt from those attributes and fed to the very
function the SDK used online: the same inputs give the same figures. Where the root span also
carries the figures recorded online, they are compared and any difference is reported.

Traces from other instrumentations get their rows from ``foreign``, by inference; when even that
is impossible the row says why, and is not measurable: a trace ragtrace can't read never scores
as perfect. ``Row`` and what both share are in ``row``.
"""

from __future__ import annotations

import math
from typing import Any

from .._internal.figures import Answer, Figures, Placed, Retrieved, compute
from .._internal.names import (
    ALL_METRICS,
    GEN_AI_RETRIEVAL_QUERY_TEXT,
    GEN_AI_RETRIEVAL_TOP_K,
    GEN_AI_WORKFLOW_NAME,
    INCLUSION_RECORDED,
    METRIC_CITED,
    METRIC_CITED_POSITIONS,
    METRIC_DUPLICATE_CHUNKS,
    METRIC_IN_CONTEXT,
    METRIC_WASTED_CONTEXT_TOKENS,
    OI_INPUT_VALUE,
    OI_RETRIEVAL_DOCUMENTS,
    RAG_CITATION_CONFORMANT,
    RAG_CITATION_FORMAT,
    RAG_CITATION_IDS,
    RAG_CITATION_INVALID_COUNT,
    RAG_CITATION_OUT_OF_CONTEXT_COUNT,
    RAG_CITATION_STATUS,
    RAG_CONTENT_MODE,
    RAG_CONTEXT_CHUNK_IDS,
    RAG_CONTEXT_CHUNK_TOKENS,
    RAG_CONTEXT_INCLUSION_METHOD,
    RAG_CONTEXT_POSITIONS,
    RAG_GENERATION_CONTEXT_SPAN_ID,
    RAG_GENERATION_ROLE,
    RAG_PIPELINE_ATTRIBUTE_PREFIX,
    RAG_QUERY_HASH,
    RAG_QUERY_ID,
    RAG_RETRIEVAL_CHUNK_IDS,
    RAG_RETRIEVAL_CONTENT_HASHES,
    RAG_RETRIEVAL_RANKS,
    RAG_RETRIEVAL_RESULT_COUNT,
    RAG_STAGE,
    RAG_UNREADABLE_ITEMS,
    ROLE_ANSWER,
    STAGE_ASSEMBLE,
    STAGE_GENERATE,
    STAGE_PIPELINE,
    STAGE_RETRIEVE,
    document_keys,
    metric_attribute,
)
from .foreign import foreign_row
from .row import (  # noqa: F401 - STATUS_ATTRIBUTES_LOST and Row are imported from here too
    STATUS_ATTRIBUTES_LOST,
    STATUS_INCOMPLETE,
    STATUS_SPANS_MISSING,
    Row,
    end_order,
    not_measurable,
    retrieval_facts,
)
from .spans import Span, Trace

_METRIC_KEYS = tuple((metric, metric_attribute(metric)) for metric in ALL_METRICS)
_CITED_KEY = metric_attribute(METRIC_CITED)
_IN_CONTEXT_KEY = metric_attribute(METRIC_IN_CONTEXT)
# the keys that start with the label prefix are exactly those in [_LABEL_FIRST, _LABEL_BEYOND)
_LABEL_FIRST = RAG_PIPELINE_ATTRIBUTE_PREFIX
_LABEL_BEYOND = _LABEL_FIRST[:-1] + chr(ord(_LABEL_FIRST[-1]) + 1)
_LABEL_START = len(_LABEL_FIRST)


# --- trace -> runs --------------------------------------------------------------------------------
def rows_of(trace: Trace) -> list[Row]:
    """The rows of one trace: one per ragtrace pipeline run, or one for the whole trace (none when
    it holds no retrieval or model call: index building, other work)."""
    spans = trace.spans
    stages: list[tuple[Span, str]] = []
    for span in spans:
        stage = span.get_str(RAG_STAGE)
        if stage is not None:
            stages.append((span, stage))
    if not stages:
        row = foreign_row(trace)
        return [row] if row is not None else []

    by_id: dict[str, Span] = {}  # built when a span's parent is not its pipeline (see below)
    pipelines = [span for span, stage in stages if stage == STAGE_PIPELINE]
    pipeline_ids = {span.span_id for span in pipelines}
    members: dict[str, list[tuple[Span, str]]] = {span.span_id: [] for span in pipelines}
    implicit: list[tuple[Span, str]] = []
    owner_cache: dict[str, str | None] = {}
    for span, stage in stages:
        if stage == STAGE_PIPELINE:
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
    members.sort(key=lambda item: end_order(item[0]))
    lost = False

    retrievals: list[list[Retrieved]] = []
    unreadable = 0
    for span, stage in members:
        if stage != STAGE_RETRIEVE:
            continue
        chunks = _recorded_retrieval(span)
        top_k = span.get_int(GEN_AI_RETRIEVAL_TOP_K)
        if top_k is not None:
            row.top_k = max(row.top_k or 0, top_k)
        if row.query is None:
            row.query = span.get_str(GEN_AI_RETRIEVAL_QUERY_TEXT)
        if chunks is None:
            if span.has(RAG_RETRIEVAL_RESULT_COUNT):
                lost = True
            continue
        retrievals.append(chunks)
        unreadable += span.get_int(RAG_UNREADABLE_ITEMS) or 0

    contexts: list[tuple[Span, list[Placed], bool]] = []
    for span, stage in members:
        if stage != STAGE_ASSEMBLE:
            continue
        recorded = _recorded_context(span)
        if recorded is None:
            lost = True
            continue
        contexts.append((span, *recorded))

    answers: list[Answer] = []
    answer_spans: list[Span] = []
    methods: set[str] = set()  # how the contexts the figures rest on were known
    used: list[tuple[list[Placed], bool]] = []
    for span, stage in members:
        if stage != STAGE_GENERATE or span.get_str(RAG_GENERATION_ROLE) != ROLE_ANSWER:
            continue
        if not (span.has(RAG_CITATION_FORMAT) or span.has(_CITED_KEY) or span.has(RAG_CITATION_STATUS)):
            continue  # an answer generation that recorded no output: not an answer online either
        cited = [str(c) for c in span.get_list(RAG_CITATION_IDS) or ()]
        context = _context_of(span, contexts, cited)
        if context is not None:
            used.append((context[1], context[2]))
            methods.add(context[0].get_str(RAG_CONTEXT_INCLUSION_METHOD) or INCLUSION_RECORDED)
        answers.append(
            Answer(
                placements=context[1] if context is not None else None,
                cited_ids=cited,
                invalid_citations=span.get_int(RAG_CITATION_INVALID_COUNT) or 0,
                out_of_context_citations=span.get_int(RAG_CITATION_OUT_OF_CONTEXT_COUNT) or 0,
                unmeasured=span.get_str(RAG_CITATION_STATUS),
            )
        )
        answer_spans.append(span)
        row.answers += 1
        if span.get_bool(RAG_CITATION_CONFORMANT) is False:
            row.nonconformant += 1

    unanswered = [] if answers else [placements for _, placements, _ in contexts]
    if not answers:
        methods.update(span.get_str(RAG_CONTEXT_INCLUSION_METHOD) or INCLUSION_RECORDED for span, _, _ in contexts)
    row.inclusion = ",".join(sorted(methods)) or None
    result = compute(retrievals, answers, contexts=unanswered, unreadable=unreadable)
    tokens_known = all(known for _, known in used) if answers else all(known for _, _, known in contexts)
    if not tokens_known:
        result.values.pop(METRIC_WASTED_CONTEXT_TOKENS, None)
    retrieval_facts(row, retrievals, result, answers, unanswered)
    row.sources = (retrievals, answers, unanswered, contexts)
    row.figures, row.status = result.values, list(result.status)
    if pipeline is not None:
        row.mismatches = _mismatches(pipeline, result, retrievals)
    elif len(answer_spans) == 1:  # outside a pipeline the answer span carries the trace's figures
        row.mismatches = _mismatches(answer_spans[0], result, retrievals)
    if set(row.mismatches) - {METRIC_DUPLICATE_CHUNKS}:
        not_measurable(row, STATUS_SPANS_MISSING)
    elif lost:
        not_measurable(row, STATUS_ATTRIBUTES_LOST)
    elif pipeline is None and not trace.has_root:
        not_measurable(row, STATUS_INCOMPLETE)
    return row


def _pipeline_facts(row: Row, pipeline: Span) -> None:
    row.pipeline = pipeline.get_str(GEN_AI_WORKFLOW_NAME)
    row.query_id = pipeline.get_str(RAG_QUERY_ID)
    row.query_hash = pipeline.get_str(RAG_QUERY_HASH)
    row.content_mode = pipeline.get_str(RAG_CONTENT_MODE)
    row.query = pipeline.get_str(OI_INPUT_VALUE)
    for key in pipeline.attrs:
        if _LABEL_FIRST <= key < _LABEL_BEYOND:  # key.startswith(prefix), without a method call per key
            value = pipeline.get(key)
            if isinstance(value, (str, int, float, bool)):
                row.labels[key[_LABEL_START:]] = value


def _recorded_retrieval(span: Span) -> list[Retrieved] | None:
    ids = span.get_list(RAG_RETRIEVAL_CHUNK_IDS)
    if ids is None:
        return None
    count = len(ids)
    ranks = span.get_aligned(RAG_RETRIEVAL_RANKS, int, count) or range(1, count + 1)
    keys = span.get_aligned(RAG_RETRIEVAL_CONTENT_HASHES, str, count)  # hash mode
    if keys is None:
        keys = _text_keys(span, count)
    if keys is None:
        return [RecordedChunk(str(chunk_id), ranks[index], None) for index, chunk_id in enumerate(ids)]
    return [RecordedChunk(str(chunk_id), ranks[index], keys[index] or None) for index, chunk_id in enumerate(ids)]


def _text_keys(span: Span, count: int) -> list[str] | None:
    """Duplicate keys from the OpenInference document text, where it was exported (full mode).

    Online, duplicates are also found by content: by a hash of the text, which offline would only
    cost time, as equal texts have equal hashes. So the text itself is the key, after a NUL that
    keeps an empty text a key and every key apart from the hex digits of a recorded hash. The
    text of the first ``max_documents`` chunks travels in ``retrieval.documents.{i}.document.content``.
    """
    if _DOCUMENT_CONTENT_KEYS[0] not in span.attrs:
        return None
    get_str = span.get_str
    names = _DOCUMENT_CONTENT_KEYS if count <= len(_DOCUMENT_CONTENT_KEYS) else _document_content_keys(count)
    keys = []
    for index in range(count):
        text = get_str(names[index])
        keys.append("\0" + text if text is not None else "")
    return keys


def _document_content_keys(count: int) -> list[str]:
    return [document_keys(OI_RETRIEVAL_DOCUMENTS, index)[2] for index in range(count)]


_DOCUMENT_CONTENT_KEYS = _document_content_keys(64)


def _recorded_context(span: Span) -> tuple[list[Placed], bool] | None:
    """The placements recorded by an assemble span, and whether their token counts are known.

    Only what the figures are computed from is read (ids, positions, tokens): labels, offsets,
    truncation, message indexes and hashes are part of the record, not of any figure.
    """
    ids = span.get_list(RAG_CONTEXT_CHUNK_IDS)
    if ids is None:
        return None
    count = len(ids)
    positions = span.get_aligned(RAG_CONTEXT_POSITIONS, int, count) or range(1, count + 1)
    tokens = span.get_aligned(RAG_CONTEXT_CHUNK_TOKENS, int, count)
    if tokens is None:
        placements = [RecordedPlacement(str(chunk_id), positions[i], 0) for i, chunk_id in enumerate(ids)]
    else:
        placements = [RecordedPlacement(str(chunk_id), positions[i], tokens[i]) for i, chunk_id in enumerate(ids)]
    return placements, tokens is not None


# Plain classes rather than a ``Chunk`` and a ``Placement``: the report builds one for every chunk
# of every trace, and a dataclass's generated ``__init__`` is interpreted code even in the compiled
# build (a frozen one, like ``Placement``'s, is about five times slower still).
class RecordedChunk:
    """A retrieved chunk as the report rebuilds it: only what the figures read (``figures.Retrieved``)."""

    __slots__ = ("id", "rank", "content_hash")  # content_hash: a recorded hash, or a text key (see _text_keys)

    def __init__(self, chunk_id: str, rank: int, content_hash: str | None) -> None:
        self.id = chunk_id
        self.rank = rank
        self.content_hash = content_hash


class RecordedPlacement:
    """A placement as the report rebuilds it: only what the figures read (``figures.Placed``)."""

    __slots__ = ("chunk_id", "position", "tokens")

    def __init__(self, chunk_id: str, position: int, tokens: int) -> None:
        self.chunk_id = chunk_id
        self.position = position
        self.tokens = tokens


def _context_of(
    generation: Span, contexts: list[tuple[Span, list[Placed], bool]], cited: list[str]
) -> tuple[Span, list[Placed], bool] | None:
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
    pointed = generation.get_str(RAG_GENERATION_CONTEXT_SPAN_ID)
    if pointed:
        pointed = pointed.lower()
        for candidate in contexts:
            if candidate[0].span_id.lower() == pointed:
                return candidate
        return None
    for candidate in contexts:  # generated inside the open assemble block: that assembly
        if candidate[0].span_id == generation.parent_id:
            return candidate
    before = [c for c in contexts if end_order(c[0]) <= end_order(generation)]
    if not before:
        return None
    recorded_size = generation.get_int(_IN_CONTEXT_KEY)

    def fits(candidate: tuple[Span, list[Placed], bool]) -> bool:
        ids = {p.chunk_id for p in candidate[1]}
        size_ok = recorded_size is None or len(ids) == recorded_size
        return size_ok and all(c in ids for c in cited)

    for candidate in reversed(before):
        if fits(candidate):
            return candidate
    return before[-1]


def _mismatches(pipeline: Span, result: Figures, retrievals: list[list[Retrieved]]) -> list[str]:
    """Figures recorded online (on the pipeline span, or the one answer span) that differ from the recomputed ones."""
    differ = []
    attrs, values = pipeline.attrs, result.values
    for metric, key in _METRIC_KEYS:
        if key not in attrs:
            continue
        recorded = pipeline.get(key) if metric == METRIC_CITED_POSITIONS else pipeline.get_number(key)
        computed = values.get(metric)
        if type(recorded) is type(computed) and recorded == computed:
            continue  # _same's first test, inline: the common case
        if not _same(recorded, computed):
            differ.append(metric)
    if differ == [METRIC_DUPLICATE_CHUNKS]:
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
