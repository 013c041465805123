"""One finished trace -> one row per pipeline run, with the figures of ``figures.compute``.

ragtrace's own spans carry what the figures are computed from (retrieved ids and ranks, recorded
placements, resolved citations), so the rows are rebuilt from those attributes and fed to the very
function the SDK used online: the same inputs give the same figures. Where the root span also
carries the figures recorded online, they are compared and any difference is reported. A root
that handed its answer to another process (``rag.pipeline.delegated``) is joined with that
process's ``pipeline_segment`` spans of the same trace: the row is recomputed from both sides and
checked against the segment's figures. Reading
those attributes back is ``recorded``'s job; this module groups spans into runs and assembles rows.

Traces from other instrumentations get their rows from ``foreign``, by inference; when even that
is impossible the row says why, and is not measurable: a trace ragtrace can't read never scores
as perfect. ``Row`` and what both share are in ``row``.
"""

from __future__ import annotations

from .._internal.core.figures import STATUS_CONTEXT_NOT_LOCATED, Answer, Placed, Retrieved, compute
from .._internal.names import (
    GEN_AI_RETRIEVAL_QUERY_TEXT,
    GEN_AI_RETRIEVAL_TOP_K,
    GEN_AI_WORKFLOW_NAME,
    INCLUSION_RECORDED,
    METRIC_CITED,
    METRIC_DUPLICATE_CHUNKS,
    METRIC_WASTED_CONTEXT_TOKENS,
    OI_INPUT_VALUE,
    CITATION_GRANULARITY_FILE,
    RAG_CITATION_CONFORMANT,
    RAG_CITATION_FILE_IDS,
    RAG_CITATION_FORMAT,
    RAG_CITATION_GRANULARITY,
    RAG_CITATION_IDS,
    RAG_CITATION_INVALID_COUNT,
    RAG_CITATION_OUT_OF_CONTEXT_COUNT,
    RAG_CITATION_STATUS,
    RAG_CONTENT_MODE,
    RAG_CONTEXT_INCLUSION_METHOD,
    RAG_GENERATION_ROLE,
    RAG_PIPELINE_ATTRIBUTE_PREFIX,
    RAG_PIPELINE_DELEGATED,
    RAG_QUERY_HASH,
    RAG_QUERY_ID,
    RAG_RETRIEVAL_RESULT_COUNT,
    RAG_OMITTED_ITEMS,
    RAG_STAGE,
    RAG_UNREADABLE_ITEMS,
    ROLE_ANSWER,
    STAGE_ASSEMBLE,
    STAGE_GENERATE,
    STAGE_PIPELINE,
    STAGE_RETRIEVE,
    STAGE_SEGMENT,
    metric_attribute,
)
from .foreign import foreign_row
from .row import (  # noqa: F401 - STATUS_ATTRIBUTES_LOST and Row are imported from here too
    STATUS_ATTRIBUTES_LOST,
    STATUS_INCOMPLETE,
    STATUS_SEGMENT_MISSING,
    STATUS_SPANS_MISSING,
    Row,
    end_order,
    not_measurable,
    retrieval_facts,
)
from .recorded import context_of, mismatches, recorded_context, recorded_retrieval
from .spans import Span, Trace

_CITED_KEY = metric_attribute(METRIC_CITED)
# the keys that start with the label prefix are exactly those in [_LABEL_FIRST, _LABEL_BEYOND)
_LABEL_FIRST = RAG_PIPELINE_ATTRIBUTE_PREFIX
_LABEL_BEYOND = _LABEL_FIRST[:-1] + chr(ord(_LABEL_FIRST[-1]) + 1)
_LABEL_START = len(_LABEL_FIRST)
_DELEGATED_KEY = RAG_PIPELINE_DELEGATED[_LABEL_START:]  # a mark, not one of the app's labels


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
    omitted = 0
    for span, stage in members:
        if stage != STAGE_RETRIEVE:
            continue
        chunks = recorded_retrieval(span)
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
        omitted += span.get_int(RAG_OMITTED_ITEMS) or 0

    contexts: list[tuple[Span, list[Placed], bool]] = []
    for span, stage in members:
        if stage != STAGE_ASSEMBLE:
            continue
        recorded = recorded_context(span)
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
        unmeasured = span.get_str(RAG_CITATION_STATUS)
        # a search that found nothing left the context unknown online: it is no empty context here either
        context = None if unmeasured == STATUS_CONTEXT_NOT_LOCATED else context_of(span, contexts, cited)
        if context is not None:
            used.append((context[1], context[2]))
            methods.add(context[0].get_str(RAG_CONTEXT_INCLUSION_METHOD) or INCLUSION_RECORDED)
        answers.append(
            Answer(
                placements=context[1] if context is not None else None,
                cited_ids=cited,
                invalid_citations=span.get_int(RAG_CITATION_INVALID_COUNT) or 0,
                out_of_context_citations=span.get_int(RAG_CITATION_OUT_OF_CONTEXT_COUNT) or 0,
                unmeasured=unmeasured,
                # citations that name files: the file-level figures count them
                cited_files=[str(f) for f in span.get_list(RAG_CITATION_FILE_IDS) or ()] if span.get_str(RAG_CITATION_GRANULARITY) == CITATION_GRANULARITY_FILE else None,
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
    result = compute(retrievals, answers, contexts=unanswered, unreadable=unreadable, omitted=omitted)
    tokens_known = all(known for _, known in used) if answers else all(known for _, _, known in contexts)
    if not tokens_known:
        result.values.pop(METRIC_WASTED_CONTEXT_TOKENS, None)
    retrieval_facts(row, retrievals, result, answers, unanswered)
    row.sources = (retrievals, answers, unanswered, contexts)
    row.figures, row.status = result.values, list(result.status)
    segments: list[Span] = []
    if pipeline is not None and pipeline.get_bool(RAG_PIPELINE_DELEGATED):
        # the answer was scored in another process (continue_pipeline): its segment, a descendant
        # of this root once both exports are read, recorded the figures; they must agree
        segments = [span for span, stage in members if stage == STAGE_SEGMENT]
        for segment in segments:
            row.mismatches += [m for m in mismatches(segment, result, retrievals) if m not in row.mismatches]
    elif pipeline is not None:
        row.mismatches = mismatches(pipeline, result, retrievals)
    elif len(answer_spans) == 1:  # outside a pipeline the answer span carries the trace's figures
        row.mismatches = mismatches(answer_spans[0], result, retrievals)
    if pipeline is not None and pipeline.get_bool(RAG_PIPELINE_DELEGATED) and not segments:
        not_measurable(row, STATUS_SEGMENT_MISSING)
    elif set(row.mismatches) - {METRIC_DUPLICATE_CHUNKS}:
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
            if isinstance(value, (str, int, float, bool)) and key[_LABEL_START:] != _DELEGATED_KEY:
                row.labels[key[_LABEL_START:]] = value
