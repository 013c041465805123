"""LangChain: how the documents a chain retrieved reach the prompt, recorded as ``assemble``:
*declared* where the stuff-documents chain rendered each document through ``format_document``
(wrapped with wrapt: no callback sees one document's text), *located* otherwise."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import wrapt

from ..assemble_stage import Assemble
from ..guard import guard
from .runs import Scope, inside

_STUFF_MODULE = "langchain_classic.chains.combine_documents.stuff"
_RENDERED_CAPACITY = 1024


def assemble(scope: Scope, prompt: Any) -> None:
    """Record how the documents retrieved last reached the prompt an answer model is about to see:
    declared if each was rendered through ``format_document``, else located in the prompt."""
    with scope.lock:
        extra = scope.extra
        if not extra.get("retrieved"):
            return
        state = scope.state
        if state is not None and len(state.contexts) > extra.get("contexts_seen", 0):
            return  # the app assembled this itself (ragtrace.assemble)
        documents, formatted, started = extra.get("formatter_documents") or extra.get("documents"), extra.get("formatted"), extra.get("assemble_from")
        extra.update(retrieved=False, formatted=None, formatter_documents=None, assemble_from=None)
    stage = Assemble()
    stage.start_time = started
    with inside(scope):
        stage.open()
    try:
        if formatted:
            for document, text in formatted:
                stage.place(document, text)
            stage.set_prompt(prompt)
        else:
            stage.observe(documents, prompt)
    finally:
        stage.close()


def formatted(scope: Scope, documents: list[Any], output: str) -> None:
    """A run turned documents into text: keep what ``format_document`` rendered for each of them."""
    taken = [(document, _take_rendered(document)) for document in documents]  # take all: none stays behind
    pieces: list[tuple[Any, str]] | None = [(document, text) for document, text in taken if text is not None and text in output]
    if len(pieces) != len(documents):
        pieces = None
    with scope.lock:
        scope.extra.update(formatted=pieces, formatter_documents=documents)


_rendered: OrderedDict[int, tuple[Any, str]] = OrderedDict()
_rendered_lock = threading.Lock()


def _take_rendered(document: Any) -> str | None:
    with _rendered_lock:
        found = _rendered.pop(id(document), None)
    return found[1] if found is not None and found[0] is document else None


def discard_rendered(documents: list[Any]) -> None:
    with _rendered_lock:
        for document in documents:
            found = _rendered.get(id(document))
            if found is not None and found[0] is document:
                del _rendered[id(document)]


def _format_document_recorder(enabled: Callable[[], bool]) -> Any:
    """The wrapper of ``format_document``: keeps each document's text while ``enabled()``."""

    def record(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        text = wrapped(*args, **kwargs)
        with guard("langchain format_document"):
            if enabled() and args and isinstance(text, str):
                with _rendered_lock:
                    _rendered[id(args[0])] = (args[0], text)
                    if len(_rendered) > _RENDERED_CAPACITY:
                        _rendered.popitem(last=False)
        return text

    return record


def wrap_format_document(enabled: Callable[[], bool]) -> None:
    """Wrap the stuff chain's module global (its closures look it up at call time, so chains built
    before instrumenting are covered). langchain-classic is optional: without it, nothing to wrap."""
    try:
        module = __import__(_STUFF_MODULE, fromlist=["format_document"])
    except ImportError:
        return
    if not isinstance(module.format_document, wrapt.FunctionWrapper):
        wrapt.wrap_function_wrapper(module, "format_document", _format_document_recorder(enabled))


def unwrap_format_document() -> None:
    module = sys.modules.get(_STUFF_MODULE)
    current = getattr(module, "format_document", None)
    if isinstance(current, wrapt.FunctionWrapper):
        module.format_document = current.__wrapped__  # type: ignore[union-attr]
