"""A chunk shown in pieces under several labels: which chunk each labelled piece was cut from.

An app may split a chunk before showing it (its halves as ``[2]`` and ``[3]``), and LlamaIndex's
``CitationQueryEngine`` re-splits every node into ``Source n:`` pieces that overlap a little. Every
piece is the chunk's text word for word, so each of its labels names that chunk
(``docs/concepts.md``). This is the one mapping every path uses: the search of a prompt
(``locate``: ``@assembler`` and ``ragtrace report`` on plain traces) and the LlamaIndex
integration, which sees the derived nodes themselves (``integrations._packing``).
Pure: no spans, no globals.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from .prompt_views import View, collapse
from .source_labels import LINE_LABEL, label_of

MIN_PIECE_CHARS = 24  # a shorter labelled text is only a piece of a chunk already found
_SHORT_PIECE_CHARS = 8
_AFTER_LABEL = re.compile(r"(?:\s|\\[nrt]){0,16}[:.)\-]?(?:\s|\\[nrt]){0,16}[\"'“‘«„]?")


class Piece(NamedTuple):
    label: str
    start: int  # in the text it was found in
    end: int
    holder: int  # index into the contents searched


def holding(piece: str, contents: Sequence[str], preferred: Sequence[int] = ()) -> int | None:
    """The index of the first of ``contents`` (collapsed, as ``collapse`` gives them) that holds
    ``piece`` whitespace-insensitively, trying ``preferred`` indexes first; None when none does."""
    needle = collapse(piece)
    if not needle:
        return None
    for index in (*preferred, *range(len(contents))):
        if needle in contents[index]:
            return index
    return None


def labelled_pieces(
    text: str,
    offset: int,
    contents: Sequence[str],
    skip: set[str],
    found: set[int],
    preferred: Sequence[int] = (),
    reach: dict[int, int] | None = None,
) -> Iterator[Piece]:
    """The pieces of ``contents`` (collapsed chunk texts) that ``text`` shows from ``offset`` on,
    each right after a source label opening a line whose folded form is not in ``skip`` (labels
    already resolved). A piece is the longest start of the label's text that one chunk holds,
    cut back to a word's end; it counts when it is at least ``MIN_PIECE_CHARS`` long, or, for a
    chunk in ``found`` (already placed), when it is all the label shows (a short last piece).
    ``reach`` (chunk index -> where its pieces so far end in its text, kept up to date): a label
    whose whole text continues a chunk right there is its next piece, however short (``(3) policy``
    between ``(2)`` and ``(4)``, which cut one chunk in three)."""
    reach = {} if reach is None else reach
    matches = list(LINE_LABEL.finditer(text, offset))
    for index, match in enumerate(matches):
        label = label_of(match)
        folded = " ".join(label.split()).casefold()
        if not label or folded in skip:
            continue
        after = _AFTER_LABEL.match(text, match.end())
        begin = after.end() if after is not None else match.end()
        stop = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        view = View(text[begin:stop])
        body = view.text.strip()
        lead = len(view.text) - len(view.text.lstrip())
        after = _continued(body, contents, reach)
        if after is not None:  # the next piece of a chunk whose pieces came before it, whole
            holder, end = after
            start, stop_at = view.span(lead, lead + len(body))
            reach[holder] = end
            yield Piece(label, begin + start, begin + stop_at, holder)
            continue
        length, holder = _longest_held(body, contents, preferred)
        if holder is None:
            continue
        rest = body[length:]
        if rest[:1].isalnum() and body[length - 1 : length].isalnum():  # cut mid-word: back to its start
            length = body.rfind(" ", 0, length)
            if length <= 0:
                continue
        piece = body[:length].rstrip()
        start, end = view.span(lead, lead + len(piece))
        if len(piece) < MIN_PIECE_CHARS:
            tail = text[begin + end : stop].lstrip(" \t\"'”’»")
            ends_line = not tail.strip() or tail.startswith(("\n", "\r", "\\n", "<"))
            if not (holder in found and ends_line and len(piece) >= _SHORT_PIECE_CHARS):
                continue
        at = contents[holder].find(piece)
        reach[holder] = max(reach.get(holder, 0), at + len(piece))
        yield Piece(label, begin + start, begin + end, holder)


def _continued(body: str, contents: Sequence[str], reach: dict[int, int]) -> tuple[int, int] | None:
    """(chunk index, where it then ends) when ``body`` is, whole and at a word's start, the text
    of a chunk right where its pieces so far end; None otherwise."""
    if not body:
        return None
    for holder, end in reach.items():
        content = contents[holder]
        start = end + (len(content[end:]) - len(content[end:].lstrip()))
        if content.startswith(body, start) and (start + len(body) == len(content) or not content[start + len(body)].isalnum()):
            return holder, start + len(body)
    return None


def _longest_held(body: str, contents: Sequence[str], preferred: Sequence[int]) -> tuple[int, int | None]:
    """The length of the longest start of ``body`` some content holds, and that content's index
    (binary search per content: "held" is monotone in the length)."""
    best, holder = 0, None
    for index in dict.fromkeys((*preferred, *range(len(contents)))):
        content = contents[index]
        if not body or body[: min(_SHORT_PIECE_CHARS, len(body))] not in content:
            continue
        low, high = max(best + 1, 1), len(body)
        while low <= high:
            middle = (low + high) // 2
            if body[:middle] in content:
                best, holder, low = middle, index, middle + 1
            else:
                high = middle - 1
    return best, holder
