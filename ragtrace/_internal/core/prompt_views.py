"""Views of a prompt text that a chunk is searched in, each mapping back to original offsets.

A formatter may re-wrap a chunk, strip its markdown, lowercase it, HTML-escape it, or a template
may show it with typographic quotes, dashes or another Unicode form. The search (``locate``) looks
for the chunk in the text as it is first, then in these views, and a hit in a view is mapped back
to where the chunk sits in the original, so offsets stay exact:

* ``collapsed``: every whitespace run read as one space;
* ``folded``: collapsed, and also HTML entities unescaped, NFKC-normalised, typographic quotes
  and dashes read as ASCII, case folded.

Normalisation works on whole grapheme runs (a character and the combining marks or Hangul jamo
that follow it), never on a lone character: a chunk stored decomposed (``e`` + U+0301) and shown
composed (``é``), or the reverse, reads the same, and every character of a run maps back to the
whole run in the original.

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


def _joins(char: str) -> bool:
    """Whether ``char`` belongs to the run of the character before it: a combining mark, or a
    Hangul vowel or final jamo (which NFC composes into the syllable before)."""
    if char.isascii():
        return False
    return bool(unicodedata.combining(char)) or unicodedata.category(char) in _MARKS or "\u1160" <= char <= "\u11ff" or "\ud7b0" <= char <= "\ud7ff"


_MARKS = frozenset({"Mn", "Mc", "Me"})


def _run_end(text: str, start: int) -> int:
    """Where the grapheme run starting at ``start`` ends."""
    end, length = start + 1, len(text)
    while end < length and _joins(text[end]):
        end += 1
    return end


def _fold_run(run: str) -> str:
    if run.isascii():
        return run.lower()
    return unicodedata.normalize("NFKC", run).translate(_TYPOGRAPHY).casefold()


_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_JSON_CHARS = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _json_document(source: str) -> bool:
    """A request body sent as one string (its escapes are what the model never sees)."""
    return "\\" in source and source.lstrip()[:1] in ("{", "[")


def shown_text(source: str, start: int, end: int) -> str:
    """What the model reads of ``source[start:end]``: in a JSON document, its string escapes
    decoded (the API decodes them), elsewhere the text as it is."""
    if not _json_document(source):
        return source[start:end]
    return "".join(unit[0] for unit in _units(source[start:end], json_only=True))


def _units(source: str, json_only: bool = False) -> list[tuple[str, int, int]]:
    """``source`` as (decoded character, start, end) units, for the folded view: HTML entities
    decoded, and, in a JSON document (a request body sent as one string), its string escapes
    (``\\u00e9``, ``\\"``, ``\\n``; a surrogate pair as one character), each unit spanning its
    whole escape in the original."""
    marks: dict[int, tuple[str, int]] = {}
    if "&" in source and not json_only:
        for match in _ENTITY.finditer(source):
            marks[match.start()] = (html.unescape(match.group()), match.end())
    if json_only or _json_document(source):
        for match in _JSON_ESCAPE.finditer(source):
            code, simple = match.groups()
            marks.setdefault(match.start(), (chr(int(code, 16)) if code else _JSON_CHARS[simple], match.end()))
    units: list[tuple[str, int, int]] = []
    index, length = 0, len(source)
    while index < length:
        mark = marks.get(index)
        if mark is None:
            units.append((source[index], index, index + 1))
            index += 1
            continue
        decoded, end = mark
        if len(decoded) == 1 and "\ud800" <= decoded <= "\udbff" and end in marks and "\udc00" <= marks[end][0] <= "\udfff":
            low, after = marks[end]  # a surrogate pair: one character
            decoded, end = (decoded + low).encode("utf-16", "surrogatepass").decode("utf-16"), after
        units.extend((char, index, end) for char in decoded)
        index = end
    return units


def fold(text: str) -> str:
    """Text as the ``folded`` view reads it (for chunk text: the needle)."""
    text = html.unescape(text)
    if text.isascii():
        return collapse(text.lower())
    pieces, index = [], 0
    while index < len(text):
        end = _run_end(text, index)
        pieces.append(_fold_run(text[index:end]))
        index = end
    return collapse("".join(pieces))


class View:
    """A text with each character's origin: ``text`` is the view, ``span`` maps a range of it back
    to the original (``source``)."""

    def __init__(self, source: str, folded: bool = False) -> None:
        chars: list[str] = []
        origin: list[int] = []
        ends: list[int] = []  # folded: where each view character's source run ends
        in_space = False
        if not folded:  # collapsed: whitespace runs become one space, nothing else changes
            for index, char in enumerate(source):
                if char.isspace():
                    if not in_space:
                        chars.append(" ")
                        origin.append(index)
                    in_space = True
                else:
                    chars.append(char)
                    origin.append(index)
                    in_space = False
            self.text, self.origin, self.source, self._ends = "".join(chars), origin, source, None
            return
        units = _units(source)
        at, count = 0, len(units)
        while at < count:  # a grapheme run: a character and the marks or jamo that join it
            stop = at + 1
            while stop < count and _joins(units[stop][0]):
                stop += 1
            piece = _fold_run("".join(unit[0] for unit in units[at:stop]))
            begin, end = units[at][1], units[stop - 1][2]
            for char in piece:
                if char.isspace():
                    if not in_space:
                        chars.append(" ")
                        origin.append(begin)
                        ends.append(end)
                    in_space = True
                else:
                    chars.append(char)
                    origin.append(begin)
                    ends.append(end)
                    in_space = False
            at = stop
        self.text = "".join(chars)
        self.origin = origin
        self.source = source
        self._ends = ends

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original (start, end) of the view's ``text[start:end]``."""
        if self._ends is None:
            return self.origin[start], self.origin[end - 1] + 1
        # a character the fold changed in length (an entity, a ligature, a combining run) ends
        # where its source run does
        return self.origin[start], self._ends[end - 1]
