"""Prompt building with exact inclusion bookkeeping, and locating chunks in a user-built prompt.

``ContextBuilder`` places chunks itself, so it *knows* which chunk landed where: ids, 1-based
positions, the label the model sees, character offsets of the chunk text in the final prompt (or
in its chat message), tokens and truncation. ``locate`` is the fallback for prompts the user
built (``locate.py``) and declared placements (``declared.py``) produce the same ``ContextRecord``.
Pure: no spans, no globals.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from . import vocabulary
from .chunks import Accessors, Chunk, NO_ACCESSORS, content_hash, placeable, to_chunk
from .tokens import DEFAULT_TOKENIZER, Tokenizer

Message = Mapping[str, Any]
Prompt = Union[str, list[dict[str, Any]]]
Labeller = Union[Literal["index", "id"], Callable[[Chunk, int], str]]

DEFAULT_CHUNK_FORMAT = "[{label}] {content}"
DEFAULT_TEMPLATE = (
    "Answer the question using only the sources below. Cite the sources you use as [n].\n\n"
    "Sources:\n{context}\n\nQuestion: {question}\nAnswer:"
)
_PLACEHOLDER = re.compile(r"(\{\w+\})")  # captured whole: ``split`` keeps the braces
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
    unshown: dict[str, str] = field(default_factory=dict)  # declared labels whose text never reached the prompt
    not_located: bool = False  # a search found nothing of chunks with text in a prompt with text: unknown, not empty
    # a record carried from another process has no prompt: the source labels that prompt showed,
    # as keyed digests (``keyed.label_key``), for the searched contexts' resolution rule (``answer``)
    shown_keys: frozenset[str] | None = None
    # a searched context: where this turn's sources start in the prompt (text number, offset), so
    # the labels of an earlier turn or an example before them are not read as this turn's
    sources_at: tuple[int, int] | None = None

    @property
    def total_tokens(self) -> int:
        return sum(p.tokens for p in self.placements)

    @property
    def truncated_count(self) -> int:
        return sum(1 for p in self.placements if p.truncated)

    def label_map(self) -> dict[str, str]:
        """Citation key -> chunk id: every label, and every in-context chunk id itself.

        In a searched context, a label two chunks were found under (an agent's rounds that each
        number from ``[1]``, both shown: as two placements' labels, or as one's label and
        another's repeat) names neither: it is left out, so a citation of it is unresolved
        (``answer.unresolvable``), never credited to one of them."""
        mapping = {p.chunk_id: p.chunk_id for p in self.placements}
        mapping.update({p.label: p.chunk_id for p in self.placements if p.label})
        for label, chunk_id in self.aliases.items():
            mapping.setdefault(label, chunk_id)
        if self.method in (vocabulary.INCLUSION_LOCATED, vocabulary.INCLUSION_INFERRED):
            owners: dict[str, set[str]] = {}
            for label, chunk_id in [*((p.label, p.chunk_id) for p in self.placements if p.label), *self.aliases.items()]:
                owners.setdefault(label, set()).add(chunk_id)
            for label, chunk_ids in owners.items():
                if len(chunk_ids) > 1 and mapping.get(label) != label:
                    mapping.pop(label, None)
        return mapping


def fill(template: str, variables: Mapping[str, Any]) -> str:
    """``{name}`` placeholders filled from ``variables``; every other brace is left alone.

    Parsed afresh each time, in one C-level split: a template or chat message can be content,
    and a process-wide cache of them would keep it after the pipeline ends (bench_template_fill.py
    measures the cost against the cache this replaced)."""
    if "{" not in template:
        return template
    parts = _PLACEHOLDER.split(template)  # literal text and ``{name}`` placeholders, alternating
    if len(parts) == 1:
        return template
    for index in range(1, len(parts), 2):
        name = parts[index][1:-1]
        if name in variables:
            parts[index] = str(variables[name])
    return "".join(parts)


@dataclass(slots=True)
class _Entry:
    chunk: Chunk
    label: str
    text: str
    tokens: int | None  # None: not counted yet (the budget could not bind; ``ContextBuilder._counted``)
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


def default_template(variables: Mapping[str, Any]) -> str:
    """The template ``render`` uses when given none."""
    return DEFAULT_TEMPLATE if "question" in variables else _CONTEXT


def fill_prompt(
    template: str | Sequence[Message] | None, block: str, variables: Mapping[str, Any]
) -> tuple[Prompt, int, int | None]:
    """The prompt, where the context block starts, and (chat) the index of the message holding it."""
    if template is None:
        template = default_template(variables)
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
        self._seen_texts: set[str] = set()  # the duplicate key: the text itself (its digest, when on, is of it)
        self._used_tokens = 0  # exact, over the counted entries
        self._uncounted = 0  # entries whose count was put off
        self._uncounted_bound = 0  # an upper bound on their tokens
        self._at_most = getattr(tokenizer, "at_most", None)  # the built-in tokenizers' free upper bound
        self._prompt: Prompt | None = None
        self._layout: tuple[int, int | None, list[tuple[int, int]]] | None = None  # the last render's
        self.unreadable = 0

    # -- placing -------------------------------------------------------------------------------
    def add(self, item: Any) -> bool:
        """Place one chunk; returns whether it landed (False: duplicate or over budget)."""
        chunk = self._chunk(item)
        return self.place(chunk) if chunk is not None else False

    def place(self, chunk: Chunk) -> bool:
        """``add`` for a chunk already read and found placeable (``chunks.placeable``)."""
        content = chunk.content
        if chunk.id in self._seen_ids or (content and content in self._seen_texts):
            self._dropped.append(Drop(chunk.id, vocabulary.DROP_DUPLICATE))
            return False
        text = content or ""
        tokens: int | None = None
        truncated = False
        bound = self._at_most(text) if self._at_most is not None else None
        if bound is not None and (self.max_tokens is None or self._used_tokens + self._uncounted_bound + bound <= self.max_tokens):
            # the budget can't bind: the count waits until someone reads it (tracing off: never)
            self._uncounted += 1
            self._uncounted_bound += bound
        else:
            self._count_all()
            tokens = self.tokenizer.count(text)
        if tokens is not None and self.max_tokens is not None and self._used_tokens + tokens > self.max_tokens:
            room = self.max_tokens - self._used_tokens
            if not self.truncate or room < min(self.min_truncated_tokens, tokens):
                self._dropped.append(Drop(chunk.id, vocabulary.DROP_OVER_BUDGET))
                return False
            text = self.tokenizer.truncate(text, room)
            tokens = self.tokenizer.count(text)
            truncated = True
        self._seen_ids.add(chunk.id)
        if content:
            self._seen_texts.add(content)
        if tokens is not None:
            self._used_tokens += tokens
        label = self._label(chunk, len(self._entries) + 1)
        self._entries.append(_Entry(chunk, label, text, tokens, truncated))
        return True

    def _count_all(self) -> None:
        """Count the entries whose count was put off, once the budget could bind (or a reader asks)."""
        if not self._uncounted:
            return
        for entry in self._entries:
            if entry.tokens is None:
                entry.tokens = self.tokenizer.count(entry.text)
                self._used_tokens += entry.tokens
        self._uncounted = self._uncounted_bound = 0

    def drop(self, item: Any, reason: str = vocabulary.DROP_FILTERED) -> None:
        """Record that the caller chose not to include a chunk, and why."""
        chunk = self._chunk(item)
        if chunk is not None:
            self._dropped.append(Drop(chunk.id, str(reason) or vocabulary.DROP_FILTERED))

    def _chunk(self, item: Any) -> Chunk | None:
        failed: list[str] = []
        chunk = placeable(to_chunk(item, len(self._entries) + 1, self.accessors, failed), failed)
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
        # the chunk format split once at its first {content}; {label} is filled per chunk below
        # (only the format's own placeholders: a label or text holding "{label}" stays as it is)
        head_format, _, tail_format = fill(self.chunk_format, {"content": marker}).partition(marker)
        labelled_head, labelled_tail = "{label}" in head_format, "{label}" in tail_format
        for index, entry in enumerate(self._entries):
            if index:
                pieces.append(self.separator)
                offset += len(self.separator)
            head = head_format.replace("{label}", entry.label) if labelled_head else head_format
            tail = tail_format.replace("{label}", entry.label) if labelled_tail else tail_format
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
        self._layout = (base, message_index, spans)
        return self._prompt

    def _placements(self) -> list[Placement]:
        """Where the last render put each chunk (built when read: tracing off never reads them)."""
        if self._layout is None:
            return []
        self._count_all()
        base, message_index, spans = self._layout
        shown = "{label}" in self.chunk_format
        return [
            Placement(
                chunk_id=entry.chunk.id,
                position=position,
                label=entry.label if shown else "",  # a format without {label} shows the model none
                start=base + start,
                end=base + end,
                tokens=entry.tokens,  # type: ignore[arg-type]  # counted by _count_all
                truncated=entry.truncated,
                message_index=message_index,
                content_hash=_digest(entry.chunk),
            )
            for position, (entry, (start, end)) in enumerate(zip(self._entries, spans), start=1)
        ]

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
        placements = self._placements()
        rendered = len(placements)
        late = [Drop(entry.chunk.id, vocabulary.DROP_NOT_RENDERED) for entry in self._entries[rendered:]]
        return ContextRecord(
            method=vocabulary.INCLUSION_RECORDED,
            placements=placements,
            dropped=list(self._dropped) + late,
            max_tokens=self.max_tokens,
            prompt=self._prompt,
        )


def _digest(chunk: Chunk) -> str | None:
    """The chunk's content digest: read with tracing off, a chunk was not hashed when added."""
    if chunk.content_hash is not None or chunk.content is None:
        return chunk.content_hash
    return content_hash(chunk.content)
