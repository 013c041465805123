"""Every span name, attribute key, event name and enum value ragtrace emits.

This is the only module that spells attribute names out. ``docs/attributes.md`` is generated from
the ``ATTRIBUTES`` table at the bottom, and a test fails when the two drift.

Three vocabularies are emitted side by side:

* OpenTelemetry GenAI (``gen_ai.*``), newest 2026 shape (``gen_ai.retrieval.top_k`` as an int,
  ``gen_ai.provider.name``). The ``opentelemetry-semantic-conventions`` package still carries the
  v1.41 names, so they are kept here instead of imported.
* ragtrace's own ``rag.*`` namespace: ids, scores, positions, figures.
* OpenInference (``openinference.*``, ``input.value``, ``retrieval.documents.{i}.*``...), which
  Phoenix and other OpenInference tools read.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final, NamedTuple

# --- stages -----------------------------------------------------------------------------------
STAGE_PIPELINE: Final = "pipeline"
STAGE_EMBED: Final = "embed"
STAGE_RETRIEVE: Final = "retrieve"
STAGE_RERANK: Final = "rerank"
STAGE_ASSEMBLE: Final = "assemble"
STAGE_GENERATE: Final = "generate"
STAGE_EVALUATION: Final = "evaluation"  # a score of a run (record_score); not a step of the pipeline
STAGE_TOOL: Final = "tool"  # an agent's tool call; a retrieval through it is a retrieve span under it
# this process's part of a pipeline that another process started (continue_pipeline): its figures
# are the pipeline's, and it is not counted as a pipeline of its own
STAGE_SEGMENT: Final = "pipeline_segment"

# gen_ai.operation.name values. "rerank" is a custom value (no OTel rerank operation exists yet).
OP_WORKFLOW: Final = "invoke_workflow"
OP_EMBEDDINGS: Final = "embeddings"
OP_RETRIEVAL: Final = "retrieval"
OP_RERANK: Final = "rerank"
OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"
# The assemble span has no GenAI operation; this is its span name.
ASSEMBLE_SPAN_NAME: Final = "assemble_context"
EVALUATION_SPAN_NAME: Final = "evaluation"  # "evaluation {score name}"

# --- OpenTelemetry general / GenAI ------------------------------------------------------------
ERROR_TYPE: Final = "error.type"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"
GEN_AI_DATA_SOURCE_ID: Final = "gen_ai.data_source.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_TYPE_FUNCTION: Final = "function"
GEN_AI_RETRIEVAL_TOP_K: Final = "gen_ai.retrieval.top_k"
GEN_AI_RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"
GEN_AI_RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT: Final = "gen_ai.embeddings.dimension.count"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
# gen_ai.evaluation.result event (one per proxy, on the root span).
GEN_AI_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
# record_score: who scored, on the same event (OpenInference's annotator kind, in lower case)
RAG_EVALUATION_SCORER: Final = "rag.evaluation.scorer"
SCORER_LLM: Final = "llm"
SCORER_HUMAN: Final = "human"
SCORER_CODE: Final = "code"

# --- ragtrace: common -------------------------------------------------------------------------
RAG_STAGE: Final = "rag.stage"
RAG_PIPELINE_ATTRIBUTE_PREFIX: Final = "rag.pipeline."  # rag_pipeline(name, version="v2") -> rag.pipeline.version
RAG_QUERY_ID: Final = "rag.query.id"
RAG_QUERY_HASH: Final = "rag.query.hash"
RAG_CONTENT_MODE: Final = "rag.content_mode"
RAG_CONTENT_SAMPLED: Final = "rag.content_sampled"
RAG_CONTENT_SAMPLE_SHARE: Final = "rag.content_sample_share"
RAG_UNREADABLE_ITEMS: Final = "rag.unreadable_items"
RAG_OMITTED_ITEMS: Final = "rag.omitted_items"
# the root of a pipeline whose answer another process scores (ragtrace.inject): it has no figures
RAG_PIPELINE_DELEGATED: Final = "rag.pipeline.delegated"

# --- ragtrace: cross-process carrier ------------------------------------------------------------
# the entry ragtrace.inject writes into a carrier (HTTP headers, a message's attributes, a JSON body)
CARRIER_KEY: Final = "ragtrace-context"

# --- ragtrace: retrieval ----------------------------------------------------------------------
RAG_RETRIEVAL_CHUNK_IDS: Final = "rag.retrieval.chunk_ids"
RAG_RETRIEVAL_SCORES: Final = "rag.retrieval.scores"
RAG_RETRIEVAL_RANKS: Final = "rag.retrieval.ranks"
RAG_RETRIEVAL_CHUNK_TOKENS: Final = "rag.retrieval.chunk_tokens"
RAG_RETRIEVAL_CONTENT_HASHES: Final = "rag.retrieval.content_hashes"
# the file (document) each chunk belongs to, where a provider says (OpenAI's file_id): the file-level figures
RAG_RETRIEVAL_FILE_IDS: Final = "rag.retrieval.file_ids"
RAG_RETRIEVAL_RESULT_COUNT: Final = "rag.retrieval.result_count"
RAG_RETRIEVAL_TOP_SCORE: Final = "rag.retrieval.top_score"
# multi-round pipelines (agents): the root's number of retrieval rounds, and on each retrieve span
# its round (1-based) and how many of its chunks no earlier round of the pipeline returned
RAG_RETRIEVAL_ROUNDS: Final = "rag.retrieval.rounds"
RAG_RETRIEVAL_ROUND: Final = "rag.retrieval.round"
RAG_RETRIEVAL_NEW_CHUNKS: Final = "rag.retrieval.new_chunks"

# --- ragtrace: rerank -------------------------------------------------------------------------
RAG_RERANK_TOP_N: Final = "rag.rerank.top_n"
RAG_RERANK_INPUT_COUNT: Final = "rag.rerank.input_count"
RAG_RERANK_OUTPUT_COUNT: Final = "rag.rerank.output_count"
RAG_RERANK_INPUT_IDS: Final = "rag.rerank.input_ids"
RAG_RERANK_OUTPUT_IDS: Final = "rag.rerank.output_ids"
RAG_RERANK_OUTPUT_SCORES: Final = "rag.rerank.output_scores"
RAG_RERANK_SEARCH_UNITS: Final = "rag.rerank.search_units"  # what a rerank API billed (Cohere's meta.billed_units)

# --- ragtrace: context assembly ---------------------------------------------------------------
RAG_CONTEXT_INCLUSION_METHOD: Final = "rag.context.inclusion_method"
RAG_CONTEXT_CHUNK_IDS: Final = "rag.context.chunk_ids"
RAG_CONTEXT_POSITIONS: Final = "rag.context.positions"
RAG_CONTEXT_LABELS: Final = "rag.context.labels"
RAG_CONTEXT_CHAR_STARTS: Final = "rag.context.char_starts"
RAG_CONTEXT_CHAR_ENDS: Final = "rag.context.char_ends"
RAG_CONTEXT_MESSAGE_INDEXES: Final = "rag.context.message_indexes"
RAG_CONTEXT_CHUNK_TOKENS: Final = "rag.context.chunk_tokens"
RAG_CONTEXT_TRUNCATED: Final = "rag.context.truncated"
RAG_CONTEXT_TRUNCATED_COUNT: Final = "rag.context.truncated_count"
RAG_CONTEXT_TOTAL_TOKENS: Final = "rag.context.total_tokens"
RAG_CONTEXT_MAX_TOKENS: Final = "rag.context.max_tokens"
RAG_CONTEXT_DROPPED_IDS: Final = "rag.context.dropped_ids"
RAG_CONTEXT_DROPPED_REASONS: Final = "rag.context.dropped_reasons"
RAG_CONTEXT_CONTENT_HASHES: Final = "rag.context.content_hashes"

INCLUSION_RECORDED: Final = "recorded"
INCLUSION_LOCATED: Final = "located"
INCLUSION_DECLARED: Final = "declared"  # the app declared each chunk's rendered text (Assemble.place)
INCLUSION_INFERRED: Final = "inferred"  # ``ragtrace report`` only: located in another instrumentation's trace
INCLUSION_PROVIDER: Final = "provider"  # the model API reported the sources it was given (Anthropic, OpenAI file_search)
INCLUSION_METHODS: Final = (INCLUSION_RECORDED, INCLUSION_DECLARED, INCLUSION_PROVIDER, INCLUSION_LOCATED, INCLUSION_INFERRED)

DROP_OVER_BUDGET: Final = "over_budget"
DROP_DUPLICATE: Final = "duplicate"
DROP_FILTERED: Final = "filtered"
DROP_RERANKED_OUT: Final = "reranked_out"
DROP_NOT_ADDED: Final = "not_added"  # retrieved, but never offered to the assembly
DROP_NOT_FOUND: Final = "not_found"  # "located" assembly: the chunk text was not found in the prompt
DROP_NOT_RENDERED: Final = "not_rendered"  # added after the prompt was last rendered
DROP_OUTSIDE_SOURCES: Final = "outside_sources"  # "located": found only unlabelled while the other sources are labelled
DROP_NOT_IN_PROMPT: Final = "not_in_prompt"  # "declared" assembly: the declared text is not in the final prompt

# --- ragtrace: generation and citations -------------------------------------------------------
RAG_GENERATION_ROLE: Final = "rag.generation.role"
RAG_GENERATION_CONTEXT_SPAN_ID: Final = "rag.generation.context_span_id"
ROLE_ANSWER: Final = "answer"
ROLE_REFINE: Final = "refine"  # rewrites the answer with more context (LlamaIndex's refine): scored like an answer
ANSWER_ROLES: Final = frozenset({ROLE_ANSWER, ROLE_REFINE})  # the generations the figures score
ROLE_REWRITE: Final = "rewrite"  # an LLM call that shapes the query (condense, rewrite, multi-query), not the answer
ROLE_GRADER: Final = "grader"  # an LLM call that judges or reranks documents (LlamaIndex's LLMRerank), not the answer
ROLE_TOOL_CHOICE: Final = "tool_choice"  # an agent's model call that asked for tools instead of answering
ROLE_DRAFT: Final = "draft"  # an agent's model call whose message was not the run's final one
RAG_ROLE_METADATA_KEY: Final = "ragtrace_role"  # LangChain run metadata that sets a generation's role
RAG_CITATION_IDS: Final = "rag.citation.ids"
RAG_CITATION_VALID_COUNT: Final = "rag.citation.valid_count"
RAG_CITATION_INVALID_COUNT: Final = "rag.citation.invalid_count"
RAG_CITATION_INVALID_LABELS: Final = "rag.citation.invalid_labels"
RAG_CITATION_OUT_OF_CONTEXT_COUNT: Final = "rag.citation.out_of_context_count"
RAG_CITATION_UNKNOWN_COUNT: Final = "rag.citation.unknown_count"
RAG_CITATION_OUT_OF_CONTEXT_IDS: Final = "rag.citation.out_of_context_ids"
RAG_CITATION_STATUS: Final = "rag.citation.status"  # why this answer's citations are not scored
RAG_CITATION_FORMAT: Final = "rag.citation.format"
RAG_CITATION_CONFORMANT: Final = "rag.citation.conformant"
RAG_CITATION_GRANULARITY: Final = "rag.citation.granularity"  # provider citations: what one names (chunk or file)
RAG_CITATION_FILE_IDS: Final = "rag.citation.file_ids"  # file-level provider citations: the cited files
# provider citations that say which part of the answer cites what: one entry per (segment, cited chunk)
RAG_CITATION_SEGMENT_STARTS: Final = "rag.citation.segment_starts"  # character offset into the answer
RAG_CITATION_SEGMENT_ENDS: Final = "rag.citation.segment_ends"
RAG_CITATION_SEGMENT_IDS: Final = "rag.citation.segment_ids"  # the chunk that segment cites
RAG_RETRIEVAL_STATUS: Final = "rag.retrieval.status"  # a provider's retrieval whose results were not returned
CITATION_GRANULARITY_CHUNK: Final = "chunk"
CITATION_GRANULARITY_FILE: Final = "file"

CITATION_FORMAT_JSON: Final = "json"
CITATION_FORMAT_INLINE: Final = "inline"
CITATION_FORMAT_NONE: Final = "none"
CITATION_FORMAT_PROVIDER: Final = "provider"  # citation objects of the model API's response, not parsed from text

# --- ragtrace: per-trace figures (keys of run.metrics; span attributes under rag.metrics.) ------
RAG_METRICS_PREFIX: Final = "rag.metrics."
RAG_METRICS_STATUS: Final = "rag.metrics.status"
RAG_METRICS_INCLUSION_METHOD: Final = "rag.metrics.inclusion_method"  # how the figures' context was known
METRIC_RETRIEVED: Final = "retrieved"
METRIC_IN_CONTEXT: Final = "in_context"
METRIC_CITED: Final = "cited"
METRIC_INVALID_CITATIONS: Final = "invalid_citations"
METRIC_OUT_OF_CONTEXT_CITATIONS: Final = "out_of_context_citations"  # names a retrieved chunk the model was not shown
METRIC_UNKNOWN_CITATIONS: Final = "unknown_citations"  # names nothing retrieved
METRIC_CONTEXT_PRECISION: Final = "context_precision"
METRIC_RECALL_PROXY: Final = "recall_proxy"
METRIC_RECALL_PROXY_WEIGHTED: Final = "recall_proxy_weighted"
METRIC_CONTEXT_UTILIZATION: Final = "context_utilization"
METRIC_WASTED_CONTEXT_TOKENS: Final = "wasted_context_tokens"
METRIC_DUPLICATE_CHUNKS: Final = "duplicate_chunks"
METRIC_CITED_POSITIONS: Final = "cited_positions"
# File granularity: where citations name files, not chunks (OpenAI file_search's file_citation), the
# figures that count cited chunks may be unknown while those that count files are exact. Each
# retrieved chunk's file is recorded (rag.retrieval.file_ids); F_R, F_C and F_K are the files of
# the retrieved, in-context and validly cited chunks (``figures``, docs/concepts.md)
METRIC_RETRIEVED_FILES: Final = "retrieved_files"
METRIC_IN_CONTEXT_FILES: Final = "in_context_files"
METRIC_CITED_FILES: Final = "cited_files"
METRIC_FILE_RECALL_PROXY: Final = "file_recall_proxy"
METRIC_FILE_CONTEXT_UTILIZATION: Final = "file_context_utilization"
# The ratios in [0, 1]; these are also emitted as gen_ai.evaluation.result events.
PROXY_METRICS: Final = (
    METRIC_CONTEXT_PRECISION,
    METRIC_RECALL_PROXY,
    METRIC_RECALL_PROXY_WEIGHTED,
    METRIC_CONTEXT_UTILIZATION,
)
ALL_METRICS: Final = (
    METRIC_RETRIEVED,
    METRIC_IN_CONTEXT,
    METRIC_CITED,
    METRIC_INVALID_CITATIONS,
    METRIC_OUT_OF_CONTEXT_CITATIONS,
    METRIC_UNKNOWN_CITATIONS,
    *PROXY_METRICS,
    METRIC_WASTED_CONTEXT_TOKENS,
    METRIC_DUPLICATE_CHUNKS,
    METRIC_CITED_POSITIONS,
)
# The file-level figures apply only to traces whose citations name files: a trace without them
# misses none (ALL_METRICS are the figures every fully measured trace has).
FILE_PROXY_METRICS: Final = (METRIC_FILE_RECALL_PROXY, METRIC_FILE_CONTEXT_UTILIZATION)
FILE_METRICS: Final = (METRIC_RETRIEVED_FILES, METRIC_IN_CONTEXT_FILES, METRIC_CITED_FILES, *FILE_PROXY_METRICS)
# every figure a span may carry (rag.metrics.*), and every ratio among them (gen_ai.evaluation.result events)
EMITTED_METRICS: Final = (*ALL_METRICS, *FILE_METRICS)
EMITTED_PROXY_METRICS: Final = (*PROXY_METRICS, *FILE_PROXY_METRICS)
EVALUATION_NAME_PREFIX: Final = "ragtrace."  # gen_ai.evaluation.name = "ragtrace.recall_proxy"


def metric_attribute(metric: str) -> str:
    """The span attribute that carries a figure: ``recall_proxy`` -> ``rag.metrics.recall_proxy``."""
    return RAG_METRICS_PREFIX + metric


# --- OpenTelemetry metrics ---------------------------------------------------------------------
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_RETRIEVAL_TOP_SCORE: Final = "rag.retrieval.top_score"
METRIC_CONTEXT_TOKENS: Final = "rag.context.tokens"
METRIC_RECALL_PROXY_HISTOGRAM: Final = "rag.recall_proxy"
METRIC_FILE_RECALL_PROXY_HISTOGRAM: Final = "rag.file_recall_proxy"
METRIC_CONTEXT_PRECISION_HISTOGRAM: Final = "rag.context_precision"
METRIC_EMPTY_RETRIEVALS: Final = "rag.retrieval.empty"
METRIC_PHOENIX_DROPPED_ANNOTATIONS: Final = "rag.phoenix.annotations.dropped"  # PhoenixExporter's full queue
# streaming generations (the v1.41 names, which backends read today; see module docstring)
METRIC_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
METRIC_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.operation.time_per_output_chunk"
RAG_PIPELINE_VERSION: Final = "rag.pipeline.version"
RAG_PIPELINE_ROUTE: Final = "rag.pipeline.route"
# an automatic root (``auto_root``) that ended with no answer: why (request_ended, owner_gone, replaced,
# idle, capacity, collected, exit)
RAG_ROOT_ABANDONED: Final = "rag.root.abandoned"
# the fleet view's metrics (docs/fleet.md): runs by figures status, citations by kind, wasted
# tokens, and one histogram of record_score's judge scores labelled by score name
METRIC_PIPELINE_RUNS: Final = "rag.pipeline.runs"
METRIC_CITATIONS: Final = "rag.citations"
METRIC_CONTEXT_WASTED_TOKENS: Final = "rag.context.wasted_tokens"
METRIC_EVAL_SCORE: Final = "rag.eval.score"
RAG_EVAL_NAME: Final = "rag.eval.name"  # the score's name (record_score(name=)), a label of rag.eval.score
RAG_CITATION_KIND: Final = "rag.citation.kind"  # a label of rag.citations
CITATION_KIND_VALID: Final = "valid"  # distinct in-context chunks the answers cited
CITATION_KIND_OUT_OF_CONTEXT: Final = "out_of_context"  # invalid: names a retrieved chunk the model was not shown
CITATION_KIND_UNKNOWN: Final = "unknown"  # invalid: names nothing retrieved
CITATION_KINDS: Final = (CITATION_KIND_VALID, CITATION_KIND_OUT_OF_CONTEXT, CITATION_KIND_UNKNOWN)

# --- rag.metrics.status: why figures are missing -----------------------------------------------
# Every reason ragtrace gives is spelled here, once, and listed in METRICS_STATUS_REASONS. That set
# bounds the rag.metrics.status label of rag.pipeline.runs (a run counts under its first reason, the
# most upstream one), so a reason added here reaches the metric and the dashboard with no other
# change; a reason missing from it would count as "other" (tests/fleet fails on any STATUS_* constant
# of ragtrace._internal that is not in the set).
STATUS_NO_RETRIEVAL: Final = "no_retrieval"
STATUS_EMPTY_RETRIEVAL: Final = "empty_retrieval"
STATUS_UNREADABLE_RETRIEVAL: Final = "retrieved_chunks_unreadable"
# a retrieval held more than max_retrieved results: R is not known whole (``figures.compute``'s ``omitted``)
STATUS_RETRIEVAL_TRUNCATED: Final = "retrieval_truncated"
STATUS_NO_CONTEXT: Final = "no_context"
STATUS_EMPTY_CONTEXT: Final = "empty_context"
STATUS_NO_ANSWER: Final = "no_answer"
# why an answer's citations are not scored (``Answer.unmeasured``; ``rag.citation.status``)
STATUS_ANSWER_UNREADABLE: Final = "answer_unreadable"  # an output ragtrace could not read as text
# a stream that ran out without its final event and without an error (a dropped connection: no
# Anthropic message_stop, no OpenAI finish_reason): part of an answer, not the answer
STATUS_ANSWER_INCOMPLETE: Final = "answer_incomplete"
STATUS_CITATION_PATTERN_FAILED: Final = "citation_pattern_failed"  # the user's citation_pattern raised
STATUS_CITATIONS_UNRESOLVED: Final = "citations_unresolved"  # located context with gaps: a citation ragtrace can't resolve
STATUS_INTERNAL_ERROR: Final = "internal_error"  # ragtrace's own fault while scoring (logged once)
# a search of the prompt (located, inferred) found none of its chunks: filtered or transformed
# beyond recognition can't be told apart, so the context is unknown, not empty
STATUS_CONTEXT_NOT_LOCATED: Final = "context_not_located"
STATUS_CITATIONS_FILE_LEVEL: Final = "citations_file_level"  # a provider cited a file with several chunks in context (``provided``)
# file-level citations, but the file of a retrieved or in-context chunk is not known (a result with
# no file id, a retrieval of the app's own beside the provider's): the file-level figures would be made up
STATUS_FILES_UNKNOWN: Final = "files_unknown"
STATUS_SOURCE_UNREADABLE: Final = "source_unreadable"  # a provider's source block whose text ragtrace can't read (a PDF)
STATUS_RESULTS_NOT_INCLUDED: Final = "results_not_included"  # a provider's retrieval whose results the response did not carry
# a provider's retrieve-and-generate call (Bedrock's retrieve_and_generate) that returns only the
# references its answer cites: what it retrieved and put in context is not returned, so counting the
# cited references as the retrieval would make recall 1.0 on every call
STATUS_CITED_REFERENCES_ONLY: Final = "cited_references_only"
# a generation whose trace's state was evicted: its retrievals and contexts are gone, so nothing of
# it is measured
STATUS_STATE_EVICTED: Final = "state_evicted"
# an automatic root opened by a search of the same request as the root it replaced (its 33rd, or
# one after a long idle): that request's first searches are in the other root, so nothing is measured
STATUS_REQUEST_SPLIT: Final = "request_split"
# an answer outside any pipeline, with no context in its trace, that cites labels: each would count
# as invalid, but the likelier cause is that its stages are traces of their own
STATUS_OUTSIDE_PIPELINE: Final = "outside_pipeline"
# an answer whose own context can't be told: its pipeline has assemblies made in several tasks or
# threads, none of them in the answer's, and more than one not yet answered
STATUS_CONTEXT_UNKNOWN: Final = "context_unknown"
# a continue_pipeline whose carried record (``carrier``) can't be used: nothing of the origin is known
STATUS_REMOTE_CONTEXT_MISSING: Final = "remote_context_missing"  # no ragtrace-context entry in the carrier
STATUS_REMOTE_CONTEXT_INVALID: Final = "remote_context_invalid"  # bad signature, expired, another trace, unreadable
STATUS_REMOTE_CONTEXT_TOO_LARGE: Final = "remote_context_too_large"  # over the carrier's size cap
# not a reason figures are missing: the root handed them to another process (``rag.pipeline.delegated``),
# which counts the run itself; the fleet view's not-measurable shares leave these runs out
STATUS_DELEGATED: Final = "delegated"
# run.status when neither a TracerProvider nor a MeterProvider is set: nothing was measured
STATUS_TELEMETRY_OFF: Final = "telemetry_off"
METRICS_STATUS_REASONS: Final = frozenset({
    STATUS_NO_RETRIEVAL, STATUS_EMPTY_RETRIEVAL, STATUS_UNREADABLE_RETRIEVAL, STATUS_RETRIEVAL_TRUNCATED, STATUS_NO_CONTEXT,
    STATUS_EMPTY_CONTEXT, STATUS_NO_ANSWER, STATUS_ANSWER_UNREADABLE, STATUS_ANSWER_INCOMPLETE, STATUS_CITATION_PATTERN_FAILED,
    STATUS_CITATIONS_UNRESOLVED, STATUS_INTERNAL_ERROR, STATUS_CONTEXT_NOT_LOCATED, STATUS_CITATIONS_FILE_LEVEL, STATUS_SOURCE_UNREADABLE,
    STATUS_FILES_UNKNOWN, STATUS_RESULTS_NOT_INCLUDED, STATUS_CITED_REFERENCES_ONLY, STATUS_STATE_EVICTED, STATUS_REQUEST_SPLIT,
    STATUS_OUTSIDE_PIPELINE, STATUS_CONTEXT_UNKNOWN, STATUS_REMOTE_CONTEXT_MISSING, STATUS_REMOTE_CONTEXT_INVALID,
    STATUS_REMOTE_CONTEXT_TOO_LARGE, STATUS_DELEGATED, STATUS_TELEMETRY_OFF,
})
# statuses of runs whose figures another process measures and counts: out of the not-measurable shares
METRICS_STATUS_ELSEWHERE: Final = (STATUS_DELEGATED,)
# the rag.metrics.status label of rag.pipeline.runs besides the reasons
METRICS_STATUS_MEASURED: Final = "measured"  # every figure of the run was measured
METRICS_STATUS_OTHER: Final = "other"  # a reason missing from METRICS_STATUS_REASONS (a ragtrace bug)
# an app-supplied label's value past its first configure(max_label_values=) values (otel_metrics)
LABEL_VALUE_OTHER: Final = "other"

# --- OpenInference ----------------------------------------------------------------------------
OI_SPAN_KIND: Final = "openinference.span.kind"
OI_KIND_CHAIN: Final = "CHAIN"
OI_KIND_EMBEDDING: Final = "EMBEDDING"
OI_KIND_RETRIEVER: Final = "RETRIEVER"
OI_KIND_RERANKER: Final = "RERANKER"
OI_KIND_PROMPT: Final = "PROMPT"
OI_KIND_LLM: Final = "LLM"
OI_KIND_EVALUATOR: Final = "EVALUATOR"
OI_KIND_TOOL: Final = "TOOL"
OI_TOOL_NAME: Final = "tool.name"
OI_INPUT_VALUE: Final = "input.value"
OI_INPUT_MIME_TYPE: Final = "input.mime_type"
OI_OUTPUT_VALUE: Final = "output.value"
OI_OUTPUT_MIME_TYPE: Final = "output.mime_type"
OI_EMBEDDING_MODEL_NAME: Final = "embedding.model_name"
OI_LLM_MODEL_NAME: Final = "llm.model_name"
OI_LLM_PROVIDER: Final = "llm.provider"
OI_LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
OI_LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
OI_LLM_TOKEN_COUNT_TOTAL: Final = "llm.token_count.total"
# the call's cost in USD as the gateway priced it (LiteLLM's response_cost); OpenInference's key
OI_LLM_COST_TOTAL: Final = "llm.cost.total"
OI_PROMPT_TEMPLATE: Final = "llm.prompt_template.template"  # Assemble.render's template
OI_PROMPT_TEMPLATE_VARIABLES: Final = "llm.prompt_template.variables"  # its variables, a JSON object
OI_LLM_INPUT_MESSAGES: Final = "llm.input_messages"  # .{i}.message.role / .message.content
OI_LLM_OUTPUT_MESSAGES: Final = "llm.output_messages"
OI_MESSAGE_ROLE: Final = "message.role"
OI_MESSAGE_CONTENT: Final = "message.content"
OI_RETRIEVAL_DOCUMENTS: Final = "retrieval.documents"  # .{i}.document.id / .score / .content
OI_RERANKER_INPUT_DOCUMENTS: Final = "reranker.input_documents"
OI_RERANKER_OUTPUT_DOCUMENTS: Final = "reranker.output_documents"
OI_RERANKER_QUERY: Final = "reranker.query"
OI_RERANKER_MODEL_NAME: Final = "reranker.model_name"
OI_RERANKER_TOP_K: Final = "reranker.top_k"
OI_DOCUMENT_ID: Final = "document.id"
OI_DOCUMENT_SCORE: Final = "document.score"
OI_DOCUMENT_CONTENT: Final = "document.content"
# rag_pipeline(session_id=, user_id=, metadata=, tags=) on the root span (Phoenix's Sessions tab)
OI_SESSION_ID: Final = "session.id"
OI_USER_ID: Final = "user.id"
OI_METADATA: Final = "metadata"  # a JSON object as a string; its values may be content
OI_TAG_TAGS: Final = "tag.tags"
ANNOTATOR_CODE: Final = "CODE"  # the figures are computed by code, not a human or an LLM judge (Phoenix annotations)
# In redact and hash modes, the message and document content slots Phoenix would show empty carry
# this, so a reader sees the content was withheld on purpose. Fixed text: it says nothing of the content.
REDACTED: Final = "[redacted]"
MIME_TEXT: Final = "text/plain"
MIME_JSON: Final = "application/json"


@lru_cache(maxsize=4096)
def indexed(prefix: str, index: int, suffix: str) -> str:
    """OpenInference's flattened list keys: ``retrieval.documents`` + 0 + ``document.id``."""
    return f"{prefix}.{index}.{suffix}"


@lru_cache(maxsize=1024)
def document_keys(prefix: str, index: int) -> tuple[str, str, str]:
    """The id, score and content keys of OpenInference's document ``index`` under ``prefix``."""
    return (
        indexed(prefix, index, OI_DOCUMENT_ID),
        indexed(prefix, index, OI_DOCUMENT_SCORE),
        indexed(prefix, index, OI_DOCUMENT_CONTENT),
    )


# --- read, not emitted: other instrumentations' attributes, for the CLI's inferred mode ----------
# ``ragtrace report`` reads these from traces that other tools produced, to infer inclusion and
# citations for them. ragtrace never emits them, so they are not in ``ATTRIBUTES`` below.
# OpenLLMetry (traceloop/openllmetry, opentelemetry-semantic-conventions-ai)
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_WORKFLOW_NAME: Final = "traceloop.workflow.name"
LLM_REQUEST_TYPE: Final = "llm.request.type"
DB_SYSTEM: Final = "db.system"
DB_VECTOR_QUERY_TOP_K: Final = "db.vector.query.top_k"
DB_QUERY_RESULT_EVENT: Final = "db.query.result"  # an event, one per result or one with parallel lists
DB_QUERY_RESULT_ID: Final = "db.query.result.id"
DB_QUERY_RESULT_SCORE: Final = "db.query.result.score"
DB_QUERY_RESULT_DISTANCE: Final = "db.query.result.distance"
DB_QUERY_RESULT_DOCUMENT: Final = "db.query.result.document"
# Legacy flattened GenAI prompt/completion attributes (OpenLLMetry and older OTel GenAI):
# gen_ai.prompt.{i}.role / .content, gen_ai.completion.{i}.role / .content (see ``indexed``), or
# gen_ai.prompt / gen_ai.completion themselves as one string (RAGScope and others)
GEN_AI_PROMPT: Final = "gen_ai.prompt"
GEN_AI_COMPLETION: Final = "gen_ai.completion"
LEGACY_MESSAGE_ROLE: Final = "role"
LEGACY_MESSAGE_CONTENT: Final = "content"
# The Vercel AI SDK's own telemetry (read by ``ragtrace report``): ai.prompt is a JSON string
# ({system, prompt, messages}), ai.prompt.messages the JSON messages sent to the provider
AI_PROMPT: Final = "ai.prompt"
AI_PROMPT_MESSAGES: Final = "ai.prompt.messages"
AI_RESPONSE_TEXT: Final = "ai.response.text"
AI_RESULT_TEXT: Final = "ai.result.text"  # before AI SDK 4
# gen_ai.operation.name values of a model call (besides ragtrace's own "chat")
GENERATION_OPERATIONS: Final = frozenset({OP_CHAT, "text_completion", "generate_content", "completion"})


# --- the attribute reference ------------------------------------------------------------------
class AttributeInfo(NamedTuple):
    """One row of the attribute reference (docs/attributes.md is generated from these)."""

    key: str
    type: str
    stages: str
    content: bool  # True: carries user content, governed by the content policy
    description: str


_ALL = "all"
ATTRIBUTES: Final[tuple[AttributeInfo, ...]] = (
    AttributeInfo(GEN_AI_OPERATION_NAME, "string", "all but assemble", False, "GenAI operation: invoke_workflow, embeddings, retrieval, rerank (custom), chat."),
    AttributeInfo(GEN_AI_PROVIDER_NAME, "string", "embed, rerank, generate", False, "Model provider, e.g. openai or local."),
    AttributeInfo(GEN_AI_REQUEST_MODEL, "string", "embed, rerank, generate", False, "Requested model name."),
    AttributeInfo(GEN_AI_RESPONSE_MODEL, "string", "generate", False, "Model name reported by the response."),
    AttributeInfo(GEN_AI_RESPONSE_ID, "string", "generate", False, "Response id from an OpenAI-style completion."),
    AttributeInfo(GEN_AI_RESPONSE_FINISH_REASONS, "string[]", "generate", False, "Finish reasons of the choices."),
    AttributeInfo(GEN_AI_REQUEST_TEMPERATURE, "double", "generate", False, "Sampling temperature, when given."),
    AttributeInfo(GEN_AI_REQUEST_MAX_TOKENS, "int", "generate", False, "Output token cap, when given."),
    AttributeInfo(GEN_AI_REQUEST_STREAM, "boolean", "generate", False, "True when the output was streamed."),
    AttributeInfo(GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, "double", "generate", False, "Streams: seconds from the call to the first chunk."),
    AttributeInfo(GEN_AI_WORKFLOW_NAME, "string", "pipeline", False, "The rag_pipeline name."),
    AttributeInfo(GEN_AI_CONVERSATION_ID, "string", "pipeline", False, "rag_pipeline(session_id=), as the GenAI semconv names it (never made up when absent)."),
    AttributeInfo(GEN_AI_DATA_SOURCE_ID, "string", "retrieve", False, "Data source (index, collection) searched."),
    AttributeInfo(GEN_AI_RETRIEVAL_TOP_K, "int", "retrieve", False, "How many documents the retriever was asked for."),
    AttributeInfo(GEN_AI_RETRIEVAL_QUERY_TEXT, "string", "retrieve", True, "The retrieval query."),
    AttributeInfo(GEN_AI_RETRIEVAL_DOCUMENTS, "string (JSON)", "retrieve", False, "Compact JSON [{id, score}] in rank order; never content."),
    AttributeInfo(GEN_AI_USAGE_INPUT_TOKENS, "int", "embed, generate", False, "Input tokens."),
    AttributeInfo(GEN_AI_USAGE_OUTPUT_TOKENS, "int", "generate", False, "Output tokens."),
    AttributeInfo(GEN_AI_EMBEDDINGS_DIMENSION_COUNT, "int", "embed", False, "Embedding dimensions."),
    AttributeInfo(GEN_AI_INPUT_MESSAGES, "string (JSON)", "generate", True, "Prompt as GenAI input messages."),
    AttributeInfo(GEN_AI_OUTPUT_MESSAGES, "string (JSON)", "generate", True, "Completion as GenAI output messages."),
    AttributeInfo(ERROR_TYPE, "string", _ALL, False, "Exception type name when the stage failed."),
    AttributeInfo(RAG_STAGE, "string", _ALL, False, "pipeline, embed, retrieve, rerank, assemble, generate; tool on an agent's tool call; evaluation on a record_score span; pipeline_segment on a continue_pipeline span."),
    AttributeInfo(RAG_PIPELINE_ATTRIBUTE_PREFIX + "<key>", "any primitive", "pipeline", False, "Extra keyword arguments of rag_pipeline (version, route...)."),
    AttributeInfo(RAG_PIPELINE_DELEGATED, "boolean", "pipeline", False, "True when ragtrace.inject handed the pipeline's record to another process: that process's pipeline_segment span carries the figures, this root none (rag.metrics.status=delegated)."),
    AttributeInfo(
        RAG_ROOT_ABANDONED, "string", "pipeline", False,
        "An automatic root (OpenAI SDK apps) that ended with no answer, and why: request_ended, owner_gone, replaced, idle, capacity, collected or exit (docs/integrations.md, request boundaries).",
    ),
    AttributeInfo(RAG_QUERY_ID, "string", "pipeline", False, "Caller-supplied query id, for golden-set eval."),
    AttributeInfo(RAG_QUERY_HASH, "string", "pipeline", False, "Keyed digest (hash key) of the normalised query: joins golden sets under redaction."),
    AttributeInfo(RAG_CONTENT_MODE, "string", "pipeline", False, "Content policy in force: full, redact or hash."),
    AttributeInfo(RAG_CONTENT_SAMPLED, "boolean", "pipeline", False, "With full_content_sample: whether this pipeline was drawn for full content."),
    AttributeInfo(RAG_CONTENT_SAMPLE_SHARE, "double", "pipeline", False, "With full_content_sample: the share of pipelines drawn for full content."),
    AttributeInfo(
        RAG_UNREADABLE_ITEMS, "int", "retrieve, rerank, assemble", False,
        "Result items ragtrace could not fully read: no id and no text (skipped), or one of your callbacks raised on it (still counted as retrieved). Warned once.",
    ),
    AttributeInfo(
        RAG_OMITTED_ITEMS, "int", "retrieve, rerank", False,
        "Results beyond configure(max_retrieved=...) (default 10,000): passed to the app and counted in result_count (rerank: input_count and output_count), not recorded. The figures that need every retrieved id are then not measured (rag.metrics.status retrieval_truncated).",
    ),
    AttributeInfo(RAG_RETRIEVAL_CHUNK_IDS, "string[]", "retrieve", False, "Chunk ids in rank order (the first max_retrieved)."),
    AttributeInfo(RAG_RETRIEVAL_SCORES, "double[]", "retrieve", False, "Scores aligned with chunk_ids (NaN when absent); only when gen_ai.retrieval.documents, which carries them, was cut by a length limit."),
    AttributeInfo(RAG_RETRIEVAL_RANKS, "int[]", "retrieve", False, "1-based ranks aligned with chunk_ids; absent when they are 1..n."),
    AttributeInfo(RAG_RETRIEVAL_CHUNK_TOKENS, "int[]", "retrieve", False, "Token counts aligned with chunk_ids."),
    AttributeInfo(RAG_RETRIEVAL_CONTENT_HASHES, "string[]", "retrieve", False, "hash mode only: keyed content digest per chunk."),
    AttributeInfo(
        RAG_RETRIEVAL_FILE_IDS, "string[]", "retrieve", False,
        "The file each chunk belongs to, aligned with chunk_ids, where the provider gives it (OpenAI file_search and vector_stores.search: file_id; an id, never a filename); \"\" where unknown. What the file-level figures count.",
    ),
    AttributeInfo(RAG_RETRIEVAL_RESULT_COUNT, "int", "retrieve", False, "Number of results, recorded or omitted."),
    AttributeInfo(RAG_RETRIEVAL_TOP_SCORE, "double", "retrieve", False, "Best score (absent when no scores)."),
    AttributeInfo(RAG_RETRIEVAL_ROUNDS, "int", "pipeline", False, "Agents: how many retrieval rounds the run took (retrieve spans of the agent's runs)."),
    AttributeInfo(RAG_RETRIEVAL_ROUND, "int", "retrieve", False, "Agents: this retrieval's round, 1-based."),
    AttributeInfo(RAG_RETRIEVAL_NEW_CHUNKS, "int", "retrieve", False, "Agents: how many of this round's chunks no earlier round returned."),
    AttributeInfo(GEN_AI_TOOL_NAME, "string", "tool", False, "The tool an agent called."),
    AttributeInfo(GEN_AI_TOOL_CALL_ID, "string", "tool", False, "The model's id for the tool call (when the framework gives one)."),
    AttributeInfo(GEN_AI_TOOL_TYPE, "string", "tool", False, "function."),
    AttributeInfo(OI_TOOL_NAME, "string", "tool", False, "OpenInference's tool name, the same as gen_ai.tool.name (openinference=True)."),
    AttributeInfo(RAG_RERANK_TOP_N, "int", "rerank", False, "How many results the reranker keeps."),
    AttributeInfo(RAG_RERANK_INPUT_COUNT, "int", "rerank", False, "Candidates in, recorded or omitted."),
    AttributeInfo(RAG_RERANK_OUTPUT_COUNT, "int", "rerank", False, "Results out, recorded or omitted."),
    AttributeInfo(RAG_RERANK_INPUT_IDS, "string[]", "rerank", False, "Candidate ids; only where reranker.input_documents does not carry them all (openinference=False, more than max_documents)."),
    AttributeInfo(RAG_RERANK_OUTPUT_IDS, "string[]", "rerank", False, "Kept ids in new order."),
    AttributeInfo(RAG_RERANK_OUTPUT_SCORES, "double[]", "rerank", False, "Rerank scores aligned with output_ids; only where reranker.output_documents does not carry them all (as input_ids)."),
    AttributeInfo(RAG_RERANK_SEARCH_UNITS, "double", "rerank", False, "The search units a rerank API billed for the call (Cohere's meta.billed_units.search_units)."),
    AttributeInfo(RAG_CONTEXT_INCLUSION_METHOD, "string", "assemble", False, "recorded (ragtrace placed the chunks), declared (the app declared each chunk's rendered text, found in order in the prompt), provider (the model API's own source blocks or file_search results, in block order) or located (chunk text searched for in a user-built prompt)."),
    AttributeInfo(RAG_CONTEXT_CHUNK_IDS, "string[]", "assemble", False, "In-context chunk ids in prompt order."),
    AttributeInfo(RAG_CONTEXT_POSITIONS, "int[]", "assemble", False, "1-based prompt positions aligned with chunk_ids."),
    AttributeInfo(RAG_CONTEXT_LABELS, "string[]", "assemble", False, "Label the model sees for each chunk, e.g. [1]."),
    AttributeInfo(RAG_CONTEXT_CHAR_STARTS, "int[]", "assemble", False, "Start offset of each chunk in the prompt (or its message); -1 where none (a declared text not found, a provider's source block)."),
    AttributeInfo(RAG_CONTEXT_CHAR_ENDS, "int[]", "assemble", False, "End offset (exclusive)."),
    AttributeInfo(RAG_CONTEXT_MESSAGE_INDEXES, "int[]", "assemble", False, "Chat prompts: index of the message holding each chunk."),
    AttributeInfo(RAG_CONTEXT_CHUNK_TOKENS, "int[]", "assemble", False, "Tokens of each chunk as placed."),
    AttributeInfo(RAG_CONTEXT_TRUNCATED, "boolean[]", "assemble", False, "Whether each chunk was cut to fit; only when some chunk was (truncated_count > 0)."),
    AttributeInfo(RAG_CONTEXT_TRUNCATED_COUNT, "int", "assemble", False, "How many chunks were cut."),
    AttributeInfo(RAG_CONTEXT_TOTAL_TOKENS, "int", "assemble", False, "Context tokens placed."),
    AttributeInfo(RAG_CONTEXT_MAX_TOKENS, "int", "assemble", False, "The token budget."),
    AttributeInfo(RAG_CONTEXT_DROPPED_IDS, "string[]", "assemble", False, "Chunks that did not land."),
    AttributeInfo(RAG_CONTEXT_DROPPED_REASONS, "string[]", "assemble", False, "over_budget, duplicate, filtered, reranked_out, not_added, not_found, outside_sources, not_rendered, not_in_prompt or a user reason."),
    AttributeInfo(RAG_CONTEXT_CONTENT_HASHES, "string[]", "assemble", False, "hash mode only: keyed content digest per placed chunk."),
    AttributeInfo(RAG_GENERATION_ROLE, "string", "generate", False, "answer, or another role left out of the figures: rewrite, grader, refine (scored like an answer), and for agents tool_choice (asked for tools) and draft (not the run's final message)."),
    AttributeInfo(RAG_GENERATION_CONTEXT_SPAN_ID, "string", "generate", False, "Span id (hex) of the assemble span whose context this generation was scored against."),
    AttributeInfo(RAG_CITATION_IDS, "string[]", "generate", False, "Validly cited chunk ids, first-cited first."),
    AttributeInfo(RAG_CITATION_VALID_COUNT, "int", "generate", False, "Citations that match an in-context chunk."),
    AttributeInfo(RAG_CITATION_INVALID_COUNT, "int", "generate", False, "Citations that point at nothing in context."),
    AttributeInfo(RAG_CITATION_INVALID_LABELS, "string[]", "generate", False, "The labels of invalid citations."),
    AttributeInfo(RAG_CITATION_OUT_OF_CONTEXT_COUNT, "int", "generate", False, "Invalid citations naming a retrieved chunk that was not in the context (by its id, or a declared label that did not reach the prompt)."),
    AttributeInfo(RAG_CITATION_UNKNOWN_COUNT, "int", "generate", False, "Invalid citations naming nothing retrieved."),
    AttributeInfo(RAG_CITATION_OUT_OF_CONTEXT_IDS, "string[]", "generate", False, "The retrieved chunks the out-of-context citations name, first-cited first (absent when none)."),
    AttributeInfo(RAG_CITATION_STATUS, "string", "generate", False, "Why the answer's citations are not scored: answer_unreadable, answer_incomplete, citation_pattern_failed, citations_unresolved, context_not_located, citations_file_level, results_not_included, cited_references_only, source_unreadable, internal_error, state_evicted, outside_pipeline, context_unknown, request_split, remote_context_missing, remote_context_invalid or remote_context_too_large (absent when scored)."),
    AttributeInfo(RAG_CITATION_FORMAT, "string", "generate", False, "json, inline, provider (the model API's citation objects) or none."),
    AttributeInfo(RAG_CITATION_GRANULARITY, "string", "generate", False, "Provider citations only: chunk (each names one source block) or file (each names a file; it resolves to that file's results)."),
    AttributeInfo(RAG_CITATION_FILE_IDS, "string[]", "generate", False, "File-level provider citations: the cited file ids, first-cited first (known also without the results)."),
    AttributeInfo(RAG_CITATION_SEGMENT_STARTS, "int[]", "generate", False, "Provider citations that locate themselves in the answer (Gemini's grounding supports): the start of each cited segment, in characters of the answer text (converted from bytes where the API counts bytes); one entry per (segment, cited chunk), parallel to segment_ends and segment_ids."),
    AttributeInfo(RAG_CITATION_SEGMENT_ENDS, "int[]", "generate", False, "The end (exclusive, characters) of each cited segment, parallel to segment_starts."),
    AttributeInfo(RAG_CITATION_SEGMENT_IDS, "string[]", "generate", False, "The chunk id each cited segment cites, parallel to segment_starts."),
    AttributeInfo(RAG_RETRIEVAL_STATUS, "string", "retrieve", False, "results_not_included: a provider's retrieval (OpenAI file_search) whose results the response did not carry (no include=[\"file_search_call.results\"]); cited_references_only: a provider's retrieve-and-generate call (Bedrock retrieve_and_generate) that returns only the references its answer cites, not what it retrieved."),
    AttributeInfo(RAG_CITATION_CONFORMANT, "boolean", "generate", False, "False when the answer has no parseable citation."),
    AttributeInfo(RAG_METRICS_STATUS, "string", "pipeline, pipeline_segment, generate", False, "Why figures are missing (absent when all were measured); delegated on a root whose figures another process's pipeline_segment carries."),
    AttributeInfo(RAG_METRICS_INCLUSION_METHOD, "string", "pipeline, generate", False, "How the context the figures rest on was known: recorded, declared, provider or located (comma-separated when a trace mixes them)."),
    AttributeInfo(metric_attribute(METRIC_RETRIEVED), "int", "pipeline, generate", False, "|R|: unique retrieved chunks."),
    AttributeInfo(metric_attribute(METRIC_IN_CONTEXT), "int", "pipeline, generate", False, "|C|: in-context chunks."),
    AttributeInfo(metric_attribute(METRIC_CITED), "int", "pipeline, generate", False, "|K|: validly cited chunks."),
    AttributeInfo(metric_attribute(METRIC_INVALID_CITATIONS), "int", "pipeline, generate", False, "Citations matching no in-context chunk (out_of_context + unknown)."),
    AttributeInfo(metric_attribute(METRIC_OUT_OF_CONTEXT_CITATIONS), "int", "pipeline, generate", False, "Invalid citations naming a retrieved chunk the model was not shown."),
    AttributeInfo(metric_attribute(METRIC_UNKNOWN_CITATIONS), "int", "pipeline, generate", False, "Invalid citations naming nothing retrieved."),
    AttributeInfo(metric_attribute(METRIC_CONTEXT_PRECISION), "double", "pipeline, generate", False, "|C ∩ R| / |R| (in-context retrieved chunks over retrieved)."),
    AttributeInfo(metric_attribute(METRIC_RECALL_PROXY), "double", "pipeline, generate", False, "|K ∩ R| / |R|."),
    AttributeInfo(metric_attribute(METRIC_RECALL_PROXY_WEIGHTED), "double", "pipeline, generate", False, "Σ 1/rank over cited ÷ Σ 1/rank over retrieved."),
    AttributeInfo(metric_attribute(METRIC_CONTEXT_UTILIZATION), "double", "pipeline, generate", False, "|K ∩ C| / |C|."),
    AttributeInfo(metric_attribute(METRIC_WASTED_CONTEXT_TOKENS), "int", "pipeline, generate", False, "Tokens of in-context chunks never cited."),
    AttributeInfo(metric_attribute(METRIC_DUPLICATE_CHUNKS), "int", "pipeline, generate", False, "Same id twice or same content under two ids."),
    AttributeInfo(metric_attribute(METRIC_CITED_POSITIONS), "int[]", "pipeline, generate", False, "Prompt positions of cited chunks (lost-in-the-middle signal)."),
    AttributeInfo(metric_attribute(METRIC_RETRIEVED_FILES), "int", "pipeline, generate", False, "File-level citations only: |F_R|, distinct files of the retrieved chunks."),
    AttributeInfo(metric_attribute(METRIC_IN_CONTEXT_FILES), "int", "pipeline, generate", False, "File-level citations only: |F_C|, distinct files of the in-context chunks."),
    AttributeInfo(metric_attribute(METRIC_CITED_FILES), "int", "pipeline, generate", False, "File-level citations only: |F_K|, distinct cited files with a chunk in context."),
    AttributeInfo(metric_attribute(METRIC_FILE_RECALL_PROXY), "double", "pipeline, generate", False, "File-level citations only: |F_K ∩ F_R| / |F_R| (cited files over retrieved files); measured also when a cited file has several chunks in context."),
    AttributeInfo(metric_attribute(METRIC_FILE_CONTEXT_UTILIZATION), "double", "pipeline, generate", False, "File-level citations only: |F_K ∩ F_C| / |F_C| (cited files over in-context files)."),
    AttributeInfo(OI_SPAN_KIND, "string", _ALL, False, "CHAIN, EMBEDDING, RETRIEVER, RERANKER, PROMPT, LLM; EVALUATOR on a record_score span."),
    AttributeInfo(OI_INPUT_VALUE, "string", _ALL, True, "Stage input: the query (pipeline, embed, rerank). Not on retrieve (Phoenix maps gen_ai.retrieval.query.text) or generate (the prompt is in gen_ai.input.messages)."),
    AttributeInfo(OI_INPUT_MIME_TYPE, "string", _ALL, True, "text/plain or application/json; set only with input.value."),
    AttributeInfo(OI_OUTPUT_VALUE, "string", _ALL, True, "Stage output: the answer (pipeline, generate), the rendered prompt (assemble)."),
    AttributeInfo(OI_OUTPUT_MIME_TYPE, "string", _ALL, True, "text/plain or application/json; set only with output.value."),
    AttributeInfo(OI_EMBEDDING_MODEL_NAME, "string", "embed", False, "Embedding model."),
    AttributeInfo(OI_LLM_MODEL_NAME, "string", "generate", False, "LLM model."),
    AttributeInfo(OI_LLM_PROVIDER, "string", "generate", False, "LLM provider."),
    AttributeInfo(OI_LLM_TOKEN_COUNT_PROMPT, "int", "embed, generate", False, "Prompt tokens."),
    AttributeInfo(OI_LLM_TOKEN_COUNT_COMPLETION, "int", "generate", False, "Completion tokens."),
    AttributeInfo(OI_LLM_TOKEN_COUNT_TOTAL, "int", "embed, generate", False, "Total tokens."),
    AttributeInfo(OI_LLM_COST_TOTAL, "double", "generate, rerank", False, "The call's cost in USD as LiteLLM priced it (response_cost), when LiteLLM knows the model's price; absent, never 0, when it doesn't."),
    AttributeInfo(OI_PROMPT_TEMPLATE, "string", "assemble", True, "The template Assemble.render filled (chat templates as JSON messages)."),
    AttributeInfo(OI_PROMPT_TEMPLATE_VARIABLES, "string", "assemble", True, "Its variables besides {context}, as a JSON object."),
    AttributeInfo(OI_LLM_INPUT_MESSAGES + ".{i}.message.{role,content}", "string", "generate", True, "Chat prompt messages, only where gen_ai.input.messages did not go out whole (redact and hash modes: role and [redacted]; a cut prompt); Phoenix derives them from gen_ai.input.messages otherwise."),
    AttributeInfo(OI_LLM_OUTPUT_MESSAGES + ".{i}.message.{role,content}", "string", "generate", True, "Completion messages, only where gen_ai.output.messages did not go out whole; Phoenix derives them from it otherwise."),
    AttributeInfo(OI_RETRIEVAL_DOCUMENTS + ".{i}.document.{id,score}", "string, double", "retrieve", False, "Retrieved documents in rank order (capped)."),
    AttributeInfo(OI_RETRIEVAL_DOCUMENTS + ".{i}.document.content", "string", "retrieve", True, "Retrieved document text."),
    AttributeInfo(OI_RERANKER_INPUT_DOCUMENTS + ".{i}.document.{id,score,content}", "mixed", "rerank", True, "Rerank candidates (content governed by policy)."),
    AttributeInfo(OI_RERANKER_OUTPUT_DOCUMENTS + ".{i}.document.{id,score,content}", "mixed", "rerank", True, "Rerank results; content only for a chunk whose text no retrieve span of the trace carries (governed by policy)."),
    AttributeInfo(OI_RERANKER_QUERY, "string", "rerank", True, "Rerank query."),
    AttributeInfo(OI_RERANKER_MODEL_NAME, "string", "rerank", False, "Rerank model."),
    AttributeInfo(OI_RERANKER_TOP_K, "int", "rerank", False, "Rerank top_n."),
    AttributeInfo(OI_SESSION_ID, "string", "pipeline", False, "rag_pipeline(session_id=): the conversation or session the run belongs to."),
    AttributeInfo(OI_USER_ID, "string", "pipeline", False, "rag_pipeline(user_id=): the app's own (ideally pseudonymous) user id."),
    AttributeInfo(OI_METADATA, "string", "pipeline", True, "rag_pipeline(metadata=) as a JSON object; values may be content."),
    AttributeInfo(OI_TAG_TAGS, "string[]", "pipeline", False, "rag_pipeline(tags=): the app's labels for the run."),
    # the gen_ai.evaluation.result event of a record_score span ("evaluation {name}", a child of the root)
    AttributeInfo(GEN_AI_EVALUATION_NAME, "string", "evaluation (event)", False, "The score's name, e.g. groundedness (also ragtrace.<proxy> on the root's events)."),
    AttributeInfo(GEN_AI_EVALUATION_SCORE_VALUE, "double", "evaluation (event)", False, "The score."),
    AttributeInfo(GEN_AI_EVALUATION_SCORE_LABEL, "string", "evaluation (event)", False, "The score's label, when given (pass, fail...)."),
    AttributeInfo(GEN_AI_EVALUATION_EXPLANATION, "string", "evaluation (event)", True, "The judge's explanation."),
    AttributeInfo(RAG_EVALUATION_SCORER, "string", "evaluation (event)", False, "Who scored: llm, human or code."),
)


class MetricInfo(NamedTuple):
    """One row of the metric reference (docs/attributes.md, after the attributes)."""

    name: str
    instrument: str
    unit: str
    description: str


METRICS: Final[tuple[MetricInfo, ...]] = (
    MetricInfo(METRIC_OPERATION_DURATION, "histogram", "s", "Duration of each stage (rag.stage) and pipeline (buckets 0.5, 1, 2.5 and 5 ms, then the GenAI convention's 10 ms to 81.92 s: fast retrievals read true)."),
    MetricInfo(METRIC_RETRIEVAL_TOP_SCORE, "histogram", "1", "Score of the top-ranked retrieved chunk (buckets 0 to 1 in tenths, then 2, 3, 4, 5, 10, 100)."),
    MetricInfo(METRIC_CONTEXT_TOKENS, "histogram", "{token}", "Context tokens placed in the prompt."),
    MetricInfo(METRIC_RECALL_PROXY_HISTOGRAM, "histogram", "1", "Cited-chunk recall proxy per pipeline."),
    MetricInfo(METRIC_CONTEXT_PRECISION_HISTOGRAM, "histogram", "1", "Context precision per pipeline."),
    MetricInfo(METRIC_FILE_RECALL_PROXY_HISTOGRAM, "histogram", "1", "Cited-file recall proxy per pipeline whose citations name files (OpenAI file_search)."),
    MetricInfo(METRIC_EMPTY_RETRIEVALS, "counter", "{retrieval}", "Retrievals that returned nothing."),
    MetricInfo(METRIC_PHOENIX_DROPPED_ANNOTATIONS, "counter", "{annotation}", "PhoenixExporter: annotations dropped from its full queue, oldest first (also PhoenixExporter.dropped_annotations)."),
    MetricInfo(METRIC_TIME_TO_FIRST_CHUNK, "histogram", "s", "Streamed generations: from the generate span's start to the first chunk."),
    MetricInfo(METRIC_TIME_PER_OUTPUT_CHUNK, "histogram", "s", "Streamed generations: one value per chunk after the first, the time since the previous chunk."),
    MetricInfo(METRIC_PIPELINE_RUNS, "counter", "{run}", "Pipeline runs, by rag.metrics.status: measured (every figure measured) or the run's first not-measurable reason."),
    MetricInfo(METRIC_CITATIONS, "counter", "{citation}", "Citations of runs whose citations were scored, by rag.citation.kind: valid (distinct in-context chunks cited), out_of_context, unknown."),
    MetricInfo(METRIC_CONTEXT_WASTED_TOKENS, "histogram", "{token}", "Tokens of in-context chunks the answer never cited, per pipeline."),
    MetricInfo(METRIC_EVAL_SCORE, "histogram", "1", "record_score: the judge scores, by rag.eval.name (buckets as top_score)."),
)
