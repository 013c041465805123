"""Agents: retrieval rounds, the tool calls they went through, and the answer's context over all of them.

An agent decides when and how often to retrieve. Each retrieval is a *round*: a retrieve span (under
the tool span when it went through a tool), numbered in the run (``rag.retrieval.round``) with the
count of chunks no earlier round returned (``rag.retrieval.new_chunks``). Tool calls are ``tool``
spans, outside the figures. The answer is the model call whose message is the run's final one; its
context is every round whose documents reach its prompt, usually as tool messages:
- *declared* when the integration knows the text each document shows in the tool message (the
  retriever tool's ``format_document``, or a ``content_and_artifact`` tool whose content holds each
  artifact document's text, in order): those pieces are found in the answer's prompt;
- *located* otherwise (a retrieval outside any tool, such as a ``@dynamic_prompt`` middleware's):
  the documents' text is searched for in the prompt.
A round whose tool message never reached the answer's prompt (trimmed, or a graph that sent only
the last round) keeps its chunks retrieved and not in context (``not_in_prompt``). Framework-neutral:
``_langchain_agents`` and ``_llama_index_agents`` feed it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from .. import names
from ..stages.assemble_stage import Assemble
from ..core.chunks import to_chunk
from ..core.declared import leading_label
from ..core.guard import guard
from ..core.messages import as_messages
from ..stages.stage import Stage

_SEPARATORS = ("\n\n", "\n")


@dataclass(eq=False)
class Round:
    """One retrieval of an agent run. ``documents`` are the framework's (content: dropped with the run)."""

    documents: list[Any]
    pieces: list[str] | None = None  # what the prompt shows for each document, when known
    content: str | None = None  # the tool message's text, when the round went through a tool


@dataclass(eq=False)
class Ledger:
    """The rounds of one agent run, and the chunk ids they returned so far."""

    rounds: list[Round] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    retrievals: int = 0

    def number(self, stage: Any) -> None:
        """Number a round's retrieve span (before it closes) and count the chunks new to the run."""
        with guard("agent round"):
            self.retrievals += 1
            ids = [chunk.id for chunk in getattr(stage, "chunks", ())]
            new = len({i for i in ids if i not in self.seen})
            self.seen.update(ids)
            if stage.attrs is not None:
                stage.attrs.set_many({names.RAG_RETRIEVAL_ROUND: self.retrievals, names.RAG_RETRIEVAL_NEW_CHUNKS: new})


class ToolCall(Stage):
    """An agent's tool call (``execute_tool {name}``): a span with the tool's name and call id, no figures."""

    stage = names.STAGE_TOOL
    oi_kind = names.OI_KIND_TOOL
    operation = names.OP_EXECUTE_TOOL
    span_kind = SpanKind.INTERNAL

    def __init__(self, name: str | None, call_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name, self.call_id = name, call_id

    def span_target(self) -> str | None:
        return self.name

    def start_attributes(self) -> dict[str, Any]:
        attributes = {names.GEN_AI_TOOL_NAME: self.name, names.GEN_AI_TOOL_CALL_ID: self.call_id, names.GEN_AI_TOOL_TYPE: names.TOOL_TYPE_FUNCTION}
        if self.config.openinference:
            attributes[names.OI_TOOL_NAME] = self.name
        return attributes

    def on_open(self) -> None:
        """A tool's arguments are content, and not the pipeline's query: none goes on the span."""


class ToolRoot:
    """What the app's own ragtrace stages inside a tool call join (a ``@ragtrace.retriever`` on the
    tool's function): made the context's automatic root while the tool runs, with no pipeline
    current, so ``Stage.open`` hands them here. Their spans go under the tool's, they record into
    the agent's pipeline (with its configuration), and each retrieval is a round of the run.
    Generations are not taken (a model call inside a tool is no answer of the agent's). Once the
    tool ends it takes nothing: a closed one left behind counts as none."""

    answer = None  # never ends on an answer: the agent's run does

    def __init__(self, state: Any, tool: Stage, ledger: Ledger) -> None:
        self.state, self.tool, self.ledger = state, tool, ledger
        self.context = trace.set_span_in_context(tool.span)
        self.retrievals: list[Any] = []
        self.closed = False

    def admit(self, stage: Stage) -> ToolRoot | None:
        if self.closed or stage.stage == names.STAGE_GENERATE:
            return None
        stage.config = self.state.config  # the pipeline's content policy, not the process default
        if stage.stage == names.STAGE_RETRIEVE:
            recorded = stage.on_close

            def numbered() -> None:  # its round, on its span before it ends
                recorded()
                self.ledger.number(stage)

            stage.on_close = numbered  # type: ignore[method-assign]
        return self

    def takes_retrieval(self) -> bool:
        return not self.closed

    def stage_closed(self, stage: Stage, error: BaseException | None) -> None:
        if stage.stage == names.STAGE_RETRIEVE and error is None and not self.closed:
            self.retrievals.append([c for c in getattr(stage, "chunks", ()) if c.content is not None])

    def end(self, error: BaseException | None = None, *, abandoned: str | None = None) -> None:
        self.closed = True


def pieces_in(content: Any, texts: Sequence[Any]) -> list[str] | None:
    """What a tool message built from documents shows for each of them: ``content`` cut into one
    piece per document, each ending where the document's text does and starting after the
    separator (a blank line, else a line break) that follows the previous one's. None unless every
    text is found, in order (a tool that summarised or reordered them: locate instead)."""
    if not isinstance(content, str) or not texts or not all(isinstance(t, str) and t for t in texts):
        return None
    ends: list[tuple[int, int]] = []  # (start of the document's text, its end)
    cursor = 0
    for text in texts:
        start = content.find(text, cursor)
        if start < 0:
            return None
        ends.append((start, start + len(text)))
        cursor = start + len(text)
    pieces, begin = [], 0
    for index, (start, end) in enumerate(ends):
        if index + 1 < len(ends):
            gap = content[end : ends[index + 1][0]]
            cut = next(((gap.find(s), len(s)) for s in _SEPARATORS if s in gap), (len(gap), 0))
            stop, begin_next = end + cut[0], end + cut[0] + cut[1]
        else:
            stop, begin_next = len(content), len(content)
        pieces.append(content[begin:stop].strip())
        begin = begin_next
    return pieces


def answer_context(rounds: Sequence[Round], prompt: Any, start_time: int | None, open_: Callable[[Stage], None]) -> Assemble:
    """The answer's assembly over every round, opened by ``open_`` (in the run's scope), closed
    here: the declared pieces found in ``prompt`` when every round's are known, else the rounds'
    documents located in it. Rounds are declared in the order their text sits in the prompt (two
    tool calls of one step answer in either order); one never shown goes last (not in context)."""
    stage = Assemble()
    stage.start_time = stage.end_time = start_time
    open_(stage)
    try:
        with guard("agent assembly"):
            whole = _whole(prompt)
            shown = [r for r in rounds if _shown(r, whole)]
            key = _chunk_id(stage)
            placed = {key(d) for r in shown for d in r.documents} - {None}
            # a document of a round the prompt does not show, which a shown round returned too, is
            # that round's: declaring it again would list a chunk shown once as placed and dropped
            kept = {id(r): [d for d in r.documents if r in shown or key(d) not in placed] for r in rounds}
            if all(r.pieces is not None for r in rounds):
                ambiguous = _ambiguous_labels(shown)
                for found in sorted(rounds, key=_position(whole)):
                    for document, piece in zip(found.documents, found.pieces or ()):
                        if any(document is d for d in kept[id(found)]):
                            stage.place(document, piece, label="" if leading_label(piece) in ambiguous else None)
                stage.set_prompt(prompt)
            else:
                stage.observe([d for r in rounds for d in kept[id(r)]], prompt)
    finally:
        stage.close()
    return stage


def _whole(prompt: Any) -> str:
    """The prompt's texts as one string (NUL between messages), for finding a round's text in it."""
    messages = as_messages(prompt)
    return "\x00".join(m["content"] for m in messages) if messages is not None else prompt if isinstance(prompt, str) else ""


def _shown(found: Round, whole: str) -> bool:
    """Whether the answer's prompt shows the round: its tool message's text, else every piece of
    it. A round whose text is unknown (a retrieval outside any tool) counts as shown: the search
    of the prompt decides for its documents."""
    if found.content is None and found.pieces is None:
        return True
    if found.content is not None and found.content.strip() and found.content.strip() in whole:
        return True
    return bool(found.pieces) and all(piece in whole for piece in found.pieces or ())


def _chunk_id(stage: Assemble) -> Callable[[Any], str | None]:
    """A document's chunk id as ``stage`` will record it (its accessors, the id it was retrieved under)."""

    def key(document: Any) -> str | None:
        chunk = to_chunk(document, 0, stage.builder.accessors)
        if chunk is None:
            return None
        return (stage.state.canonical(chunk) if stage.state is not None else chunk).id

    return key


def _ambiguous_labels(rounds: Sequence[Round]) -> set[str]:
    """Labels that two rounds the answer's prompt shows give to different documents (each tool
    message numbers its own ``[1]``, ``[2]``): which one a citation of them means is unknown, so
    those documents are placed unlabelled and such a citation is unresolved
    (``citations_unresolved``), never guessed. A round the prompt does not show (a graph that
    answers from the last tool message) shares no label with the one it does."""
    texts: dict[str, set[str]] = {}
    for found in rounds:
        for piece in found.pieces or ():
            label = leading_label(piece)
            if label:
                texts.setdefault(label, set()).add(piece)
    return {label for label, pieces in texts.items() if len(pieces) > 1}


def _position(whole: str) -> Callable[[Round], int]:
    beyond = len(whole) + 1

    def position(found: Round) -> int:
        first = found.pieces[0] if found.pieces else None
        at = whole.find(first) if first else -1
        return at if at >= 0 else beyond

    return position
