"""LangChain: how the documents a chain retrieved reach the prompt, recorded as ``assemble``:
*declared* where the stuff-documents chain rendered each document through ``format_document``
(wrapped with wrapt: no callback sees one document's text), *located* otherwise. The retriever
tool (``create_retriever_tool``) renders through the same function: an agent's round takes its
documents' texts from here (``take_rendered``)."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import wrapt

from ..stages.assemble_stage import Assemble
from ..core.guard import guard
from .runs import Scope, inside

_STUFF_MODULE = "langchain_classic.chains.combine_documents.stuff"
_RETRIEVER_TOOL_MODULE = "langchain_core.tools.retriever"  # create_retriever_tool renders each document with it
# the module globals that render one document each, looked up at call time: (module, name, async)
_RENDERERS = ((_STUFF_MODULE, "format_document", False), (_RETRIEVER_TOOL_MODULE, "format_document", False), (_RETRIEVER_TOOL_MODULE, "aformat_document", True))
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
    taken = [(document, take_rendered(document)) for document in documents]  # take all: none stays behind
    pieces: list[tuple[Any, str]] | None = [(document, text) for document, text in taken if text is not None and text in output]
    if len(pieces) != len(documents):
        pieces = None
    with scope.lock:
        scope.extra.update(formatted=pieces, formatter_documents=documents)


_rendered: OrderedDict[int, tuple[Any, str]] = OrderedDict()
_rendered_lock = threading.Lock()


def take_rendered(document: Any) -> str | None:
    """What ``format_document`` rendered for ``document`` (once: taken, it is forgotten)."""
    with _rendered_lock:
        found = _rendered.pop(id(document), None)
    return found[1] if found is not None and found[0] is document else None


def discard_rendered(documents: list[Any]) -> None:
    with _rendered_lock:
        for document in documents:
            found = _rendered.get(id(document))
            if found is not None and found[0] is document:
                del _rendered[id(document)]


def _format_document_recorder(enabled: Callable[[], bool], asynchronous: bool) -> Any:
    """The wrapper of ``format_document`` (or ``aformat_document``): keeps each document's text while ``enabled()``."""

    def keep(args: tuple[Any, ...], text: Any) -> None:
        with guard("langchain format_document"):
            if enabled() and args and isinstance(text, str):
                with _rendered_lock:
                    _rendered[id(args[0])] = (args[0], text)
                    if len(_rendered) > _RENDERED_CAPACITY:
                        _rendered.popitem(last=False)

    def record(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        text = wrapped(*args, **kwargs)
        keep(args, text)
        return text

    async def arecord(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        text = await wrapped(*args, **kwargs)
        keep(args, text)
        return text

    return arecord if asynchronous else record


def wrap_format_document(enabled: Callable[[], bool]) -> None:
    """Wrap the module globals that render one document (their callers look them up at call time,
    so chains and tools built before instrumenting are covered). langchain-classic is optional:
    without it, its one is not wrapped."""
    for module_name, name, asynchronous in _RENDERERS:
        try:
            module = __import__(module_name, fromlist=[name])
        except ImportError:
            continue
        if not isinstance(getattr(module, name, None), wrapt.FunctionWrapper):
            wrapt.wrap_function_wrapper(module, name, _format_document_recorder(enabled, asynchronous))


def unwrap_format_document() -> None:
    for module_name, name, _ in _RENDERERS:
        module = sys.modules.get(module_name)
        current = getattr(module, name, None)
        if isinstance(current, wrapt.FunctionWrapper):
            setattr(module, name, current.__wrapped__)
