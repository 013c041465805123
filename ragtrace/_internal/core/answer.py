"""An answer generation -> ``figures.Answer``: its citations resolved and classified, or why not.

A citation is flagged invalid only when ragtrace knows what the model was shown. So an answer is
left unscored, with the reason, when its output could not be read, when the user's citation
pattern raised, or when a *located* context has gaps (a chunk the search could not find, or found
under no label it could read) and the answer cites something that does not resolve: it may well be
the chunk the search missed.
Invalid citations are split in two: ``out_of_context`` names a retrieved chunk the model was not
shown (by its id, or by a declared label whose text never reached the prompt), ``unknown`` names
nothing retrieved. The two have different fixes (the context budget vs. the model).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass
from typing import Any

from . import figures
from . import vocabulary
from .assembly import ContextRecord
from .citations import CitationPattern, CitationResult, parse_citations
from .guard import warn_once
from .keyed import HASHED_LABEL, label_key
from .source_labels import shown_labels

SEARCHED = frozenset({vocabulary.INCLUSION_LOCATED, vocabulary.INCLUSION_INFERRED})


@dataclass(frozen=True, slots=True)
class Scored:
    answer: figures.Answer
    citations: CitationResult | None  # None: not parsed (unreadable output, failing pattern)
    out_of_context_ids: tuple[str, ...] = ()  # the chunks its out-of-context citations name, first-cited first


def checked_pattern(pattern: Any) -> CitationPattern | None:
    """A citation pattern as given, checked at the call site: a regex that does not compile or a
    value of the wrong type is a misconfiguration and raises here, not at every answer."""
    if pattern is None or isinstance(pattern, re.Pattern) or callable(pattern):
        return pattern
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"citation_pattern {pattern!r} is not a valid regular expression: {error}") from None
        return pattern
    raise TypeError(f"citation_pattern must be a regex (str or compiled) or a callable, got {type(pattern).__name__}")


class _PatternFailed(Exception):
    """The user's citation-pattern callable raised (carried out of the parser, then reported)."""


def _guarded(pattern: Callable[[str], Iterable[str]]) -> Callable[[str], list[Any]]:
    def keys(text: str) -> list[Any]:
        try:
            return list(pattern(text))
        except Exception as error:  # noqa: BLE001 - the user's code: reported as theirs
            raise _PatternFailed(type(error).__name__) from error

    return keys


def score(
    text: str | None, context: ContextRecord | None, retrieved: Set[str], pattern: CitationPattern | None
) -> Scored:
    """The answer for the figures. ``text`` None means an output was recorded but not readable."""
    if context is not None and context.not_located:  # the search failed: nothing to resolve against
        return Scored(figures.Answer(None, unmeasured=figures.STATUS_CONTEXT_NOT_LOCATED), None)
    placements = context.placements if context is not None else None
    if text is None:
        return Scored(figures.Answer(placements, unmeasured=figures.STATUS_ANSWER_UNREADABLE), None)
    user_callable = callable(pattern) and not isinstance(pattern, re.Pattern)
    try:
        citations = parse_citations(
            text, context.label_map() if context is not None else {}, pattern=_guarded(pattern) if user_callable else pattern  # type: ignore[arg-type]
        )
    except _PatternFailed as failure:
        warn_once(
            f"citation-pattern:{id(pattern)}",
            "your citation_pattern callable %s raised %s; this answer's citations are not scored (further errors from it are not logged)",
            getattr(pattern, "__qualname__", type(pattern).__name__),
            failure.args[0],
        )
        return Scored(figures.Answer(placements, unmeasured=figures.STATUS_CITATION_PATTERN_FAILED), None)
    return classify(citations, context, retrieved)


def classify(citations: CitationResult, context: ContextRecord | None, retrieved: Set[str]) -> Scored:
    """The one citation-resolution rule, for citations parsed from an answer or handed in (a
    provider's native citations, as a ``CitationResult`` over label keys resolved against the
    same ``context.label_map()``): the SDK, located and inferred inclusion and ``ragtrace report``
    all call it, so one prompt's figures never depend on the path that measured them.

    Cited chunks count. A citation that resolves to nothing is invalid only when ragtrace knows
    every label the model saw; otherwise (``unresolvable``) the answer's citation figures are not
    measurable (``citations_unresolved``) instead of a made-up count.
    """
    placements = context.placements if context is not None else None
    if not citations.invalid_labels:  # the common answer: every citation resolved
        return Scored(figures.Answer(placements, citations.cited_ids), citations)
    if context is not None and unresolvable(context, citations.invalid_labels):
        return Scored(figures.Answer(placements, citations.cited_ids, unmeasured=figures.STATUS_CITATIONS_UNRESOLVED), citations)
    outside = _outside(context, retrieved)
    named = _named(outside, citations.invalid_labels)
    answer = figures.Answer(placements, citations.cited_ids, citations.invalid_count, len(named))
    return Scored(answer, citations, tuple(dict.fromkeys(named)))


def unresolvable(context: ContextRecord, invalid_labels: Sequence[str] = ()) -> bool:
    """Whether a citation that resolves to nothing may still name a chunk the model was shown.

    * Some chunk was shown under no label (LangChain's and LlamaIndex's default prompts join the
      documents bare): ``[1]`` may mean the first document, or nothing; ragtrace does not guess
      a position (``docs/concepts.md``), on every inclusion method alike.
    * The context was found by searching (located, inferred) and the prompt shows one of the
      cited keys as a source label that no found chunk sits under: the search missed that
      chunk (reformatted, escaped, summarised), so the label is unresolved, not made up.

    Recorded and declared contexts know every label they placed, so only the first applies.
    """
    if any(not p.label for p in context.placements):
        return True
    if context.method not in SEARCHED or not invalid_labels:
        return False
    if context.prompt is None:  # a record carried from another process: the labels' keyed digests
        carried = context.shown_keys
        return carried is not None and any(label_key(_fold(label)) in carried for label in invalid_labels)
    shown = shown_labels(context.prompt, context.sources_at)
    return any(_fold(label) in shown for label in invalid_labels)


def _outside(context: ContextRecord | None, retrieved: Set[str]) -> dict[str, str]:
    """Folded keys that name a retrieved (or declared) chunk the context does not hold -> its id."""
    placed = {p.chunk_id for p in context.placements} if context is not None else set()
    keys = {_fold(chunk_id): chunk_id for chunk_id in retrieved if chunk_id not in placed}
    if context is not None:
        keys.update((_fold(label), chunk_id) for label, chunk_id in context.unshown.items() if chunk_id not in placed)
    return keys


def _named(outside: dict[str, str], labels: Iterable[str]) -> list[str]:
    """The chunk ids ``labels`` name among ``outside``'s keys; a label carried as a keyed digest
    (``keyed.label_key``, from another process in redact mode) is matched by the digest of the key."""
    if not outside:  # the common answer: no invalid citation
        return []
    hashed = any(key.startswith(HASHED_LABEL) for key in outside)
    named = []
    for key in map(_fold, labels):
        found = outside.get(key)
        if found is None and hashed:
            found = outside.get(label_key(key))
        if found is not None:
            named.append(found)
    return named


def _fold(key: str) -> str:
    return " ".join(key.split()).casefold()
