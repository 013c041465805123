"""LlamaIndex agents (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow`` of
``llama_index.core.agent.workflow``): an agent's ``run`` is the pipeline, its tools ``tool`` spans.

- A tool call's round is the retrieval inside it (a ``RetrieverTool``'s retriever, a
  ``QueryEngineTool``'s engine), else a ``ToolOutput`` whose ``raw_output`` is a list of
  ``NodeWithScore`` (recorded as the round's retrieval). Its pieces are declared when the tool's
  text holds each node's text in order (``RetrieverTool`` joins ``get_content(MetadataMode.LLM)``);
  a ``QueryEngineTool`` returns its engine's answer instead, so its nodes are located in the
  agent's prompt (they reached it only if that answer quotes them). The engine's own synthesis is
  traced as in any query: an answer scored against the nodes it was shown.
- The agent's model calls: one that asks for tools is ``tool_choice``; one that doesn't ends the
  agent's loop and is the ``answer``, scored against the rounds as they reach its prompt.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from .. import names
from ..stages import state as state_module
from ..core.assembly import ContextRecord
from ..stages.generation import Generate
from ..core.guard import guard
from ..stages.retrieval import Retrieve
from ..stages.stage import Stage
from ._agent_rounds import Ledger, Round, ToolCall, answer_context, pieces_in

AGENT_METHODS = frozenset({"run"})
TOOL_METHODS = frozenset({"call", "acall"})


@dataclass(eq=False)
class Agent:
    """One agent run's rounds."""

    ledger: Ledger = field(default_factory=Ledger)
    provider: Any = None
    owns_root: bool = False  # its run is the pipeline (no app's rag_pipeline around it)


@dataclass(eq=False)
class ToolRun:
    agent: Agent
    stage: ToolCall
    nodes: list[Any] | None = None  # what the retrieval inside it returned
    token: Any = None  # resets ``_tool`` when the call ends


_tool: ContextVar[ToolRun | None] = ContextVar("ragtrace_llama_index_tool", default=None)


def agent_classes() -> tuple[type, ...]:
    from llama_index.core.agent.workflow import AgentWorkflow, BaseWorkflowAgent

    return (BaseWorkflowAgent, AgentWorkflow)


def user_message(args: dict[str, Any]) -> str | None:
    message = args.get("user_msg")
    text = getattr(message, "content", message)
    return text if isinstance(text, str) else None


def tool_started(agent: Agent, instance: Any) -> ToolRun:
    """A tool call's span (opened by the tracker); the retrieval inside it, if any, is its round."""
    name = getattr(getattr(instance, "metadata", None), "name", None)
    return ToolRun(agent, ToolCall(name if isinstance(name, str) else type(instance).__name__, tracer_provider=agent.provider))


def enter_tool(run: ToolRun) -> Any:
    """The tool call in progress in this context, until ``leave_tool``: its retrievals are its round."""
    return _tool.set(run)


def leave_tool(run: ToolRun) -> None:
    token, run.token = run.token, None
    if token is not None:
        with guard("llama_index context"):  # fails when an async span ends in another context
            _tool.reset(token)


def retrieved(stage: Retrieve, nodes: Any) -> None:
    """A retrieval ended inside an agent's tool: its round (the outermost one of the tool counts)."""
    run = _tool.get()
    if run is None or run.stage.closed:
        return
    run.agent.ledger.number(stage)
    if run.nodes is None and isinstance(nodes, list):
        run.nodes = nodes


def tool_ended(run: ToolRun, output: Any) -> None:
    """The tool's round, recorded in its agent's ledger, before the tool span ends."""
    nodes = run.nodes
    raw = getattr(output, "raw_output", None)
    if nodes is None and isinstance(raw, list) and raw and all(hasattr(n, "node") and hasattr(n, "score") for n in raw):
        nodes = raw
        stage = Retrieve(_text(getattr(output, "raw_input", None)), data_source=run.stage.name, tracer_provider=run.agent.provider)
        stage.open()
        try:
            stage.record(nodes)
            run.agent.ledger.number(stage)
        finally:
            stage.close()
    if nodes is None:
        return
    content = getattr(output, "content", None)
    run.agent.ledger.rounds.append(Round(list(nodes), pieces_in(content, [_node_text(n) for n in nodes]), content if isinstance(content, str) else None))


def _node_text(node: Any) -> str | None:
    from llama_index.core.schema import MetadataMode

    inner = getattr(node, "node", node)
    try:
        return inner.get_content(metadata_mode=MetadataMode.LLM).strip()  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - a node ragtrace can't read is located instead
        return None


def _text(raw_input: Any) -> str | None:
    if isinstance(raw_input, dict):
        strings = [v for v in raw_input.values() if isinstance(v, str)]
        return strings[0].strip() if len(strings) == 1 else None
    return None


def model_ended(agent: Agent, generate: Generate, response: Any) -> None:
    """An agent's model call ends: asking for tools it is ``tool_choice`` (as it opened); else it
    ends the loop and is the answer, scored against every round as it reaches its prompt."""
    message = getattr(response, "message", None)
    if message is None or asks_for_tools(message):
        return
    generate.role = names.ROLE_ANSWER
    if generate.attrs is not None:
        generate.attrs.set(names.RAG_GENERATION_ROLE, names.ROLE_ANSWER)
    state = generate.state
    if agent.owns_root and state is not None and state.retrieved_ids() - agent.ledger.seen:
        # a retrieval of the run that is no round (a @ragtrace.retriever inside a tool): where its
        # chunks sit in the prompt is unknown, so the answer's figures are not measured
        generate.context = ContextRecord(method=names.INCLUSION_LOCATED)  # given: not looked up in the pipeline either
        generate._context_unknown = state_module.STATUS_CONTEXT_UNKNOWN
        return
    if agent.ledger.rounds and generate.prompt is not None:
        generate.context = answer_context(agent.ledger.rounds, generate.prompt, getattr(generate.span, "start_time", None), _open)


def _open(stage: Stage) -> None:
    stage.open()  # in the agent's pipeline (its state is current), beside the model call


def asks_for_tools(message: Any) -> bool:
    blocks = getattr(message, "blocks", None) or []
    if any(getattr(block, "block_type", None) == "tool_call" for block in blocks):
        return True
    extra = getattr(message, "additional_kwargs", None)
    return bool(isinstance(extra, dict) and extra.get("tool_calls"))


def exited(tool: ToolRun | None, agent: Agent | None, stage: Stage | None, result: Any, error: BaseException | None) -> None:
    """A tool call records its round before its span ends; an agent's run puts its round count on
    the pipeline before the root ends."""
    if tool is not None:
        leave_tool(tool)
        if error is None:
            tool_ended(tool, result)
    elif agent is not None:
        finished(agent, stage)


def finished(agent: Agent, root: Stage | None) -> None:
    """``rag.retrieval.rounds`` on the agent's pipeline (its own root, or the app's ``rag_pipeline``)."""
    total = agent.ledger.retrievals
    if root is not None and root.attrs is not None:
        root.attrs.essential(names.RAG_RETRIEVAL_ROUNDS, total)
        return
    span = trace.get_current_span()
    if getattr(span, "attributes", {}).get(names.RAG_STAGE) == names.STAGE_PIPELINE and span.is_recording():
        span.set_attribute(names.RAG_RETRIEVAL_ROUNDS, total)
