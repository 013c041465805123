"""Which in-context chunks an answer cites, and which of its citations point at nothing.

Pure and dependency-free: ``parse_citations(text, labels)`` reads an LLM answer and resolves every
citation against ``labels`` (citation key -> chunk id, built at assembly). It runs on every answer
inside instrumentation, on text a model produced, so it must be linear in the text and never
raise on odd input. How that is kept:

* Structure first: one regex pass finds fence lines (code blocks are skipped), one C-level
  ``re.sub`` blanks inline code spans out (a regex that can match each position only one way).
* Bracket tokens are found by a bounded regex (``[`` + at most 64 bracket-free characters + ``]``),
  which cannot backtrack beyond that bound; a label that repeats many times is masked out of the
  rest of the text in one C-level ``re.sub`` instead of being visited a million times.
* JSON is only decoded when a ``"citations"`` key exists, only at ``{"`` positions before the
  last one, and with caps on decoder calls (16 failures, 1024 attempts), so a million
  ``{"citations"`` fragments cost a handful of decoder calls.

Plain Python cannot visit a million tokens in 100 ms, which is why the heavy lifting is in C
(``str.find``, ``re``, ``json``) and Python only sees each *distinct* token. Work per distinct
token is bounded, so text made of 100k distinct labels is still linear, just not C-fast
(``bench/bench_citations.py`` shows both).


What counts as a citation (design choices, also in ``parse_citations``'s docstring):

* Numeric tokens (``[3]``, ``[^3]``, ``[1-3]``, ``【3†source】``) are always citations: valid when the
  key maps to a chunk, otherwise invalid.
* Id-like tokens (``[doc-7]``, ``[abc.md]``) are citations when they map, or when they contain a
  digit or one of ``- _ . : / #`` (invalid). A plain word that maps to nothing (``[sic]``,
  ``[note]``, ``[x]``) is ignored, as is anything with spaces (``[citation needed]``), so prose
  brackets don't inflate the invalid count. Tokens ending in ``.`` (``[e.g.]``) are abbreviations.
* ``[Source 2]``, ``[source: abc]``, ``[see 3]``: the prefix word is dropped; after a colon any
  unmatched id-like word is invalid (``[Source: Wikipedia]``), otherwise the rule above applies.
  The same goes for footnote syntax (``[^note]``) and for entries of a JSON ``citations`` field.
* Invalid labels are reported as the key the model used (``"9"`` for ``[Source 9]``, ``【9:0†x】``),
  at most 64 characters of id characters, so they never carry prose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Union

from . import names

__all__ = ["CitationPattern", "CitationResult", "parse_citations"]

# A user-supplied citation format: a regex whose group 1 (or whole match) is a label key, or a
# callable returning the label keys found in the text. (The alias is evaluated at runtime, where
# typing.Union is the spelling every supported Python accepts; it equals the | form.)
CitationPattern = Union[str, re.Pattern[str], Callable[[str], Iterable[str]]]


@dataclass(frozen=True, slots=True)
class CitationResult:
    """What the answer cites. ``format`` is one of ``names.CITATION_FORMAT_*``."""

    format: str
    cited_ids: tuple[str, ...]
    invalid_labels: tuple[str, ...]
    conformant: bool

    @property
    def valid_count(self) -> int:
        """Distinct in-context chunks cited."""
        return len(self.cited_ids)

    @property
    def invalid_count(self) -> int:
        """Distinct citation labels that point at no in-context chunk."""
        return len(self.invalid_labels)


_NOTHING: Final = CitationResult(names.CITATION_FORMAT_NONE, (), (), False)

MAX_LABEL: Final = 64  # longest text between brackets that can be a citation label
MAX_RANGE: Final = 100  # [1-100] expands; [1-1000] is one invalid label
_HEAVY_REPEATS: Final = 16  # a token seen this often in one stretch is masked out of the rest
_MAX_MASKINGS: Final = 16  # ...at most this many times per stretch (each is one O(n) pass)
_MAX_JSON_ATTEMPTS: Final = 1024  # decoder calls per text
_MAX_JSON_FAILURES: Final = 16  # failed decoder calls per text (each may scan to the end)
_MAX_JSON_DEPTH: Final = 32
_LINK_DEST_MAX: Final = 2048

# --- regexes: every quantifier is bounded or over a class that excludes what follows it ---------
_FENCE = re.compile(r"^[ \t>]{0,16}(`{3,}|~{3,})([^\n]*)", re.MULTILINE)
# An inline code span, CommonMark-style: a run of 1-3 backticks closed by the next run of exactly
# the same length, not across a blank line. Every alternative can match only one way (text and
# backtick runs are consumed whole), so a failed opener costs one scan of its paragraph, and only
# the last run of each length in a paragraph can fail: at most three scans. Longer runs are left
# literal (fences take those).
_CODE_SPAN = re.compile(r"(?<!`)(`{1,3})(?!`)(?:[^`\n]+(?![^`\n])|\n(?![ \t\r]*\n)|`+(?!`))*?\1(?!`)")
# What code spans become: a character no citation label may contain, legal inside JSON strings.
_CODE_MASK: Final = "\ue000"
# What masked repeats become: no label may contain it, any link destination may, and it keeps
# ASCII text ASCII (cheap copies).
_REPEAT_MASK: Final = "\x00"
# Group 2 is what follows ``]`` when it makes the bracket a link ``](`` or a reference definition
# ``]: http://...``; those are never citations.
_AFTER = r"(\(|:[ \t]{0,16}(?:<|/|#|www\.|mailto:|[A-Za-z][A-Za-z0-9+.\-]{0,31}://))?"
# Labels hold no bracket of either kind: tokens are innermost, so no two can overlap.
_LABEL = r"[^\[\]【】\r\n\x00\ue000]{1,%d}" % MAX_LABEL
_SQUARE = re.compile(r"\[(%s)\]%s" % (_LABEL, _AFTER))
# The OpenAI form is only searched for when the text holds a 【: the alternation costs the regex
# engine its fast literal scan for [.
_SQUARE_OR_LENTICULAR = re.compile(
    r"\[(%s)\]%s|【(%s)】" % (_LABEL, _AFTER, _LABEL)
)
# A link's "(destination "title")" after "]"; "[1](p. 5)" is no link (CommonMark agrees).
_LINK_DEST = re.compile(
    r"\((?:<[^<>\n]{0,%d}>|[^()\s]{0,%d})(?:[ \t]{1,16}(?:\"[^\"\n]{0,256}\"|'[^'\n]{0,256}'))?[ \t]{0,16}\)"
    % (_LINK_DEST_MAX, _LINK_DEST_MAX)
)
_OBJECT_START = re.compile(r"\{[ \t\r\n]{0,64}\"")
_NON_SPACE = re.compile(r"\S")
_CITATIONS_KEYS: Final = ('"citations"', '"Citations"')

_LIST_SPLIT = re.compile(r"\s*(?:[,;，、]|&|\band\b)\s*")
_RANGE = re.compile(r"(\d{1,9})\s*[-–—‒]\s*(\d{1,9})")
_PREFIX = re.compile(
    r"(?:sources?|src|docs?|documents?|chunks?|refs?|references?|citations?|cite|passages?"
    r"|contexts?|snippets?|excerpts?|results?|ids?|see)(\s*[:#]\s*|\s+)(\S.*)",
    re.IGNORECASE | re.DOTALL,
)
_ID = re.compile(r"[\w.:/#\-]+")
_ID_SEPARATORS: Final = frozenset("-_.:/#")
_OPENAI_INDEX = re.compile(r"(\d{1,9})(?::\d{1,9})?")
_ID_FIELDS: Final = ("id", "chunk_id", "doc_id", "document_id", "source_id", "label", "index", "source", "ref")
_DECODER = json.JSONDecoder()

# How sure we are that an unmatched key was meant as a citation.
_PLAIN: Final = 0  # bare bracket: numbers and id-looking tokens only
_SOURCE: Final = 1  # after "source:" or in a JSON citations field: any id-like word


def _fold(key: str) -> str:
    return " ".join(key.split()).casefold()


def _is_id(key: str) -> bool:
    """Letters/digits with ``- _ . : / #``, at least one letter or digit, short."""
    return len(key) <= MAX_LABEL and _ID.fullmatch(key) is not None and any(c.isalnum() for c in key)


def _looks_like_citation(key: str) -> bool:
    """An unmatched bare token is an (invalid) citation only if it looks like an id or a number."""
    if not _is_id(key) or key.endswith("."):
        return False
    return any(c.isdigit() or c in _ID_SEPARATORS for c in key)


def _strip_caret(key: str) -> str:
    key = key.strip()
    if key.startswith("^"):  # footnote [^3]
        key = key[1:].strip()
    return key


class _Parser:
    """One parse: the label lookup and the ordered, de-duplicated findings."""

    def __init__(self, labels: Mapping[str, str], pattern: re.Pattern[str] | None) -> None:
        self.exact: dict[str, str] = {}
        if isinstance(labels, Mapping):
            for key, value in labels.items():
                if isinstance(key, str) and value is not None:
                    self.exact[key] = value if isinstance(value, str) else str(value)
        self._folded: dict[str, str] | None = None
        self.pattern = pattern
        self.inline_rules = pattern is None  # off when the caller's pattern replaces them
        self.cited: dict[str, None] = {}
        self.invalid: dict[str, None] = {}
        self.json_found = False
        self.classified: set[str] = set()  # bracket tokens already resolved, across stretches
        self.json_attempts = 0
        self.json_failures = 0

    # --- resolution ---------------------------------------------------------------------------
    def lookup(self, key: str) -> str | None:
        """Exact key first, then case-insensitive with whitespace trimmed and collapsed."""
        found = self.exact.get(key)
        if found is not None:
            return found
        if self._folded is None:
            self._folded = {}
            for label, chunk_id in self.exact.items():
                self._folded.setdefault(_fold(label), chunk_id)
        return self._folded.get(_fold(key))

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
        if text.lstrip().startswith("^"):  # [^note] is footnote syntax: meant as a citation
            strength = _SOURCE
        key = _strip_caret(text)
        if not key or self.valid(key):
            return
        if key.isascii() and key.isdigit():  # the common [7]: no list, range or prefix to try
            self.invalid.setdefault(key, None)
            return
        match = _PREFIX.fullmatch(key)
        if match is not None:
            key = match.group(2)
            if ":" in match.group(1):
                strength = _SOURCE
            if self.valid(key):
                return
        parts = _LIST_SPLIT.split(key)
        for part in parts if len(parts) > 1 else (key,):
            self.item(part, strength)

    def item(self, text: str, strength: int, depth: int = 0) -> None:
        key = _strip_caret(text)
        if not key or self.valid(key):
            return
        match = _RANGE.fullmatch(key)
        if match is not None:
            self.range(key, int(match.group(1)), int(match.group(2)))
            return
        match = _PREFIX.fullmatch(key)
        if match is not None and depth < 2:  # [Source 1, Source 2]
            self.item(match.group(2), _SOURCE if ":" in match.group(1) else strength, depth + 1)
            return
        if key.startswith("#") and len(key) > 1:  # [#3]
            key = key[1:].strip()
            if self.valid(key):
                return
        if _looks_like_citation(key) or (strength >= _SOURCE and _is_id(key)):
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
        index = _OPENAI_INDEX.fullmatch(left)
        if index is not None:
            if self.valid(left) or self.valid(index.group(1)):
                return
            if right and right.casefold() != "source" and self.valid(right):
                return
            self.add_invalid(index.group(1))
            return
        if not dagger:
            self.group(text, _PLAIN)
        elif not (left and self.valid(left)) and not (right and self.valid(right)):
            self.group(left or right, _PLAIN)

    def user_key(self, key: Any) -> None:
        """A key from the caller's pattern: exact label semantics, unmatched means invalid."""
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            return
        text = str(key).strip()
        if text and len(text) <= MAX_LABEL and not self.valid(text):
            self.add_invalid(text)

    # --- JSON -----------------------------------------------------------------------------------
    def json_value(self, value: Any) -> None:
        """The value of a ``citations`` field: a list of ints, id strings or ``{"id": ...}``."""
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict):
                item = next((item[f] for f in _ID_FIELDS if f in item), None)
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
                self.group(key, _SOURCE)

    def walk(self, node: Any, depth: int = 0) -> None:
        """A decoded citation object in document order: the field, and answer strings' markers."""
        if depth > _MAX_JSON_DEPTH:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and key.casefold() == "citations":
                    self.json_found = True
                    self.json_value(value)
                else:
                    self.walk(value, depth + 1)
        elif isinstance(node, list):
            for value in node:
                self.walk(value, depth + 1)
        elif isinstance(node, str) and (
            self.pattern is not None or (self.inline_rules and ("[" in node or "【" in node))
        ):
            self.markdown(node, 0, len(node), allow_json=False)

    def decode_at(self, text: str, start: int, end: int) -> tuple[Any, int] | None:
        """One bounded decoder call; None (never an exception) when it isn't JSON."""
        if self.json_attempts >= _MAX_JSON_ATTEMPTS or self.json_failures >= _MAX_JSON_FAILURES:
            return None
        self.json_attempts += 1
        try:
            obj, stop = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):  # JSONDecodeError; int too long; nesting too deep
            self.json_failures += 1
            return None
        if stop > end:
            return None
        return obj, stop

    def json_objects(self, text: str, start: int, end: int) -> list[tuple[int, int, Any]]:
        """Citation objects between start and end, in order."""
        last = _last_key(text, start, end)
        if last < 0:
            return []
        found: list[tuple[int, int, Any]] = []
        resume = start
        for match in _OBJECT_START.finditer(text, start, last + 1):
            begin = match.start()
            if begin < resume:
                continue
            decoded = self.decode_at(text, begin, end)
            if decoded is None:
                if self.json_failures >= _MAX_JSON_FAILURES or self.json_attempts >= _MAX_JSON_ATTEMPTS:
                    break
                continue
            obj, stop = decoded
            resume = stop
            if _has_citations(obj, 0):
                found.append((begin, stop, obj))
        return found

    def fenced(self, text: str, start: int, end: int, info: str) -> None:
        """A fenced block is code, except a JSON citation object in it."""
        if _last_key(text, start, end) < 0:
            return
        words = info.split(None, 1)
        language = words[0].casefold() if words else ""
        if language in ("json", "jsonc", "json5"):
            for _, _, obj in self.json_objects(text, start, end):
                self.walk(obj)
            return
        first = _NON_SPACE.search(text, start, end)
        if first is not None and first.group() == "{":
            first_index = first.start()
            decoded = self.decode_at(text, first_index, end)
            if decoded is not None and not text[decoded[1] : end].strip() and _has_citations(decoded[0], 0):
                self.walk(decoded[0])

    # --- markdown -------------------------------------------------------------------------------
    def markdown(self, text: str, start: int, end: int, allow_json: bool) -> None:
        """Prose and fenced blocks in document order."""
        # JSON is only looked for when a "citations" key exists at all: one C-level find.
        allow_json = allow_json and _last_key(text, start, end) >= 0
        if text.find("```", start, end) < 0 and text.find("~~~", start, end) < 0:
            self.prose(text, start, end, allow_json)
            return
        position = start
        fence = ""  # the open fence's run ("" when none is open)
        info, content = "", start
        for match in _FENCE.finditer(text, start, end):
            run, rest = match.group(1), match.group(2)
            if not fence:
                if run[0] == "`" and "`" in rest:  # ```x``` on one line is inline code
                    continue
                if position < match.start():
                    self.prose(text, position, match.start(), allow_json)
                fence, info, content = run, rest, min(match.end() + 1, end)
            elif run[0] == fence[0] and len(run) >= len(fence) and not rest.strip():
                if allow_json:
                    self.fenced(text, content, match.start(), info)
                fence, position = "", min(match.end() + 1, end)
        if not fence:
            self.prose(text, position, end, allow_json)
        elif allow_json:  # an unclosed fence runs to the end, as in CommonMark
            self.fenced(text, content, end, info)

    def prose(self, text: str, start: int, end: int, allow_json: bool) -> None:
        """Text outside fences: inline code blanked out, then JSON objects and markers in order."""
        if start >= end:
            return
        if text.find("`", start, end) >= 0:
            text = _CODE_SPAN.sub(_CODE_MASK, text[start:end])
            start, end = 0, len(text)
        position = start
        if allow_json:
            for begin, stop, obj in self.json_objects(text, start, end):
                self.inline(text, position, begin)
                self.walk(obj)
                position = stop
        self.inline(text, position, end)

    def inline(self, text: str, start: int, end: int) -> None:
        """Citation markers in a stretch of prose with no code in it."""
        if self.pattern is not None:
            for match in self.pattern.finditer(text, start, end):
                key = match.group(1) if self.pattern.groups else match.group(0)
                self.user_key(key if key is not None else match.group(0))
            return
        if not self.inline_rules:
            return
        lenticular = text.find("【", start, end) >= 0
        if not lenticular and text.find("[", start, end) < 0:
            return
        regex = _SQUARE_OR_LENTICULAR if lenticular else _SQUARE
        seen: dict[str, int] = {}
        maskings = 0
        position = start
        while True:
            match = regex.search(text, position, end)
            if match is None:
                return
            position = match.end()
            after = match.group(2)
            if after == "(":  # a link or image, whose destination is skipped too
                destination = _LINK_DEST.match(text, position - 1, end)
                if destination is not None:
                    position = destination.end()
                    continue
                position -= 1  # "[1](p. 5)": a citation followed by a parenthesis
            elif after:  # a reference definition "[1]: http://..."
                continue
            token = text[match.start() : position]
            count = seen.get(token, 0) + 1
            seen[token] = count
            if count == 1 and token not in self.classified:
                self.classified.add(token)
                square = match.group(1)
                if square is not None:
                    self.group(square, _PLAIN)
                else:
                    self.lenticular(match.group(3))
            elif count == _HEAVY_REPEATS and maskings < _MAX_MASKINGS:
                # This token can only repeat what it already said: mask its later copies in one C
                # pass so the search skips them. Copies followed by "(" stay (they may be links);
                # the mask keeps the length and is a character no label may hold and any link
                # destination may, so every other match comes out exactly as before.
                rest = text[position:end]
                if rest.find(token + "(") < 0:
                    text = rest.replace(token, _REPEAT_MASK * len(token))
                else:
                    text = re.sub(re.escape(token) + r"(?!\()", _REPEAT_MASK * len(token), rest)
                position, end = 0, len(text)
                maskings += 1


def _last_key(text: str, start: int, end: int) -> int:
    """Where the last ``"citations"`` key starts (-1: none), found in C rather than by decoding."""
    return max(text.rfind(key, start, end) for key in _CITATIONS_KEYS)


def _has_citations(node: Any, depth: int) -> bool:
    if depth > _MAX_JSON_DEPTH:
        return False
    if isinstance(node, dict):
        return any(
            (isinstance(k, str) and k.casefold() == "citations") or _has_citations(v, depth + 1)
            for k, v in node.items()
        )
    if isinstance(node, list):
        return any(_has_citations(v, depth + 1) for v in node)
    return False


def parse_citations(
    text: str | None, labels: Mapping[str, str], *, pattern: CitationPattern | None = None
) -> CitationResult:
    """The chunks ``text`` cites, resolved through ``labels`` (citation key -> chunk id).

    Recognised: ``[1]``, ``[1, 3]``, ``[1][2]``, ``[1-3]`` / ``[1–3]`` (ranges up to 100 wide),
    ``[^1]``, ``【1†source】`` / ``【3:0†source】``, id labels (``[doc-7]``, ``[source: abc]``,
    ``[Source 2]``), and a JSON object with a ``citations`` list (ints, id strings or
    ``{"id": ...}``), bare, embedded in prose or in a fenced block. JSON wins the ``format`` but
    inline markers elsewhere (including inside the object's strings) still count.

    Never citations: links and images (``[t](url)``), reference definitions (``[1]: http://..``),
    anything in inline code or fenced code, plain bracketed words that match no label (``[sic]``).
    ``BM25[1]`` does count: models glue markers to the previous word, and prose has no arrays.
    Reference-style *uses* (``[text][1]``) count too, since footnote-style answers look the same.

    ``cited_ids`` and ``invalid_labels`` are unique, first-appearance order (a JSON object's
    entries sit where the object starts). ``conformant`` is False only when nothing citation-like
    was found; a JSON ``"citations": []`` is conformant (the model answered in the format).

    ``pattern`` replaces the inline rules (JSON still applies): a regex (string or compiled) whose
    group 1, or whole match, is a label key, matched outside code; or a callable given the whole
    text that returns label keys (listed after any JSON entries). Unmatched keys are invalid, and
    are reported only up to 64 characters long. The callable and the regex are the
    caller's code: their exceptions propagate (the instrumentation wraps this call), and a regex
    that backtracks is the caller's cost.
    """
    if not isinstance(text, str) or not text:
        return _NOTHING
    compiled: re.Pattern[str] | None = None
    keys_from: Callable[[str], Iterable[str]] | None = None
    if isinstance(pattern, str):
        compiled = re.compile(pattern)
    elif isinstance(pattern, re.Pattern):
        compiled = pattern
    elif callable(pattern):
        keys_from = pattern
    elif pattern is not None:
        raise TypeError(f"citation pattern must be a regex or a callable, not {type(pattern).__name__}")

    parser = _Parser(labels, compiled)
    if keys_from is not None:
        parser.inline_rules = False  # the callable replaces the inline rules
    parser.markdown(text, 0, len(text), allow_json=True)
    if keys_from is not None:
        for key in keys_from(text):
            parser.user_key(key)

    if parser.json_found:
        kind = names.CITATION_FORMAT_JSON
    elif parser.cited or parser.invalid:
        kind = names.CITATION_FORMAT_INLINE
    else:
        return _NOTHING
    return CitationResult(kind, tuple(parser.cited), tuple(parser.invalid), True)
