"""Where each document lands in a Haystack builder's prompt, known by rendering it again.

``PromptBuilder`` and ``ChatPromptBuilder`` render a Jinja2 template over the documents they are
given; no tracing tag says where each one's text went. ragtrace renders the same template once
more through the builder's own ``run``, with each document's ``content`` between private-use
marks (U+E000..U+E002), on copies: the app's documents and prompt are never touched. When the
rendering with the marks taken out is exactly the prompt the app got, each document's text is at
the marks' offsets: a *recorded* placement, found by no search. When it isn't (a filter that cut
or measured the text, ``{{ doc.content[:200] }}``, a template that reads the clock), nothing is
recorded here and the assembly falls back to locating the documents in the prompt (*located*).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import names
from ..core.assembly import ContextRecord, Drop, Placement
from ..core.source_labels import label_at
from ..stages.assemble_stage import Assemble
from ._haystack_components import documents_in, prompt_of

_OPEN, _MID, _CLOSE = "\ue000", "\ue001", "\ue002"
_MARKS = re.compile(_OPEN + r"(\d+)" + _MID + "|" + _CLOSE)
_ANY_MARK = re.compile("[\ue000-\ue002]")

Span = tuple[int, int | None, int, int]  # (document index, message index or None, start, end)


def rendered_spans(run: Callable[..., Any], kwargs: Mapping[str, Any], prompt: Any) -> tuple[list[Any], list[Span]] | None:
    """The documents a builder was given and where each one's text sits in ``prompt`` (the
    builder's own output), by rendering again through ``run`` with marked copies; None when the
    marked rendering is not the same prompt once the marks are out."""
    documents = documents_in(kwargs)
    texts = _texts(prompt)
    if texts is None:
        return None
    if not documents:
        return documents, []
    if any(isinstance(d.content, str) and _ANY_MARK.search(d.content) for d in documents):
        return None  # the marks would be ambiguous
    marked = {id(doc): _marked(doc, index) for index, doc in enumerate(documents)}
    again = run(**_substituted(kwargs, marked))
    marked_texts = _texts(again.get("prompt") if isinstance(again, Mapping) else None)
    if marked_texts is None or len(marked_texts) != len(texts):
        return None
    spans: list[Span] = []
    for message, (text, marked_text) in enumerate(zip(texts, marked_texts)):
        found = _unmarked(marked_text)
        if found is None or found[0] != text:
            return None
        spans.extend((index, None if isinstance(prompt, str) else message, start, end) for index, start, end in found[1])
    spans.sort(key=lambda span: (-1 if span[1] is None else span[1], span[2]))
    return documents, spans


def _texts(prompt: Any) -> list[str] | None:
    """The prompt's texts: the string, or each chat message's text (a message holding more than
    one text part is not read: its parts' offsets would not be one text's)."""
    if isinstance(prompt, str):
        return [prompt]
    if prompt_of(prompt) is None or any(len(getattr(m, "texts", None) or ()) > 1 for m in prompt):
        return None
    return [m.text or "" for m in prompt]


def _marked(document: Any, index: int) -> Any:
    twin = copy.copy(document)
    if isinstance(document.content, str):
        object.__setattr__(twin, "content", f"{_OPEN}{index}{_MID}{document.content}{_CLOSE}")
    return twin


def _substituted(value: Any, marked: Mapping[int, Any], depth: int = 0) -> Any:
    """The builder's arguments with each document swapped for its marked copy (in lists, tuples
    and ``template_variables``)."""
    if id(value) in marked:
        return marked[id(value)]
    if depth < 2 and isinstance(value, Mapping):
        return {key: _substituted(item, marked, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and any(id(item) in marked for item in value):
        return type(value)(marked.get(id(item), item) for item in value)
    return value


def _unmarked(text: str) -> tuple[str, list[tuple[int, int, int]]] | None:
    """``text`` without the marks, and (document index, start, end) of each marked run in it;
    None when the marks don't pair up (a filter cut one off)."""
    pieces: list[str] = []
    spans: list[tuple[int, int, int]] = []
    length, open_at, index, last = 0, -1, -1, 0
    for match in _MARKS.finditer(text):
        pieces.append(text[last : match.start()])
        length += match.start() - last
        last = match.end()
        if match.group(1) is not None:
            if open_at >= 0:
                return None
            open_at, index = length, int(match.group(1))
        else:
            if open_at < 0:
                return None
            spans.append((index, open_at, length))
            open_at = -1
    if open_at >= 0:
        return None
    pieces.append(text[last:])
    return "".join(pieces), spans


def recorded(stage: Assemble, documents: Sequence[Any], spans: Sequence[Span], prompt: Any) -> ContextRecord:
    """The assembly's record from the rendered offsets: each document placed where its text is,
    under the label right before it (``[2]``, ``Document 2:``), in prompt order; a document shown
    twice counts once (``duplicate``, its second label still resolves), one given but never shown
    is ``not_in_prompt``."""
    shown = prompt_of(prompt)
    texts = [shown] if isinstance(shown, str) else [m["content"] for m in shown or []]
    record = ContextRecord(method=names.INCLUSION_RECORDED, prompt=shown)
    tokenizer = stage.builder.tokenizer
    chunks = [stage._canonical(document) for document in documents]
    placed: set[str] = set()
    for index, message, start, end in spans:
        chunk = chunks[index]
        if chunk is None:
            continue
        text = texts[message or 0]
        label = label_at(text, start)[0]
        if chunk.id in placed:
            record.dropped.append(Drop(chunk.id, names.DROP_DUPLICATE))
            if label:
                record.aliases.setdefault(label, chunk.id)
            continue
        placed.add(chunk.id)
        record.placements.append(
            Placement(chunk.id, len(record.placements) + 1, label, start, end, tokenizer.count(text[start:end]), False, message, chunk.content_hash)
        )
    for chunk in chunks:
        if chunk is not None and chunk.id not in placed:
            placed.add(chunk.id)
            record.dropped.append(Drop(chunk.id, names.DROP_NOT_IN_PROMPT))
    return record
