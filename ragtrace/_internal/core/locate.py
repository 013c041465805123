"""Locating chunks in a prompt the user built: a search, and said to be one (``located``).

The fallback when nothing was recorded or declared: the prompt is searched at assembly time,
while the input chunks are still known. A search can miss or misplace text, so the record says
``inclusion_method = "located"``, and the citation rule (``answer``) leaves a citation it can't
resolve unscored rather than invalid where the search may have missed its chunk. ``ragtrace
report`` infers inclusion for other tools' traces with the same search.
Pure: no spans, no globals.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from . import vocabulary
from .assembly import ContextRecord, Drop, Placement
from .chunks import Chunk, content_hash
from .patterns import uncached
from .prompt_views import View, collapse, fold, plain
from .source_labels import LABEL_OPENS_LINE, NO_LABEL, fold_label, label_at, prompt_texts
from .tokens import DEFAULT_TOKENIZER, Tokenizer

_MAX_OCCURRENCES = 64
_MIN_PREFIX_CHARS = 24
_ASSISTANT_ROLES = frozenset({"assistant", "ai", "model"})


class _Hit(NamedTuple):
    text: int  # index into the prompt's texts
    start: int
    end: int
    truncated: bool
    tier: int  # how sure the label before it is a source's (``source_labels``)


class _Texts:
    """The prompt's texts and their search views, each view built on first use."""

    def __init__(self, prompt: Any) -> None:
        found = prompt_texts(prompt)
        self.indexes = [index for index, _, _ in found]
        self.roles = [role for _, role, _ in found]
        self.raw = [text for _, _, text in found]
        self._collapsed: list[View] | None = None
        self._folded: list[View] | None = None

    @property
    def collapsed(self) -> list[View]:
        if self._collapsed is None:
            self._collapsed = [View(text) for text in self.raw]
        return self._collapsed

    @property
    def folded(self) -> list[View]:
        if self._folded is None:
            self._folded = [View(text, folded=True) for text in self.raw]
        return self._folded


def locate(chunks: Sequence[Chunk], prompt: Any, tokenizer: Tokenizer = DEFAULT_TOKENIZER) -> ContextRecord:
    """Find each input chunk's text in ``prompt`` (a string or chat messages).

    Tries an exact match, then a whitespace-insensitive match, then the chunk with its markdown
    emphasis, code marks, heading marks and link targets removed (a formatter that strips them),
    then the same through case, HTML escaping, Unicode normal form and typographic quotes and
    dashes (``prompt_views``), then the longest matching prefix (a truncated chunk). Occurrences
    right after a label such as ``[2]`` are preferred, so short chunks that also appear in the
    instructions aren't credited to the instructions, and of equally labelled ones the latest
    message's (this turn's, not the history's).

    This turn's sources are the labelled block the answer's prompt adds (``_this_turn``): a
    chunk found only in an earlier turn of the chat, in an example whose labels the sources reuse,
    or outside any label when the sources are labelled, is not one of them (``outside_sources``),
    so it never takes a position from a real one. A chunk shown again under another label (``[1]``
    and ``[4]``), or in several pieces under one id, resolves under each label (``aliases``).

    Longer chunks are matched first and no two chunks share prompt text: a chunk whose text also
    sits inside a longer chunk's text is credited at its own occurrence, and is a duplicate when
    that is the only one. Nothing found of chunks with text in a prompt with text is a failed
    search, not an empty context (``not_located``).
    """
    texts = _Texts(prompt)
    hits: dict[int, _Hit] = {}
    dropped: dict[int, Drop] = {}
    first_of: dict[str, int] = {}
    pieces: list[int] = []  # a repeated id with other text: another piece of that chunk
    pending: list[int] = []
    for number, chunk in enumerate(chunks):
        first = first_of.setdefault(chunk.id, number)
        if first == number:
            pending.append(number)
        elif chunk.content and chunk.content != chunks[first].content:
            pieces.append(number)
        else:
            dropped[number] = Drop(chunk.id, vocabulary.DROP_DUPLICATE)
    pending.sort(key=lambda number: -len(chunks[number].content or ""))  # stable: ties keep input order
    taken: list[tuple[int, int, int]] = []  # (text index, start, end) already credited
    for number in pending:
        content = chunks[number].content or ""
        hit = _find_chunk(content, texts, taken)
        if hit is None:
            shared = taken and _find_chunk(content, texts, []) is not None
            dropped[number] = Drop(chunks[number].id, vocabulary.DROP_DUPLICATE if shared else vocabulary.DROP_NOT_FOUND)
            continue
        taken.append(hit[:3])
        hits[number] = hit
    outside, region = _this_turn(hits, texts)
    for number in outside:
        del hits[number]
    taken = [hit[:3] for hit in hits.values()]
    if outside and region is not None:  # a chunk first found in an earlier block may be in this one too
        before = [(i, 0, len(texts.raw[i]) + 1) for i in range(region[0])] + [(region[0], 0, region[1])]
        for number in sorted(outside):
            hit = _find_chunk(chunks[number].content or "", texts, taken + before)
            if hit is not None and hit.tier > NO_LABEL:
                hits[number] = hit
                taken.append(hit[:3])
                outside.discard(number)
    for number in outside:
        dropped[number] = Drop(chunks[number].id, vocabulary.DROP_OUTSIDE_SOURCES)
    is_chat = not isinstance(prompt, str)
    placements: list[Placement] = []
    for position, (number, hit) in enumerate(sorted(hits.items(), key=lambda item: (item[1].text, item[1].start)), start=1):
        chunk, text = chunks[number], texts.raw[hit.text]
        placements.append(
            Placement(
                chunk_id=chunk.id,
                position=position,
                label=label_at(text, hit.start)[0],
                start=hit.start,
                end=hit.end,
                tokens=tokenizer.count(text[hit.start : hit.end]),
                truncated=hit.truncated,
                message_index=texts.indexes[hit.text] if is_chat else None,
                content_hash=chunk.content_hash or (content_hash(chunk.content) if chunk.content else None),
            )
        )
    record = ContextRecord(method=vocabulary.INCLUSION_LOCATED, placements=placements, prompt=prompt)
    _aliases(record, chunks, pieces, hits, texts, taken, tokenizer, dropped)
    record.dropped = [dropped[number] for number in sorted(dropped)]
    record.not_located = not placements and any(c.content and c.content.strip() for c in chunks) and any(t.strip() for t in texts.raw)
    return record


def _this_turn(hits: dict[int, _Hit], texts: _Texts) -> tuple[set[int], tuple[int, int] | None]:
    """The chunks found outside this turn's sources: the labelled block the answer's prompt adds.

    The last text with a labelled chunk holds it (or its end: where the labels start over, an
    example or an earlier block came first). A labelled chunk in an earlier text is outside when
    a model turn lies between (chat history), or when its label is one this block uses again (an
    example); when the sources are labelled, a chunk found under no label is outside too.
    Returns those chunks, and where this turn's block starts (text index, offset) when a
    labelled chunk was put outside.
    """
    labelled = [n for n, hit in hits.items() if hit.tier > NO_LABEL]
    if not labelled:
        return set(), None
    last = max(hits[n].text for n in labelled)
    history = max((i for i in range(last) if texts.roles[i].casefold() in _ASSISTANT_ROLES), default=-1)
    outside = {n for n, hit in hits.items() if hit.tier == NO_LABEL}
    block: dict[str, int] = {}  # folded label -> chunk, this block's
    block_start, split = 0, False
    for n in sorted((n for n in labelled if hits[n].text == last), key=lambda n: hits[n].start):
        label = fold_label(label_at(texts.raw[last], hits[n].start)[0])
        if label in block:  # the labels start over: what came before was another block
            outside.update(block.values())
            block, block_start, split = {}, hits[n].start, True
        block[label] = n
    for n in labelled:
        hit = hits[n]
        if hit.text < last and (hit.text < history or fold_label(label_at(texts.raw[hit.text], hit.start)[0]) in block):
            outside.add(n)
            split = True
    return outside, ((last, block_start) if split else None)


def _aliases(
    record: ContextRecord,
    chunks: Sequence[Chunk],
    pieces: list[int],
    hits: dict[int, _Hit],
    texts: _Texts,
    taken: list[tuple[int, int, int]],
    tokenizer: Tokenizer,
    dropped: dict[int, Drop],
) -> None:
    """More labels the model saw for a placed chunk: a verbatim repeat of its text under another
    label (counted once, as everywhere), and the other pieces of a chunk shown in pieces under one
    id (a synthesizer that re-split it: their tokens are the chunk's too)."""
    at = {p.chunk_id: index for index, p in enumerate(record.placements)}
    labels = {fold_label(p.label) for p in record.placements if p.label}
    for number, hit in hits.items():
        content = chunks[number].content or ""
        text = texts.raw[hit.text]
        for start in _candidates(text, content):
            end = start + len(content)
            if any(t == hit.text and start < stop and begin < end for t, begin, stop in taken):
                continue
            label, tier = label_at(text, start)
            if tier > NO_LABEL and fold_label(label) not in labels:
                labels.add(fold_label(label))
                record.aliases.setdefault(label, chunks[number].id)
    for number in pieces:
        chunk = chunks[number]
        index = at.get(chunk.id)
        hit = _find_chunk(chunk.content or "", texts, taken) if index is not None else None
        if hit is None or index is None:
            dropped[number] = Drop(chunk.id, vocabulary.DROP_DUPLICATE)
            continue
        taken.append(hit[:3])
        label = label_at(texts.raw[hit.text], hit.start)[0]
        if label and fold_label(label) not in labels:
            labels.add(fold_label(label))
            record.aliases.setdefault(label, chunk.id)
        placement = record.placements[index]
        shown = texts.raw[hit.text][hit.start : hit.end]
        record.placements[index] = replace(placement, tokens=placement.tokens + tokenizer.count(shown))
        dropped[number] = Drop(chunk.id, vocabulary.DROP_DUPLICATE)


def _find_chunk(content: str, texts: _Texts, taken: Sequence[tuple[int, int, int]] = ()) -> _Hit | None:
    """The chunk's best occurrence, in the first of the ways tried (see ``locate``) that finds it."""
    if not content.strip():
        return None
    hit = _find_in(texts.raw, content, taken)
    if hit is not None:
        return _Hit(hit[0], hit[1], hit[1] + len(content), False, hit[2])
    needle = collapse(content)
    for views, candidates in ((texts.collapsed, (needle, collapse(plain(content)))), (texts.folded, (fold(content), fold(plain(content))))):
        for candidate in dict.fromkeys(candidates):
            hit = _find_in(views, candidate, taken) if candidate else None
            if hit is not None:
                return _Hit(hit[0], *views[hit[0]].span(hit[1], hit[1] + len(candidate)), False, hit[2])
    # truncated chunk: the longest prefix (binary search; "found" is monotone in prefix length)
    indexes = texts.collapsed
    best: tuple[int, int, int, int] | None = None
    low, high = min(_MIN_PREFIX_CHARS, len(needle)), len(needle) - 1
    while low <= high:
        middle = (low + high) // 2
        hit = _find_in(indexes, needle[:middle], taken)
        if hit is None:
            high = middle - 1
        else:
            best = (hit[0], hit[1], middle, hit[2])
            low = middle + 1
    if best is None:
        return None
    message, start, length, tier = best
    # the prefix may have run on into the prompt's whitespace after the cut: the chunk text ends
    # at its last non-space character
    length = len(needle[:length].rstrip())
    if length < _MIN_PREFIX_CHARS:
        return None
    return _Hit(message, *indexes[message].span(start, start + length), True, tier)


def _find_in(texts: Sequence[str | View], needle: str, taken: Sequence[tuple[int, int, int]] = ()) -> tuple[int, int, int] | None:
    """(text index, start, label tier) of the best occurrence in any of the texts: the best label
    tier, and of equal tiers the latest text's. In a view, labels are judged in the original
    (where lines still exist).

    Chat prompts put instructions, examples and earlier turns before this turn's sources, so a
    chunk that also appears there must not be credited to the first message it is in.
    """
    best: tuple[int, int, int] | None = None  # (tier, text index, start)
    for index, text in enumerate(texts):
        occupied = [(start, end) for message, start, end in taken if message == index]
        if isinstance(text, str):
            found = _best_occurrence(text, needle, None, occupied)
        else:
            found = _best_occurrence(text.text, needle, text, occupied)
        if found is not None and (best is None or found[1] >= best[0]):
            best = (found[1], index, found[0])
    return None if best is None else (best[1], best[2], best[0])


def _best_occurrence(text: str, needle: str, view: View | None = None, occupied: Sequence[tuple[int, int]] = ()) -> tuple[int, int] | None:
    """(start, tier): the first occurrence right after a label that opens a line (``[2] ...``),
    else right after any label, else the first occurrence at all. Instructions such as
    ``Cite as [n]. Be concise.`` have a label mid-line, sources have one at the line start.
    Occurrences overlapping ``occupied`` (original-text spans of chunks already credited) are
    skipped; ``view`` maps a search view ``text`` back to its original."""
    best: tuple[int, int] | None = None
    for start in _candidates(text, needle):
        if best is not None and best[1] == LABEL_OPENS_LINE:
            break
        if view is None:
            source, begin, end = text, start, start + len(needle)
        else:
            source, (begin, end) = view.source, view.span(start, start + len(needle))
        if not any(begin < stop and first < end for first, stop in occupied):
            tier = label_at(source, begin)[1]
            if best is None or tier > best[1]:
                best = (start, tier)
    return best


def _candidates(text: str, needle: str) -> Iterator[int]:
    """Where ``needle`` starts: its first occurrences (bounded), then, past the bound, the
    occurrences right after a bracket label (one C-level scan), so a labelled source is found
    even behind many unlabelled repeats."""
    if not needle:
        return
    start = text.find(needle)
    for _ in range(_MAX_OCCURRENCES):
        if start < 0:
            return
        yield start
        start = text.find(needle, start + 1)
    if start < 0:
        return
    pattern = uncached(r"\][ \t]{0,4}(?:[:.)-][ \t]{0,4})?(" + re.escape(needle) + ")")  # chunk text: never in re's cache
    for number, match in enumerate(pattern.finditer(text, start)):
        if number >= _MAX_OCCURRENCES:
            return
        yield match.start(1)
