"""The embed, retrieve and rerank stage handles: what was searched and what came back, in rank order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.trace import SpanKind

from .. import names
from ..setup import otel_metrics
from ..core.chunks import Accessors, Chunk, NO_ACCESSORS, Normalized, normalize, to_chunk, warn_if_digest_chunks
from ..core.guard import guard, warn_once
from ..core.keyed import warn_if_random
from .passthrough import Kept
from .spans import finite_or_nan, id_score_json
from .stage import Stage, int_or_none


# --- embed ------------------------------------------------------------------------------------
class Embed(Stage):
    stage = names.STAGE_EMBED
    span_kind = SpanKind.CLIENT
    oi_kind = names.OI_KIND_EMBEDDING
    operation = names.OP_EMBEDDINGS

    def __init__(self, model: str | None = None, provider: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model, self.provider = model, provider

    def start_attributes(self) -> dict[str, Any]:
        # Phoenix derives embedding.model_name from gen_ai.request.model on an embeddings span
        return {names.GEN_AI_PROVIDER_NAME: self.provider, names.GEN_AI_REQUEST_MODEL: self.model}

    def record(
        self,
        vectors: Any = None,
        *,
        dimensions: int | None = None,
        input_tokens: int | None = None,
        text: str | Sequence[str] | None = None,
    ) -> None:
        """Record the embedding result: dimensions (or the vectors to read them from), tokens, input."""
        if self.attrs is None:  # the span could not be started, or the stage is inert
            return
        with guard("embed record"):
            if dimensions is None and vectors is not None:
                dimensions = _dimensions(vectors)
            self.attrs.set(names.GEN_AI_EMBEDDINGS_DIMENSION_COUNT, int_or_none(dimensions, "dimensions"))
            tokens = int_or_none(input_tokens, "input_tokens")
            self.attrs.set(names.GEN_AI_USAGE_INPUT_TOKENS, tokens)
            if self.config.openinference and tokens is not None:
                self.attrs.set(names.OI_LLM_TOKEN_COUNT_PROMPT, tokens)
                self.attrs.set(names.OI_LLM_TOKEN_COUNT_TOTAL, tokens)
            if text is not None:
                joined = text if isinstance(text, str) else "\n".join(t for t in text if isinstance(t, str)) if isinstance(text, (list, tuple)) else None
                self._oi_value(names.OI_INPUT_VALUE, joined)


def _dimensions(vectors: Any) -> int | None:
    """Length of a vector, or of the first vector in a batch (lists, tuples, numpy arrays)."""
    shape = getattr(vectors, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[-1])
    if isinstance(vectors, Sequence) and vectors:
        first = vectors[0]
        if isinstance(first, (int, float)):
            return len(vectors)
        inner = getattr(first, "shape", None)
        if inner is not None and len(inner) == 1:
            return int(inner[0])
        if isinstance(first, Sequence):
            return len(first)
    return None


# --- retrieve ---------------------------------------------------------------------------------
class _Results(Stage):
    """A stage whose results the app may read back as ``.chunks``. An inert stage (telemetry
    off) keeps the app's list as it is and normalises it only if ``.chunks`` is read."""

    accessors: Accessors = NO_ACCESSORS
    _chunks: list[Chunk]
    _unread: list[Any] | tuple[Any, ...] | None = None

    @property
    def chunks(self) -> list[Chunk]:
        if self._unread is not None:
            unread, self._unread = self._unread, None
            self._chunks = []
            with guard("document normalisation"):
                self._chunks = normalize(unread, self.accessors).chunks
        return self._chunks

    @chunks.setter
    def chunks(self, chunks: list[Chunk]) -> None:
        self._chunks, self._unread = chunks, None

    @property
    def stream_keep(self) -> int:
        """A returned stream keeps the results that are recorded, ``max_retrieved``; the app gets all."""
        return self.config.max_retrieved

    def read(self, results: Any) -> Normalized:
        """The first ``max_retrieved`` results as chunks, and how many more there were: those a
        stream passed on without keeping (``Kept``) and those beyond the cap in a list."""
        normalized = normalize(results, self.accessors, limit=self.config.max_retrieved, digests=self.digests)
        if isinstance(results, Kept):
            normalized.omitted += results.omitted
        if normalized.omitted:
            warn_once(
                f"omitted:{self.stage}",
                "a %s returned more than max_retrieved=%d results; the first %d are recorded, the rest only counted "
                "(rag.omitted_items), and the figures that need every retrieved id say retrieval_truncated",
                self.stage,
                self.config.max_retrieved,
                self.config.max_retrieved,
            )
        return normalized

    def keep_unread(self, results: Any) -> bool:
        """When inert, hold a list or tuple of results for ``.chunks``; True if held (an iterator
        is read now, as when recording: reading it later could find it consumed by the app)."""
        if not self.inert or not isinstance(results, (list, tuple)):
            return False
        self._unread = results
        return True


class Retrieve(_Results):
    query_keys = (names.GEN_AI_RETRIEVAL_QUERY_TEXT,)
    query_derived = True  # Phoenix maps gen_ai.retrieval.query.text to a retriever's input.value
    stage = names.STAGE_RETRIEVE
    span_kind = SpanKind.CLIENT
    oi_kind = names.OI_KIND_RETRIEVER
    operation = names.OP_RETRIEVAL

    def __init__(
        self,
        query: str | None = None,
        *,
        data_source: str | None = None,
        top_k: int | None = None,
        accessors: Accessors = NO_ACCESSORS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.query, self.data_source, self.top_k, self.accessors = query, data_source, top_k, accessors
        self.chunks: list[Chunk] = []
        self.recorded = False

    def span_target(self) -> str | None:
        return self.data_source

    def start_attributes(self) -> dict[str, Any]:
        return {
            names.GEN_AI_DATA_SOURCE_ID: self.data_source,
            names.GEN_AI_RETRIEVAL_TOP_K: int_or_none(self.top_k, "top_k"),
        }

    def metric_labels(self) -> dict[str, Any]:
        return {names.GEN_AI_DATA_SOURCE_ID: self.data_source}

    def record_stage_metrics(self, found: otel_metrics.Instruments, labels: dict[str, Any]) -> None:
        if not self.recorded:
            return
        if not self.chunks:
            found.empty_retrievals.add(1, labels)
        elif self.chunks[0].score is not None:
            found.top_score.record(self.chunks[0].score, labels)

    def record(self, results: Any) -> None:
        """Record what the retriever returned (any common document shape, in rank order)."""
        if self.keep_unread(results):
            self.recorded = True
            return
        with guard("document normalisation"):
            normalized = self.read(results)
            if normalized.unreadable:
                warn_once(
                    "unreadable:retrieve",
                    "%d retrieved item(s) could not be read in full (no id and no text, or a callback of yours raised); pass id_of=/content_of=",
                    normalized.unreadable,
                )
            chunks = normalized.chunks
            if self.state is not None:
                canonical = self.state.add_retrieval(chunks, normalized.unreadable, normalized.omitted)
                chunks = [c if c.id == k.id else _with_id(c, k.id) for c, k in zip(chunks, canonical)]
            self.chunks = chunks
            self.recorded = True
            self._attributes(chunks, normalized.unreadable, normalized.omitted)

    def record_files(self, results: Sequence[Mapping[str, Any]], files: Sequence[str | None]) -> None:
        """``record`` for a provider's results whose files it names (``files``, aligned; None where
        one is not named): each chunk keeps its file, and the span lists them
        (``rag.retrieval.file_ids``) for the file-level figures."""
        if self.inert:  # telemetry off: the results are held as they came, read only if asked (``record``)
            self.record(results)
            return
        with guard("document normalisation"):
            read: list[Any] = []
            for rank, (item, file_id) in enumerate(zip(results, files), 1):
                chunk = to_chunk(item, rank)  # a new chunk (the results are mappings): its file is set in place
                if chunk is not None:
                    chunk.file_id = file_id
                read.append(item if chunk is None else chunk)
            results = read
        self.record(results)
        attrs = self.attrs
        if attrs is not None and attrs.recording and self.chunks:
            attrs.set(names.RAG_RETRIEVAL_FILE_IDS, [chunk.file_id or "" for chunk in self.chunks])

    def _attributes(self, chunks: list[Chunk], unreadable: int, omitted: int) -> None:
        attrs = self.attrs
        if attrs is None or not attrs.recording:
            return
        ids = [c.id for c in chunks]
        warn_if_digest_chunks(chunks)
        ranks = [c.rank for c in chunks]
        # the documents' ids and scores, once: gen_ai.retrieval.documents (every mode), from which
        # Phoenix also fills OpenInference's retrieval.documents.{i}.document.id/score
        pairs = [(c.id, c.score) for c in chunks]
        documents = [{"id": i, "score": s} for i, s in pairs]
        whole = attrs.json_list(names.GEN_AI_RETRIEVAL_DOCUMENTS, documents, id_score_json(pairs))
        attrs.set_many(
            {
                names.RAG_RETRIEVAL_CHUNK_IDS: ids,
                # cut from the JSON above by the length limit: the scores stay readable here
                names.RAG_RETRIEVAL_SCORES: None if whole else [finite_or_nan(c.score) for c in chunks],
                # ranks other than 1..n only (a reader takes 1..n when absent)
                names.RAG_RETRIEVAL_RANKS: None if ranks == list(range(1, len(ranks) + 1)) else ranks,
                names.RAG_RETRIEVAL_RESULT_COUNT: len(chunks) + omitted,
                names.RAG_RETRIEVAL_TOP_SCORE: chunks[0].score if chunks else None,
                names.RAG_UNREADABLE_ITEMS: unreadable or None,
                names.RAG_OMITTED_ITEMS: omitted or None,
            }
        )
        tokens = [c.tokens for c in chunks]
        if chunks and None not in tokens:
            attrs.set(names.RAG_RETRIEVAL_CHUNK_TOKENS, tokens)
        if self.config.content.hashes:
            attrs.set(names.RAG_RETRIEVAL_CONTENT_HASHES, [c.content_hash or "" for c in chunks])
            warn_if_random("hash-mode content hashes differ between processes")
        if self.config.openinference:
            # Phoenix derives the ids and scores from the JSON when it holds every one of them
            derived = whole and all(c.id and c.score is not None for c in chunks)
            shown = _oi_documents(self, names.OI_RETRIEVAL_DOCUMENTS, chunks, ids_derived=derived)
            if self.state is not None:
                self.state.shown.update(shown)


def _with_id(chunk: Chunk, chunk_id: str) -> Chunk:
    return Chunk(chunk_id, chunk.rank, chunk.score, chunk.content, chunk.metadata, chunk.tokens, chunk.content_hash, chunk.file_id)


def _oi_documents(
    stage: Stage, prefix: str, chunks: Sequence[Chunk], shown: dict[str, str | None] | None = None, *, ids_derived: bool = False
) -> dict[str, str | None]:
    """OpenInference's flattened document list, capped so the attribute limit is not exhausted.

    A chunk whose text (or its placeholder) a retrieve span of the trace already carries, as
    ``shown`` records (id -> content hash), gets no text here: a reranker's outputs are retrieved
    chunks, and their text is written once. ``ids_derived``: the reader derives each document's id
    and score from ``gen_ai.retrieval.documents``, so only the text goes here. Returns the chunks
    whose text this list carries.
    """
    assert stage.attrs is not None
    policy, limit = stage.config.content, stage.config.max_content_chars
    # the policy is asked once per list, not once per text: redact and hash modes show the
    # placeholder, and full mode with no redactor lets each text through as it is
    captures, verbatim = policy.captures, policy.verbatim
    values: dict[str, Any] = {}
    carried: dict[str, str | None] = {}
    for index, chunk in enumerate(chunks[: stage.config.max_documents]):
        id_key, score_key, content_key = names.document_keys(prefix, index)
        if not ids_derived:
            values[id_key] = chunk.id
            values[score_key] = chunk.score
        text = chunk.content
        if text is None or (shown is not None and chunk.id in shown and shown[chunk.id] == chunk.content_hash):
            continue
        if not captures:
            values[content_key] = names.REDACTED
        else:
            content = text if verbatim else policy.text(text)
            if content is None:
                continue
            values[content_key] = content if len(content) <= limit else content[:limit]  # ``trim_text``
        carried[chunk.id] = chunk.content_hash
    stage.attrs.set_many(values)
    return carried


# --- rerank -----------------------------------------------------------------------------------
class Rerank(_Results):
    stage = names.STAGE_RERANK
    span_kind = SpanKind.CLIENT
    oi_kind = names.OI_KIND_RERANKER
    operation = names.OP_RERANK

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: str | None = None,
        top_n: int | None = None,
        query: str | None = None,
        accessors: Accessors = NO_ACCESSORS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model, self.provider, self.top_n, self.query, self.accessors = model, provider, top_n, query, accessors
        self.query_keys = (names.OI_RERANKER_QUERY,) if self.config.openinference else ()
        self.chunks: list[Chunk] = []

    def start_attributes(self) -> dict[str, Any]:
        top_n = int_or_none(self.top_n, "top_n")
        attributes = {
            names.GEN_AI_PROVIDER_NAME: self.provider,
            names.GEN_AI_REQUEST_MODEL: self.model,
            names.RAG_RERANK_TOP_N: top_n,
        }
        if self.config.openinference:
            attributes[names.OI_RERANKER_MODEL_NAME] = self.model
            attributes[names.OI_RERANKER_TOP_K] = top_n
        return attributes

    def record(self, output: Any, *, candidates: Any = None) -> None:
        """Record the reranked results (new order); ``candidates`` defaults to the last retrieval."""
        if self.keep_unread(output):
            return
        with guard("document normalisation"):
            kept = self.read(output)
            state = self.state
            inputs_omitted = 0
            if candidates is not None:
                given = normalize(candidates, self.accessors, limit=self.config.max_retrieved, digests=self.digests)
                inputs, inputs_omitted = given.chunks, given.omitted
            elif state is not None and state.retrievals:
                inputs = state.retrievals[-1]
            else:
                inputs = []
            if state is not None:
                kept.chunks[:] = state.canonical_all(kept.chunks)
                if candidates is not None:  # the last retrieval's chunks are canonical already (add_retrieval)
                    inputs = state.canonical_all(inputs)
                kept_ids = {c.id for c in kept.chunks}
                state.reranked = True
                if not kept.omitted:  # else a candidate missing from the kept outputs may be among the omitted ones
                    state.reranked_out.update({c.id for c in inputs}.difference(kept_ids))
                state.reranked_out.difference_update(kept_ids)
            self.chunks = kept.chunks
            self._attributes(inputs, kept.chunks, kept.unreadable, (inputs_omitted, kept.omitted))

    def _attributes(self, inputs: list[Chunk], outputs: list[Chunk], unreadable: int, omitted: tuple[int, int]) -> None:
        """``omitted``: (candidates, results) beyond ``max_retrieved``, counted but not recorded."""
        attrs = self.attrs
        if attrs is None or not attrs.recording:
            return
        # the input ids and output scores once: in OpenInference's reranker documents when those
        # hold them all, else here (rag.rerank.output_ids stays: the Phoenix annotations read it)
        in_documents = self.config.openinference and max(len(inputs), len(outputs)) <= self.config.max_documents
        warn_if_digest_chunks([*inputs, *outputs])
        attrs.set_many(
            {
                names.RAG_RERANK_INPUT_COUNT: len(inputs) + omitted[0],
                names.RAG_RERANK_OUTPUT_COUNT: len(outputs) + omitted[1],
                names.RAG_RERANK_INPUT_IDS: None if in_documents else [c.id for c in inputs],
                names.RAG_RERANK_OUTPUT_IDS: [c.id for c in outputs],
                names.RAG_RERANK_OUTPUT_SCORES: None if in_documents else [finite_or_nan(c.score) for c in outputs],
                names.RAG_UNREADABLE_ITEMS: unreadable or None,
                names.RAG_OMITTED_ITEMS: sum(omitted) or None,
            }
        )
        if self.config.openinference:
            shown = self.state.shown if self.state is not None else None
            _oi_documents(self, names.OI_RERANKER_INPUT_DOCUMENTS, inputs, shown)
            _oi_documents(self, names.OI_RERANKER_OUTPUT_DOCUMENTS, outputs, shown)
