"""LangChain agents (``create_agent``) and LangGraph graphs: tool calls, retrieval rounds, the answer.

A run is an agent's when LangGraph runs it (its metadata names a ``langgraph_node``); the outermost
run of the graph is the pipeline (the automatic root, or the app's ``rag_pipeline``). In it:
- a tool call is a ``tool`` span. A retrieval in it is a round: a retriever run inside the tool
  (``create_retriever_tool``: its ``format_document`` pieces are declared), else a
  ``content_and_artifact`` tool whose artifact is a list of ``Document``s (a retrieve span of its
  own; the content's pieces for each document are declared when found in order). A retriever run
  outside any tool (a ``@dynamic_prompt`` middleware's) is a round without a tool message;
- a model call that asks for tools is ``tool_choice``; one with structured output (a document
  grader's ``with_structured_output``) is ``grader``; every other one is decided when the run
  ends: the call whose message is the run's final message is the ``answer``, scored against the
  rounds as they reach its prompt (``_agent_rounds``); one whose text came back as a human message
  is a ``rewrite``; the rest are ``draft``s. Those spans end when their call did (``end_time``).
Nothing here changes what the agent does: callbacks only read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from .. import names
from ..stages import state as state_module
from ..stages.generation import Generate
from ..core.guard import guard
from ..core.messages import content_text
from ..stages.retrieval import Retrieve
from . import _langchain_assembly
from ._agent_rounds import Ledger, Round, ToolCall, ToolRoot, answer_context, pieces_in
from .runs import Run, Runs, Scope, inside

_GRAPH_NODE_KEY = "langgraph_node"
_STRUCTURED_OUTPUT_KEY = "ls_structured_output_format"


@dataclass(eq=False)
class _Pending:
    """A model call whose role waits for the run's end: it answered, unless another message is final."""

    stage: Generate
    message_id: str | None
    text: str | None
    prompt: Any  # the messages it was shown (content, dropped with the run)
    started: int


@dataclass(eq=False)
class _Agent:
    ledger: Ledger = field(default_factory=Ledger)
    pending: list[_Pending] = field(default_factory=list)
    uses_tools: bool = False  # a model with tools bound, or a tool call, so far in the run


def is_agent(metadata: Any) -> bool:
    """Is the run part of a LangGraph graph (its retrievals are rounds)?"""
    return isinstance(metadata, dict) and _GRAPH_NODE_KEY in metadata


def graph_node(run: Run, name: Any, metadata: Any) -> None:
    """Mark a chain run that is a LangGraph node itself (not a chain a node runs)."""
    if is_agent(metadata) and name == metadata[_GRAPH_NODE_KEY]:
        run.data["graph_node"] = True


def agent_model(runs: Runs, run: Run, metadata: Any, params: Any) -> bool:
    """Is this model call an agent's: made by a graph node itself, or in a graph that has bound
    tools to a model or called a tool (so far, or with this call)? A chain that a node runs keeps
    the chain's rules (its stuff-documents prompt stays declared)."""
    if not is_agent(metadata):
        return False
    agent = _agent(runs, run)
    if isinstance(params, dict) and params.get("tools"):
        agent.uses_tools = True
    parent = runs.parent(run)
    return agent.uses_tools or (parent is not None and bool(parent.data.get("graph_node")))


def _outermost(runs: Runs, run: Run) -> Run:
    found = run
    for ancestor in runs.ancestors(run):
        found = ancestor
    return found


def _agent(runs: Runs, run: Run) -> _Agent:
    outer = _outermost(runs, run)
    with outer.scope.lock:
        agent = outer.data.get("agent")
        if agent is None:
            agent = outer.data["agent"] = _Agent()
        return agent  # type: ignore[no-any-return]


def _tool_run(runs: Runs, run: Run) -> Run | None:
    for ancestor in runs.ancestors(run):
        if "tool_started" in ancestor.data:
            return ancestor
    return None


# --- tools ----------------------------------------------------------------------------------------
def tool_started(runs: Runs, run: Run, name: Any, call_id: Any) -> None:
    """A tool call's span. While the tool runs (LangChain runs its function in a copy of this
    context), the app's own ragtrace stages in it join the call (``ToolRoot``)."""
    run.data.update(tool_started=time.time_ns())
    state = run.scope.state
    if state is None:  # a tool called outside any pipeline is not traced
        return
    tool = runs.open(run, lambda: ToolCall(name if isinstance(name, str) else None, call_id if isinstance(call_id, str) else None))
    agent = _agent(runs, run)
    agent.uses_tools = True
    joined = ToolRoot(state, tool, agent.ledger)
    run.data.update(tool_root=joined, tool_tokens=(state_module.set_auto_root(joined), state_module.activate(None)))  # type: ignore[arg-type]


def _tool_left(run: Run) -> ToolRoot | None:
    """The tool's own context back as it was (LangChain ends a tool where it started it)."""
    joined, tokens = run.data.pop("tool_root", None), run.data.pop("tool_tokens", None)
    if joined is not None:
        joined.end()
    if tokens is not None:
        with guard("langchain tool context"):
            state_module.deactivate(tokens[1])
            state_module.reset_auto_root(tokens[0])
    return joined  # type: ignore[no-any-return]


def tool_ended(runs: Runs, run: Run, output: Any, tool_input: Any) -> None:
    """A tool's round, if it retrieved: the documents of a retriever run inside it, else a
    ``Document`` artifact (recorded here as the round's retrieval)."""
    joined = _tool_left(run)
    documents = run.data.get("documents")
    rendered = [_langchain_assembly.take_rendered(d) for d in documents] if documents is not None else []  # taken, traced or not
    tool = run.stage
    if not isinstance(tool, ToolCall):
        return
    if documents is None and joined is not None and joined.retrievals:  # the app's @ragtrace.retriever inside
        documents = joined.retrievals[-1]
        rendered = [None] * len(documents)
    content = content_text(getattr(output, "content", output)) if output is not None else None
    if documents is not None:  # a retriever tool: each document's text, as format_document rendered it
        pieces = rendered if all(isinstance(p, str) for p in rendered) else pieces_in(content, [_text(d) for d in documents])
    else:
        artifact = getattr(output, "artifact", None)
        if not (isinstance(artifact, list) and artifact and all(_is_document(d) for d in artifact)):
            return
        documents = artifact
        stage = Retrieve(tool_input if isinstance(tool_input, str) else None, data_source=tool.name)
        stage.start_time = getattr(tool.span, "start_time", None) or run.data.get("tool_started")  # the tool's call is the search
        with inside(run.scope, tool):
            stage.open()
        try:
            stage.record(documents)
            _agent(runs, run).ledger.number(stage)
        finally:
            stage.close()
        pieces = pieces_in(content, [d.page_content for d in documents])
    agent = _agent(runs, run)
    with run.scope.lock:
        agent.ledger.rounds.append(Round(list(documents), pieces, content))  # type: ignore[arg-type]


def tool_failed(run: Run) -> None:
    _tool_left(run)


def _text(document: Any) -> Any:
    """A LangChain document's text, or a ragtrace chunk's (what a decorated retriever returned)."""
    return getattr(document, "page_content", None) or getattr(document, "content", None)


def _is_document(value: Any) -> bool:
    return hasattr(value, "page_content") and hasattr(value, "metadata")


# --- retrievers -----------------------------------------------------------------------------------
def retriever_parent(runs: Runs, run: Run) -> Any:
    """The tool span a retriever run goes under, if it runs inside a tool."""
    tool = _tool_run(runs, run)
    return tool.stage if tool is not None and isinstance(tool.stage, ToolCall) else None


def retrieved(runs: Runs, run: Run, documents: Any, stage: Any, metadata: Any) -> None:
    """A retriever run ended. The outermost retriever's documents are what a tool around it shows;
    in an agent its retrieve span is a round (outside a tool: a round with no tool message)."""
    agent = _agent(runs, run) if is_agent(metadata) else None
    if agent is not None and isinstance(stage, Retrieve):
        agent.ledger.number(stage)
    if any("query" in ancestor.data for ancestor in runs.ancestors(run)):
        return  # an inner retriever: the one wrapping it gives the documents
    tool = _tool_run(runs, run)
    if tool is not None:
        tool.data["documents"] = documents
    elif agent is not None and isinstance(documents, list):
        with run.scope.lock:
            agent.ledger.rounds.append(Round(list(documents)))


# --- models ---------------------------------------------------------------------------------------
def start_role(metadata: dict[str, Any], kw: dict[str, Any]) -> str | None:
    """The role known when an agent's model call starts (the app's ``ragtrace_role``, a grader's
    structured output), else None: decided by its output and the run's final message."""
    given = metadata.get(names.RAG_ROLE_METADATA_KEY)
    if isinstance(given, str) and given:
        return given
    options = kw.get("options")
    if isinstance(options, dict) and options.get(_STRUCTURED_OUTPUT_KEY):
        return names.ROLE_GRADER
    return None


def model_ended(runs: Runs, run: Run, response: Any) -> None:
    """An undecided model call ended: asking for tools makes it ``tool_choice`` (closed with the
    run); otherwise its span waits, ended at this time, for the run's final message."""
    stage = run.stage
    if not isinstance(stage, Generate) or not run.data.get("undecided"):
        return
    message = _message(response)
    if message is None or getattr(message, "tool_calls", None):
        return  # tool_choice, its role since it opened
    stage.end_time = time.time_ns()
    run.stage = None  # the run's end leaves it open
    text = content_text(getattr(message, "content", None))
    pending = _Pending(stage, getattr(message, "id", None), text, run.data.get("prompt"), run.data.get("started", stage.end_time))
    agent = _agent(runs, run)
    with run.scope.lock:
        agent.pending.append(pending)


def _message(response: Any) -> Any:
    generations = getattr(response, "generations", None)
    try:
        return generations[0][0].message  # type: ignore[index]
    except (TypeError, IndexError, AttributeError):
        return None


# --- the run's end ----------------------------------------------------------------------------------
def finished(run: Run, outputs: Any) -> None:
    """The outermost run ends: decide the waiting calls' roles, score the answer over the rounds,
    and put the round count on the pipeline. ``outputs`` None: the run failed, nothing answered."""
    agent = run.data.pop("agent", None)
    if not isinstance(agent, _Agent):
        return
    messages = outputs.get("messages") if isinstance(outputs, dict) else None
    messages = messages if isinstance(messages, list) else []
    final = messages[-1] if messages else None
    asked = {content_text(m.content) for m in messages if getattr(m, "type", None) == "human"}
    answer = None
    if final is not None and getattr(final, "type", None) == "ai":
        answer = next((p for p in agent.pending if p.message_id is not None and p.message_id == getattr(final, "id", None)), None)
    elif outputs is not None and not messages and agent.pending:  # a graph without a message list
        answer = agent.pending[-1]
    for pending in agent.pending:
        with guard("agent answer"):
            if pending is answer and agent.ledger.rounds:
                pending.stage.context = answer_context(agent.ledger.rounds, pending.prompt, pending.started, lambda s: _open(run.scope, s))
            role = names.ROLE_ANSWER if pending is answer else names.ROLE_REWRITE if pending.text in asked else names.ROLE_DRAFT
            pending.stage.role = role
            if pending.stage.attrs is not None:
                pending.stage.attrs.set(names.RAG_GENERATION_ROLE, role)
        pending.stage.close()
    _count_rounds(run.scope, agent.ledger.retrievals)
    _langchain_assembly.discard_rendered([d for r in agent.ledger.rounds for d in r.documents])


def _open(scope: Scope, stage: Any) -> None:
    with inside(scope):
        stage.open()


def _count_rounds(scope: Scope, rounds: int) -> None:
    """``rag.retrieval.rounds`` on the pipeline: the automatic root's, or the app's ``rag_pipeline``
    (summed over the agent runs inside it)."""
    with scope.lock:
        total = scope.extra["rounds"] = scope.extra.get("rounds", 0) + rounds
    root = scope.root
    if root is not None:
        if root.attrs is not None:
            root.attrs.essential(names.RAG_RETRIEVAL_ROUNDS, total)
        return
    span = trace.get_current_span(scope.context)
    if getattr(span, "attributes", {}).get(names.RAG_STAGE) == names.STAGE_PIPELINE and span.is_recording():
        span.set_attribute(names.RAG_RETRIEVAL_ROUNDS, total)
