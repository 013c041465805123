"""The generate stage handle: the LLM call, its output (text, completion or stream) and its citations."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry.trace import SpanKind

from ..core import figures as figures_module
from .. import names
from ..setup import otel_metrics
from . import state as state_module
from ..core.answer import Scored, checked_pattern, score
from ..core.assembly import ContextRecord
from ..core.citations import CitationPattern, CitationResult
from ..core.provided import Provided, scored as provided_scored
from ..core.guard import call_guarded, guard, warn_once
from ..core.messages import as_messages
from ..core.outputs import as_text, cut_off, is_streaming_response, read_output, read_piece, stream_pieces
from .spans import all_passed, gate_messages, messages_json, messages_text
from .assemble_stage import Assemble
from .stage import Stage, float_or_none, int_or_none, set_figures


# --- generate ---------------------------------------------------------------------------------
class Generate(Stage):
    """An LLM call. Answer generations are scored: citations parsed against their context."""

    stage = names.STAGE_GENERATE
    span_kind = SpanKind.CLIENT
    oi_kind = names.OI_KIND_LLM
    operation = names.OP_CHAT

    def __init__(
        self,
        model: str | None = None,
        provider: str | None = None,
        *,
        prompt: Any = None,
        context: Any = None,
        role: str = names.ROLE_ANSWER,
        citation_pattern: CitationPattern | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model, self.provider, self.role = model, provider, role
        self.context, self.citation_pattern = context, checked_pattern(citation_pattern)
        self.temperature, self.max_tokens = temperature, max_tokens
        self.prompt: Any = prompt
        self.text: str | None = None
        self.pieces: list[str] | None = None
        self.citations: CitationResult | None = None
        self.out_of_context_ids: tuple[str, ...] = ()  # retrieved chunks it cited that the prompt did not show
        self.citation_status: str | None = None  # why the answer's citations are not scored
        self.provided: Provided | None = None  # citations the model API reported itself (``provided``): not parsed
        self.output_unreadable = False  # an output was recorded that ragtrace could not read
        self._pending_stream: Any = None  # a LlamaIndex StreamingResponse, read at close
        self._context_unknown: str | None = None  # why its context can't be told (``context_for_answer``)
        self._incomplete: str | None = None  # the stream was cut off (``stream_cut_off``)
        self.answer: figures_module.Answer | None = None
        self.metrics: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self.time_to_first_chunk: float | None = None  # seconds from the span's start
        self._last_chunk = 0.0
        self._chunk_gaps: list[float] = []  # seconds between consecutive chunks, after the first

    def start_attributes(self) -> dict[str, Any]:
        temperature = self.temperature if isinstance(self.temperature, (int, float)) and not isinstance(self.temperature, bool) else None
        attributes = {
            names.GEN_AI_PROVIDER_NAME: self.provider,
            names.GEN_AI_REQUEST_MODEL: self.model,
            names.GEN_AI_REQUEST_TEMPERATURE: float_or_none(temperature),
            names.GEN_AI_REQUEST_MAX_TOKENS: int_or_none(self.max_tokens, "max_tokens"),
            names.RAG_GENERATION_ROLE: str(self.role),
        }
        # Phoenix derives llm.model_name and llm.provider from gen_ai.request.model / provider.name
        return attributes

    @property
    def is_answer(self) -> bool:
        return self.role in names.ANSWER_ROLES

    def set_prompt(self, prompt: Any) -> None:
        """The prompt sent to the model: a string or a list of chat messages."""
        self.prompt = prompt

    def record(
        self,
        output: Any,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        response_model: str | None = None,
    ) -> None:
        """Record the model output: a string, an OpenAI or Anthropic completion (object or dict), a
        LangChain or LlamaIndex result, or a list of pieces. An output ragtrace can't read is
        warned about once and leaves the answer unscored (never scored as an empty answer)."""
        with guard("generation record"):
            if output is None:
                return
            text, usage = read_output(output)
            if text is not None:
                self.text = text
                self.output_unreadable = False
            elif is_streaming_response(output):  # its text exists once the app has read the stream
                self._pending_stream = output
            else:
                self._unreadable(output)
            self._usage.update({k: v for k, v in usage.items() if v is not None})
            for key, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens), ("response_model", response_model)):
                if value is not None:
                    self._usage[key] = value

    def add_piece(self, piece: Any) -> None:
        """One streamed piece (a string or an OpenAI-style chunk), as it arrives: timed, and
        joined with the others at the end. Integrations that see the stream call this per chunk."""
        self.item_arrived()
        self._collect(piece)

    def item_arrived(self) -> None:
        """Time one chunk of a stream: the first gives the time to first chunk, the rest the
        gaps between chunks. Two clock reads' worth of work; the metrics are recorded at close."""
        if not self._started:  # never opened: there is no start to measure from
            return
        now = time.perf_counter()
        if self.time_to_first_chunk is None:
            self.time_to_first_chunk = now - self._started
            self._usage["stream"] = True
        else:
            self._chunk_gaps.append(now - self._last_chunk)
        self._last_chunk = now

    def _collect(self, piece: Any) -> None:
        with guard("generation record"):
            text, usage = read_piece(piece)
            if text:
                if self.pieces is None:
                    self.pieces = []
                self.pieces.append(text)
            self._usage.update(usage)

    def _unreadable(self, output: Any) -> None:
        self.output_unreadable = self.text is None
        warn_once(
            f"unreadable-output:{type(output).__qualname__}",
            "a model output of type %s could not be read as text; the answer is not scored (rag.citation.status=answer_unreadable)",
            type(output).__qualname__,
        )

    def drop_token_counts(self) -> None:
        """Token counts recorded from an output that were estimated, not reported by the provider
        (LiteLLM counts a stream's tokens itself when none came): not measured, so not recorded."""
        self._usage.pop("input_tokens", None)
        self._usage.pop("output_tokens", None)

    def stream_done(self, pieces: Iterable[Any]) -> None:
        """A whole stream that was already consumed and timed with ``item_arrived`` (the generator
        decorator's collected pieces). One that ran out by itself without its protocol's final
        event was cut off (a dropped connection): its answer is not scored. One the app closed
        early is scored as what the app read."""
        self._usage["stream"] = True
        for piece in pieces:
            self._collect(piece)
        self.check_stream_end(pieces)

    def check_stream_end(self, events: Iterable[Any] | None) -> None:
        """The events of a stream that ran out by itself (``passthrough.Kept.ran_out``): cut off
        when their protocol's final event is missing (``outputs.cut_off``). For integrations that
        hand ``stream_done`` the text they read from the events, not the events."""
        if getattr(events, "ran_out", False) and cut_off(events):  # type: ignore[arg-type]
            self.stream_cut_off()

    def stream_cut_off(self) -> None:
        """The stream ended without its final event and without an error: the answer is incomplete,
        and its citation figures are not measurable (``answer_incomplete``), never scored as whole."""
        self._incomplete = names.STATUS_ANSWER_INCOMPLETE
        warn_once("answer-incomplete", "a model stream ended without its final event (a dropped connection?): its answer is not scored (rag.citation.status=%s)", names.STATUS_ANSWER_INCOMPLETE)

    def stream(self, pieces: Iterable[Any]) -> Iterator[Any]:
        """Pass a stream through unchanged while collecting its text."""
        self._usage["stream"] = True
        for piece in stream_pieces(pieces):
            self.add_piece(piece)
            yield piece

    async def astream(self, pieces: AsyncIterable[Any]) -> AsyncIterator[Any]:
        self._usage["stream"] = True
        async for piece in pieces:
            self.add_piece(piece)
            yield piece

    def on_close(self) -> None:
        if self.text is None and self.pieces is not None:
            self.text = "".join(self.pieces)
        if self.text is None and self._pending_stream is not None:
            self.text = read_output(self._pending_stream)[0]
            if self.text is None:
                warn_once("unread-stream", "a StreamingResponse was recorded but its stream was not read before the generate stage ended; pass it through generate(...).stream(response) to record it")
                self.output_unreadable = True
        context = self._context()
        state = self.state
        if self.is_answer and (self.text is not None or self.output_unreadable):
            retrieved = state.retrieved_ids() if state is not None else set()
            if self.provided is not None:  # the model API's own citations, resolved by the same rule
                scored = call_guarded("provider citations", provided_scored, self.provided, context, retrieved)
            else:
                scored = call_guarded("citation parsing", score, self.text, context, retrieved, self.citation_pattern)
            if scored is None:  # ragtrace's own fault: the answer is not measured, never scored 0
                scored = Scored(figures_module.Answer(context.placements if context else None, unmeasured=figures_module.STATUS_INTERNAL_ERROR), None)
            # its own context can't be told (several tasks' assemblies), or its root's request may be split
            unknown = self._context_unknown or (state.unmeasured if state is not None else None)
            if unknown is not None:
                scored = Scored(figures_module.Answer(None, unmeasured=unknown), scored.citations)
            elif self._incomplete is not None:  # what it was shown is known; what it would have cited is not
                scored = Scored(figures_module.Answer(scored.answer.placements, unmeasured=self._incomplete), scored.citations)
            scored = _outside_a_pipeline(scored, state, context)
            if state is not None and state.unmeasured in state_module.REMOTE_CONTEXT_STATUSES:  # a carried record that can't be used
                scored = Scored(figures_module.Answer(None, unmeasured=state.unmeasured), scored.citations)
            self.citations, answer, self.out_of_context_ids = scored.citations, scored.answer, scored.out_of_context_ids
            self.citation_status = answer.unmeasured
            self.answer = answer
            if state is not None:
                state.answers.append(answer)
                state.answer_text = self.text
            if answer.unmeasured == names.STATUS_STATE_EVICTED:  # its trace's retrievals are gone
                result = figures_module.Figures(status=[answer.unmeasured])
            else:
                result = state.figures_for_answer(answer) if state is not None else figures_module.compute([], [answer])
                if answer.unmeasured is not None and answer.unmeasured not in result.status:
                    result.status.append(answer.unmeasured)
            self.metrics = dict(result.values)
            with guard("figure attributes"):
                set_figures(self, result, inclusion_method=context.method if context is not None else None)
        self._attributes(context)

    def record_stage_metrics(self, found: otel_metrics.Instruments, labels: dict[str, Any]) -> None:
        if self.time_to_first_chunk is not None:
            found.time_to_first_chunk.record(self.time_to_first_chunk, labels)
            record = found.time_per_output_chunk.record
            for gap in self._chunk_gaps:
                record(gap, labels)

    def _context(self) -> ContextRecord | None:
        given = self.context
        if isinstance(given, Assemble):
            return given.snapshot()
        if isinstance(given, ContextRecord):
            return given
        if given is not None:
            warn_once("context-type", "generate(context=...) takes an assemble handle; got %s", type(given).__name__)
        if self.state is None:
            return None
        record, self._context_unknown = self.state.context_for_answer(self.is_answer)  # the assembly made in this task or thread
        return record

    def _attributes(self, context: ContextRecord | None) -> None:
        attrs = self.attrs
        if attrs is None or not attrs.recording:
            return
        usage = self._usage
        if usage or self.time_to_first_chunk is not None:  # else every value below is None: nothing to write
            self._usage_attributes(usage)
        if context is not None and context.span_id is not None:
            attrs.set(names.RAG_GENERATION_CONTEXT_SPAN_ID, context.span_id)
        citations = self.citations
        attrs.set(names.RAG_CITATION_STATUS, self.citation_status)
        if citations is not None:
            attrs.set_many(
                {
                    names.RAG_CITATION_IDS: list(citations.cited_ids),
                    names.RAG_CITATION_VALID_COUNT: citations.valid_count,
                    names.RAG_CITATION_FORMAT: citations.format,
                    names.RAG_CITATION_CONFORMANT: citations.conformant,
                }
            )
        if self.provided is not None:
            attrs.set(names.RAG_CITATION_GRANULARITY, self.provided.granularity)
            attrs.set(names.RAG_CITATION_FILE_IDS, list(self.provided.files) or None)
            segments = self.provided.segments
            if segments:  # positions and ids, not content
                attrs.set_many(
                    {
                        names.RAG_CITATION_SEGMENT_STARTS: [start for start, _, _ in segments],
                        names.RAG_CITATION_SEGMENT_ENDS: [end for _, end, _ in segments],
                        names.RAG_CITATION_SEGMENT_IDS: [chunk_id for _, _, chunk_id in segments],
                    }
                )
        if citations is not None and self.citation_status is None and context is not None:
            # invalid means "names no chunk of the context": without a context it is not measured
            out_of_context = self.answer.out_of_context_citations if self.answer is not None else None
            attrs.set_many(
                {
                    names.RAG_CITATION_INVALID_COUNT: citations.invalid_count,
                    names.RAG_CITATION_OUT_OF_CONTEXT_COUNT: out_of_context,
                    names.RAG_CITATION_UNKNOWN_COUNT: None if out_of_context is None else citations.invalid_count - out_of_context,
                    names.RAG_CITATION_OUT_OF_CONTEXT_IDS: list(self.out_of_context_ids) or None,  # ids, not content
                    # an invalid label is a piece of the completion ("[123-45-6789]"): content
                    names.RAG_CITATION_INVALID_LABELS: [t for t in map(self.config.content.text, citations.invalid_labels) if t],
                }
            )
        self._content_attributes()

    def _usage_attributes(self, usage: dict[str, Any]) -> None:
        """What the provider reported about the call: tokens, response model and id, streaming."""
        attrs = self.attrs
        assert attrs is not None
        attrs.set_many(
            {
                names.GEN_AI_USAGE_INPUT_TOKENS: int_or_none(usage.get("input_tokens"), "input_tokens"),
                names.GEN_AI_USAGE_OUTPUT_TOKENS: int_or_none(usage.get("output_tokens"), "output_tokens"),
                names.GEN_AI_RESPONSE_MODEL: as_text(usage.get("response_model")),
                names.GEN_AI_RESPONSE_ID: as_text(usage.get("response_id")),
                names.GEN_AI_RESPONSE_FINISH_REASONS: usage.get("finish_reasons"),
                names.GEN_AI_REQUEST_STREAM: usage.get("stream"),
                names.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: self.time_to_first_chunk,
            }
        )
        if self.config.openinference:
            prompt_tokens = int_or_none(usage.get("input_tokens"), "input_tokens")
            completion_tokens = int_or_none(usage.get("output_tokens"), "output_tokens")
            attrs.set(names.OI_LLM_TOKEN_COUNT_PROMPT, prompt_tokens)
            attrs.set(names.OI_LLM_TOKEN_COUNT_COMPLETION, completion_tokens)
            if prompt_tokens is not None and completion_tokens is not None:
                attrs.set(names.OI_LLM_TOKEN_COUNT_TOTAL, int_or_none(prompt_tokens + completion_tokens, "total_tokens"))

    def _content_attributes(self) -> None:
        """The prompt and the answer, once per reader: ``gen_ai.input.messages`` /
        ``gen_ai.output.messages`` for GenAI backends, from which Phoenix derives
        ``llm.input_messages`` / ``llm.output_messages`` itself. The OpenInference message keys are
        written only where no GenAI copy went out whole (redacted, or cut by a length limit), and
        ``output.value`` (what Phoenix shows as the LLM's output) carries the answer once more."""
        assert self.attrs is not None
        policy, limit = self.config.content, self.config.max_content_chars
        openinference = self.config.openinference
        messages = _prompt_messages(self.prompt)
        if messages is not None:
            gated = gate_messages(messages, policy)  # each text through the policy once
            passed = all_passed(gated)
            if passed is not None:
                shaped = messages_json(passed, limit)
                sent = self.attrs.json_list(names.GEN_AI_INPUT_MESSAGES, shaped, messages_text(shaped))
            else:
                sent = False
            if openinference and not sent:
                for index, message in enumerate(messages[: self.config.max_documents]):
                    prefix = names.indexed(names.OI_LLM_INPUT_MESSAGES, index, "")
                    self.attrs.set(prefix + names.OI_MESSAGE_ROLE, str(message.get("role", "user")))
                    if gated is not None:
                        self._gated(prefix + names.OI_MESSAGE_CONTENT, gated[index][1])
                    elif not policy.captures:
                        self.attrs.set(prefix + names.OI_MESSAGE_CONTENT, names.REDACTED)
        if self.text is not None:
            answer = all_passed(gate_messages([{"role": "assistant", "content": self.text}], policy))
            sent = False
            if answer is not None:
                output = messages_json(answer, limit)
                output[0]["finish_reason"] = (self._usage.get("finish_reasons") or ["stop"])[0]
                sent = self.attrs.json_list(names.GEN_AI_OUTPUT_MESSAGES, output, messages_text(output))
            if openinference:
                text = answer[0][1] if answer is not None else None
                if not sent:
                    prefix = names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, "")
                    self.attrs.set(prefix + names.OI_MESSAGE_ROLE, "assistant")
                    self._gated(prefix + names.OI_MESSAGE_CONTENT, text if text is not None or policy.captures else names.REDACTED)
                self._oi_value(names.OI_OUTPUT_VALUE, text, gated=True)


def _outside_a_pipeline(scored: Scored, state: state_module.PipelineState | None, context: ContextRecord | None) -> Scored:
    """An answer outside any pipeline that its trace's state can't score, marked not measured:
    the state was evicted (``state``), or no context is known in its trace while it cites labels,
    which would all count as invalid. Stages outside a pipeline and outside any span of the app's
    are a trace each, so the retrieval and the assembly are in other traces; the log says so once."""
    if state is None or not state.implicit:
        return scored
    if state.evicted:
        return Scored(figures_module.Answer(None, unmeasured=names.STATUS_STATE_EVICTED), scored.citations)
    citations = scored.citations
    if context is None and citations is not None and citations.invalid_count and scored.answer.unmeasured is None:
        warn_once(
            "outside-pipeline",
            "an answer generated outside any rag_pipeline cites sources, but no context is known in its trace: each stage "
            "outside a pipeline and outside any span of yours is a trace of its own, so the retrieval and assembly are "
            "elsewhere. Its citations are not scored (rag.citation.status=outside_pipeline) instead of all counting as "
            "invalid. Wrap the stages of one request in `with ragtrace.rag_pipeline(...)`, or pass generate(context=ctx)",
        )
        return Scored(figures_module.Answer(None, cited_ids=scored.answer.cited_ids, unmeasured=names.STATUS_OUTSIDE_PIPELINE), citations)
    return scored


def _prompt_messages(prompt: Any) -> list[Mapping[str, Any]] | None:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, Sequence) and prompt and all(isinstance(m, Mapping) for m in prompt):
        return list(prompt)
    return as_messages(prompt) or None  # LangChain/LlamaIndex message objects
