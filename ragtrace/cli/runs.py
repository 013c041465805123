"""One run's chunks for the report's drill-down: rank order, where each landed, cited, why dropped.

Built only for the runs a report shows, from what their row kept of the trace
(``Row.sources``): the rebuilt retrievals, answers and assemble spans, so the report path does no
work for it on the runs it does not show.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._internal.names import RAG_CONTEXT_DROPPED_IDS, RAG_CONTEXT_DROPPED_REASONS
from .row import Row

# rag.context.dropped_reasons values, as a reader would say them (others are the user's own words)
DROP_TEXT = {
    "over_budget": "over the token budget",
    "duplicate": "duplicate of a chunk already in the prompt",
    "filtered": "filtered out",
    "reranked_out": "reranked out",
    "not_added": "never offered to the assembly",
    "not_found": "text not found in the prompt",
    "not_rendered": "added after the prompt was rendered",
}
NO_REASON = "not in the prompt (no reason recorded)"


@dataclass(frozen=True, slots=True)
class ChunkLine:
    chunk_id: str
    rank: int | None  # best retrieval rank; None: in the prompt but never retrieved
    position: int | None  # prompt position; None: did not land
    cited: bool
    dropped: str | None  # why it did not land, when it did not


def chunk_lines(row: Row) -> list[ChunkLine] | None:
    """The run's chunks, best rank first (then the unretrieved ones in prompt order); None when the
    row kept no record of them (rows rebuilt from other instrumentations' spans)."""
    if row.sources is None:
        return None
    retrievals, answers, contexts, assemblies = row.sources
    rank: dict[str, int] = {}
    for retrieval in retrievals:
        for chunk in retrieval:
            if chunk.id not in rank or chunk.rank < rank[chunk.id]:
                rank[chunk.id] = chunk.rank
    position: dict[str, int] = {}
    shown = [a.placements for a in answers if a.placements is not None] if answers else contexts
    for placements in shown:
        for placed in placements:
            if placed.chunk_id not in position or placed.position < position[placed.chunk_id]:
                position[placed.chunk_id] = placed.position
    cited = {chunk_id for answer in answers for chunk_id in answer.cited_ids}
    reasons: dict[str, str] = {}
    for span, _, _ in assemblies:
        ids = span.get_list(RAG_CONTEXT_DROPPED_IDS) or []
        why = span.get_aligned(RAG_CONTEXT_DROPPED_REASONS, str, len(ids)) or []
        for chunk_id, reason in zip(ids, why):
            reasons.setdefault(str(chunk_id), DROP_TEXT.get(reason, reason))
    retrieved = sorted(rank, key=rank.__getitem__)  # stable: equal ranks keep first-seen order
    unretrieved = sorted((c for c in position if c not in rank), key=position.__getitem__)
    return [
        ChunkLine(
            chunk_id,
            rank.get(chunk_id),
            position.get(chunk_id),
            chunk_id in cited,
            None if chunk_id in position else reasons.get(chunk_id, NO_REASON),
        )
        for chunk_id in retrieved + unretrieved
    ]
