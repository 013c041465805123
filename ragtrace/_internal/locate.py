"""Locating chunks in a prompt the user built: a search, and said to be one (``located``).

The fallback when nothing was recorded or declared: the prompt is searched at assembly time,
while the input chunks are still known. A search can miss or misplace text, so the record says
``inclusion_method = "located"``, and a chunk it could not find makes the answer's unresolved
citations unscored rather than invalid (``generation``). ``ragtrace report`` infers inclusion for
other tools' traces with the same search.
Pure: no spans, no globals.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from . import names
from .assembly import ContextRecord, Drop, Placement
from .chunks import Chunk, content_hash
from .patterns import uncached
from .tokens import DEFAULT_TOKENIZER, Tokenizer

# The labels a source can open with, each read by a bounded regex (none can backtrack far):
# "Source 2", "doc #3": the keyword, then a space or "#", then the label ("passages" is no label "s");
# not inside a word ("resource 2"), though right after a JSON-escaped line break ("\\nSource 2").
KEYWORD_LABEL = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))(?:source|document|doc|chunk|passage)(?:[ \t]*#[ \t]*|[ \t]+)(\w{1,32})"
# An XML-style source tag carrying its label, ``<source id="2">`` or ``<document index='2'>`` (the
# format model vendors recommend for documents); its quotes may be JSON-escaped (a request body).
XML_LABEL = r"<(?:source|document|doc|chunk|passage|context)\b[^<>\n]{0,64}?\b(?:id|index|n|number)\s*=\s*\\?[\"']?([\w.:\-]{1,32})\\?[\"']?[^<>\n]{0,64}>"
# "(2)" opening a line (a numbered list); mid-line it is prose ("as in (5)").
NUMBER_LABEL = r"(?:^|(?<=\n)|(?<=\\n))\((\d{1,4})\)"
# What may sit between a label and the chunk text, escaped line breaks included.
_GAP = r"(?:\s|\\[nrt]){0,16}"
_LABEL_BEFORE = re.compile(
    r"(?:\[([^\[\]\n]{1,64})\]|" + KEYWORD_LABEL + "|" + XML_LABEL + "|" + NUMBER_LABEL + r")" + _GAP + r"[:.)-]?" + _GAP + "$", re.I
)
_MAX_OCCURRENCES = 64
# A source label opening a line (escaped line breaks included), in any form ``_LABEL_BEFORE`` reads:
# what the prompt shows the model as sources, whether or not a chunk was found under it.
_LINE_LABEL = re.compile(
    r"(?:^|(?<=\n)|(?<=\\n))[ \t\-*>]{0,16}(?:\[([^\[\]\n]{1,64})\]|" + KEYWORD_LABEL + "|" + XML_LABEL + r"|\((\d{1,4})\)|(\d{1,4})[.)](?=[ \t]))",
    re.I,
)
_MIN_PREFIX_CHARS = 24


def locate(chunks: Sequence[Chunk], prompt: Any, tokenizer: Tokenizer = DEFAULT_TOKENIZER) -> ContextRecord:
    """Find each input chunk's text in ``prompt`` (a string or chat messages).

    Tries an exact match, then a whitespace-insensitive match, then the chunk with its markdown
    emphasis, code marks, heading marks and link targets removed (a formatter that strips them),
    then the longest matching prefix (a truncated chunk). Occurrences right after a label such as
    ``[2]`` are preferred, so short chunks that also appear in the instructions aren't credited to
    the instructions; and when the sources are labelled, a chunk found only outside any label is
    not one of them (``outside_sources``, typically a dropped chunk whose words the instructions
    repeat), so it never takes a position from a labelled one.

    Longer chunks are matched first and no two chunks share prompt text: a chunk whose text also
    sits inside a longer chunk's text is credited at its own occurrence, and is a duplicate when
    that is the only one.
    """
    texts = _prompt_texts(prompt)
    outcomes: list[Drop | tuple[int, int, int, bool, int, Chunk] | None] = [None] * len(chunks)
    seen_ids: set[str] = set()
    pending: list[int] = []
    for number, chunk in enumerate(chunks):
        if chunk.id in seen_ids:
            outcomes[number] = Drop(chunk.id, names.DROP_DUPLICATE)
        else:
            seen_ids.add(chunk.id)
            pending.append(number)
    pending.sort(key=lambda number: -len(chunks[number].content or ""))  # stable: ties keep input order
    indexes = [_Normalized(text) for _, text in texts]
    taken: list[tuple[int, int, int]] = []  # (text index, start, end) already credited
    for number in pending:
        chunk = chunks[number]
        hit = _find_chunk(chunk.content or "", texts, indexes, taken)
        if hit is None:
            shared = taken and _find_chunk(chunk.content or "", texts, indexes, []) is not None
            outcomes[number] = Drop(chunk.id, names.DROP_DUPLICATE if shared else names.DROP_NOT_FOUND)
            continue
        taken.append(hit[:3])
        outcomes[number] = (*hit, chunk)  # (text index, start, end, truncated, tier, chunk)
    labelled = any(isinstance(o, tuple) and o[4] > _NO_LABEL for o in outcomes)
    if labelled:
        outcomes = [Drop(o[5].id, names.DROP_OUTSIDE_SOURCES) if isinstance(o, tuple) and o[4] == _NO_LABEL else o for o in outcomes]
    dropped = [o for o in outcomes if isinstance(o, Drop)]
    found = sorted((o for o in outcomes if isinstance(o, tuple)), key=lambda item: (item[0], item[1]))
    is_chat = not isinstance(prompt, str)
    placements = []
    for position, (message, start, end, truncated, _, chunk) in enumerate(found, start=1):
        text = texts[message][1]
        placements.append(
            Placement(
                chunk_id=chunk.id,
                position=position,
                label=_label_before(text, start),
                start=start,
                end=end,
                tokens=tokenizer.count(text[start:end]),
                truncated=truncated,
                message_index=texts[message][0] if is_chat else None,
                content_hash=chunk.content_hash or (content_hash(chunk.content) if chunk.content else None),
            )
        )
    return ContextRecord(method=names.INCLUSION_LOCATED, placements=placements, dropped=dropped, prompt=prompt)


def _prompt_texts(prompt: Any) -> list[tuple[int, str]]:
    if isinstance(prompt, str):
        return [(0, prompt)]
    texts = []
    if isinstance(prompt, Sequence):
        for index, message in enumerate(prompt):
            content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
            if isinstance(content, str):
                texts.append((index, content))
    return texts


class _Normalized:
    """A text with runs of whitespace collapsed to one space, and a map back to the original."""

    def __init__(self, text: str) -> None:
        chars: list[str] = []
        origin: list[int] = []
        in_space = False
        for index, char in enumerate(text):
            if char.isspace():
                if not in_space:
                    chars.append(" ")
                    origin.append(index)
                in_space = True
            else:
                chars.append(char)
                origin.append(index)
                in_space = False
        self.text = "".join(chars)
        self.origin = origin
        self.source = text

    def span(self, start: int, end: int) -> tuple[int, int]:
        return self.origin[start], self.origin[end - 1] + 1


def _collapse(text: str) -> str:
    return " ".join(text.split())


_MARKDOWN = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`+|^#{1,6}[ \t]+|^[ \t]*>[ \t]?", re.M)
_MARKDOWN_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\s]*\)")


def _plain(content: str) -> str:
    """Chunk text as a formatter that strips markdown would render it."""
    return _MARKDOWN.sub("", _MARKDOWN_LINK.sub(r"\1", content))


def _find_chunk(
    content: str, texts: list[tuple[int, str]], indexes: list[_Normalized], taken: Sequence[tuple[int, int, int]] = ()
) -> tuple[int, int, int, bool, int] | None:
    """(text index, start, end, truncated, label tier) of the chunk's best occurrence."""
    if not content.strip():
        return None
    hit = _find_in([text for _, text in texts], content, taken)
    if hit is not None:
        return hit[0], hit[1], hit[1] + len(content), False, hit[2]
    needle = _collapse(content)
    for candidate in dict.fromkeys((needle, _collapse(_plain(content)))):
        hit = _find_in(indexes, candidate, taken)
        if hit is not None and candidate:
            return (hit[0], *indexes[hit[0]].span(hit[1], hit[1] + len(candidate)), False, hit[2])
    # truncated chunk: the longest prefix (binary search; "found" is monotone in prefix length)
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
    return (message, *indexes[message].span(start, start + length), True, tier)


def _find_in(texts: Sequence[str | _Normalized], needle: str, taken: Sequence[tuple[int, int, int]] = ()) -> tuple[int, int, int] | None:
    """(text index, start, label tier) of the best occurrence in any of the texts; earlier wins a tie.
    In a whitespace-collapsed text, labels are judged in the original (where lines still exist).

    Chat prompts put instructions in an earlier message than the sources, so a short chunk that
    also appears there must not be credited to the first message it is in.
    """
    best: tuple[int, int, int] | None = None  # (tier, text index, start)
    for index, text in enumerate(texts):
        occupied = [(start, end) for message, start, end in taken if message == index]
        if isinstance(text, str):
            found = _best_occurrence(text, needle, None, occupied)
        else:
            found = _best_occurrence(text.text, needle, text, occupied)
        if found is not None and (best is None or found[1] > best[0]):
            best = (found[1], index, found[0])
            if best[0] == _LABEL_OPENS_LINE:
                break
    return None if best is None else (best[1], best[2], best[0])


_NO_LABEL, _LABEL, _LABEL_OPENS_LINE = 0, 1, 2
_LINE_LEAD = " \t-*>"  # indentation, list bullets and quote marks before a line's label
_MAX_LINE_LEAD = 16


def _best_occurrence(
    text: str, needle: str, normalized: _Normalized | None = None, occupied: Sequence[tuple[int, int]] = ()
) -> tuple[int, int] | None:
    """(start, tier): the first occurrence right after a label that opens a line (``[2] ...``),
    else right after any label, else the first occurrence at all. Instructions such as
    ``Cite as [n]. Be concise.`` have a label mid-line, sources have one at the line start.
    Occurrences overlapping ``occupied`` (original-text spans of chunks already credited) are
    skipped; ``normalized`` maps a whitespace-collapsed ``text`` back to its original."""
    best: tuple[int, int] | None = None
    for start in _candidates(text, needle):
        if best is not None and best[1] == _LABEL_OPENS_LINE:
            break
        if normalized is None:
            source, begin, end = text, start, start + len(needle)
        else:
            source, (begin, end) = normalized.source, normalized.span(start, start + len(needle))
        if not any(begin < stop and first < end for first, stop in occupied):
            tier = _label_tier(source, begin)
            if best is None or tier > best[1]:
                best = (start, tier)
    return best


def _candidates(text: str, needle: str) -> Iterator[int]:
    """Where ``needle`` starts: its first occurrences (bounded), then, past the bound, the
    occurrences right after a bracket label (one C-level scan), so a labelled source is found
    even behind many unlabelled repeats."""
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


def _label_tier(text: str, start: int) -> int:
    return _label_at(text, start)[1]


def _label_at(text: str, start: int) -> tuple[str, int]:
    """The label right before ``start`` and its tier. A label that opens its line may stand on a
    line of its own (``[2]\\n text``); one in mid-line must share the chunk's line, or it is an
    instruction's example (``citing [n].\\n\\n text``), not the chunk's label."""
    window_start = max(0, start - 80)
    match = _LABEL_BEFORE.search(text[window_start:start])
    label = label_of(match) if match is not None else ""
    if not label:
        return "", _NO_LABEL
    label_start = window_start + match.start()  # type: ignore[union-attr]
    lead_start = max(0, label_start - _MAX_LINE_LEAD)  # bounded: never scan back a whole line
    # a line starts after a line break, or after an escaped one (a JSON request body)
    line_start = max(text.rfind("\n", lead_start, label_start) + 1, text.rfind("\\n", lead_start, label_start) + 2, 0)
    opens_line = bool(line_start or not lead_start) and not text[line_start:label_start].strip(_LINE_LEAD)
    if opens_line:
        return label, _LABEL_OPENS_LINE
    gap = text[label_start:start]
    if "\n" in gap or "\\n" in gap:
        return "", _NO_LABEL
    return label, _LABEL


def label_of(match: re.Match[str]) -> str:
    """The label a label regex matched (whichever of its forms did), trimmed."""
    return next((group for group in match.groups() if group), "").strip()


def _label_before(text: str, start: int) -> str:
    return _label_at(text, start)[0]


def shown_labels(prompt: Any) -> frozenset[str]:
    """The source labels ``prompt`` shows at line starts (folded: case and whitespace), found or
    not: a cited key among them names something the model saw (``answer.unresolvable``)."""
    labels: set[str] = set()
    for _, text in _prompt_texts(prompt):
        for match in _LINE_LABEL.finditer(text):
            label = label_of(match)
            if label:
                labels.add(" ".join(label.split()).casefold())
    return frozenset(labels)
