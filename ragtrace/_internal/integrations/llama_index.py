"""LlamaIndex (llama-index-core 0.14): a span handler and an event handler on the root
instrumentation dispatcher translate a query into ragtrace's stage handles.

- the outermost ``query``/``aquery`` of a query engine, or ``chat``/``achat``/``stream_chat``/
  ``astream_chat`` of a chat engine (one turn), is the pipeline root when no ``rag_pipeline`` surrounds it;
- a retriever's ``retrieve`` is a retrieve span (ids, scores and ranks from its ``NodeWithScore``
  list), a query embedding inside it an embed span, a node postprocessor a rerank span;
- each LLM call of the response synthesizer gets an assemble span for the prompt it is sent and a
  generate span. Placements are *declared* when the call's context text is exactly the
  synthesizer's renderings of a run of nodes joined by its separator (each node's
  ``get_content(MetadataMode.LLM)``, stripped, as ``PromptHelper.repack`` leaves it); when the
  packing cut or merged node text (a context window too small for the nodes), the nodes are
  *located* in the prompt instead, and the record says so;
- the QA call's role is ``answer``, a refine call's ``refine``: it rewrites the answer with the next
  packed chunk and supersedes it, so only the final answer is scored (``_llama_index_llm``). LLM
  calls in a postprocessor are ``grader``, elsewhere in a query or chat engine ``rewrite`` (query
  transforms, a chat engine condensing the history into a question): traced, left out of the figures.

``streaming=True``: the query returns before the model is called. The ``StreamingResponse`` goes
back to the app unread; its ``response_gen`` is replaced by a generator that passes every token
through while the pipeline's context is active, and the root ends when the stream does; the
same for ``aquery``'s ``AsyncStreamingResponse`` and its async ``response_gen``. A chat engine's
``stream_chat``/``astream_chat`` turn ends with the engine's own writer (``_llama_index_chat``).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from ..stages import state as state_module
from ..core.guard import guard
from ..stages.pipeline import RagPipeline
from ..stages.retrieval import Embed, Rerank, Retrieve
from ..stages.stage import Stage
from . import _llama_index_agents
from ._common import Attached
from ._llama_index_chat import STREAM_CHAT_METHODS, WRITER_METHODS, StreamedTurns
from ._llama_index_llm import LLM_METHODS, LlmCalls, Synthesis, sourced
from .base import RagtraceInstrumentor

_ENGINE_METHODS = frozenset({"query", "aquery"})
# a turn of a chat engine that retrieves and answers through a synthesizer, its own or its query
# engine's (condense_question); not a plain SimpleChatEngine, whose reply must stay an answer, nor
# the multimodal ones. An LLM call of the engine itself (condensing the history) is a rewrite
_CHAT_METHODS = frozenset({"chat", "achat"}) | STREAM_CHAT_METHODS
_RETRIEVE_METHODS = frozenset({"retrieve", "aretrieve"})
_RERANK_METHODS = frozenset({"_postprocess_nodes", "_apostprocess_nodes"})
_SYNTHESIZE_METHODS = frozenset({"synthesize", "asynthesize"})
_GET_RESPONSE_METHODS = frozenset({"get_response", "aget_response"})
_EMBED_METHODS = frozenset({"get_query_embedding", "aget_query_embedding"})


@dataclass(eq=False)
class _Region:
    """What the LlamaIndex call in progress belongs to (the innermost stage-level component)."""

    kind: str  # "engine", "retrieve", "rerank", "synthesis", "agent", "tool"
    synthesis: Synthesis | None = None
    nodes: Any = None  # an engine's: the nodes its latest retrieval or postprocessor returned
    agent: Any = None  # an agent run's rounds (``_llama_index_agents.Agent``), in its region
    tool: Any = None  # a tool call of an agent, in its region


@dataclass(eq=False)
class _Opened:
    """What ``enter`` started for one dispatcher span."""

    stage: Stage | None  # None for a synthesis, which is only a region
    region: _Region | None
    token: Any = None
    candidates: Any = None  # a postprocessor's input nodes
    attached: Attached | None = None


_region: ContextVar[_Region | None] = ContextVar("ragtrace_llama_index_region", default=None)


class LlamaIndexInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("llama_index")``, or ``LlamaIndexInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "llama_index"
    _handlers: tuple[Any, Any] | None = None

    def _instrument(self, **kwargs: Any) -> None:
        from llama_index.core.instrumentation import get_dispatcher

        tracker = _Tracker(self.tracer_provider(kwargs))
        self._handlers = _handlers(tracker)
        root = get_dispatcher()
        # first in line: the dispatcher enters *and* exits spans in handler order, so each span
        # leaves the first handler's context current. Ours settles (``_common._CurrentSpan``);
        # another instrumentor's (OpenInference's) would chain one stale proxy per query.
        root.span_handlers.insert(0, self._handlers[0])
        root.add_event_handler(self._handlers[1])

    def _uninstrument(self, **kwargs: Any) -> None:
        from llama_index.core.instrumentation import get_dispatcher

        if self._handlers is None:
            return
        root = get_dispatcher()
        span_handler, event_handler = self._handlers
        root.span_handlers[:] = [h for h in root.span_handlers if h is not span_handler]
        root.event_handlers[:] = [h for h in root.event_handlers if h is not event_handler]
        self._handlers = None


class _Tracker:
    """Turns dispatcher spans into stage handles (each entry point is guarded by the handlers)."""

    def __init__(self, provider: trace.TracerProvider | None) -> None:
        from llama_index.core.base.base_query_engine import BaseQueryEngine
        from llama_index.core.base.base_retriever import BaseRetriever
        from llama_index.core.base.embeddings.base import BaseEmbedding
        from llama_index.core.base.llms.base import BaseLLM
        from llama_index.core.chat_engine import CondensePlusContextChatEngine, CondenseQuestionChatEngine, ContextChatEngine
        from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
        from llama_index.core.chat_engine.types import StreamingAgentChatResponse
        from llama_index.core.postprocessor.types import BaseNodePostprocessor
        from llama_index.core.response_synthesizers.base import BaseSynthesizer
        from llama_index.core.tools.types import BaseTool

        self.provider = provider
        self.kinds = (
            (BaseQueryEngine, _ENGINE_METHODS, self._enter_engine),
            ((ContextChatEngine, CondensePlusContextChatEngine, CondenseQuestionChatEngine), _CHAT_METHODS, self._enter_engine),
            (BaseRetriever, _RETRIEVE_METHODS, self._enter_retrieve),
            (BaseEmbedding, _EMBED_METHODS, self._enter_embed),
            (BaseNodePostprocessor, _RERANK_METHODS, self._enter_rerank),
            (BaseSynthesizer, _SYNTHESIZE_METHODS, self._enter_synthesis),
            (BaseSynthesizer, _GET_RESPONSE_METHODS, self._enter_get_response),
            (BaseLLM, LLM_METHODS, self._enter_llm),
            (StreamingAgentChatResponse, WRITER_METHODS, self._enter_writer),
            (_llama_index_agents.agent_classes(), _llama_index_agents.AGENT_METHODS, self._enter_agent),
            (BaseTool, _llama_index_agents.TOOL_METHODS, self._enter_tool),
        )
        self.streaming_response = StreamingResponse
        self.async_streaming_response = AsyncStreamingResponse
        self.lock = threading.Lock()
        self.open: dict[str, _Opened] = {}  # dispatcher span id -> what enter started
        self.llm = LlmCalls(provider)
        self.turns = StreamedTurns()

    # -- dispatcher spans ------------------------------------------------------------------------
    def enter(self, id_: str, bound_args: Any, instance: Any, parent_id: str | None) -> None:
        method = id_.partition("-")[0].rpartition(".")[2]
        for cls, methods, handler in self.kinds:
            if method in methods and isinstance(instance, cls):
                handler(id_, bound_args.arguments, instance, method, parent_id)
                return

    def exit(self, id_: str, result: Any, error: BaseException | None) -> Any:
        """Finish what ``enter`` started for this span; returns the result to hand back."""
        self.llm.exit(id_, result, error)
        turn = self.turns.writer_ended(id_, error)
        if turn is not None:  # a streamed chat turn's writer, the last of it to end
            _end_stream(turn.root, self, turn.error)
            return result
        with self.lock:
            opened = self.open.pop(id_, None)
        if opened is None:
            return result
        if opened.token is not None:
            with guard("llama_index context"):  # fails when an async span ends in another context
                _region.reset(opened.token)
        stage, region = opened.stage, opened.region
        if region is not None and (region.agent is not None or region.tool is not None):
            with guard("llama_index agent"):
                _llama_index_agents.exited(region.tool, region.agent, stage, result, error)
        if stage is None:  # a region only; a streamed answer is produced later, in its synthesis
            if error is None and opened.region is not None and opened.region.kind == "synthesis":
                return self._passing(result, None, opened.region)
            return result
        if opened.attached is not None:
            opened.attached.detach()
        if error is None:
            if isinstance(stage, (Retrieve, Rerank)):
                engine = _region.get()
                if engine is not None and engine.kind == "engine":
                    engine.nodes = result  # what a synthesizer's derived nodes are pieces of
            if isinstance(stage, Rerank):
                stage.record(result, candidates=opened.candidates)
            elif isinstance(stage, (Retrieve, Embed)):
                stage.record(result)
                if isinstance(stage, Retrieve):
                    _llama_index_agents.retrieved(stage, result)
            elif isinstance(stage, RagPipeline):
                return self._passing(result, stage, None, id_)
        if isinstance(stage, RagPipeline):
            self.turns.failed(id_)
            self.llm.end_leftovers(stage.state)
        stage.close(error)
        return result

    def _open(self, id_: str, stage: Stage | None, region: _Region | None, candidates: Any = None) -> None:
        attached = None
        if stage is not None:
            stage.open()
            attached = Attached(stage, stage.state if isinstance(stage, RagPipeline) else None)
        token = _region.set(region) if region is not None else None
        with self.lock:
            self.open[id_] = _Opened(stage, region, token, candidates, attached)

    def _enter_engine(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        if state_module.current() is not None:  # inside the user's rag_pipeline, or a nested engine
            self._open(id_, None, _Region("engine"))
            return
        query = args.get("str_or_query_bundle", args.get("message"))  # a query engine's, a chat engine's
        run = RagPipeline(type(instance).__name__, query=_query_text(query), tracer_provider=self.provider)
        if method in STREAM_CHAT_METHODS:
            self.turns.started(id_, run)
        self._open(id_, run, _Region("engine"))

    def _enter_agent(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        """An agent's run: the pipeline root, unless it runs inside one (``_llama_index_agents``)."""
        region = _Region("agent", agent=_llama_index_agents.Agent(provider=self.provider))
        if state_module.current() is not None:
            self._open(id_, None, region)
            return
        region.agent.owns_root = True
        self._open(id_, RagPipeline(type(instance).__name__, query=_llama_index_agents.user_message(args), tracer_provider=self.provider), region)

    def _enter_tool(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        region = _region.get()
        if region is None or region.agent is None:  # a tool called outside an agent is not traced
            return
        tool = _llama_index_agents.tool_started(region.agent, instance)
        self._open(id_, tool.stage, _Region("tool", tool=tool))
        tool.token = _llama_index_agents.enter_tool(tool)

    def _enter_writer(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        """A streamed chat turn's writer, which calls the model (``_llama_index_chat``)."""
        self.turns.writer_started(id_, parent)

    def _enter_retrieve(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        region = _region.get()
        if region is not None and region.kind == "retrieve":  # a retriever's sub-retrievers: the outer result counts
            return
        top_k = getattr(instance, "similarity_top_k", None)
        stage = Retrieve(
            _query_text(args.get("str_or_query_bundle")),
            data_source=type(instance).__name__,
            top_k=top_k if isinstance(top_k, int) else None,
            tracer_provider=self.provider,
        )
        self._open(id_, stage, _Region("retrieve"))

    def _enter_embed(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        region = _region.get()
        if region is None or region.kind != "retrieve":  # query embeddings of a retrieval only, not indexing
            return
        model = _text(getattr(instance, "model_name", None))
        self._open(id_, Embed(model if model != "unknown" else type(instance).__name__, tracer_provider=self.provider), None)

    def _enter_rerank(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        top_n = getattr(instance, "top_n", None)
        model = _text(getattr(instance, "model", None)) or type(instance).__name__
        query = args.get("query_bundle")
        stage = Rerank(model, top_n=top_n if isinstance(top_n, int) else None, query=_query_text(query), tracer_provider=self.provider)
        self._open(id_, stage, _Region("rerank"), args.get("nodes"))

    def _enter_synthesis(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        nodes, engine = args.get("nodes"), _region.get()
        retrieved = engine.nodes if engine is not None and isinstance(engine.nodes, list) else []
        self._open(id_, None, _Region("synthesis", Synthesis(sourced(list(nodes), retrieved) if isinstance(nodes, list) else [])))

    def _enter_get_response(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        """The first get_response of a synthesis gets one rendering per node, in node order."""
        region = _region.get()
        synthesis = region.synthesis if region is not None else None
        texts = args.get("text_chunks")
        if synthesis is not None and synthesis.texts is None and isinstance(texts, list):
            if len(texts) == len(synthesis.nodes) and all(isinstance(t, str) for t in texts):
                synthesis.texts = list(texts)

    def _enter_llm(self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None) -> None:
        region = _region.get()
        kind, synthesis = (region.kind, region.synthesis) if region is not None else (None, None)
        self.llm.enter(id_, args, instance, method, parent, kind, synthesis, region.agent if region is not None else None)

    # -- streams ---------------------------------------------------------------------------------
    def _passing(self, result: Any, root: RagPipeline | None, region: _Region | None, engine_id: str | None = None) -> Any:
        """A StreamingResponse whose tokens pass through with the pipeline's context active (the
        model is called while the app reads them); the root ends with the stream. A streamed chat
        turn's root ends with the engine's writer, unless that is done already."""
        if engine_id is not None and engine_id in self.turns:
            turn = self.turns.returned(engine_id, result)
            if turn is not None:
                _end_stream(turn.root, self, turn.error)
        elif isinstance(result, self.streaming_response) and hasattr(result.response_gen, "__next__"):
            result.response_gen = _passing(result.response_gen, root, region, self)
        elif isinstance(result, self.async_streaming_response) and hasattr(result.response_gen, "__anext__"):
            result.response_gen = _apassing(result.response_gen, root, region, self)
        elif root is not None:
            self.llm.end_leftovers(root.state)
            root.close()
        return result


def _passing(tokens: Iterator[Any], root: RagPipeline | None, region: _Region | None, tracker: _Tracker) -> Iterator[Any]:
    error = None  # the stream's own (the model failed mid-answer): the spans end with it, the app gets it
    try:
        while True:
            with _stream_step(root, region):
                try:
                    item = next(tokens)
                except StopIteration:
                    return
                except BaseException as failed:
                    error = failed
                    raise
            yield item
    finally:
        _end_stream(root, tracker, error)


async def _apassing(tokens: AsyncIterator[Any], root: RagPipeline | None, region: _Region | None, tracker: _Tracker) -> AsyncIterator[Any]:
    """``_passing`` for ``aquery(...)`` with ``streaming=True`` (an ``AsyncStreamingResponse``)."""
    error = None
    try:
        while True:
            with _stream_step(root, region):
                try:
                    item = await tokens.__anext__()
                except StopAsyncIteration:
                    return
                except BaseException as failed:
                    error = failed
                    raise
            yield item
    finally:
        _end_stream(root, tracker, error)


@contextmanager
def _stream_step(root: RagPipeline | None, region: _Region | None) -> Iterator[None]:
    """While the app pulls one token, the stream's pipeline and region are current (the
    framework's LLM call runs lazily inside that pull), and neither once the token is handed over."""
    if root is not None:
        with guard("llama_index stream"):
            root.attach()
    token = _region.set(region) if region is not None else None
    try:
        yield
    finally:
        if token is not None:
            _region.reset(token)
        if root is not None:
            with guard("llama_index stream"):
                root.detach()


def _end_stream(root: RagPipeline | None, tracker: _Tracker, error: BaseException | None = None) -> None:
    if root is not None:
        with guard("llama_index stream"):
            tracker.llm.end_leftovers(root.state, error)
            root.close(error)


def _query_text(query: Any) -> str | None:
    if isinstance(query, str):
        return query
    text = getattr(query, "query_str", None)
    return text if isinstance(text, str) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _handlers(tracker: _Tracker) -> tuple[Any, Any]:
    """The span and event handler (pydantic models of llama-index-core) feeding ``tracker``."""
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
    from pydantic import PrivateAttr

    class RagtraceSpanHandler(BaseSpanHandler[Any]):  # type: ignore[misc,valid-type]
        _tracker: _Tracker = PrivateAttr()

        @classmethod
        def class_name(cls) -> str:
            return "RagtraceSpanHandler"

        def new_span(self, id_: str, bound_args: Any, instance: Any = None, parent_span_id: str | None = None, tags: Any = None, **kwargs: Any) -> None:
            with guard("llama_index instrumentation"):
                self._tracker.enter(id_, bound_args, instance, parent_span_id)
            return None  # no span of our own for the dispatcher to keep

        def prepare_to_exit_span(self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any) -> None:
            with guard("llama_index instrumentation"):
                self._tracker.exit(id_, result, None)
            return None

        def prepare_to_drop_span(self, id_: str, bound_args: Any, instance: Any = None, err: BaseException | None = None, **kwargs: Any) -> None:
            with guard("llama_index instrumentation"):
                self._tracker.exit(id_, None, err)
            return None

    class RagtraceEventHandler(BaseEventHandler):  # type: ignore[misc]
        _tracker: _Tracker = PrivateAttr()

        @classmethod
        def class_name(cls) -> str:
            return "RagtraceEventHandler"

        def handle(self, event: Any, **kwargs: Any) -> None:
            with guard("llama_index instrumentation"):
                self._tracker.llm.event(event)

    spans, events = RagtraceSpanHandler(), RagtraceEventHandler()
    spans._tracker = events._tracker = tracker
    return spans, events
