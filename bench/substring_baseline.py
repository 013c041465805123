"""The substring baseline: context inclusion and citations as a trace-only tool infers them.

A tool that only sees exported spans has the retrieved chunks (ids and text, from the retrieval
spans' ``retrieval.documents.*`` attributes) and every LLM call's prompt and output
(``gen_ai.input.messages`` / ``input.value``, ``gen_ai.output.messages`` / ``output.value``). It
decides "chunk in context" by ``chunk.content in prompt`` over all LLM prompts of the trace, and
resolves a citation ``[n]`` in an output to the n-th retrieved chunk found in that call's prompt
(ordered by where it first occurs), or ``[id]`` to a retrieved chunk id. That is the best a
trace-only tool can do without knowing how the prompt was built; ``bench_accuracy.py`` compares it
with what ragtrace records while building the prompt.

Pure functions over span-like objects (``.attributes``, ``.context.trace_id``), so it works on
spans from any exporter that keeps attributes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_DOC = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|content)$")
_MARKER = re.compile(r"\[([^\[\]\n]{1,64})\]")
_LLM_OPERATIONS = ("chat", "text_completion", "generate_content")


@dataclass
class Inference:
    """What the baseline concludes about one trace."""

    retrieved: dict[str, str] = field(default_factory=dict)  # id -> content, first retrieval wins
    in_context: set[str] = field(default_factory=set)
    cited: set[str] = field(default_factory=set)

    @property
    def context_precision(self) -> float | None:
        """|C| / |R| over retrieved chunks (None when nothing was retrieved)."""
        if not self.retrieved:
            return None
        return len(self.in_context & self.retrieved.keys()) / len(self.retrieved)


def _attributes(span: Any) -> Mapping[str, Any]:
    return getattr(span, "attributes", None) or {}


def is_retrieval(attributes: Mapping[str, Any]) -> bool:
    return attributes.get("openinference.span.kind") == "RETRIEVER" or attributes.get("gen_ai.operation.name") == "retrieval"


def is_llm(attributes: Mapping[str, Any]) -> bool:
    return attributes.get("openinference.span.kind") == "LLM" or attributes.get("gen_ai.operation.name") in _LLM_OPERATIONS


def retrieved_documents(attributes: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """(id, content) of a retrieval span's documents, in rank order."""
    found: dict[int, dict[str, str]] = {}
    for key, value in attributes.items():
        match = _DOC.match(key)
        if match is not None:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = str(value)
    return [(doc["id"], doc.get("content")) for _, doc in sorted(found.items()) if "id" in doc]


def _message_texts(raw: Any) -> list[str] | None:
    """The text of each message of a GenAI ``{role, parts}`` JSON list (None: unreadable)."""
    try:
        messages = json.loads(raw)
    except (TypeError, ValueError):
        return None
    if not isinstance(messages, list):
        return None
    texts = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        parts = message.get("parts")
        if isinstance(parts, list):
            texts.append("".join(str(p.get("content", "")) for p in parts if isinstance(p, Mapping)))
        elif isinstance(message.get("content"), str):
            texts.append(message["content"])
    return texts


def prompt_texts(attributes: Mapping[str, Any]) -> list[str]:
    """An LLM span's prompt, one string per message."""
    texts = _message_texts(attributes.get("gen_ai.input.messages"))
    if texts is not None:
        return texts
    value = attributes.get("input.value")
    return [str(value)] if value is not None else []


def output_text(attributes: Mapping[str, Any]) -> str:
    texts = _message_texts(attributes.get("gen_ai.output.messages"))
    if texts is not None:
        return "\n".join(texts)
    value = attributes.get("output.value")
    return str(value) if value is not None else ""


def _keys(marker: str) -> list[str]:
    """``1`` / ``1, 3`` / ``doc-7`` inside one pair of brackets."""
    return [part.strip() for part in marker.split(",") if part.strip()]


def infer(spans: Iterable[Any]) -> Inference:
    """The baseline's reading of one trace's spans."""
    result = Inference()
    llm_spans: list[Mapping[str, Any]] = []
    for span in spans:
        attributes = _attributes(span)
        if is_retrieval(attributes):
            for chunk_id, content in retrieved_documents(attributes):
                result.retrieved.setdefault(chunk_id, content or "")
        elif is_llm(attributes):
            llm_spans.append(attributes)
    for attributes in llm_spans:
        prompt = "\n".join(prompt_texts(attributes))
        found: list[tuple[int, int, str]] = []  # (first offset, retrieval order, id)
        for order, (chunk_id, content) in enumerate(result.retrieved.items()):
            if content and content in prompt:
                result.in_context.add(chunk_id)
                found.append((prompt.find(content), order, chunk_id))
        by_position = [chunk_id for _, _, chunk_id in sorted(found)]
        for marker in _MARKER.findall(output_text(attributes)):
            for key in _keys(marker):
                if key.isdigit() and 1 <= int(key) <= len(by_position):
                    result.cited.add(by_position[int(key) - 1])
                elif key in result.retrieved:
                    result.cited.add(key)
    return result


def by_trace(spans: Sequence[Any]) -> dict[int, list[Any]]:
    """Group exported spans by trace id."""
    traces: dict[int, list[Any]] = {}
    for span in spans:
        traces.setdefault(span.context.trace_id, []).append(span)
    return traces
