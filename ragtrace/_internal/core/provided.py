"""What a model API reports itself: the sources it was given and the citations it made.

Anthropic's Messages API and OpenAI's ``file_search`` tool say which passages the model saw and
which of them each sentence cites, as structured objects. Those facts enter the same figures as
every other path: the sources become an assembly's placements (``rag.context.inclusion_method =
"provider"``: exact, in block order), the citations an ``Answer`` whose cited ids were resolved
by the provider, not parsed from the answer's text. Pure: no spans, no SDK types.

Resolution. A chunk-level citation names one block (Anthropic's ``search_result_index`` /
``document_index``): it resolves to exactly that block, or is invalid when the request had no
such block. A file-level citation (OpenAI's ``file_citation``) names a file: it resolves to every
result of that file in the context (``rag.citation.granularity = "file"``). When a cited file has
one result there, that is exact; when it has several, the cited chunks are not known, so the
figures that count cited chunks are not measurable (``citations_file_level``), while retrieved,
in-context and context precision, which don't depend on citations, still are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace

from . import figures
from . import vocabulary
from .answer import Scored, classify
from .assembly import ContextRecord, Placement
from .citations import CitationResult
from .tokens import Tokenizer


@dataclass(frozen=True, slots=True)
class Source:
    """One block the model was given: the chunk id it is recorded under, its text (None when
    ragtrace can't read it, a PDF), the request message that holds it, and the file it is a
    chunk of, where the provider names one (OpenAI's ``file_id``)."""

    chunk_id: str
    text: str | None
    message_index: int | None = None
    file_id: str | None = None


@dataclass(frozen=True, slots=True)
class Provided:
    """An answer's citations as the provider reported them, resolved to chunk ids.

    ``cited_ids`` are unique, first-cited first; ``invalid`` are the provider's references that
    name no source of the request; ``files`` the cited file ids (file granularity);
    ``unmeasured`` a reason the citations can't be scored at all (``results_not_included``)."""

    cited_ids: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()
    granularity: str = vocabulary.CITATION_GRANULARITY_CHUNK
    files: tuple[str, ...] = ()
    ambiguous: bool = False  # a cited file has several results in the context
    unmeasured: str | None = None
    # where the answer cites what, when the provider says: (start, end, chunk id), character
    # offsets into the answer text, one per (segment, cited chunk)
    segments: tuple[tuple[int, int, str], ...] = ()


def context_record(sources: Sequence[Source], tokenizer: Tokenizer) -> ContextRecord:
    """The provider's context as placements: each source once, positions 1..n in block order,
    labelled by its id (the model cites a block by the API's index, which the provider resolves:
    no text label exists, and none is missing). No character offsets (-1): a block is a part of
    the request, not a span of prompt text."""
    record = ContextRecord(method=vocabulary.INCLUSION_PROVIDER)
    seen: set[str] = set()
    for source in sources:
        if source.chunk_id in seen:
            continue
        seen.add(source.chunk_id)
        tokens = tokenizer.count(source.text) if source.text is not None else 0
        record.placements.append(Placement(source.chunk_id, len(record.placements) + 1, source.chunk_id, -1, -1, tokens, False, source.message_index))
    return record


def by_index(cited: Iterable[tuple[str, object]], sources: Mapping[str, Sequence[Source]]) -> Provided:
    """Chunk-level citations, each ``(kind, index)``: a 0-based index into ``sources[kind]``
    (Anthropic counts search results and documents apart). An index with no source is an invalid
    citation, reported as ``{kind}={index}`` (never text)."""
    ids: dict[str, None] = {}
    invalid: dict[str, None] = {}
    for kind, index in cited:
        found = sources.get(kind, ())
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(found):
            ids.setdefault(found[index].chunk_id)
        else:
            invalid.setdefault(f"{kind}={index}")
    return Provided(tuple(ids), tuple(invalid))


def by_file(cited_files: Iterable[str], files_of: Sequence[tuple[str, str | None]] | None) -> Provided:
    """File-level citations: each cited file resolves to its results in the context, given as
    (chunk id, file id) pairs in context order; None when the results are not known (OpenAI
    without ``include=["file_search_call.results"]``): only the cited files are."""
    files = tuple(dict.fromkeys(f for f in cited_files if isinstance(f, str)))
    if files_of is None:
        return Provided(granularity=vocabulary.CITATION_GRANULARITY_FILE, files=files, unmeasured=figures.STATUS_RESULTS_NOT_INCLUDED)
    ids: dict[str, None] = {}
    invalid: list[str] = []
    ambiguous = False
    for file_id in files:
        chunks = [chunk_id for chunk_id, owner in files_of if owner == file_id]
        if not chunks:
            invalid.append(f"file_id={file_id}")
        ambiguous = ambiguous or len(set(chunks)) > 1
        ids.update(dict.fromkeys(chunks))
    return Provided(tuple(ids), tuple(invalid), vocabulary.CITATION_GRANULARITY_FILE, files, ambiguous)


def scored(provided: Provided, context: ContextRecord | None, retrieved: Set[str]) -> Scored:
    """The answer for the figures, from the provider's citations: the same resolution rule as
    parsed citations (``answer.classify``), over ids the provider resolved instead of labels
    read from text; or not measurable, with the reason the provider's report leaves open."""
    placements = context.placements if context is not None else None
    result = CitationResult(vocabulary.CITATION_FORMAT_PROVIDER, provided.cited_ids, provided.invalid, bool(provided.cited_ids or provided.invalid or provided.files))
    unmeasured = provided.unmeasured or (figures.STATUS_CITATIONS_FILE_LEVEL if provided.ambiguous else None)
    # file-level citations name their files to the figures, which count files where chunks are open
    files = provided.files if provided.granularity == vocabulary.CITATION_GRANULARITY_FILE else None
    if unmeasured is not None:
        return Scored(figures.Answer(placements, provided.cited_ids, len(provided.invalid), 0, unmeasured, files), result)
    found = classify(result, context, retrieved)
    return found if files is None else replace(found, answer=replace(found.answer, cited_files=files))
