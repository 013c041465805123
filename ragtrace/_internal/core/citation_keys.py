"""Resolving what is inside one citation marker to chunks: keys, lists, ranges, prefixes, JSON entries.

``KeyResolver`` holds one parse's label lookup (citation key -> chunk id) and its ordered,
de-duplicated findings: chunks validly cited and labels that point at nothing. The scanner
(``citation_scan``) finds the markers in the text and hands their insides here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .keyed import HASHED_LABEL, label_key
from .citation_syntax import (
    ID_FIELDS,
    LIST_SPLIT,
    MAX_LABEL,
    MAX_RANGE,
    OPENAI_INDEX,
    PLAIN,
    PREFIX,
    RANGE,
    SOURCE,
    fold,
    is_id,
    looks_like_citation,
    strip_caret,
)


class KeyResolver:
    """One parse's label lookup and findings; every method resolves keys, none reads the text."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.exact: dict[str, str] = {}
        if isinstance(labels, Mapping):
            for key, value in labels.items():
                if isinstance(key, str) and value is not None:
                    self.exact[key] = value if isinstance(value, str) else str(value)
        self._folded: dict[str, str] | None = None
        # whether some labels are keyed digests a cross-process record carried (``keyed.label_key``):
        # looked for at the first key that matches no label, so a parse whose keys all match never pays
        self._hashed: bool | None = None
        self.cited: dict[str, None] = {}
        self.invalid: dict[str, None] = {}

    def lookup(self, key: str) -> str | None:
        """Exact key first, then case-insensitive with whitespace trimmed and collapsed."""
        found = self.exact.get(key)
        if found is not None:
            return found
        if self._folded is None:
            self._folded = {}
            for label, chunk_id in self.exact.items():
                self._folded.setdefault(fold(label), chunk_id)
        found = self._folded.get(fold(key))
        if found is None and self._hashed is not False:
            if self._hashed is None:
                self._hashed = any(label.startswith(HASHED_LABEL) for label in self.exact)
            if self._hashed:
                return self.exact.get(label_key(fold(key)))
        return found

    def valid(self, key: str) -> bool:
        chunk_id = self.lookup(key)
        if chunk_id is None:
            return False
        self.cited.setdefault(chunk_id, None)
        return True

    def add_invalid(self, key: str) -> None:
        # Invariant: an invalid label never resolves (guards every caller, and the property tests).
        if key and not self.valid(key):
            self.invalid.setdefault(key, None)

    def group(self, text: str, strength: int) -> None:
        """The inside of one bracket (or one JSON string): a key, a list, a range, a prefix."""
        chunk_id = self.exact.get(text)
        if chunk_id is not None and not text.startswith("^") and text == text.strip():  # the common [1]: a label as it is
            self.cited.setdefault(chunk_id, None)
            return
        if text.lstrip().startswith("^"):  # [^note] is footnote syntax: meant as a citation
            strength = SOURCE
        key = strip_caret(text)
        if not key or self.valid(key):
            return
        if key.isascii() and key.isdigit():  # the common [7]: no list, range or prefix to try
            self.invalid.setdefault(key, None)
            return
        match = PREFIX.fullmatch(key)
        if match is not None:
            key = match.group(2)
            if ":" in match.group(1):
                strength = SOURCE
            if self.valid(key):
                return
        parts = LIST_SPLIT.split(key)
        for part in parts if len(parts) > 1 else (key,):
            self.item(part, strength)

    def item(self, text: str, strength: int, depth: int = 0) -> None:
        key = strip_caret(text)
        if not key or self.valid(key):
            return
        match = RANGE.fullmatch(key)
        if match is not None:
            self.range(key, int(match.group(1)), int(match.group(2)))
            return
        match = PREFIX.fullmatch(key)
        if match is not None and depth < 2:  # [Source 1, Source 2]
            self.item(match.group(2), SOURCE if ":" in match.group(1) else strength, depth + 1)
            return
        if key.startswith("#") and len(key) > 1:  # [#3]
            key = key[1:].strip()
            if self.valid(key):
                return
        if looks_like_citation(key) or (strength >= SOURCE and is_id(key)):
            self.add_invalid(key)

    def range(self, raw: str, low: int, high: int) -> None:
        if high < low or high - low >= MAX_RANGE:
            self.add_invalid(raw)
            return
        for number in range(low, high + 1):
            key = str(number)
            if not self.valid(key):
                self.add_invalid(key)

    def lenticular(self, inner: str) -> None:
        """OpenAI file-search markers: ``【3†source】``, ``【3:0†source】``, ``【doc-a†x.md】``."""
        text = inner.strip()
        if not text or self.valid(text):
            return
        left, dagger, right = text.partition("†")
        left, right = left.strip(), right.strip()
        index = OPENAI_INDEX.fullmatch(left)
        if index is not None:
            if self.valid(left) or self.valid(index.group(1)):
                return
            if right and right.casefold() != "source" and self.valid(right):
                return
            self.add_invalid(index.group(1))
            return
        if not dagger:
            self.group(text, PLAIN)
        elif not (left and self.valid(left)) and not (right and self.valid(right)):
            self.group(left or right, PLAIN)

    def user_key(self, key: Any) -> None:
        """A key from the caller's pattern: exact label semantics, unmatched means invalid."""
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            return
        text = str(key).strip()
        if text and len(text) <= MAX_LABEL and not self.valid(text):
            self.add_invalid(text)

    def json_value(self, value: Any) -> None:
        """The value of a ``citations`` field: a list of ints, id strings or ``{"id": ...}``."""
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict):
                item = next((item[f] for f in ID_FIELDS if f in item), None)
            if isinstance(item, bool) or item is None:
                continue
            if isinstance(item, float) and item.is_integer():
                item = int(item)
            if isinstance(item, int):
                key = str(item)
                if not self.valid(key):
                    self.add_invalid(key)
            elif isinstance(item, str):
                key = item.strip()
                if len(key) >= 2 and key[0] + key[-1] in ("[]", "【】"):
                    key = key[1:-1]
                self.group(key, SOURCE)
