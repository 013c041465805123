"""LangChain (langchain-core 1.x): callbacks turned into ragtrace's stage handles.

One callback handler, registered globally through ``register_configure_hook`` (every callback
manager LangChain configures picks it up, inheritable, in any thread or task), translates runs:
- retrievers → ``retrieve``; a retriever that wraps another (``ContextualCompressionRetriever``)
  → ``rerank`` of the inner one's documents;
- the documents' way into the prompt → ``assemble``: *declared* where the stuff-documents chain
  renders each document (``format_document``, wrapped with wrapt: no callback sees one document's
  text), *located* otherwise (an LCEL ``format_docs`` the app wrote): ``_langchain_assembly``;
- chat models and LLMs → ``generate``, with LangChain's own messages and ``LLMResult``; a call made
  under a retriever or before any retrieval shapes the query (role ``rewrite``), the rest answer.
An outermost chain outside a ``rag_pipeline`` opens one (the automatic root). Runs are linked by
``run_id``/``parent_run_id``, never by context, which ``ainvoke`` and ``batch`` don't carry over.
"""

from __future__ import annotations

import sys
import threading
import time
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from opentelemetry import trace

from .. import names
from ..stages.generation import Generate
from ..core.guard import guard, is_strict
from ..core.outputs import langchain_cut_off
from ..stages.retrieval import Rerank, Retrieve
from . import _langchain_agents, _langchain_assembly
from ._common import generated, generating, retrieval_over, retrieving
from .base import RagtraceInstrumentor
from .runs import Run, Runs

_OPENINFERENCE_MODULE = "openinference.instrumentation.langchain"
_ROOT_NAME = "langchain"
_QUERY_KEYS = ("input", "question", "query")
_ANSWER_KEYS = ("answer", "output", "result")


class LangChainInstrumentor(RagtraceInstrumentor):
    """``LangChainInstrumentor().instrument()``; the same as ``ragtrace.instrument("langchain")``."""

    library_name = "langchain"

    def _instrument(self, **kwargs: Any) -> None:
        handler = _registered_handler()
        handler.runs.tracer_provider = self.tracer_provider(kwargs)
        handler.enabled = True
        _langchain_assembly.wrap_format_document(lambda: handler.enabled)

    def _uninstrument(self, **kwargs: Any) -> None:
        handler = _registered_handler()
        handler.enabled = False
        _langchain_assembly.unwrap_format_document()


# --- the handler ----------------------------------------------------------------------------------
def _handler_base() -> type:
    from langchain_core.callbacks import BaseCallbackHandler

    return BaseCallbackHandler


_handler: Any = None
_handler_lock = threading.Lock()


def _registered_handler() -> Any:
    """The one handler, registered with LangChain's configure hook once per process (LangChain has
    no way to unregister a hook: after ``uninstrument()`` it stays, ignoring every event)."""
    global _handler
    with _handler_lock:
        if _handler is None:
            from langchain_core.tracers.context import register_configure_hook

            _handler = type("RagtraceCallbackHandler", (_Handler, _handler_base()), {})()
            register_configure_hook(ContextVar("ragtrace_langchain_handler", default=_handler), True)
        return _handler


class _Handler:
    """Sync callbacks, run inline (in the event loop under ``ainvoke``) so events keep their order."""

    run_inline = True
    enabled = False
    runs = Runs()

    @property
    def raise_error(self) -> bool:  # ragtrace's own tests see its bugs; users never do (the guard)
        return is_strict()

    # disabled with no run in flight: LangChain doesn't even call us. Runs started before
    # uninstrument() still end (their spans close), but no new one starts.
    # ``ignore_agent`` also covers tools: an agent's tool calls and the retrievals in them
    ignore_llm = ignore_chain = ignore_retriever = ignore_chat_model = ignore_agent = property(lambda self: not self.enabled and not len(self.runs))
    ignore_retry = ignore_custom_event = True

    # -- chains ---------------------------------------------------------------------------------
    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any) -> None:
        with guard("langchain chain start"):
            if not self.enabled:
                return
            run = self.runs.start(
                run_id, parent_run_id, root_name=kw.get("name") or _ROOT_NAME, query=_query(inputs), context=_beside(run_id, parent_run_id)
            )
            _langchain_agents.graph_node(run, kw.get("name"), kw.get("metadata"))
            documents = _documents(inputs)
            if documents is not None:
                run.data["documents"] = documents
                extra = run.scope.extra
                if extra.get("retrieved") and extra.get("assemble_from") is None:
                    extra["assemble_from"] = time.time_ns()

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kw: Any) -> None:
        try:
            with guard("langchain chain end"):
                run = self.runs.get(run_id)
                if run is not None and "documents" not in run.data:  # a streamed run's input comes with its end
                    documents = _documents(kw.get("inputs"))
                    if documents is not None:
                        run.data["documents"] = documents
                if run is not None and isinstance(outputs, str) and "documents" in run.data:
                    _langchain_assembly.formatted(run.scope, run.data["documents"], outputs)
        finally:  # a run always ends, even when recording it failed
            with guard("langchain chain end"):
                self._end_chain(run_id, outputs, output=_answer(outputs))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kw: Any) -> None:
        with guard("langchain chain error"):
            self._end_chain(run_id, error=error)

    def _end_chain(self, run_id: UUID, outputs: Any = None, **ending: Any) -> None:
        """End the run, and drop what ``format_document`` rendered for its documents that no run
        took (a formatter that raised part-way, an output that wasn't text): content isn't kept
        past the run that made it. An agent's outermost run first decides its answer."""
        run = self.runs.get(run_id)
        if run is not None and "documents" in run.data:
            _langchain_assembly.discard_rendered(run.data["documents"])
        if run is not None and "agent" in run.data:
            with guard("langchain agent end"):
                _langchain_agents.finished(run, outputs if ending.get("error") is None else None)
        self.runs.end(run_id, **ending)

    # -- retrievers -----------------------------------------------------------------------------
    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any) -> None:
        with guard("langchain retriever start"):
            if not self.enabled:
                return
            run = self.runs.start(run_id, parent_run_id, context=_beside(run_id, parent_run_id))
            run.data.update(query=query, started=time.time_ns(), metadata=kw.get("metadata") or {}, name=kw.get("name"))
            run.data["retrieving"] = retrieving()  # a vector store's client call inside it is this retrieval
            for ancestor in self.runs.ancestors(run):
                if "query" in ancestor.data:  # a retriever inside a retriever: the outer one reranks
                    ancestor.data["wraps"] = True
                    break

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kw: Any) -> None:
        run = self.runs.get(run_id)
        try:
            with guard("langchain retriever end"):
                if run is not None:
                    self._retrieved(run, documents)
        finally:
            with guard("langchain retriever end"):
                if run is not None and "retrieving" in run.data:
                    retrieval_over(run.data["retrieving"])
                self.runs.end(run_id)
                if run is not None:
                    run.scope.extra["retrieved_at"] = time.time_ns()  # a wrapping retriever reranks from here

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kw: Any) -> None:
        try:
            with guard("langchain retriever error"):
                run = self.runs.get(run_id)
                if run is not None and not run.data.get("wraps"):
                    stage = _retrieve_stage(run)
                    stage.start_time = run.data["started"]
                    self.runs.open(run, lambda: stage)
        finally:
            with guard("langchain retriever error"):
                ended = self.runs.end(run_id, error=error)
                if ended is not None and "retrieving" in ended.data:
                    retrieval_over(ended.data["retrieving"])

    def _retrieved(self, run: Run, documents: Any) -> None:
        data, scope = run.data, run.scope
        if data.get("wraps"):  # reranks what the inner retriever returned
            inner = scope.extra.get("documents")
            stage: Any = Rerank(data.get("name"), query=data["query"])
            stage.start_time = scope.extra.get("retrieved_at", data["started"])
            self.runs.open(run, lambda: stage)
            stage.record(documents, candidates=inner)
        else:
            stage = _retrieve_stage(run)
            stage.start_time = data["started"]
            self.runs.open(run, lambda: stage, parent=_langchain_agents.retriever_parent(self.runs, run))
            stage.record(documents)
        _langchain_agents.retrieved(self.runs, run, documents, stage, data.get("metadata"))
        with scope.lock:
            scope.extra.update(
                retrieved=True,
                documents=documents,
                assemble_from=None,
                formatted=None,
                contexts_seen=len(scope.state.contexts) if scope.state is not None else 0,
            )

    # -- models ---------------------------------------------------------------------------------
    def on_chat_model_start(self, serialized: Any, messages: list[list[Any]], *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any) -> None:
        with guard("langchain chat model start"):
            self._model_start(run_id, parent_run_id, messages[0] if messages else None, kw)

    def on_llm_start(self, serialized: Any, prompts: list[str], *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any) -> None:
        with guard("langchain llm start"):
            self._model_start(run_id, parent_run_id, prompts[0] if prompts else None, kw)

    def _model_start(self, run_id: UUID, parent_run_id: UUID | None, prompt: Any, kw: dict[str, Any]) -> None:
        if not self.enabled:
            return
        run = self.runs.start(run_id, parent_run_id, context=_beside(run_id, parent_run_id))
        metadata = kw.get("metadata") or {}
        params = kw.get("invocation_params") or {}
        if _langchain_agents.agent_model(self.runs, run, metadata, params):  # decided by its output and the run's final message
            role = _langchain_agents.start_role(metadata, kw) or names.ROLE_TOOL_CHOICE
            run.data.update(undecided=role == names.ROLE_TOOL_CHOICE, prompt=prompt, started=time.time_ns())
        else:
            role = self._role(run, metadata)
            if role == names.ROLE_ANSWER:
                _langchain_assembly.assemble(run.scope, prompt)
        model = metadata.get("ls_model_name") or params.get("model") or params.get("model_name") or kw.get("name")
        stage = self.runs.open(
            run,
            lambda: Generate(
                model if isinstance(model, str) else None,
                metadata.get("ls_provider"),
                prompt=prompt,
                role=role,
                temperature=metadata.get("ls_temperature"),
                max_tokens=metadata.get("ls_max_tokens"),
            ),
        )
        run.data["generating"] = generating(stage)  # the SDK call the model makes is this one (ChatOpenAI)

    def _role(self, run: Run, metadata: dict[str, Any]) -> str:
        """The app's ``ragtrace_role`` metadata; else a call under a retriever (multi-query) or before
        any retrieval in its pipeline (condense-question) rewrites the query; the rest answer."""
        given = metadata.get(names.RAG_ROLE_METADATA_KEY)
        if isinstance(given, str) and given:
            return given
        if any("query" in ancestor.data for ancestor in self.runs.ancestors(run)):
            return names.ROLE_REWRITE
        state = run.scope.state
        if state is not None and not state.retrievals:
            return names.ROLE_REWRITE
        return names.ROLE_ANSWER

    def on_llm_new_token(self, token: str, *, run_id: UUID, **kw: Any) -> None:
        with guard("langchain llm token"):
            run = self.runs.get(run_id)
            if run is not None and isinstance(run.stage, Generate) and not run.data.get("streamed"):
                run.data["streamed"] = True
                run.stage.stream_done(())

    def on_llm_end(self, response: Any, *, run_id: UUID, **kw: Any) -> None:
        try:
            with guard("langchain llm end"):
                run = self.runs.get(run_id)
                if run is not None and isinstance(run.stage, Generate):
                    run.stage.record(response)
                    if run.data.get("streamed") and langchain_cut_off(response):  # a dropped connection
                        run.stage.stream_cut_off()
                    _langchain_agents.model_ended(self.runs, run, response)
        finally:
            with guard("langchain llm end"):
                self._model_end(run_id, None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kw: Any) -> None:
        with guard("langchain llm error"):
            self._model_end(run_id, error)

    # -- tools (an agent's) ------------------------------------------------------------------------
    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any) -> None:
        with guard("langchain tool start"):
            if not self.enabled:
                return
            run = self.runs.start(run_id, parent_run_id, context=_beside(run_id, parent_run_id))
            run.data["tool_input"] = _tool_query(input_str, kw.get("inputs"))
            name = kw.get("name") or (serialized.get("name") if isinstance(serialized, dict) else None)
            _langchain_agents.tool_started(self.runs, run, name, kw.get("tool_call_id"))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kw: Any) -> None:
        try:
            with guard("langchain tool end"):
                run = self.runs.get(run_id)
                if run is not None:
                    _langchain_agents.tool_ended(self.runs, run, output, run.data.get("tool_input"))
        finally:
            with guard("langchain tool end"):
                self.runs.end(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kw: Any) -> None:
        with guard("langchain tool error"):
            run = self.runs.get(run_id)
            if run is not None:
                _langchain_agents.tool_failed(run)
            self.runs.end(run_id, error=error)

    def _model_end(self, run_id: UUID, error: BaseException | None) -> None:
        run = self.runs.end(run_id, error=error)
        if run is not None and "generating" in run.data:
            generated(run.data["generating"])


def _beside(run_id: UUID, parent_run_id: UUID | None) -> Any:
    """With OpenInference's LangChainInstrumentor on too, an outermost run's ragtrace spans go
    under the span it made for the same run (its public ``get_span``), so both share one trace."""
    module = sys.modules.get(_OPENINFERENCE_MODULE) if parent_run_id is None else None
    if module is None:
        return None
    other = module.LangChainInstrumentor()
    if not other.is_instrumented_by_opentelemetry:
        return None
    span = other.get_span(run_id)
    return trace.set_span_in_context(span) if span is not None else None


def _retrieve_stage(run: Run) -> Retrieve:
    metadata = run.data.get("metadata") or {}
    source = metadata.get("ls_vector_store_provider") or run.data.get("name")
    return Retrieve(run.data.get("query"), data_source=source if isinstance(source, str) else None)


# --- shapes ---------------------------------------------------------------------------------------
def _is_document(value: Any) -> bool:
    return hasattr(value, "page_content") and hasattr(value, "metadata")


def _documents(inputs: Any) -> list[Any] | None:
    """The documents a chain run takes: a list of them, or one under a key of its input dict."""
    candidates = inputs.values() if isinstance(inputs, dict) else (inputs,)
    for value in candidates:
        if isinstance(value, list) and value and all(_is_document(d) for d in value):
            return value
    return None


def _query(inputs: Any) -> str | None:
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, dict):
        for key in _QUERY_KEYS:
            if isinstance(inputs.get(key), str):
                return inputs[key]
    return None


def _tool_query(input_str: Any, inputs: Any) -> str | None:
    """A tool's query: its one string argument (LangChain passes the arguments as ``inputs``), else its input string."""
    strings = [v for v in inputs.values() if isinstance(v, str)] if isinstance(inputs, dict) else []
    if len(strings) == 1:
        return strings[0]
    return input_str if isinstance(input_str, str) else None


def _answer(outputs: Any) -> str | None:
    if isinstance(outputs, str):
        return outputs
    if isinstance(outputs, dict):
        for key in _ANSWER_KEYS:
            if isinstance(outputs.get(key), str):
                return outputs[key]
    return None
