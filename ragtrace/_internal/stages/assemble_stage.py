"""The assemble stage handle: builds the prompt (or observes a user-built one) and records inclusion."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Union


from .. import names
from ..setup import otel_metrics
from . import state as state_module
from ..core.assembly import DEFAULT_CHUNK_FORMAT, ContextBuilder, ContextRecord, Drop, Labeller, Prompt, default_template, fill, fill_prompt
from ..core.locate import locate
from ..core.chunks import Accessors, Chunk, NO_ACCESSORS, normalize, placeable, to_chunk, warn_if_digest_ids
from ..core.declared import Declared, leading_label, resolve
from ..core.guard import call_guarded, guard, warn_once
from ..core.keyed import warn_if_random
from ..core.messages import as_prompt
from ..core.tokens import Tokenizer
from .spans import gate_messages, gated_json_object
from .stage import Stage, content_limit, int_or_none, prompt_json


# How ``place_all`` renders each chunk: a format string over ``{position}``, ``{label}``, ``{id}``
# and ``{content}``, or your function of the chunk (the object you passed) returning its text.
Render = Union[str, Callable[[Any], str]]

_current: ContextVar[Assemble | None] = ContextVar("ragtrace_assemble", default=None)


# --- assemble ---------------------------------------------------------------------------------
class Assemble(Stage):
    """Builds the prompt (``add``/``drop``/``render``) and records exactly what landed where."""

    stage = names.STAGE_ASSEMBLE
    oi_kind = names.OI_KIND_PROMPT

    def __init__(
        self,
        max_tokens: int | None = None,
        *,
        labeller: Labeller = "index",
        chunk_format: str | None = None,
        separator: str = "\n\n",
        truncate: bool = True,
        tokenizer: Tokenizer | None = None,
        accessors: Accessors = NO_ACCESSORS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        builder_options: dict[str, Any] = {"chunk_format": chunk_format} if chunk_format is not None else {}
        self.builder = ContextBuilder(
            max_tokens=int_or_none(max_tokens, "max_tokens"),
            tokenizer=tokenizer or self.config.tokenizer,
            labeller=labeller,
            separator=separator,
            truncate=truncate,
            accessors=accessors,
            **builder_options,
        )
        self.record_: ContextRecord | None = None
        self._template: tuple[Any, Mapping[str, Any]] | None = None  # the last render's, for the span
        self._located: ContextRecord | None = None
        self._declared: list[Declared] | None = None  # place() calls, in prompt order
        self._declared_prompt: Any = None
        self._current_token: Any = None

    def span_name(self) -> str:
        return names.ASSEMBLE_SPAN_NAME

    def add(self, chunk: Any) -> bool:
        """Place a chunk in the context; returns False when it did not land (duplicate, budget).
        A list of chunks places each in order, and returns whether all of them landed."""
        if type(chunk) is not list:
            return bool(call_guarded("assembly bookkeeping", self._add, chunk, default=False))
        # one level: a list inside it is one item, never recursed into
        landed = [bool(call_guarded("assembly bookkeeping", self._add, item, default=False)) for item in chunk]
        return bool(landed) and all(landed)

    def _add(self, chunk: Any) -> bool:
        chunk = self._canonical(chunk, rendered=True)
        return self.builder.place(chunk) if chunk is not None else False

    # -- declared placements: the app renders, ragtrace records -----------------------------------
    def place(self, chunk: Any, text: str, *, label: str | None = None) -> bool:
        """Declare that the prompt shows exactly ``text`` for ``chunk`` (your own rendering of it),
        in prompt order; ``label`` is the citation label the model sees for it (default: the label
        ``text`` opens with, ``"[2] ..."`` -> ``"2"``, else none). Hand over the final prompt with
        ``set_prompt``. Returns False when nothing new was recorded (an unreadable chunk, a text
        that is not a string, or a chunk already placed: it counts once, its labels all resolve).
        """
        return bool(call_guarded("assembly bookkeeping", self._place, chunk, text, label, default=False))

    def _place(self, chunk: Any, text: Any, label: Any) -> bool:
        if not isinstance(text, str):
            warn_once("place-text", "place(chunk, text) takes the text the prompt shows as a str, got %s; not recorded", type(text).__name__)
            return False
        found = self._canonical(chunk)
        if found is None:
            return False
        declared = self._declared if self._declared is not None else []
        self._declared = declared
        duplicate = any(d.chunk.id == found.id for d in declared)
        declared.append(Declared(found, text, leading_label(text) if label is None else str(label)))
        return not duplicate

    def place_all(self, chunks: Iterable[Any], render: Render = DEFAULT_CHUNK_FORMAT, *, separator: str = "\n\n") -> str:
        """Render each chunk, declare it (``place``) and return the texts joined by ``separator``:
        a whole ``format_docs(docs)`` in one line. ``render`` is a format string over
        ``{position}``, ``{label}`` (the position), ``{id}`` and ``{content}`` (default
        ``"[{label}] {content}"``), or a function of one chunk returning its text (its label is the
        one the text opens with). Your function's exceptions are yours and pass through."""
        return render_joined(chunks, render, separator, self.builder.accessors, self)

    def set_prompt(self, prompt: Any) -> None:
        """The final prompt the declared fragments are found in: a string, or chat messages (dicts
        with role/content, LangChain or LlamaIndex message objects, a LangChain prompt value)."""
        with guard("assembly bookkeeping"):
            if self._declared is None:
                self._declared = []
            self._declared_prompt = as_prompt(prompt)

    def attach(self) -> None:
        super().attach()
        self._current_token = _current.set(self)

    def detach(self) -> None:
        token, self._current_token = self._current_token, None
        if token is not None:
            with guard("context detach"):
                _current.reset(token)
        super().detach()

    def drop(self, chunk: Any, reason: str = names.DROP_FILTERED) -> None:
        """Record that ``chunk`` was left out on purpose, with a reason."""
        with guard("assembly bookkeeping"):
            found = self._canonical(chunk)
            if found is not None:
                self.builder.drop(found, reason)

    def _canonical(self, item: Any, *, rendered: bool = False) -> Chunk | None:
        """``item`` as a chunk under the id it was retrieved under; None (counted) if unplaceable.
        ``rendered``: ragtrace renders its text (``add``), so a content_of that raised rules it out."""
        failed: list[str] = []
        chunk = placeable(to_chunk(item, 0, self.builder.accessors, failed, hashed=not self.inert, digests=self.digests), failed, rendered=rendered)
        if chunk is None:
            self.builder.unreadable += 1
            return None
        return self.state.canonical(chunk) if self.state is not None else chunk

    def render(self, template: str | Sequence[Mapping[str, Any]] | None = None, **variables: Any) -> Prompt:
        """Render the prompt with ``{context}`` and ``{variables}`` filled (see ContextBuilder)."""
        if template is not None or variables:
            self._template = (default_template(variables) if template is None else template, variables)
        try:
            return self.builder.render(template, **variables)
        except Exception as error:  # noqa: BLE001 - a prompt must still come back
            call_guarded("assembly bookkeeping", _raise, error)
            # the same prompt, rendered without the bookkeeping that failed
            return call_guarded("assembly bookkeeping", _render_plain, self.builder, template, variables, default="")  # type: ignore[return-value]

    @property
    def prompt(self) -> Prompt:
        prompt = self.builder._prompt
        return prompt if prompt is not None else self.render()

    def observe(self, chunks: Any, prompt: Any) -> None:
        """For prompts the user built: locate ``chunks`` in ``prompt`` (inclusion_method=located)."""
        with guard("assembly bookkeeping"):
            normalized = normalize(chunks, self.builder.accessors)
            inputs = [self.state.canonical(c) for c in normalized.chunks] if self.state else normalized.chunks
            self.builder.unreadable += normalized.unreadable
            self._located = locate(inputs, prompt, self.builder.tokenizer)

    def given(self, record: ContextRecord) -> None:
        """Inclusion facts known exactly from outside the builder: reported by the model API
        itself (``provided.context_record``), or recorded by an integration that rendered the
        framework's template again (Haystack's builders). They stand as the record, like located
        ones, but are exact."""
        self._located = record

    def snapshot(self) -> ContextRecord:
        """The inclusion facts so far (final once the assemble block has closed)."""
        if self.record_ is not None:
            return self.record_
        return self._record()

    def _record(self) -> ContextRecord:
        """The declared placements, else the located chunks for a prompt the user built, else
        what the builder placed."""
        if self._declared is not None:
            if self.builder._entries:
                warn_once("place-and-add", "an assembly used both place() and add(); the declared placements are recorded")
            record = resolve(self._declared, self._declared_prompt, self.builder.tokenizer)
            record.dropped[:0] = self.builder._dropped  # drop() reasons still count
            return record
        return self._located if self._located is not None else self.builder.record()

    @property
    def has_declarations(self) -> bool:
        """Whether ``place`` or ``set_prompt`` was used (the record is ``declared``)."""
        return self._declared is not None

    def on_close(self) -> None:
        record = self._record()
        span_context = self.span.get_span_context()
        if span_context.is_valid:
            record.span_id = format(span_context.span_id, "016x")
        state = self.state
        if state is not None:
            _explain_missing(record, state)
            state.contexts.append(record)
            state.bind_context(record)
        self.record_ = record
        self._attributes(record)

    def record_stage_metrics(self, found: otel_metrics.Instruments, labels: dict[str, Any]) -> None:
        if self.record_ is not None:
            found.context_tokens.record(self.record_.total_tokens, labels)

    def _attributes(self, record: ContextRecord) -> None:
        attrs = self.attrs
        if attrs is None or not attrs.recording:
            return
        placements = record.placements
        warn_if_digest_ids((p.chunk_id, p.content_hash) for p in placements)
        values: dict[str, Any] = {
            names.RAG_CONTEXT_INCLUSION_METHOD: record.method,
            names.RAG_CONTEXT_CHUNK_IDS: [p.chunk_id for p in placements],
            names.RAG_CONTEXT_POSITIONS: [p.position for p in placements],
            # a label other than the position or id (a title found in a user-built prompt) is content
            names.RAG_CONTEXT_LABELS: [
                p.label if p.label in ("", p.chunk_id, str(p.position)) else self.config.content.text(p.label) or ""
                for p in placements
            ],
            names.RAG_CONTEXT_CHAR_STARTS: [p.start for p in placements],
            names.RAG_CONTEXT_CHAR_ENDS: [p.end for p in placements],
            names.RAG_CONTEXT_CHUNK_TOKENS: [p.tokens for p in placements],
            # the flags only when some chunk was cut: the count says none otherwise
            names.RAG_CONTEXT_TRUNCATED: [p.truncated for p in placements] if record.truncated_count else None,
            names.RAG_CONTEXT_TRUNCATED_COUNT: record.truncated_count,
            names.RAG_CONTEXT_TOTAL_TOKENS: record.total_tokens,
            names.RAG_CONTEXT_MAX_TOKENS: record.max_tokens,
            names.RAG_CONTEXT_DROPPED_IDS: [d.chunk_id for d in record.dropped],
            names.RAG_CONTEXT_DROPPED_REASONS: [d.reason for d in record.dropped],
            names.RAG_UNREADABLE_ITEMS: self.builder.unreadable or None,
        }
        if any(p.message_index is not None for p in placements):
            values[names.RAG_CONTEXT_MESSAGE_INDEXES] = [-1 if p.message_index is None else p.message_index for p in placements]
        if self.config.content.hashes:
            values[names.RAG_CONTEXT_CONTENT_HASHES] = [p.content_hash or "" for p in placements]
            warn_if_random("hash-mode content hashes differ between processes")
        attrs.set_many(values)
        attrs.essential(names.RAG_CONTEXT_INCLUSION_METHOD, record.method)
        if self.config.openinference and record.prompt is not None:
            if isinstance(record.prompt, str):
                self._oi_value(names.OI_OUTPUT_VALUE, record.prompt)
            else:  # declared JSON, so it must stay valid JSON under every length limit
                self._oi_value(names.OI_OUTPUT_VALUE, prompt_json(self, gate_messages(record.prompt, self.config.content)), json_value=True)
        if self.config.openinference and self._template is not None:
            self._template_attributes(*self._template)

    def _template_attributes(self, template: Any, variables: Mapping[str, Any]) -> None:
        """``llm.prompt_template.*``: the template and its variables are content (full mode only)."""
        if self.attrs is None:
            return
        if isinstance(template, str):
            self._content(names.OI_PROMPT_TEMPLATE, template)
        else:  # chat messages: JSON that stays valid under the length limits
            self.attrs.set(names.OI_PROMPT_TEMPLATE, prompt_json(self, gate_messages(template, self.config.content)))
        if variables:
            self.attrs.set(names.OI_PROMPT_TEMPLATE_VARIABLES, gated_json_object(variables, self.config.content, content_limit(self)))


def render_joined(
    chunks: Iterable[Any], render: Render, separator: str, accessors: Accessors = NO_ACCESSORS, stage: Assemble | None = None
) -> str:
    """Each chunk rendered (see ``Assemble.place_all``) and joined; declared on ``stage`` if given.
    A chunk with no readable content is left out of a format-string rendering (counted unreadable)."""
    texts: list[str] = []
    for item in chunks:
        if callable(render):
            text = render(item)
            if stage is not None:
                stage.place(item, text)
        else:
            chunk = call_guarded("assembly bookkeeping", to_chunk, item, 0, accessors)
            if chunk is None or chunk.content is None:
                if stage is not None:
                    stage.builder.unreadable += 1
                continue
            position = str(len(texts) + 1)
            text = fill(render, {"position": position, "label": position, "id": chunk.id, "content": chunk.content})
            if stage is not None:
                numbered = "{label}" in render or "{position}" in render
                stage.place(item, text, label=position if numbered else None)
        texts.append(text if isinstance(text, str) else str(text))
    return separator.join(texts)


def current() -> Assemble | None:
    """The assemble stage whose block (or ``@assembler`` function) is running, if any."""
    return _current.get()


def _raise(error: BaseException) -> None:
    raise error

def _render_plain(builder: ContextBuilder, template: Any, variables: Mapping[str, Any]) -> Prompt:
    """What ``ContextBuilder.render`` returns, without its placement bookkeeping."""
    return fill_prompt(template, builder.context_block()[0], variables)[0]


def _explain_missing(record: ContextRecord, state: state_module.PipelineState) -> None:
    """Every retrieved chunk that did not land gets a reason (reranked out, or never offered)."""
    accounted = {p.chunk_id for p in record.placements} | {d.chunk_id for d in record.dropped}
    for chunk_id in dict.fromkeys(c.id for r in state.retrievals for c in r):
        if chunk_id not in accounted:
            reason = names.DROP_RERANKED_OUT if chunk_id in state.reranked_out else names.DROP_NOT_ADDED
            record.dropped.append(Drop(chunk_id, reason))
