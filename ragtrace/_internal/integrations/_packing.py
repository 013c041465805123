"""Which nodes a framework's packed context holds: pure functions over texts and records.

LlamaIndex's synthesizers render each node (``get_content(MetadataMode.LLM)``), strip the texts,
drop empty ones and join them with a separator before splitting to fit the context window. When
no split cut a node, a packed context is exactly a run of renderings joined: each node's text is
then known, not searched for.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .. import names
from ..core.assembly import ContextRecord
from ..core.declared import split_label
from ..core.pieces import holding
from ..core.prompt_views import collapse

SEPARATORS = ("\n\n", "\n")  # CompactAndRefine, Refine, TreeSummarize repack with "\n\n"; SimpleSummarize joins with "\n"


def exact_run(texts: list[str] | None, start: int, context: str) -> tuple[int, int, list[str]] | None:
    """The nodes ``start:end`` whose stripped renderings, joined as the synthesizer joins them,
    are exactly ``context`` (empty renderings are dropped by the packing, so they are skipped)."""
    if texts is None:
        return None
    for separator in SEPARATORS:
        joined, parts = "", []
        for end in range(start, len(texts)):
            text = texts[end].strip()
            parts.append(text)
            if not text:
                continue
            joined = joined + separator + text if joined else text
            if joined == context:
                return start, end + 1, parts
            if not context.startswith(joined):
                break
    return None


def merged(contexts: list[ContextRecord]) -> ContextRecord:
    """The contexts of a refine chain as one: every chunk once, numbered in the order shown."""
    seen: dict[str, Any] = {}
    for record in contexts:
        for placement in record.placements:
            seen.setdefault(placement.chunk_id, placement)
    placements = [replace(p, position=n) for n, p in enumerate(seen.values(), start=1)]
    methods = {record.method for record in contexts}
    method = names.INCLUSION_LOCATED if names.INCLUSION_LOCATED in methods else contexts[-1].method
    return replace(contexts[-1], placements=placements, method=method)


def derived_sources(texts: list[str | None], retrieved: list[tuple[Any, str | None]]) -> list[tuple[str, str, str] | None]:
    """For nodes a synthesizer derived from the retrieved ones (LlamaIndex's ``CitationQueryEngine``
    re-splits each node into granular ``"Source n:\\n..."`` nodes under new ids): (the id of the
    retrieved chunk each one's text was cut from, the label it opens with, its text after the
    label), or None for a node that is no piece of any retrieved chunk. ``retrieved`` is (id, text)
    in rank order; the first retrieved chunk (best rank) that holds the text wins, by the shared
    piece mapping the searches use (``pieces.holding``); ids are never invented."""
    known = [(str(chunk_id), collapse(text)) for chunk_id, text in retrieved if chunk_id is not None and text]
    contents = [content for _, content in known]
    sources: list[tuple[str, str, str] | None] = []
    for text in texts:
        label, body = split_label(text) if text else ("", "")
        index = holding(body, contents) if body else None
        sources.append(None if index is None else (known[index][0], label, body.strip()))
    return sources
