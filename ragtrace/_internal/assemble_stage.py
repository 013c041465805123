"""The assemble stage handle: builds the prompt (or observes a user-built one) and records inclusion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


from . import names, otel_metrics, state as state_module
from .assembly import ContextBuilder, ContextRecord, Drop, Labeller, Prompt, fill_prompt, locate
from .chunks import Accessors, Chunk, NO_ACCESSORS, normalize, to_chunk
from .guard import call_guarded, guard
from .tokens import Tokenizer
from .spans import gate_messages
from .stage import Stage, int_or_none, prompt_json


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
        self._located: ContextRecord | None = None

    def span_name(self) -> str:
        return names.ASSEMBLE_SPAN_NAME

    def add(self, chunk: Any) -> bool:
        """Place a chunk in the context; returns False when it did not land (duplicate, budget)."""
        return bool(call_guarded("assembly bookkeeping", self._add, chunk, default=False))

    def _add(self, chunk: Any) -> bool:
        chunk = self._canonical(chunk)
        return self.builder.add(chunk) if chunk is not None else False

    def drop(self, chunk: Any, reason: str = names.DROP_FILTERED) -> None:
        """Record that ``chunk`` was left out on purpose, with a reason."""
        with guard("assembly bookkeeping"):
            found = self._canonical(chunk)
            if found is not None:
                self.builder.drop(found, reason)

    def _canonical(self, item: Any) -> Chunk | None:

        chunk = to_chunk(item, 0, self.builder.accessors)
        if chunk is None:
            self.builder.unreadable += 1
            return None
        return self.state.canonical(chunk) if self.state is not None else chunk

    def render(self, template: str | Sequence[Mapping[str, Any]] | None = None, **variables: Any) -> Prompt:
        """Render the prompt with ``{context}`` and ``{variables}`` filled (see ContextBuilder)."""
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

    def snapshot(self) -> ContextRecord:
        """The inclusion facts so far (final once the assemble block has closed)."""
        if self.record_ is not None:
            return self.record_
        return self._record()

    def _record(self) -> ContextRecord:
        """The located chunks for a prompt the user built, else what the builder placed."""
        return self._located if self._located is not None else self.builder.record()

    def on_close(self) -> None:
        record = self._record()
        span_context = self.span.get_span_context()
        if span_context.is_valid:
            record.span_id = format(span_context.span_id, "016x")
        state = self.state
        if state is not None:
            _explain_missing(record, state)
            state.contexts.append(record)
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
            names.RAG_CONTEXT_TRUNCATED: [p.truncated for p in placements],
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
        attrs.set_many(values)
        attrs.essential(names.RAG_CONTEXT_INCLUSION_METHOD, record.method)
        if self.config.openinference and record.prompt is not None:
            if isinstance(record.prompt, str):
                self._oi_value(names.OI_OUTPUT_VALUE, record.prompt)
            else:  # declared JSON, so it must stay valid JSON under every length limit
                self._oi_value(names.OI_OUTPUT_VALUE, prompt_json(self, gate_messages(record.prompt, self.config.content)), json_value=True)


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
