"""Finding citation markers in an answer: markdown structure, code, fences, JSON objects, inline tokens.

``Scanner`` walks the text once in document order. Code (fenced and inline) is skipped, JSON is
decoded only where a ``"citations"`` key exists and under call caps, and a token that repeats
often is masked out of the rest of the stretch in one C-level pass; what each marker says is left
to ``KeyResolver``. ``citations.py`` explains why every step is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .citation_keys import KeyResolver
from .citation_syntax import (
    CODE_MASK,
    CODE_SPAN,
    DECODER,
    FENCE,
    HEAVY_REPEATS,
    LINK_DEST,
    MAX_JSON_ATTEMPTS,
    MAX_JSON_DEPTH,
    MAX_JSON_FAILURES,
    MAX_MASKINGS,
    MAX_PROSE_CITATIONS,
    NON_SPACE,
    OBJECT_START,
    PAREN_CITATION,
    PLAIN,
    PROSE_WORD_ENDS,
    PROSE_WORDS,
    REPEAT_MASK,
    SOURCES_LINE,
    SQUARE,
    SQUARE_OR_LENTICULAR,
    has_citations,
    last_key,
)
from .patterns import uncached


class Scanner(KeyResolver):
    """One parse over one text: where the markers are, in order (``KeyResolver`` says what they mean)."""

    def __init__(self, labels: Mapping[str, str], pattern: re.Pattern[str] | None) -> None:
        super().__init__(labels)
        self.pattern = pattern
        self.inline_rules = pattern is None  # off when the caller's pattern replaces them
        self.json_found = False
        self.classified: set[str] = set()  # bracket tokens already resolved, across stretches
        self.json_attempts = 0
        self.json_failures = 0
        self.prose_seen: set[str] = set()

    def walk(self, node: Any, depth: int = 0) -> None:
        """A decoded citation object in document order: the field, and answer strings' markers."""
        if depth > MAX_JSON_DEPTH:
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
        if self.json_attempts >= MAX_JSON_ATTEMPTS or self.json_failures >= MAX_JSON_FAILURES:
            return None
        self.json_attempts += 1
        try:
            obj, stop = DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):  # JSONDecodeError; int too long; nesting too deep
            self.json_failures += 1
            return None
        if stop > end:
            return None
        return obj, stop

    def json_objects(self, text: str, start: int, end: int) -> list[tuple[int, int, Any]]:
        """Citation objects between start and end, in order."""
        last = last_key(text, start, end)
        if last < 0:
            return []
        found: list[tuple[int, int, Any]] = []
        resume = start
        for match in OBJECT_START.finditer(text, start, last + 1):
            begin = match.start()
            if begin < resume:
                continue
            decoded = self.decode_at(text, begin, end)
            if decoded is None:
                if self.json_failures >= MAX_JSON_FAILURES or self.json_attempts >= MAX_JSON_ATTEMPTS:
                    break
                continue
            obj, stop = decoded
            resume = stop
            if has_citations(obj, 0):
                found.append((begin, stop, obj))
        return found

    def fenced(self, text: str, start: int, end: int, info: str) -> None:
        """A fenced block is code, except a JSON citation object in it."""
        if last_key(text, start, end) < 0:
            return
        words = info.split(None, 1)
        language = words[0].casefold() if words else ""
        if language in ("json", "jsonc", "json5"):
            for _, _, obj in self.json_objects(text, start, end):
                self.walk(obj)
            return
        first = NON_SPACE.search(text, start, end)
        if first is not None and first.group() == "{":
            first_index = first.start()
            decoded = self.decode_at(text, first_index, end)
            if decoded is not None and not text[decoded[1] : end].strip() and has_citations(decoded[0], 0):
                self.walk(decoded[0])

    # --- markdown -------------------------------------------------------------------------------
    def markdown(self, text: str, start: int, end: int, allow_json: bool) -> None:
        """Prose and fenced blocks in document order."""
        # JSON is only looked for when a "citations" key exists at all: one C-level find.
        allow_json = allow_json and last_key(text, start, end) >= 0
        if text.find("```", start, end) < 0 and text.find("~~~", start, end) < 0:
            self.prose(text, start, end, allow_json)
            return
        position = start
        fence = ""  # the open fence's run ("" when none is open)
        info, content = "", start
        for match in FENCE.finditer(text, start, end):
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
            text = CODE_SPAN.sub(CODE_MASK, text[start:end])
            start, end = 0, len(text)
        position = start
        if allow_json:
            for begin, stop, obj in self.json_objects(text, start, end):
                self.inline(text, position, begin)
                self.walk(obj)
                position = stop
        self.inline(text, position, end)
        if self.inline_rules:
            self.in_prose(text, start, end)

    def in_prose(self, text: str, start: int, end: int) -> None:
        """Citations written as words: ``(Source 2)``, ``(sources 1, 3)``, and a ``Sources: faq-7,
        faq-9`` line; what they hold is read as a bracket's inside would be. Only a ``(`` that
        opens with a keyword, or a ``:`` right after one, is tried (found with C-level
        ``find``/``startswith``/``endswith`` on one lowered copy), each by an anchored, bounded
        match, at most ``MAX_PROSE_CITATIONS`` of them."""
        if text.find("(", start, end) < 0 and text.find(":", start, end) < 0:
            return  # neither mark: nothing to try (lowering makes no "(" or ":" of other characters)
        lowered = text[start:end].lower()
        tried = 0
        for mark, regex in (("(", PAREN_CITATION), (":", SOURCES_LINE)):
            at = lowered.find(mark)
            while at >= 0 and tried < MAX_PROSE_CITATIONS:
                tried += 1
                match = None
                if mark == "(":
                    if lowered.startswith(PROSE_WORDS, at + 1):  # one C call for every keyword
                        match = regex.match(text, start + at, end)
                elif lowered.endswith(PROSE_WORD_ENDS, max(0, at - 12), at):
                    line = lowered.rfind("\n", max(0, at - 24), at) + 1
                    if line or at <= 20:
                        match = regex.match(text, start + line, end)
                if match is not None:
                    inner = match.group(1)
                    if inner not in self.prose_seen:
                        self.prose_seen.add(inner)
                        self.group(inner, PLAIN)
                at = lowered.find(mark, at + 1)

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
        regex = SQUARE_OR_LENTICULAR if lenticular else SQUARE
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
                destination = LINK_DEST.match(text, position - 1, end)
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
                    self.group(square, PLAIN)
                else:
                    self.lenticular(match.group(3))
            elif count == HEAVY_REPEATS and maskings < MAX_MASKINGS:
                # This token can only repeat what it already said: mask its later copies in one C
                # pass so the search skips them. Copies followed by "(" stay (they may be links);
                # the mask keeps the length and is a character no label may hold and any link
                # destination may, so every other match comes out exactly as before.
                rest = text[position:end]
                if rest.find(token + "(") < 0:
                    text = rest.replace(token, REPEAT_MASK * len(token))
                else:
                    text = uncached(re.escape(token) + r"(?!\()").sub(REPEAT_MASK * len(token), rest)  # answer text: not in re's cache
                position, end = 0, len(text)
                maskings += 1

