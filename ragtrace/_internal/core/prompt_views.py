"""Views of a prompt text that a chunk is searched in, each mapping back to original offsets.

A formatter may re-wrap a chunk, strip its markdown, lowercase it, HTML-escape it, or a template
may show it with typographic quotes, dashes or another Unicode form. The search (``locate``) looks
for the chunk in the text as it is first, then in these views, and a hit in a view is mapped back
to where the chunk sits in the original, so offsets stay exact:

* ``collapsed``: every whitespace run read as one space;
* ``folded``: collapsed, and also HTML entities unescaped, NFKC-normalised, typographic quotes
  and dashes read as ASCII, case folded.

Chunk text goes through the same ``collapse`` / ``fold`` before it is searched for.
Pure: no spans, no globals.
"""

from __future__ import annotations

import html
import re
import unicodedata

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# what a typesetter (or a template) puts where the chunk has plain ASCII marks
_TYPOGRAPHY = str.maketrans(
    {
        **dict.fromkeys("‘’‚‛′`´", "'"),
        **dict.fromkeys("“”„‟″«»", '"'),
        **dict.fromkeys("‐‑‒–—―−", "-"),
        "…": "...",
    }
)
_MARKDOWN = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`+|^#{1,6}[ \t]+|^[ \t]*>[ \t]?", re.M)
_MARKDOWN_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\s]*\)")


def collapse(text: str) -> str:
    return " ".join(text.split())


def plain(content: str) -> str:
    """Chunk text as a formatter that strips markdown would render it."""
    return _MARKDOWN.sub("", _MARKDOWN_LINK.sub(r"\1", content))


def _fold_char(char: str) -> str:
    if char.isascii():
        return char.lower()
    return unicodedata.normalize("NFKC", char).translate(_TYPOGRAPHY).casefold()


def fold(text: str) -> str:
    """Text as the ``folded`` view reads it (for chunk text: the needle)."""
    return collapse("".join(_fold_char(c) for c in html.unescape(text)))


class View:
    """A text with each character's origin: ``text`` is the view, ``span`` maps a range of it back
    to the original (``source``)."""

    def __init__(self, source: str, folded: bool = False) -> None:
        chars: list[str] = []
        origin: list[int] = []
        in_space = False
        entities = {m.start(): m for m in _ENTITY.finditer(source)} if folded and "&" in source else {}
        index, length = 0, len(source)
        while index < length:
            entity = entities.get(index)
            if entity is not None:
                piece, step = html.unescape(entity.group()), entity.end() - index
            else:
                piece, step = source[index], 1
            if folded:
                piece = "".join(_fold_char(c) for c in piece)
            for char in piece:
                if char.isspace():
                    if not in_space:
                        chars.append(" ")
                        origin.append(index)
                    in_space = True
                else:
                    chars.append(char)
                    origin.append(index)
                    in_space = False
            index += step
        self.text = "".join(chars)
        self.origin = origin
        self.source = source
        self._ends = [origin[i + 1] if i + 1 < len(origin) else length for i in range(len(origin))] if folded else None

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original (start, end) of the view's ``text[start:end]``."""
        if self._ends is None:
            return self.origin[start], self.origin[end - 1] + 1
        # a character the fold changed in length (an entity, a ligature) ends where its source does
        return self.origin[start], self._ends[end - 1]
