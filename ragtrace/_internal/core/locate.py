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
from typing import Any

from . import vocabulary
from .assembly import ContextRecord, Drop, Placement
from .chunks import Chunk, content_hash
from .patterns import uncached
from .pieces import Piece, labelled_pieces
from .prompt_views import View, collapse, fold, plain, shown_text
from .source_labels import LABEL_OPENS_LINE, NO_LABEL, fold_label, label_at, prompt_texts
from .tokens import DEFAULT_TOKENIZER, Tokenizer
from .turn_sources import ENDS_ENTRY, Hit as _Hit, fills_line, this_turn

_MAX_OCCURRENCES = 64
_MIN_PREFIX_CHARS = 24


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

    This turn's sources are the labelled block the answer's prompt adds (``turn_sources``): a
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
    # every whole match first, then truncations: a chunk whose whole text is the start of a longer
    # chunk's is credited where it sits whole, and the longer one is truncated only elsewhere
    for find in (_find_whole, _find_prefix):
        for number in pending:
            if number in hits:
                continue
            hit = find(chunks[number].content or "", texts, taken)
            if hit is not None:
                taken.append(hit[:3])
                hits[number] = hit
    for number in pending:
        if number not in hits:
            shared = bool(taken) and _shares_text(chunks[number].content or "", texts, hits)
            dropped[number] = Drop(chunks[number].id, vocabulary.DROP_DUPLICATE if shared else vocabulary.DROP_NOT_FOUND)
    outside, region = this_turn(hits, texts.raw, texts.roles)
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
    if region is not None:
        _first_showing(chunks, hits, texts, region, taken)
    missing = [n for n in pending if n in dropped and dropped[n].reason == vocabulary.DROP_NOT_FOUND]
    shown: dict[int, list[tuple[int, Piece]]] = {}
    if region is not None and (missing or any(hit.truncated for hit in hits.values())):
        shown = _shown_in_pieces(chunks, missing, hits, texts, region, dropped)
    is_chat = not isinstance(prompt, str)
    placements: list[Placement] = []
    for position, (number, hit) in enumerate(sorted(hits.items(), key=lambda item: (item[1].text, item[1].start)), start=1):
        chunk, text = chunks[number], texts.raw[hit.text]
        more = shown.get(number, ())
        placements.append(
            Placement(
                chunk_id=chunk.id,
                position=position,
                label=label_at(text, hit.start)[0],
                start=hit.start,
                end=hit.end,
                tokens=tokenizer.count(shown_text(text, hit.start, hit.end)) + sum(tokenizer.count(shown_text(texts.raw[at], p.start, p.end)) for at, p in more),
                truncated=hit.truncated,
                message_index=texts.indexes[hit.text] if is_chat else None,
                content_hash=chunk.content_hash or (content_hash(chunk.content) if chunk.content else None),
            )
        )
    record = ContextRecord(method=vocabulary.INCLUSION_LOCATED, placements=placements, prompt=prompt, sources_at=region)
    for number, found in shown.items():
        for _, piece in found:
            record.aliases.setdefault(piece.label, chunks[number].id)
    _aliases(record, chunks, pieces, hits, texts, taken, tokenizer, dropped, region)
    record.dropped = [dropped[number] for number in sorted(dropped)]
    record.not_located = not placements and any(c.content and c.content.strip() for c in chunks) and any(t.strip() for t in texts.raw)
    return record


def _shares_text(content: str, texts: _Texts, hits: dict[int, _Hit]) -> bool:
    """Whether a chunk not found is shown, but as another chunk's text: its whole text sits in a
    credited chunk's, or its start does where that chunk is truncated the same way. A chunk whose
    start is only another chunk's whole text (that chunk is shorter) was not shown."""
    hit = _find_chunk(content, texts, [])
    if hit is None:
        return False
    if not hit.truncated:
        return True
    return any(other.truncated and other.text == hit.text and other.start < hit.end and hit.start < other.end for other in hits.values())


def _first_showing(chunks: Sequence[Chunk], hits: dict[int, _Hit], texts: _Texts, region: tuple[int, int], taken: list[tuple[int, int, int]]) -> None:
    """Place a chunk this turn shows twice (an agent's two rounds that both returned it) at its
    first showing, as recorded and declared do, its later label an alias (``_aliases``): the
    search preferred the latest text, for a history that is by now left out."""
    for number, hit in list(hits.items()):
        content = chunks[number].content or ""
        if hit.truncated or hit.text == region[0] or not content:
            continue
        for index in range(region[0], hit.text):
            if texts.roles[index] != texts.roles[hit.text]:  # another round of the same kind only
                continue
            starts = (s for s in _candidates(texts.raw[index], content) if (index, s) >= region)
            free = (s for s in starts if not any(t == index and s < stop and begin < s + len(content) for t, begin, stop in taken))
            start = next((s for s in free if label_at(texts.raw[index], s)[1] >= hit.tier), None)
            if start is not None:
                moved = _Hit(index, start, start + len(content), False, hit.tier)
                taken[:] = [moved[:3] if spot == hit[:3] else spot for spot in taken]
                hits[number] = moved
                break


def _shown_in_pieces(
    chunks: Sequence[Chunk], missing: list[int], hits: dict[int, _Hit], texts: _Texts, region: tuple[int, int], dropped: dict[int, Drop]
) -> dict[int, list[tuple[int, Piece]]]:
    """The labelled pieces of this turn's sources that are chunks' text cut in pieces
    (``pieces``), for the chunks found truncated or not at all: each piece's label names its
    chunk. A chunk not found whole is placed at its first piece; one whose pieces cover all its
    text is not truncated. Returns the pieces beyond each chunk's first occurrence, by chunk."""
    cut = [n for n, hit in hits.items() if hit.truncated]
    numbers = cut + missing
    contents = [collapse(chunks[n].content or "") for n in numbers]
    skip = {fold_label(label_at(texts.raw[hit.text], hit.start)[0]) for hit in hits.values()}
    found = set(range(len(cut)))
    taken = [(hit.text, hit.start, hit.end) for hit in hits.values()]
    by_chunk: dict[int, list[tuple[int, Piece]]] = {}
    reach = {index: len(collapse(texts.raw[hits[n].text][hits[n].start : hits[n].end])) for index, n in enumerate(cut)}
    for at in range(region[0], len(texts.raw)):
        offset = region[1] if at == region[0] else 0
        for piece in labelled_pieces(texts.raw[at], offset, contents, skip, found, range(len(cut)), reach):
            if any(t == at and piece.start < stop and begin < piece.end for t, begin, stop in taken):
                continue
            skip.add(fold_label(piece.label))
            found.add(piece.holder)
            by_chunk.setdefault(numbers[piece.holder], []).append((at, piece))
    for number, found_pieces in by_chunk.items():
        content = contents[numbers.index(number)]
        spans = [(content.find(collapse(texts.raw[at][p.start : p.end])), len(collapse(texts.raw[at][p.start : p.end]))) for at, p in found_pieces]
        hit = hits.get(number)
        if hit is None:  # shown only in pieces: placed at the first
            at, first = found_pieces.pop(0)
            hit = _Hit(at, first.start, first.end, True, LABEL_OPENS_LINE)
            dropped.pop(number, None)
        else:
            spans.append((0, len(collapse(texts.raw[hit.text][hit.start : hit.end]))))
        hits[number] = hit._replace(truncated=not _covers(spans, content))
    return by_chunk


def _covers(spans: list[tuple[int, int]], content: str) -> bool:
    """Whether the (start, length) spans cover all of ``content`` but the spaces between them."""
    reach = 0
    for start, size in sorted(spans):
        if start < 0 or content[reach:start].strip():
            return False
        reach = max(reach, start + size)
    return not content[reach:].strip()


def _aliases(
    record: ContextRecord,
    chunks: Sequence[Chunk],
    pieces: list[int],
    hits: dict[int, _Hit],
    texts: _Texts,
    taken: list[tuple[int, int, int]],
    tokenizer: Tokenizer,
    dropped: dict[int, Drop],
    region: tuple[int, int] | None,
) -> None:
    """More labels the model saw for a placed chunk: a verbatim repeat of its text under another
    label anywhere in this turn's sources (counted once, as everywhere: an agent's two rounds that
    both returned it), and the other pieces of a chunk shown in pieces under one id (a
    synthesizer that re-split it: their tokens are the chunk's too)."""
    at = {p.chunk_id: index for index, p in enumerate(record.placements)}
    owner = {fold_label(p.label): p.chunk_id for p in record.placements if p.label}
    labels = set(owner)
    for number, hit in hits.items():
        content = chunks[number].content or ""
        where = range(region[0], len(texts.raw)) if region is not None else (hit.text,)
        for index in where:
            text = texts.raw[index]
            for start in _candidates(text, content):
                end = start + len(content)
                if (region is not None and (index, start) < region) or any(t == index and start < stop and begin < end for t, begin, stop in taken):
                    continue
                label, tier = label_at(text, start)
                if tier <= NO_LABEL:
                    continue
                if fold_label(label) not in labels:
                    labels.add(fold_label(label))
                    owner[fold_label(label)] = chunks[number].id
                    record.aliases.setdefault(label, chunks[number].id)
                elif owner.get(fold_label(label)) != chunks[number].id:  # two rounds' [1]: it names neither (``label_map``)
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
        shown = shown_text(texts.raw[hit.text], hit.start, hit.end)
        record.placements[index] = replace(placement, tokens=placement.tokens + tokenizer.count(shown))
        dropped[number] = Drop(chunk.id, vocabulary.DROP_DUPLICATE)


def _find_chunk(content: str, texts: _Texts, taken: Sequence[tuple[int, int, int]] = ()) -> _Hit | None:
    """The chunk's best occurrence, in the first of the ways tried (see ``locate``) that finds it."""
    return _find_whole(content, texts, taken) or _find_prefix(content, texts, taken)


def _find_whole(content: str, texts: _Texts, taken: Sequence[tuple[int, int, int]] = ()) -> _Hit | None:
    """The chunk's whole text: as it is, through whitespace, markdown, then the folded view."""
    if not content.strip():
        return None
    hit = _find_in(texts.raw, content, taken)
    if hit is not None:
        return _Hit(hit[0], hit[1], hit[1] + len(content), False, hit[2])
    for views, candidates in ((texts.collapsed, (collapse(content), collapse(plain(content)))), (texts.folded, (fold(content), fold(plain(content))))):
        for candidate in dict.fromkeys(candidates):
            hit = _find_in(views, candidate, taken) if candidate else None
            if hit is not None:
                return _Hit(hit[0], *views[hit[0]].span(hit[1], hit[1] + len(candidate)), False, hit[2])
    return None


def _find_prefix(content: str, texts: _Texts, taken: Sequence[tuple[int, int, int]] = ()) -> _Hit | None:
    """A truncated chunk: the longest prefix of its text, in the collapsed view, else the folded one
    (binary search; "found" is monotone in prefix length)."""
    if not content.strip():
        return None
    for views, needle in ((texts.collapsed, collapse(content)), (texts.folded, fold(content))):
        best: tuple[int, int, int, int] | None = None
        low, high = min(_MIN_PREFIX_CHARS, len(needle)), len(needle) - 1
        while low <= high:
            middle = (low + high) // 2
            hit = _find_in(views, needle[:middle], taken)
            if hit is None:
                high = middle - 1
            else:
                best = (hit[0], hit[1], middle, hit[2])
                low = middle + 1
        if best is None:
            continue
        message, start, length, tier = best
        # the prefix may have run on into the prompt's whitespace after the cut: the chunk text
        # ends at its last non-space character
        length = len(needle[:length].rstrip())
        if length >= _MIN_PREFIX_CHARS:
            return _Hit(message, *views[message].span(start, start + length), True, tier)
    return None


def _find_in(texts: Sequence[str | View], needle: str, taken: Sequence[tuple[int, int, int]] = ()) -> tuple[int, int, int] | None:
    """(text index, start, label tier) of the best occurrence in any of the texts: the best label
    tier, and of equal tiers the latest text's. In a view, labels are judged in the original
    (where lines still exist).

    Chat prompts put instructions, examples and earlier turns before this turn's sources, so a
    chunk that also appears there must not be credited to the first message it is in.
    """
    best: tuple[tuple[int, bool], int, int] | None = None  # ((tier, fills its entry), text index, start)
    for index, text in enumerate(texts):
        occupied = [(start, end) for message, start, end in taken if message == index]
        if isinstance(text, str):
            found = _best_occurrence(text, needle, None, occupied)
        else:
            found = _best_occurrence(text.text, needle, text, occupied)
        if found is not None and (best is None or found[1:] >= best[0]):
            best = (found[1:], index, found[0])
    return None if best is None else (best[1], best[2], best[0][0])


def _best_occurrence(text: str, needle: str, view: View | None = None, occupied: Sequence[tuple[int, int]] = ()) -> tuple[int, int, bool] | None:
    """(start, tier, whether it fills its entry): the first occurrence right after a label that
    opens a line (``[2] ...``), else right after any label, else the first occurrence at all.
    Instructions such as ``Cite as [n]. Be concise.`` have a label mid-line, sources have one at
    the line start. Of equally labelled occurrences, one that ends its entry (its line) wins: a
    chunk whose whole text is the start of a longer chunk shown before it sits whole in its own
    entry; of unlabelled ones, one that is a line of its own (not a sentence of the instructions). Occurrences overlapping ``occupied`` (original-text spans of chunks already credited)
    are skipped; ``view`` maps a search view ``text`` back to its original."""
    best: tuple[int, int, bool] | None = None
    for start in _candidates(text, needle):
        if best is not None and best[1] == LABEL_OPENS_LINE and best[2]:
            break
        if view is None:
            source, begin, end = text, start, start + len(needle)
        else:
            source, (begin, end) = view.source, view.span(start, start + len(needle))
        if not any(begin < stop and first < end for first, stop in occupied):
            tier = label_at(source, begin)[1]
            fills = ENDS_ENTRY.match(source, end) is not None if tier > NO_LABEL else fills_line(source, begin, end)
            if best is None or (tier, fills) > best[1:]:
                best = (start, tier, fills)
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
