"""Declared placements: the app says what it rendered for each chunk; ragtrace finds those fragments.

Code that builds its own prompt (a framework's ``format_docs``, an f-string loop) declares, per
chunk and in prompt order, the exact text it rendered and the label the model sees
(``Assemble.place``), then hands over the final prompt (``Assemble.set_prompt``). Offsets come from
finding the *declared fragments* in that prompt, in order; chunk content is never searched for, so
a reformatted chunk is still exact. The record says ``inclusion_method = "declared"``.

Finding fragments, in the order tried for each one: the text as declared; the text JSON-escaped
(a prompt serialised whole, e.g. a JSON request body); the text with whitespace runs collapsed
(a template that re-wraps); the longest prefix of at least ``MIN_PREFIX_CHARS`` that stops where
the text does or at a space or mark (a prompt cut to fit a window: the placement is marked
truncated). Of all the ways to find the fragments in order, the one that finds the most is kept, then the one with the most fragments at a line start or
right after their label, then the tightest (the sources sit together; instructions or a question
that repeat a chunk's words sit elsewhere). A fragment found nowhere is dropped as
``not_in_prompt``: the model did not see it.
Pure: no spans, no globals.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from . import vocabulary
from .assembly import ContextRecord, Drop, Placement, Prompt
from .chunks import Chunk
from .source_labels import KEYWORD_LABEL, LIST_LABEL, NUMBER_LABEL, XML_LABEL, label_of
from .messages import as_messages
from .tokens import Tokenizer

MIN_PREFIX_CHARS = 16
_MAX_OCCURRENCES = 32  # per fragment: a fragment found more often than this is cut to the first ones
_LINE_LEAD = " \t-*>"
# a label the fragment opens with: "[2] ...", "Source 2: ...", "Document #2. ..."
_WORD = re.compile(r"\S+")
_AFTER_LABEL = re.compile(r"[ \t]{0,16}[:.)\-]?\s{0,16}([\"'“‘«„]?)")  # what separates a label from its text
_CLOSING_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "„": "“"}
_XML_CLOSE = re.compile(r"\s*</(?:source|document|doc|chunk|passage|context)\s*>\s*$", re.I)
_LEADING_LABEL = re.compile(r"\s*(?:\[([^\[\]\n]{1,64})\]|" + KEYWORD_LABEL + r"\s*[:.)-]|" + XML_LABEL + "|" + NUMBER_LABEL + "|" + LIST_LABEL + ")", re.I)


@dataclass(frozen=True, slots=True)
class Declared:
    """One ``place`` call: the chunk, the text the prompt shows for it, and the label the model sees."""

    chunk: Chunk
    text: str
    label: str


def leading_label(text: str) -> str:
    """The label a rendered fragment opens with (``"[2] ..."`` -> ``"2"``), or ""."""
    return split_label(text)[0]


def split_label(text: str) -> tuple[str, str]:
    """A rendered fragment as (the label it opens with, the text after it): ``"Source 2:\\nabc"``
    -> ``("2", "abc")``; ``("", text)`` when it opens with no label."""
    match = _LEADING_LABEL.match(text)
    label = label_of(match) if match else ""
    if not label:
        return "", text
    rest = text[match.end() :]  # type: ignore[union-attr]
    after = _AFTER_LABEL.match(rest)
    opening = after.group(1) if after is not None else None
    rest = rest[after.end() :] if after is not None else rest
    closing = _CLOSING_QUOTES.get(opening or "")
    if closing and rest.rstrip().endswith(closing):  # [1] “text”: the quotes are the label's, not the text's
        rest = rest.rstrip()[: -len(closing)]
    if match.group(0).lstrip().startswith("<"):  # <source id="2">text</source>: the closing tag is the label's too
        rest = _XML_CLOSE.sub("", rest)
    return label, rest


class _Occurrence(NamedTuple):
    start: int  # in the whole prompt (message texts laid end to end)
    end: int
    truncated: bool
    anchored: bool  # at a line start, or right after its label


class _Chain(NamedTuple):
    """Fragments found so far in order; ``key`` ranks chains: more found, more anchored, tighter."""

    end: int
    placed: int
    unanchored: int
    gap: int
    links: tuple[Any, ...] | None  # (fragment index, occurrence, previous links)

    def key(self) -> tuple[int, int, int]:
        # ``end - gap``: a later end leaves less gap to the next fragment, so it is part of the rank
        return (self.placed, -self.unanchored, self.end - self.gap)


_EMPTY = _Chain(-1, 0, 0, 0, None)


def resolve(declared: Sequence[Declared], prompt: Any, tokenizer: Tokenizer) -> ContextRecord:
    """The declared record: each fragment's offsets in ``prompt`` (a string or chat messages).

    A chunk placed twice is in context once (the second is a ``duplicate`` drop), but the label
    the model saw on its second rendering still resolves to it.
    """
    record = ContextRecord(method=vocabulary.INCLUSION_DECLARED)
    messages = as_messages(prompt)
    final: Prompt | None = messages if messages is not None else (prompt if isinstance(prompt, str) else None)
    record.prompt = final
    if final is None:  # no prompt given: what was declared is all there is, without offsets
        found: dict[int, _Occurrence] | None = None
        whole, bases = "", [0]
    else:
        texts = [final] if isinstance(final, str) else [m["content"] for m in final]
        bases = _bases(texts)
        whole = "\x00".join(texts)  # NUL between messages: no fragment spans two of them
        words = _Words(whole)
        found = _best_chain([_occurrences(whole, d.text, d.label, words) for d in declared])
    seen: dict[str, int] = {}  # chunk id -> its placement's index
    shown_pieces: dict[str, set[str]] = {}  # chunk id -> the texts shown for it
    for index, entry in enumerate(declared):
        occurrence = found.get(index) if found is not None else None
        if entry.chunk.id in seen:
            record.dropped.append(Drop(entry.chunk.id, vocabulary.DROP_DUPLICATE))
            if entry.label and (occurrence is not None or found is None):
                record.aliases.setdefault(entry.label, entry.chunk.id)
            piece = split_label(entry.text)[1]
            pieces = shown_pieces[entry.chunk.id]
            if (occurrence is not None or found is None) and piece not in pieces:
                # another piece of the chunk (a synthesizer that re-split it): its tokens are the
                # chunk's too; a verbatim repeat is the same text, counted once as everywhere else
                pieces.add(piece)
                at = seen[entry.chunk.id]
                first = record.placements[at]
                record.placements[at] = replace(first, tokens=first.tokens + tokenizer.count(piece))
            continue
        if found is not None and occurrence is None:
            record.dropped.append(Drop(entry.chunk.id, vocabulary.DROP_NOT_IN_PROMPT))
            if entry.label:
                record.unshown.setdefault(entry.label, entry.chunk.id)
            continue
        seen[entry.chunk.id] = len(record.placements)
        shown_pieces[entry.chunk.id] = {split_label(entry.text)[1]}
        position = len(record.placements) + 1
        if occurrence is None:
            record.placements.append(_placement(entry, position, -1, -1, False, None, tokenizer))
            continue
        message = bisect.bisect_right(bases, occurrence.start) - 1
        base = bases[message]
        shown = whole[occurrence.start : occurrence.end]
        record.placements.append(
            _placement(
                entry, position, occurrence.start - base, occurrence.end - base, occurrence.truncated,
                None if isinstance(final, str) else message, tokenizer, shown,
            )
        )
    return record


def _placement(
    entry: Declared, position: int, start: int, end: int, truncated: bool, message: int | None, tokenizer: Tokenizer, shown: str | None = None
) -> Placement:
    return Placement(
        chunk_id=entry.chunk.id,
        position=position,
        label=entry.label,
        start=start,
        end=end,
        # the chunk's tokens, not its label's: "[2] text" counts as "text", as a recorded placement does
        tokens=tokenizer.count(split_label(shown if truncated and shown is not None else entry.text)[1]),
        truncated=truncated,
        message_index=message,
        content_hash=entry.chunk.content_hash,
    )


def _bases(texts: Sequence[str]) -> list[int]:
    bases, offset = [], 0
    for text in texts:
        bases.append(offset)
        offset += len(text) + 1
    return bases


def _occurrences(whole: str, text: str, label: str, words: _Words) -> list[_Occurrence]:
    """Where a fragment sits: the first form that is found at all (see the module docstring)."""
    if not text:
        return []
    for form in _forms(text):
        starts = _find_all(whole, form)
        if starts:
            return [_Occurrence(s, s + len(form), False, _anchored(whole, s, label)) for s in starts]
    collapsed = [_Occurrence(start, end, False, _anchored(whole, start, label)) for start, end in words.find_all(text)]
    if collapsed:
        return collapsed
    return _truncated(whole, text, label)


def _forms(text: str) -> list[str]:
    forms = [text]
    for ascii_only in (False, True):
        escaped = json.dumps(text, ensure_ascii=ascii_only)[1:-1]
        if escaped not in forms:
            forms.append(escaped)
    return forms


def _find_all(whole: str, needle: str) -> list[int]:
    starts: list[int] = []
    start = whole.find(needle)
    while start >= 0 and len(starts) < _MAX_OCCURRENCES:
        starts.append(start)
        start = whole.find(needle, start + 1)
    return starts


class _Words:
    """A prompt with each whitespace run read as one space, to find a fragment whatever the
    whitespace between its words (a regex ``w1\\s+w2...`` matches the same places). Searched with
    ``str.find``, never compiled into a pattern: a pattern of the chunk's words would stay in
    ``re``'s process-wide cache after the pipeline, and takes milliseconds to compile. Built on
    first use, once per prompt."""

    def __init__(self, whole: str) -> None:
        self._whole = whole
        self._built = False
        self._collapsed = ""
        self._starts: list[int] = []  # each word's start in the original
        self._offsets: list[int] = []  # ...and in the collapsed text

    def find_all(self, text: str) -> list[tuple[int, int]]:
        """(start, end) in the original of each non-overlapping occurrence, at most _MAX_OCCURRENCES."""
        needle = " ".join(text.split())
        if needle.count(" ") < 1:  # one word: the exact search already looked
            return []
        if not self._built:
            self._build()
        found: list[tuple[int, int]] = []
        start = self._collapsed.find(needle)
        while start >= 0 and len(found) < _MAX_OCCURRENCES:
            end = start + len(needle)
            found.append((self._original(start), self._original(end - 1) + 1))
            start = self._collapsed.find(needle, end)
        return found

    def _build(self) -> None:
        self._built = True
        self._starts = [match.start() for match in _WORD.finditer(self._whole)]
        offset = 0
        for word in self._whole.split():
            self._offsets.append(offset)
            offset += len(word) + 1
        self._collapsed = " ".join(self._whole.split())

    def _original(self, position: int) -> int:
        """The original index of a non-space character of the collapsed text."""
        word = bisect.bisect_right(self._offsets, position) - 1
        return self._starts[word] + position - self._offsets[word]


def _truncated(whole: str, text: str, label: str) -> list[_Occurrence]:
    """The longest prefix of the fragment that occurs (binary search: presence shrinks with length)."""
    low, high, best = MIN_PREFIX_CHARS, len(text) - 1, 0
    while low <= high:
        middle = (low + high) // 2
        if whole.find(text[:middle]) >= 0:
            best, low = middle, middle + 1
        else:
            high = middle - 1
    prefix = text[:best].rstrip()
    if len(prefix) < MIN_PREFIX_CHARS:
        return []
    # A cut text stops where the prompt (or its message) does, or at a space or mark: a prefix that
    # runs on into other letters or digits is another text that opens the same way.
    return [
        _Occurrence(s, s + len(prefix), True, _anchored(whole, s, label))
        for s in _find_all(whole, prefix)
        if s + len(prefix) == len(whole) or not whole[s + len(prefix)].isalnum()
    ]


def _anchored(whole: str, start: int, label: str) -> bool:
    """At a line (or message) start, past indentation and bullets, or right after its label."""
    line_start = max(whole.rfind("\n", 0, start), whole.rfind("\x00", 0, start)) + 1
    if not whole[line_start:start].strip(_LINE_LEAD):
        return True
    return bool(label) and label in whole[max(0, start - len(label) - 12) : start]


def _best_chain(candidates: Sequence[Sequence[_Occurrence]]) -> dict[int, _Occurrence]:
    """Fragment index -> the occurrence chosen for it, fragments in increasing prompt order.

    Dynamic programming over chains kept as a Pareto front sorted by end: a chain that ends no
    later and ranks no lower makes another useless, so along the front both end and rank rise,
    and the best predecessor for an occurrence is the last chain ending before it.
    """
    front: list[_Chain] = []
    for index, occurrences in enumerate(candidates):
        if not occurrences:
            continue
        ends = [chain.end for chain in front]
        grown: list[_Chain] = []
        for occurrence in occurrences:
            extra = 0 if occurrence.anchored else 1
            best = _Chain(occurrence.end, 1, extra, 0, (index, occurrence, None))
            before = bisect.bisect_right(ends, occurrence.start) - 1
            if before >= 0:
                previous = front[before]
                chained = _Chain(
                    occurrence.end,
                    previous.placed + 1,
                    previous.unanchored + extra,
                    previous.gap + occurrence.start - previous.end,
                    (index, occurrence, previous.links),
                )
                if chained.key() > best.key():
                    best = chained
            grown.append(best)
        front = _pareto(front + grown)
    if not front:
        return {}
    best_chain = max(front, key=lambda chain: (chain.placed, -chain.unanchored, -chain.gap))
    chosen: dict[int, _Occurrence] = {}
    links = best_chain.links
    while links is not None:
        index, occurrence, links = links
        chosen[index] = occurrence
    return chosen


def _pareto(chains: list[_Chain]) -> list[_Chain]:
    chains.sort(key=lambda chain: (chain.end, [-k for k in chain.key()]))
    kept: list[_Chain] = []
    for chain in chains:
        if not kept or chain.key() > kept[-1].key():
            kept.append(chain)
    return kept
