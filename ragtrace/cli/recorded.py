"""What ragtrace's own spans recorded, read back: retrieved chunks, placements, the assembly each
answer was scored against, and the figures recorded online (compared with the recomputed ones).

Only what the figures are computed from is read; ``traces`` assembles the rows from it.
"""

from __future__ import annotations

import math
from typing import Any

from .._internal.core.figures import Figures, Placed, Retrieved
from .._internal.names import (
    EMITTED_METRICS,
    METRIC_CITED_POSITIONS,
    METRIC_DUPLICATE_CHUNKS,
    METRIC_IN_CONTEXT,
    OI_RETRIEVAL_DOCUMENTS,
    RAG_CONTEXT_CHUNK_IDS,
    RAG_CONTEXT_CHUNK_TOKENS,
    RAG_CONTEXT_POSITIONS,
    RAG_GENERATION_CONTEXT_SPAN_ID,
    RAG_RETRIEVAL_CHUNK_IDS,
    RAG_RETRIEVAL_CONTENT_HASHES,
    RAG_RETRIEVAL_FILE_IDS,
    RAG_RETRIEVAL_RANKS,
    REDACTED,
    document_keys,
    metric_attribute,
)
from .row import end_order
from .spans import Span

_METRIC_KEYS = tuple((metric, metric_attribute(metric)) for metric in EMITTED_METRICS)
_IN_CONTEXT_KEY = metric_attribute(METRIC_IN_CONTEXT)


def recorded_retrieval(span: Span) -> list[Retrieved] | None:
    ids = span.get_list(RAG_RETRIEVAL_CHUNK_IDS)
    if ids is None:
        return None
    count = len(ids)
    ranks = span.get_aligned(RAG_RETRIEVAL_RANKS, int, count) or range(1, count + 1)
    keys = span.get_aligned(RAG_RETRIEVAL_CONTENT_HASHES, str, count)  # hash mode
    if keys is None:
        keys = _text_keys(span, count)
    if keys is None:
        chunks = [RecordedChunk(str(chunk_id), ranks[index], None) for index, chunk_id in enumerate(ids)]
    else:
        chunks = [RecordedChunk(str(chunk_id), ranks[index], keys[index] or None) for index, chunk_id in enumerate(ids)]
    files = span.get_aligned(RAG_RETRIEVAL_FILE_IDS, str, count)  # a provider's results: the file of each
    if files is not None:
        for chunk, file_id in zip(chunks, files):
            chunk.file_id = file_id or None
    return chunks


def _text_keys(span: Span, count: int) -> list[str] | None:
    """Duplicate keys from the OpenInference document text, where it was exported (full mode).

    Online, duplicates are also found by content: by a hash of the text, which offline would only
    cost time, as equal texts have equal hashes. So the text itself is the key, after a NUL that
    keeps an empty text a key and every key apart from the hex digits of a recorded hash. The
    text of the first ``max_documents`` chunks travels in ``retrieval.documents.{i}.document.content``.
    A redact-mode export carries the ``[redacted]`` placeholder there: that is no text, so no key
    (every chunk would be a duplicate of every other).
    """
    if _DOCUMENT_CONTENT_KEYS[0] not in span.attrs:
        return None
    get_str = span.get_str
    names = _DOCUMENT_CONTENT_KEYS if count <= len(_DOCUMENT_CONTENT_KEYS) else _document_content_keys(count)
    keys = []
    for index in range(count):
        text = get_str(names[index])
        keys.append("\0" + text if text is not None and text != REDACTED else "")
    return keys


def _document_content_keys(count: int) -> list[str]:
    return [document_keys(OI_RETRIEVAL_DOCUMENTS, index)[2] for index in range(count)]


_DOCUMENT_CONTENT_KEYS = _document_content_keys(64)


def recorded_context(span: Span) -> tuple[list[Placed], bool] | None:
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

    __slots__ = ("id", "rank", "content_hash", "file_id")  # content_hash: a recorded hash, or a text key (see _text_keys)

    def __init__(self, chunk_id: str, rank: int, content_hash: str | None) -> None:
        self.id = chunk_id
        self.rank = rank
        self.content_hash = content_hash
        self.file_id: str | None = None  # rag.retrieval.file_ids, where recorded


class RecordedPlacement:
    """A placement as the report rebuilds it: only what the figures read (``figures.Placed``)."""

    __slots__ = ("chunk_id", "position", "tokens")

    def __init__(self, chunk_id: str, position: int, tokens: int) -> None:
        self.chunk_id = chunk_id
        self.position = position
        self.tokens = tokens


def context_of(
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


def mismatches(pipeline: Span, result: Figures, retrievals: list[list[Retrieved]]) -> list[str]:
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
