"""Reading the labels a prompt shows its sources under: ``[2]``, ``Source 2:``, ``<source id="2">``,
``(2)``, ``2.`` / ``2)`` opening a line, JSON-escaped or not.

The search for chunks (``locate``), declared fragments (``declared``) and the citation rule
(``answer``) read labels with these regexes, so a label means the same on every path. Every
regex is bounded (none can backtrack beyond its bound). Pure: no spans, no globals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# "Source 2", "doc #3": the keyword, then a space or "#", then the label ("passages" is no label "s");
# not inside a word ("resource 2"), though right after a JSON-escaped line break ("\\nSource 2").
KEYWORD_LABEL = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))(?:source|document|doc|chunk|passage)(?:[ \t]*#[ \t]*|[ \t]+)(\w{1,32})"
# An XML-style source tag carrying its label, ``<source id="2">`` or ``<document index='2'>`` (the
# format model vendors recommend for documents); its quotes may be JSON-escaped (a request body).
XML_LABEL = r"<(?:source|document|doc|chunk|passage|context)\b[^<>\n]{0,64}?\b(?:id|index|n|number)\s*=\s*\\?[\"']?([\w.:\-]{1,32})\\?[\"']?[^<>\n]{0,64}>"
_LINE_START = r"(?:^|(?<=\n)|(?<=\\n))"
# "(2)" opening a line; mid-line it is prose ("as in (5)").
NUMBER_LABEL = _LINE_START + r"\((\d{1,4})\)"
# "2." or "2)" opening a line, then a space: a numbered list.
LIST_LABEL = _LINE_START + r"[ \t]{0,8}(\d{1,4})(?=[.)][ \t])"
# What may sit between a label and the chunk text, escaped line breaks included, and an opening quote.
_GAP = r"(?:\s|\\[nrt]){0,16}"
LABEL_FORMS = r"\[([^\[\]\n]{1,64})\]|" + KEYWORD_LABEL + "|" + XML_LABEL + "|" + NUMBER_LABEL + "|" + LIST_LABEL
_LABEL_BEFORE = re.compile(r"(?:" + LABEL_FORMS + r")" + _GAP + r"[:.)-]?" + _GAP + r"(?:[\"'“‘«„]|\\\")?$", re.I)
# A source label opening a line: what the prompt shows the model as sources, found or not. A
# keyword label there holds a number, or ends at a separator or the line's end ("Source 2 ...",
# "Source kb:", "Document A"): a line of text opening with "Document management is ..." is none.
_KEYWORD_ENDS = r"(?:(?<=\d)|(?=[ \t]*(?:[:.)\-#]|\r|\n|\\[rn]|$)))"
LINE_LABEL = re.compile(
    _LINE_START
    + r"[ \t\-*>]{0,16}(?:\[([^\[\]\n]{1,64})\]|"
    + KEYWORD_LABEL
    + _KEYWORD_ENDS
    + "|"
    + XML_LABEL
    + r"|\((\d{1,4})\)|(\d{1,4})[.)](?=[ \t]))",
    re.I,
)
NO_LABEL, LABEL, LABEL_OPENS_LINE = 0, 1, 2  # how sure a label is a source's, lowest first
_LINE_LEAD = " \t-*>"  # indentation, list bullets and quote marks before a line's label
_MAX_LINE_LEAD = 16


def label_of(match: re.Match[str]) -> str:
    """The label a label regex matched (whichever of its forms did), trimmed."""
    return next((group for group in match.groups() if group), "").strip()


def fold_label(label: str) -> str:
    return " ".join(label.split()).casefold()


def label_at(text: str, start: int) -> tuple[str, int]:
    """The label right before ``start`` and its tier. A label that opens its line may stand on a
    line of its own (``[2]\\n text``); one in mid-line must share the chunk's line, or it is an
    instruction's example (``citing [n].\\n\\n text``), not the chunk's label."""
    window_start = max(0, start - 80)
    match = _LABEL_BEFORE.search(text[window_start:start])
    if match is None:
        return "", NO_LABEL
    label = label_of(match)
    if not label:
        return "", NO_LABEL
    label_start = window_start + match.start()
    lead_start = max(0, label_start - _MAX_LINE_LEAD)  # bounded: never scan back a whole line
    # a line starts after a line break, or after an escaped one (a JSON request body)
    line_start = max(text.rfind("\n", lead_start, label_start) + 1, text.rfind("\\n", lead_start, label_start) + 2, 0)
    if (line_start or not lead_start) and not text[line_start:label_start].strip(_LINE_LEAD):
        return label, LABEL_OPENS_LINE
    gap = text[label_start:start]
    if "\n" in gap or "\\n" in gap:
        return "", NO_LABEL
    return label, LABEL


def label_style(text: str, start: int) -> tuple[tuple[Any, ...], int]:
    """How the label right before ``start`` is written, and where it starts: its form (brackets,
    a keyword, an XML tag, ``(n)``, a list number) and its kind (a number, a letter or two, an
    id). A few-shot example under ``[A]`` or ``[doc-7]`` is written unlike sources under
    ``[1]``, whatever the numbers. ``((), start)`` when there is no label."""
    window_start = max(0, start - 80)
    match = _LABEL_BEFORE.search(text[window_start:start])
    if match is None:
        return (), start
    form = next((index for index, group in enumerate(match.groups(), start=1) if group), 0)
    label = label_of(match)
    kind = "n" if label.isdigit() else "a" if label.isalpha() and len(label) <= 3 else "id"
    return (form, kind), window_start + match.start()


def shown_labels(prompt: Any, start: tuple[int, int] | None = None) -> frozenset[str]:
    """The source labels ``prompt`` shows at line starts (folded: case and whitespace), found or
    not: a cited key among them names something the model saw (``answer.unresolvable``).
    ``start`` (text number among ``prompt_texts``, offset): only this turn's sources, which start
    there (``locate``); labels of an earlier turn or of an example before them name nothing the
    answer may cite."""
    labels: set[str] = set()
    for number, (_, _, text) in enumerate(prompt_texts(prompt)):
        if start is not None and number < start[0]:
            continue
        offset = start[1] if start is not None and number == start[0] else 0
        for match in LINE_LABEL.finditer(text, offset):
            label = label_of(match)
            if label:
                labels.add(fold_label(label))
    return frozenset(labels)


def prompt_texts(prompt: Any) -> list[tuple[int, str, str]]:
    """(message index, role, text) of each text a prompt holds: a string is one, role "user"."""
    if isinstance(prompt, str):
        return [(0, "user", prompt)]
    texts = []
    if isinstance(prompt, Sequence):
        for index, message in enumerate(prompt):
            if isinstance(message, Mapping):
                content, role = message.get("content"), message.get("role")
            else:
                content, role = getattr(message, "content", None), getattr(message, "role", None) or getattr(message, "type", None)
            if isinstance(content, str):
                texts.append((index, str(getattr(role, "value", role) or "user"), content))
    return texts
