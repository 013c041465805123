"""Per-trace figures: a pure function of retrieved chunks, in-context placements and citations.

R = unique retrieved chunks (union over retrievals, keyed by id, best rank kept), C = in-context
chunks, K = validly cited chunks. A figure that can't be measured is left out and the reason is
added to ``status``: a default 0 or 1 would look like a measurement. The CLI reuses this module on
exported traces, so online and offline figures can't disagree.

File granularity. Where an answer's citations name files, not chunks (``Answer.cited_files``:
OpenAI's ``file_citation``), the files are counted too: F_R and F_C are the files of the chunks of
R and C (each retrieved chunk's ``file_id``), F_K the cited files with a chunk in context (for an
answer beside it whose citations name chunks: the files of its cited chunks). These figures stay
exact when a cited file has several chunks in context, where the chunk-counting ones are not
measurable (``citations_file_level``). A chunk whose file is not known leaves them out
(``files_unknown``): no file-level figure rests on a guess.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, Union

from .vocabulary import (  # the status reasons live in vocabulary.py; imported here for the modules that set them
    STATUS_ANSWER_UNREADABLE,
    STATUS_CITATION_PATTERN_FAILED,
    STATUS_CITATIONS_FILE_LEVEL,
    STATUS_CITED_REFERENCES_ONLY,
    STATUS_CITATIONS_UNRESOLVED,
    STATUS_CONTEXT_NOT_LOCATED,
    STATUS_EMPTY_CONTEXT,
    STATUS_EMPTY_RETRIEVAL,
    STATUS_FILES_UNKNOWN,
    STATUS_INTERNAL_ERROR,
    STATUS_NO_ANSWER,
    STATUS_NO_CONTEXT,
    STATUS_NO_RETRIEVAL,
    STATUS_RESULTS_NOT_INCLUDED,
    STATUS_RETRIEVAL_TRUNCATED,
    STATUS_SOURCE_UNREADABLE,
    STATUS_UNREADABLE_RETRIEVAL,
    METRIC_CITED,
    METRIC_CITED_FILES,
    METRIC_CITED_POSITIONS,
    METRIC_CONTEXT_PRECISION,
    METRIC_CONTEXT_UTILIZATION,
    METRIC_DUPLICATE_CHUNKS,
    METRIC_FILE_CONTEXT_UTILIZATION,
    METRIC_FILE_RECALL_PROXY,
    METRIC_IN_CONTEXT,
    METRIC_IN_CONTEXT_FILES,
    METRIC_INVALID_CITATIONS,
    METRIC_OUT_OF_CONTEXT_CITATIONS,
    METRIC_RECALL_PROXY,
    METRIC_RECALL_PROXY_WEIGHTED,
    METRIC_RETRIEVED,
    METRIC_RETRIEVED_FILES,
    METRIC_UNKNOWN_CITATIONS,
    METRIC_WASTED_CONTEXT_TOKENS,
)

FigureValue = Union[int, float, list[int]]


class Retrieved(Protocol):
    """What the figures read of a retrieved chunk: ``chunks.Chunk`` has it, and so do the lighter
    records ``ragtrace report`` rebuilds from exported spans."""

    @property
    def id(self) -> str: ...

    @property
    def rank(self) -> int: ...

    @property
    def content_hash(self) -> str | None:
        """The duplicate key: chunks with equal keys and different ids are duplicates by content."""

    @property
    def file_id(self) -> str | None:
        """The file the chunk belongs to, where the provider says (None: not known)."""


class Placed(Protocol):
    """What the figures read of a placement: ``assembly.Placement`` has it, and so do the lighter
    records ``ragtrace report`` rebuilds from exported spans."""

    @property
    def chunk_id(self) -> str: ...

    @property
    def position(self) -> int: ...

    @property
    def tokens(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer generation: what it was shown and what it cited."""

    placements: Sequence[Placed] | None  # None: the context is unknown
    cited_ids: Sequence[str] = ()
    invalid_citations: int = 0
    out_of_context_citations: int = 0  # of the invalid ones: naming a retrieved chunk not in context
    unmeasured: str | None = None  # a status reason: this answer's citations can't be scored
    # the files the citations name, first-cited first, where they name files (None: they name chunks)
    cited_files: Sequence[str] | None = None


@dataclass(slots=True)
class Figures:
    values: dict[str, FigureValue] = field(default_factory=dict)
    status: list[str] = field(default_factory=list)

    @property
    def status_text(self) -> str | None:
        """``rag.metrics.status``: the reasons figures are missing, or None when all were measured."""
        return ",".join(self.status) if self.status else None


def compute(
    retrievals: Sequence[Sequence[Retrieved]],
    answers: Sequence[Answer],
    *,
    contexts: Sequence[Sequence[Placed]] = (),
    unreadable: int = 0,
    omitted: int = 0,
) -> Figures:
    """The figures for one trace (or one generation: pass just that answer).

    ``contexts`` are assemblies with no recorded answer; they still give |C| and context
    precision. ``unreadable`` counts retrieved items ragtrace could not understand. ``omitted``
    counts retrieved items beyond ``max_retrieved``, counted but not kept: every figure whose value
    needs all of R is then left out (``retrieval_truncated``); those of C and K stay.
    """
    figures = _compute(retrievals, answers, contexts, unreadable)
    if omitted:
        for metric in _NEED_ALL_OF_R:
            figures.values.pop(metric, None)
        figures.status.insert(0, STATUS_RETRIEVAL_TRUNCATED)
    return figures


# |R|, duplicates within R, and whether an invalid citation names a chunk of R
_NEED_ALL_OF_R = (
    METRIC_RETRIEVED,
    METRIC_DUPLICATE_CHUNKS,
    METRIC_CONTEXT_PRECISION,
    METRIC_RECALL_PROXY,
    METRIC_RECALL_PROXY_WEIGHTED,
    METRIC_OUT_OF_CONTEXT_CITATIONS,
    METRIC_UNKNOWN_CITATIONS,
    METRIC_RETRIEVED_FILES,
    METRIC_FILE_RECALL_PROXY,
)


def _compute(
    retrievals: Sequence[Sequence[Retrieved]],
    answers: Sequence[Answer],
    contexts: Sequence[Sequence[Placed]],
    unreadable: int,
) -> Figures:
    figures = Figures()
    values, status = figures.values, figures.status

    best_rank: dict[str, int] = {}
    duplicates = 0
    seen_hashes: dict[str, str] = {}
    for retrieval in retrievals:
        for chunk in retrieval:
            if chunk.id in best_rank:
                duplicates += 1
                best_rank[chunk.id] = min(best_rank[chunk.id], chunk.rank)
                continue
            best_rank[chunk.id] = chunk.rank
            if chunk.content_hash:
                if chunk.content_hash in seen_hashes:
                    duplicates += 1
                else:
                    seen_hashes[chunk.content_hash] = chunk.id

    if not retrievals:
        status.append(STATUS_NO_RETRIEVAL)
    else:
        values[METRIC_RETRIEVED] = len(best_rank)
        values[METRIC_DUPLICATE_CHUNKS] = duplicates
        if not best_rank:
            status.append(STATUS_UNREADABLE_RETRIEVAL if unreadable else STATUS_EMPTY_RETRIEVAL)

    placed: dict[str, Placed] = {}
    known_contexts = [a.placements for a in answers if a.placements is not None] + list(contexts)
    for placements in known_contexts:
        for placement in placements:
            placed.setdefault(placement.chunk_id, placement)
    context_known = bool(known_contexts)
    # why no context is known: a search that found nothing says so, otherwise none was recorded
    no_context = STATUS_CONTEXT_NOT_LOCATED if any(a.unmeasured == STATUS_CONTEXT_NOT_LOCATED for a in answers) else STATUS_NO_CONTEXT
    if context_known:
        values[METRIC_IN_CONTEXT] = len(placed)
        if best_rank:
            in_context_retrieved = len(placed.keys() & best_rank.keys())
            values[METRIC_CONTEXT_PRECISION] = in_context_retrieved / len(best_rank)
    else:
        status.append(no_context)

    if not answers:
        status.append(STATUS_NO_ANSWER)
        return figures

    # citations can only be resolved against a known context: an answer without one is not scored
    scored = [a for a in answers if a.placements is not None]
    if not scored:
        if no_context not in status:
            status.append(no_context)
        status.extend(r for r in dict.fromkeys(a.unmeasured for a in answers if a.unmeasured) if r not in status)
        return figures
    # one answer's citations unknown leaves every citation figure of the trace unknown
    unmeasured = [a.unmeasured for a in answers if a.unmeasured]
    # file-level citations give the file-level figures, also where they leave the chunk-level ones open
    file_level = any(a.cited_files is not None for a in scored) and all(u == STATUS_CITATIONS_FILE_LEVEL for u in unmeasured)
    if unmeasured:
        status.extend(dict.fromkeys(unmeasured))
        if file_level:
            _file_figures(figures, retrievals, placed, scored)
        return figures
    cited: dict[str, None] = {}
    for answer in scored:
        for chunk_id in answer.cited_ids:
            if chunk_id in placed:
                cited.setdefault(chunk_id)
    values[METRIC_CITED] = len(cited)
    invalid = sum(a.invalid_citations for a in scored)
    out_of_context = sum(a.out_of_context_citations for a in scored)
    values[METRIC_INVALID_CITATIONS] = invalid
    values[METRIC_OUT_OF_CONTEXT_CITATIONS] = out_of_context
    values[METRIC_UNKNOWN_CITATIONS] = invalid - out_of_context
    if best_rank:
        values[METRIC_RECALL_PROXY] = len(cited.keys() & best_rank.keys()) / len(best_rank)
        values[METRIC_RECALL_PROXY_WEIGHTED] = _weighted(cited, best_rank)
    if context_known:
        if placed:
            values[METRIC_CONTEXT_UTILIZATION] = len(cited.keys() & placed.keys()) / len(placed)
        else:
            status.append(STATUS_EMPTY_CONTEXT)
        values[METRIC_WASTED_CONTEXT_TOKENS] = sum(p.tokens for c, p in placed.items() if c not in cited)
        values[METRIC_CITED_POSITIONS] = sorted([placed[c].position for c in cited if c in placed])
    if file_level:
        _file_figures(figures, retrievals, placed, scored)
    return figures


def _file_figures(figures: Figures, retrievals: Sequence[Sequence[Retrieved]], placed: dict[str, Placed], answers: Sequence[Answer]) -> None:
    """The file-level figures (module docstring), when every chunk's file they rest on is known."""
    values = figures.values
    file_of: dict[str, str | None] = {}
    for retrieval in retrievals:
        for chunk in retrieval:
            file_of.setdefault(chunk.id, chunk.file_id)
    retrieved = set(file_of.values())
    if None in retrieved:
        figures.status.append(STATUS_FILES_UNKNOWN)
        return
    if retrievals:
        values[METRIC_RETRIEVED_FILES] = len(retrieved)
    in_context: set[str | None] = {file_of.get(chunk_id) for chunk_id in placed}
    cited: set[str | None] = set()
    for answer in answers:
        if answer.cited_files is not None:
            cited.update(answer.cited_files)
        else:  # citations that name chunks: the files of the in-context chunks they name
            cited.update(file_of.get(c) for c in answer.cited_ids if c in placed)
    if None in in_context or None in cited:
        figures.status.append(STATUS_FILES_UNKNOWN)
        return
    cited &= in_context  # a cited file with no chunk in context is an invalid citation, not a cited file
    values[METRIC_IN_CONTEXT_FILES] = len(in_context)
    values[METRIC_CITED_FILES] = len(cited)
    if retrieved:
        values[METRIC_FILE_RECALL_PROXY] = len(cited & retrieved) / len(retrieved)
    if in_context:
        values[METRIC_FILE_CONTEXT_UTILIZATION] = len(cited) / len(in_context)


def _weighted(cited: Iterable[str], best_rank: dict[str, int]) -> float:
    # fsum is correctly rounded, so a part can never exceed the whole: the ratio stays <= 1
    total = math.fsum([1.0 / rank for rank in best_rank.values()])
    return math.fsum([1.0 / best_rank[c] for c in cited if c in best_rank]) / total


def label(value: float) -> str:
    """A low-cardinality label for a proxy in [0, 1] (``gen_ai.evaluation.score.label``)."""
    if value <= 0.0:
        return "none"
    if value < 1 / 3:
        return "low"
    if value < 2 / 3:
        return "medium"
    return "high"
