"""The LLM calls of a LlamaIndex query: a generate span per call and, for the response
synthesizer's calls, an assemble span for the prompt each one is sent.

Placements are declared when a call's context text is exactly a run of the synthesizer's node
renderings joined as it joins them (``_packing.exact_run``), else the nodes are located in the
prompt. A refine call rewrites the answer with the next packed chunk: it is scored against every
context of the chain and supersedes the answer before it, so only the final answer is scored.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from .. import names
from ..stages import state as state_module
from ..stages.assemble_stage import Assemble
from ..core.assembly import ContextRecord
from ..stages.generation import Generate
from ..core.outputs import end_mark
from . import _llama_index_agents
from ._common import Attached, inside_generation
from ._packing import derived_sources, exact_run, merged

PREDICT_METHODS = frozenset({"predict", "apredict", "stream", "astream"})  # format a template, then call the model
LLM_METHODS = PREDICT_METHODS | {
    "complete", "acomplete", "stream_complete", "astream_complete", "chat", "achat", "stream_chat", "astream_chat",
}

_SYNC_STREAMS = frozenset({"stream_complete", "stream_chat"})
_ASYNC_STREAMS = (".astream_complete", ".astream_chat")


@dataclass(frozen=True)
class Sourced:
    """A node the synthesizer derived from a retrieved one: placed as a piece of its source, under
    the label its rendering opens with (``Source 3:``) when it has one."""

    id: str
    label: str
    content: str


@dataclass(eq=False)
class Synthesis:
    """One response synthesis: its nodes, their renderings, how many are placed so far, the
    contexts of its calls and the answer the next refine call supersedes."""

    nodes: list[Any]
    texts: list[str] | None = None
    cursor: int = 0
    contexts: list[ContextRecord] = field(default_factory=list)
    answer: Any = None  # the figures' record of the latest answer (``state.answers`` entry)


@dataclass(eq=False)
class Call:
    """One LLM call: its generate span, the assembly of its prompt, its dispatcher span ids."""

    generate: Generate
    attached: Attached
    instance: Any
    synthesis: Synthesis | None = None
    assemble: Assemble | None = None
    located: list[Any] | None = None  # nodes to locate in the prompt (packing changed their text)
    span_ids: list[str] = field(default_factory=list)
    prompted: bool = False
    streaming: bool = False
    last_response: Any = None
    chunk_span: str | None = None  # the LLM method whose progress events time the chunks
    agent: Any = None  # the agent run whose model call this is (``_llama_index_agents``)
    final: Any = None  # its response, for the agent to decide its role
    ended: bool | None = None  # a stream's raw chunks: their protocol's final event seen (None: no known protocol)


class LlmCalls:
    """The open LLM calls, by the dispatcher span id of each of their LLM methods."""

    def __init__(self, provider: trace.TracerProvider | None) -> None:
        self.provider = provider
        self.lock = threading.Lock()
        self.calls: dict[str, Call] = {}

    def enter(
        self, id_: str, args: dict[str, Any], instance: Any, method: str, parent: str | None, region: str | None, synthesis: Synthesis | None, agent: Any = None
    ) -> None:
        """An LLM method starts: part of a call already open (chat -> complete), or a new call."""
        with self.lock:
            outer = self.calls.get(parent) if parent is not None else None
            outer = outer or self._converted_stream(instance, method)
            if outer is not None:  # chat -> complete, predict -> chat ...: one call
                outer.span_ids.append(id_)
                self.calls[id_] = outer
                return
        if inside_generation():
            return
        role, assemble, located = names.ROLE_ANSWER, None, None
        if region == "synthesis" and synthesis is not None and method in PREDICT_METHODS:
            prompt_args = args.get("prompt_args") or {}
            role = names.ROLE_REFINE if "context_msg" in prompt_args else names.ROLE_ANSWER
            assemble, located = self._assemble(synthesis, prompt_args.get("context_str", prompt_args.get("context_msg")))
        else:
            synthesis = None
            role = names.ROLE_GRADER if region == "rerank" else names.ROLE_REWRITE if region is not None else names.ROLE_ANSWER
            if region == "agent":  # the answer, once it asks for no tools (``_llama_index_agents.model_ended``)
                role = names.ROLE_TOOL_CHOICE
        generate = Generate(_model(instance), _provider(instance), role=role, temperature=_number(getattr(instance, "temperature", None)), tracer_provider=self.provider)
        generate.open()
        call = Call(generate, Attached(generate), instance, synthesis, assemble, located, [id_], agent=agent if region == "agent" else None)
        with self.lock:
            self.calls[id_] = call

    def _converted_stream(self, instance: Any, method: str) -> Call | None:
        """CustomLLM's ``astream_complete`` returns an async generator that calls the sync
        ``stream_complete`` only when read, outside its own dispatcher span: that is the same call."""
        if method not in _SYNC_STREAMS:
            return None
        state = state_module.current()
        for call in self.calls.values():
            if call.streaming and call.instance is instance and call.generate.state is state and call.span_ids[-1].partition("-")[0].endswith(_ASYNC_STREAMS):
                return call
        return None

    def _assemble(self, synthesis: Synthesis, context: Any) -> tuple[Assemble, list[Any] | None]:
        """An assemble span for one call's context: nodes declared when the context is exactly a run
        of their renderings, else the nodes to locate once the prompt is known."""
        assemble = Assemble(tracer_provider=self.provider)
        assemble.open()
        run = exact_run(synthesis.texts, synthesis.cursor, context) if synthesis.texts is not None and isinstance(context, str) else None
        if run is None:
            return assemble, [{"id": n.id, "content": n.content} if isinstance(n, Sourced) else n for n in synthesis.nodes]
        start, end, stripped = run
        for node, text in zip(synthesis.nodes[start:end], stripped):
            if text:
                if isinstance(node, Sourced):
                    assemble.place({"id": node.id, "content": node.content}, text, label=node.label or None)
                else:
                    assemble.place(node, text)
        synthesis.cursor = end
        return assemble, None

    def _prompted(self, call: Call, prompt: Any) -> None:
        """The call's final prompt: it closes the call's assembly (declared or located)."""
        if call.prompted:
            return
        call.prompted = True
        call.generate.set_prompt(prompt)
        self._close_assembly(call, prompt)

    def _close_assembly(self, call: Call, prompt: Any) -> None:
        assemble, call.assemble = call.assemble, None
        if assemble is None:
            return
        if prompt is not None:
            if call.located is not None:
                assemble.observe(call.located, prompt)
            else:
                assemble.set_prompt(prompt)
        assemble.close()
        if call.synthesis is not None:
            call.synthesis.contexts.append(assemble.snapshot())

    def exit(self, id_: str, result: Any, error: BaseException | None) -> None:
        """An LLM method ends; the call ends with its outermost one (a stream: with its End event)."""
        with self.lock:
            call = self.calls.get(id_)
        if call is None or id_ != call.span_ids[0]:
            return
        call.attached.detach()
        if error is None and (hasattr(result, "__next__") or hasattr(result, "__anext__")):
            call.streaming = True  # the End event ends it
            return
        self.end_call(call, error)

    def end_call(self, call: Call, error: BaseException | None = None) -> None:
        with self.lock:
            for span_id in call.span_ids:
                self.calls.pop(span_id, None)
        self._close_assembly(call, None)
        generate, synthesis = call.generate, call.synthesis
        if call.last_response is not None:
            generate.record(call.last_response)
        if call.agent is not None and error is None:
            _llama_index_agents.model_ended(call.agent, generate, call.final or call.last_response)
        if synthesis is None or generate.role not in names.ANSWER_ROLES:
            generate.close(error)
            return
        if generate.role == names.ROLE_REFINE and synthesis.contexts:
            generate.context = merged(synthesis.contexts)  # the answer it rewrites came from all of them
        state = generate.state
        answers = len(state.answers) if state is not None else 0
        generate.close(error)
        if state is None or len(state.answers) == answers:
            return
        if generate.role == names.ROLE_REFINE and synthesis.answer in state.answers:
            state.answers.remove(synthesis.answer)  # superseded: only the final answer is scored
        synthesis.answer = state.answers[-1]

    # -- events ----------------------------------------------------------------------------------
    def event(self, event: Any) -> None:
        """LLM events: the formatted prompt at the start, the response at the end."""
        with self.lock:
            call = self.calls.get(event.span_id) if event.span_id else None
        if call is None:
            return
        kind = type(event).__name__
        if kind in ("LLMCompletionStartEvent", "LLMChatStartEvent"):
            self._prompted(call, event.prompt if kind == "LLMCompletionStartEvent" else event.messages)
        elif kind in ("LLMCompletionInProgressEvent", "LLMChatInProgressEvent"):
            call.last_response = event.response  # recorded at the end, or when the stream is left
            mark = end_mark(getattr(event.response, "raw", None))  # the provider's own chunk (OpenAI, Anthropic)
            if mark is not None:
                call.ended = bool(call.ended) or mark
            call.chunk_span = call.chunk_span or event.span_id
            if event.span_id == call.chunk_span:
                call.generate.item_arrived()
        elif kind in ("LLMCompletionEndEvent", "LLMChatEndEvent"):
            call.last_response, call.final = None, event.response
            if call.agent is None or not _llama_index_agents.asks_for_tools(getattr(event.response, "message", None)):
                call.generate.record(event.response)  # a call that only asks for tools has no text to read
            if call.streaming:
                if call.ended is False:  # the provider's stream ran out without its final event
                    call.generate.stream_cut_off()
                self.end_call(call)

    def end_leftovers(self, state: state_module.PipelineState | None, error: BaseException | None = None) -> None:
        """Close the calls of a pipeline whose stream was abandoned or broke (they end with its root)."""
        with self.lock:
            left = {id(c): c for c in self.calls.values() if c.generate.state is state}
        for call in left.values():
            self.end_call(call, error)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _model(llm: Any) -> str | None:
    """The model's own name when the integration gives one, else the LLM class (MockLLM...)."""
    for name in (getattr(llm, "model", None), getattr(getattr(llm, "metadata", None), "model_name", None)):
        if isinstance(name, str) and name and name != "unknown":
            return name
    return type(llm).__name__


def _provider(llm: Any) -> str | None:
    """``llama_index.llms.openai`` -> ``openai``; core's own LLMs (MockLLM) have no provider."""
    parts = type(llm).__module__.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["llama_index", "llms"] else None


def sourced(nodes: list[Any], retrieved: list[Any]) -> list[Any]:
    """The synthesizer's nodes, each derived one (a piece of a retrieved node under a new id,
    ``CitationQueryEngine``'s) replaced by a ``Sourced`` piece of the node it came from, so the
    context holds the retrieved nodes, and every label the model sees resolves to its source.
    LlamaIndex gives the pieces new ids and no link to their node (only its metadata and
    relationships), so the source is the retrieved node whose text holds the piece's."""
    if not retrieved or not nodes:
        return nodes
    ids = {_node_id(node) for node in retrieved}
    unknown = [index for index, node in enumerate(nodes) if _node_id(node) not in ids]
    if not unknown:
        return nodes
    sources = derived_sources(
        [_node_text(nodes[index]) for index in unknown],
        [(_node_id(node), _node_text(node)) for node in retrieved],
    )
    sourced = list(nodes)
    for index, source in zip(unknown, sources):
        if source is not None:
            sourced[index] = Sourced(*source)
    return sourced


def _node_id(node: Any) -> Any:
    return getattr(node, "node_id", None)


def _node_text(node: Any) -> str | None:
    inner = getattr(node, "node", node)
    try:
        text = inner.get_content()  # MetadataMode.NONE: the node's own text, as it was cut
    except Exception:  # noqa: BLE001 - not a node ragtrace can read
        return None
    return text if isinstance(text, str) else None
