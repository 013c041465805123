"""Prompt building with exact inclusion bookkeeping, and locating chunks in a user-built prompt.

``ContextBuilder`` places chunks itself, so it *knows* which chunk landed where: ids, 1-based
positions, the label the model sees, character offsets of the chunk text in the final prompt (or
in its chat message), tokens and truncation. ``locate`` is the fallback for prompts the user
built: it searches the prompt at assembly time, while the input chunks are still known, and says
so (``located``), since a search can miss or misplace text.
Pure: no spans, no globals.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from . import names
from .chunks import Accessors, Chunk, NO_ACCESSORS, content_hash, to_chunk
from .tokens import DEFAULT_TOKENIZER, Tokenizer

Message = Mapping[str, Any]
Prompt = Union[str, list[dict[str, Any]]]
Labeller = Union[Literal["index", "id"], Callable[[Chunk, int], str]]

DEFAULT_CHUNK_FORMAT = "[{label}] {content}"
DEFAULT_TEMPLATE = (
    "Answer the question using only the sources below. Cite the sources you use as [n].\n\n"
    "Sources:\n{context}\n\nQuestion: {question}\nAnswer:"
)
_VARIABLE = re.compile(r"\{(\w+)\}")
_CONTEXT = "{context}"


@dataclass(frozen=True, slots=True)
class Placement:
    """A chunk as it landed in the prompt. ``start``/``end`` index the chunk text itself."""

    chunk_id: str
    position: int
    label: str
    start: int
    end: int
    tokens: int
    truncated: bool
    message_index: int | None = None
    content_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Drop:
    chunk_id: str
    reason: str


@dataclass(slots=True)
class ContextRecord:
    """What an assembly produced: the inclusion facts the figures are computed from."""

    method: str
    placements: list[Placement] = field(default_factory=list)
    dropped: list[Drop] = field(default_factory=list)
    max_tokens: int | None = None
    prompt: Prompt | None = None
    span_id: str | None = None  # hex id of the assemble span, so generations can point at it
    aliases: dict[str, str] = field(default_factory=dict)  # more labels the model saw (declared duplicates)

    @property
    def total_tokens(self) -> int:
        return sum(p.tokens for p in self.placements)

    @property
    def truncated_count(self) -> int:
        return sum(1 for p in self.placements if p.truncated)

    def label_map(self) -> dict[str, str]:
        """Citation key -> chunk id: every label, and every in-context chunk id itself."""
        mapping = {p.chunk_id: p.chunk_id for p in self.placements}
        mapping.update({p.label: p.chunk_id for p in self.placements if p.label})
        for label, chunk_id in self.aliases.items():
            mapping.setdefault(label, chunk_id)
        return mapping


def fill(template: str, variables: Mapping[str, Any]) -> str:
    """``{name}`` placeholders filled from ``variables``; every other brace is left alone."""
    # templates repeat, message contents don't: only short strings are parsed through the cache
    parts = _cached_parts(template) if len(template) <= _CACHED_TEMPLATE_CHARS else _template_parts(template)
    if len(parts) == 1:
        return template
    return "".join(
        part if index % 2 == 0 else str(variables[part[1:-1]]) if part[1:-1] in variables else part
        for index, part in enumerate(parts)
    )


def _template_parts(template: str) -> tuple[str, ...]:
    """Literal text and ``{name}`` placeholders, alternating."""
    parts: list[str] = []
    last = 0
    for match in _VARIABLE.finditer(template):
        parts += [template[last : match.start()], match.group(0)]
        last = match.end()
    parts.append(template[last:])
    return tuple(parts)


_CACHED_TEMPLATE_CHARS = 2048
_cached_parts = functools.lru_cache(maxsize=128)(_template_parts)


@dataclass(slots=True)
class _Entry:
    chunk: Chunk
    label: str
    text: str
    tokens: int
    truncated: bool


def render_text(template: str, block: str, variables: Mapping[str, Any]) -> tuple[str, int]:
    """The filled template and where the context block starts in it."""
    before, found, after = template.partition(_CONTEXT)
    head = fill(before, variables)
    if not found:  # no {context} placeholder: the chunks go after the template
        head = head + ("\n\n" if head else "")
        return head + block, len(head)
    return head + block + fill(after, variables), len(head)


def render_messages(
    template: Sequence[Message], block: str, variables: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], int, int]:
    """Filled chat messages, the context block's offset in its message, and that message's index."""
    messages: list[dict[str, Any]] = []
    base, target = 0, -1
    for index, message in enumerate(template):
        copy = dict(message)
        content = copy.get("content")
        if isinstance(content, str):
            if target < 0 and _CONTEXT in content:
                copy["content"], base = render_text(content, block, variables)
                target = index
            else:
                copy["content"] = fill(content, variables)
        messages.append(copy)
    if target < 0:  # no placeholder anywhere: a user message with the sources goes last
        messages.append({"role": "user", "content": block})
        base, target = 0, len(messages) - 1
    return messages, base, target


def fill_prompt(
    template: str | Sequence[Message] | None, block: str, variables: Mapping[str, Any]
) -> tuple[Prompt, int, int | None]:
    """The prompt, where the context block starts, and (chat) the index of the message holding it."""
    if template is None:
        template = DEFAULT_TEMPLATE if "question" in variables else _CONTEXT
    if isinstance(template, str):
        prompt, base = render_text(template, block, variables)
        return prompt, base, None
    return render_messages(template, block, variables)


class ContextBuilder:
    """Places chunks into a context block under a token budget and renders the prompt."""

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        tokenizer: Tokenizer = DEFAULT_TOKENIZER,
        labeller: Labeller = "index",
        chunk_format: str = DEFAULT_CHUNK_FORMAT,
        separator: str = "\n\n",
        truncate: bool = True,
        min_truncated_tokens: int = 8,
        accessors: Accessors = NO_ACCESSORS,
    ) -> None:
        self.max_tokens = max_tokens
        self.tokenizer = tokenizer
        self.labeller = labeller
        self.chunk_format = chunk_format
        self.separator = separator
        self.truncate = truncate
        self.min_truncated_tokens = min_truncated_tokens
        self.accessors = accessors
        self._entries: list[_Entry] = []
        self._dropped: list[Drop] = []
        self._seen_ids: set[str] = set()
        self._seen_hashes: set[str] = set()
        self._used_tokens = 0
        self._prompt: Prompt | None = None
        self._placements: list[Placement] | None = None
        self.unreadable = 0

    # -- placing -------------------------------------------------------------------------------
    def add(self, item: Any) -> bool:
        """Place one chunk; returns whether it landed (False: duplicate or over budget)."""
        chunk = self._chunk(item)
        if chunk is None:
            return False
        if chunk.id in self._seen_ids or (chunk.content_hash and chunk.content_hash in self._seen_hashes):
            self._dropped.append(Drop(chunk.id, names.DROP_DUPLICATE))
            return False
        text = chunk.content or ""
        tokens = self.tokenizer.count(text)
        truncated = False
        if self.max_tokens is not None and self._used_tokens + tokens > self.max_tokens:
            room = self.max_tokens - self._used_tokens
            if not self.truncate or room < min(self.min_truncated_tokens, tokens):
                self._dropped.append(Drop(chunk.id, names.DROP_OVER_BUDGET))
                return False
            text = self.tokenizer.truncate(text, room)
            tokens = self.tokenizer.count(text)
            truncated = True
        self._seen_ids.add(chunk.id)
        if chunk.content_hash:
            self._seen_hashes.add(chunk.content_hash)
        self._used_tokens += tokens
        label = self._label(chunk, len(self._entries) + 1)
        self._entries.append(_Entry(chunk, label, text, tokens, truncated))
        return True

    def drop(self, item: Any, reason: str = names.DROP_FILTERED) -> None:
        """Record that the caller chose not to include a chunk, and why."""
        chunk = self._chunk(item)
        if chunk is not None:
            self._dropped.append(Drop(chunk.id, str(reason) or names.DROP_FILTERED))

    def _chunk(self, item: Any) -> Chunk | None:
        chunk = to_chunk(item, len(self._entries) + 1, self.accessors)
        if chunk is None:
            self.unreadable += 1
        return chunk

    def _label(self, chunk: Chunk, position: int) -> str:
        if self.labeller == "index":
            return str(position)
        if self.labeller == "id":
            return chunk.id
        return str(self.labeller(chunk, position))

    # -- rendering -----------------------------------------------------------------------------
    def context_block(self) -> tuple[str, list[tuple[int, int]]]:
        """The joined chunk entries and each chunk text's (start, end) inside the block."""
        pieces: list[str] = []
        spans: list[tuple[int, int]] = []
        offset = 0
        marker = "\x00"
        for index, entry in enumerate(self._entries):
            if index:
                pieces.append(self.separator)
                offset += len(self.separator)
            head, _, tail = fill(self.chunk_format, {"label": entry.label, "content": marker}).partition(marker)
            start = offset + len(head)
            spans.append((start, start + len(entry.text)))
            piece = head + entry.text + tail.replace(marker, entry.text)  # {content} used twice
            pieces.append(piece)
            offset += len(piece)
        return "".join(pieces), spans

    def render(self, template: str | Sequence[Message] | None = None, **variables: Any) -> Prompt:
        """The final prompt: ``template`` with ``{context}`` and other ``{variables}`` filled in.

        A list of chat messages may be given instead of a string: the message whose content holds
        ``{context}`` receives the chunks. Without a template the prompt is the context block, or
        a default question template when a ``question`` variable is given.
        """
        block, spans = self.context_block()
        self._prompt, base, message_index = fill_prompt(template, block, variables)
        self._placements = [
            Placement(
                chunk_id=entry.chunk.id,
                position=position,
                label=entry.label,
                start=base + start,
                end=base + end,
                tokens=entry.tokens,
                truncated=entry.truncated,
                message_index=message_index,
                content_hash=entry.chunk.content_hash,
            )
            for position, (entry, (start, end)) in enumerate(zip(self._entries, spans), start=1)
        ]
        return self._prompt

    @property
    def prompt(self) -> Prompt:
        """The rendered prompt (rendering the bare context block if ``render`` wasn't called)."""
        if self._prompt is None:
            self.render()
        assert self._prompt is not None
        return self._prompt

    def record(self) -> ContextRecord:
        """The inclusion facts of the prompt the caller got: the last ``render`` (or the bare block).

        Chunks added after the last render are not in that prompt; they are reported as dropped
        (``not_rendered``) rather than claimed as included.
        """
        if self._prompt is None:
            self.render()
        placements = list(self._placements or ())
        rendered = len(placements)
        late = [Drop(entry.chunk.id, names.DROP_NOT_RENDERED) for entry in self._entries[rendered:]]
        return ContextRecord(
            method=names.INCLUSION_RECORDED,
            placements=placements,
            dropped=list(self._dropped) + late,
            max_tokens=self.max_tokens,
            prompt=self._prompt,
        )


# --- locating chunks in a prompt the user built ----------------------------------------------
_LABEL_BEFORE = re.compile(r"(?:\[([^\[\]\n]{1,64})\]|(?:source|document|doc|chunk|passage)\s*#?(\w{1,32}))\s*[:.)-]?\s*$", re.I)
_MAX_OCCURRENCES = 64
_MIN_PREFIX_CHARS = 24


def locate(chunks: Sequence[Chunk], prompt: Any, tokenizer: Tokenizer = DEFAULT_TOKENIZER) -> ContextRecord:
    """Find each input chunk's text in ``prompt`` (a string or chat messages).

    Tries an exact match, then a whitespace-insensitive match, then the longest matching prefix
    (a truncated chunk). Occurrences right after a label such as ``[2]`` are preferred, so short
    chunks that also appear in the instructions aren't credited to the instructions.

    Longer chunks are matched first and no two chunks share prompt text: a chunk whose text also
    sits inside a longer chunk's text is credited at its own occurrence, and is a duplicate when
    that is the only one.
    """
    texts = _prompt_texts(prompt)
    outcomes: list[Drop | tuple[int, int, int, bool, Chunk] | None] = [None] * len(chunks)
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
        outcomes[number] = (*hit, chunk)
    dropped = [o for o in outcomes if isinstance(o, Drop)]
    found = sorted((o for o in outcomes if isinstance(o, tuple)), key=lambda item: (item[0], item[1]))
    is_chat = not isinstance(prompt, str)
    placements = []
    for position, (message, start, end, truncated, chunk) in enumerate(found, start=1):
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


def _find_chunk(
    content: str, texts: list[tuple[int, str]], indexes: list[_Normalized], taken: Sequence[tuple[int, int, int]] = ()
) -> tuple[int, int, int, bool] | None:
    if not content.strip():
        return None
    hit = _find_in([text for _, text in texts], content, taken)
    if hit is not None:
        return hit[0], hit[1], hit[1] + len(content), False
    needle = _collapse(content)
    hit = _find_in(indexes, needle, taken)
    if hit is not None:
        return (hit[0], *indexes[hit[0]].span(hit[1], hit[1] + len(needle)), False)
    # truncated chunk: the longest prefix (binary search; "found" is monotone in prefix length)
    best: tuple[int, int, int] | None = None
    low, high = min(_MIN_PREFIX_CHARS, len(needle)), len(needle) - 1
    while low <= high:
        middle = (low + high) // 2
        hit = _find_in(indexes, needle[:middle], taken)
        if hit is None:
            high = middle - 1
        else:
            best = (hit[0], hit[1], middle)
            low = middle + 1
    if best is None:
        return None
    message, start, length = best
    # the prefix may have run on into the prompt's whitespace after the cut: the chunk text ends
    # at its last non-space character
    length = len(needle[:length].rstrip())
    if length < _MIN_PREFIX_CHARS:
        return None
    return (message, *indexes[message].span(start, start + length), True)


def _find_in(texts: Sequence[str | _Normalized], needle: str, taken: Sequence[tuple[int, int, int]] = ()) -> tuple[int, int] | None:
    """(text index, start) of the best occurrence in any of the texts; earlier wins a tie.
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
    return None if best is None else (best[1], best[2])


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
    start = text.find(needle)
    for _ in range(_MAX_OCCURRENCES):
        if start < 0:
            break
        if normalized is None:
            source, begin, end = text, start, start + len(needle)
        else:
            source, (begin, end) = normalized.source, normalized.span(start, start + len(needle))
        if not any(begin < stop and first < end for first, stop in occupied):
            tier = _label_tier(source, begin)
            if best is None or tier > best[1]:
                best = (start, tier)
                if tier == _LABEL_OPENS_LINE:
                    break
        start = text.find(needle, start + 1)
    return best


def _label_tier(text: str, start: int) -> int:
    window_start = max(0, start - 80)
    match = _LABEL_BEFORE.search(text[window_start:start])
    if match is None or not (match.group(1) or match.group(2) or "").strip():
        return _NO_LABEL
    label_start = window_start + match.start()
    lead_start = max(0, label_start - _MAX_LINE_LEAD)  # bounded: never scan back a whole line
    line_start = text.rfind("\n", lead_start, label_start) + 1
    if not line_start and lead_start:
        return _LABEL
    return _LABEL_OPENS_LINE if not text[line_start:label_start].strip(_LINE_LEAD) else _LABEL


def _label_before(text: str, start: int) -> str:
    match = _LABEL_BEFORE.search(text[max(0, start - 80) : start])
    if match is None:
        return ""
    return (match.group(1) or match.group(2) or "").strip()
