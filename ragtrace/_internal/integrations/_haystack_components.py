"""Haystack's component shapes, read: which stage a component is, and what its sockets carry.

A Haystack component has no base class that says what it does; its contract is its sockets.
``haystack.component.run`` spans carry the component's type (and, since 2.x's later releases,
its fully qualified type) and its input and output sockets, which is all the stage is told from:

- ``PromptBuilder`` / ``ChatPromptBuilder`` of ``haystack.components.builders``, or any component
  with a ``documents`` input and a ``prompt`` output (the app's own prompt component): assemble;
- a component with a ``replies`` output (every generator and chat generator, a user's own
  ``@component`` generator): generate;
- a ``documents`` output from ``query`` and ``documents`` inputs, or a component of a
  ``rankers`` package with a ``documents`` output: rerank;
- a ``documents`` output without a ``documents`` input, from a component of a ``retrievers``
  package or one with a ``query`` input: retrieve.

- a ``text`` input and an ``embedding`` output (a text embedder, the query's): embed.

Everything else (document embedders, joiners, converters, writers, an ``AnswerBuilder``) is no stage.
Nothing here imports Haystack: its objects are read by their attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import names

BUILDERS = frozenset({"PromptBuilder", "ChatPromptBuilder"})
_BUILDERS_PACKAGE = "haystack.components.builders."

TYPE_TAG = "haystack.component.type"
QUALIFIED_TAG = "haystack.component.fully_qualified_type"
NAME_TAG = "haystack.component.name"
INPUTS_TAG = "haystack.component.input_spec"
OUTPUTS_TAG = "haystack.component.output_spec"


def stage_of(tags: Mapping[str, Any]) -> str | None:
    """The stage a ``haystack.component.run`` span's component is (``names.STAGE_*``), or None."""
    kind = tags.get(TYPE_TAG)
    qualified = tags.get(QUALIFIED_TAG)
    qualified = qualified if isinstance(qualified, str) else ""
    inputs, outputs = _sockets(tags.get(INPUTS_TAG)), _sockets(tags.get(OUTPUTS_TAG))
    if "prompt" in outputs and ("documents" in inputs or (kind in BUILDERS and (not qualified or qualified.startswith(_BUILDERS_PACKAGE)))):
        return names.STAGE_ASSEMBLE
    if "replies" in outputs:
        return names.STAGE_GENERATE
    if "text" in inputs and "embedding" in outputs:
        return names.STAGE_EMBED
    if "documents" not in outputs:
        return None
    packages = qualified.split(".")[:-1]
    if "documents" in inputs and ("query" in inputs or "rankers" in packages):
        return names.STAGE_RERANK
    if "documents" not in inputs and ("query" in inputs or "retrievers" in packages):
        return names.STAGE_RETRIEVE
    return None


def _sockets(spec: Any) -> frozenset[str]:
    return frozenset(spec) if isinstance(spec, Mapping) else frozenset()


def receivers(tags: Mapping[str, Any], socket: str) -> list[Any]:
    """The components an output socket is connected to (empty: it goes to the pipeline's output)."""
    spec = tags.get(OUTPUTS_TAG)
    found = spec.get(socket) if isinstance(spec, Mapping) else None
    names_ = found.get("receivers") if isinstance(found, Mapping) else None
    return list(names_) if isinstance(names_, (list, tuple)) else []


def provider_of(qualified: Any, package: str) -> str | None:
    """The provider a Haystack component of ``package`` (``generators``, ``embedders``) names in
    its module: ``haystack.components.generators.chat.openai.OpenAIChatGenerator`` -> ``openai``,
    ``haystack_integrations.components.generators.anthropic...`` -> ``anthropic``; a user's own
    component has none."""
    if not isinstance(qualified, str):
        return None
    parts = qualified.split(".")
    if parts[0] not in ("haystack", "haystack_integrations") or package not in parts:
        return None
    rest = [p for p in parts[parts.index(package) + 1 : -1] if p not in ("chat", "utils")]
    # core's embedders are one module each: ``openai_text_embedder`` -> ``openai``
    return rest[0].removesuffix("_text_embedder").removesuffix("_document_embedder") if rest else None


def is_document(value: Any) -> bool:
    """A Haystack ``Document`` (or the like): an id, content and meta."""
    return hasattr(value, "id") and hasattr(value, "content") and hasattr(value, "meta") and not isinstance(value, Mapping)


def own_id(document: Any) -> Any:
    """A document's id unless it is Haystack's default one, the SHA-256 of its content and meta
    (``Document._create_id``): an unkeyed hash of content is content, so such a document is
    given ragtrace's keyed digest instead (None: the id-less path) where content is not exported."""
    if not is_document(document):
        return document.get("id") if isinstance(document, Mapping) else getattr(document, "id", None)
    create = getattr(document, "_create_id", None)
    try:
        derived = callable(create) and document.id == create()
    except Exception:  # noqa: BLE001 - an id that can't be checked is not exported as given
        derived = True
    return None if derived else document.id


def documents_in(values: Any) -> list[Any]:
    """The documents among a component's inputs (a builder's variables, ``template_variables``
    included), in the order given, each object once."""
    found: dict[int, Any] = {}
    for value in _variables(values):
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if is_document(item):
                found.setdefault(id(item), item)
    return list(found.values())


def _variables(values: Any) -> list[Any]:
    if not isinstance(values, Mapping):
        return []
    extra = values.get("template_variables")
    more = list(extra.values()) if isinstance(extra, Mapping) else []
    return [v for k, v in values.items() if k != "template_variables"] + more


def prompt_of(value: Any) -> str | list[dict[str, str]] | None:
    """A builder's output or a generator's input as ragtrace's prompt: the string, or chat messages
    as ``{role, content}`` dicts (each message's text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and value and all(hasattr(m, "role") and hasattr(m, "text") for m in value):
        return [{"role": str(getattr(m.role, "value", m.role)), "content": m.text or ""} for m in value]
    return None


def generator_prompt(inputs: Mapping[str, Any]) -> Any:
    """What a generator was sent: its ``prompt`` (generators) or ``messages`` (chat generators)."""
    for key in ("prompt", "messages"):
        if inputs.get(key) is not None:
            return inputs[key]
    return None


def reply(outputs: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """A generator's first reply as text, and what its meta says of the call: tokens, the
    response model, the finish reason (Haystack's generators report OpenAI-style ``usage``)."""
    replies = outputs.get("replies")
    if not isinstance(replies, (list, tuple)) or not replies:
        return None, {}
    first = replies[0]
    if isinstance(first, str):
        text: str | None = first
        metas = outputs.get("meta")
        meta = metas[0] if isinstance(metas, (list, tuple)) and metas and isinstance(metas[0], Mapping) else {}
    else:
        text = getattr(first, "text", None)
        meta = getattr(first, "meta", None) or {}
    if not isinstance(text, str):
        return None, {}
    return text, _usage(meta if isinstance(meta, Mapping) else {})


def _usage(meta: Mapping[str, Any]) -> dict[str, Any]:
    usage = meta.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    found = {
        "input_tokens": _count(usage.get("prompt_tokens", usage.get("input_tokens"))),
        "output_tokens": _count(usage.get("completion_tokens", usage.get("output_tokens"))),
        "response_model": meta.get("model") if isinstance(meta.get("model"), str) else None,
        "finish_reasons": [meta["finish_reason"]] if isinstance(meta.get("finish_reason"), str) else None,
    }
    return {k: v for k, v in found.items() if v is not None}


def embedding_meta(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """What a text embedder's ``meta`` says: its model and the tokens it was billed."""
    meta = outputs.get("meta")
    meta = meta if isinstance(meta, Mapping) else {}
    usage = meta.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    found = {"model": meta.get("model") if isinstance(meta.get("model"), str) else None, "input_tokens": _count(usage.get("prompt_tokens", usage.get("total_tokens")))}
    return {k: v for k, v in found.items() if v is not None}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
