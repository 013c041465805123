"""The values the pure core computes with: stage and role names, inclusion methods, drop reasons,
citation formats and granularities, the figures' keys and the reasons a figure is not measurable.

They live in ``core`` because the figures, the context builder and the citation rule set them, and
``core`` imports nothing outside itself; ``ragtrace._internal.names`` re-exports them beside the
attribute names, so the shell reads every name from one place.
"""

from __future__ import annotations

from typing import Final

__all__ = ['INCLUSION_RECORDED', 'INCLUSION_LOCATED', 'INCLUSION_DECLARED', 'INCLUSION_INFERRED', 'INCLUSION_PROVIDER', 'INCLUSION_METHODS', 'DROP_OVER_BUDGET', 'DROP_DUPLICATE', 'DROP_FILTERED', 'DROP_RERANKED_OUT', 'DROP_NOT_ADDED', 'DROP_NOT_FOUND', 'DROP_NOT_RENDERED', 'DROP_OUTSIDE_SOURCES', 'DROP_NOT_IN_PROMPT', 'CITATION_GRANULARITY_CHUNK', 'CITATION_GRANULARITY_FILE', 'CITATION_FORMAT_JSON', 'CITATION_FORMAT_INLINE', 'CITATION_FORMAT_NONE', 'CITATION_FORMAT_PROVIDER', 'RAG_METRICS_PREFIX', 'RAG_METRICS_STATUS', 'RAG_METRICS_INCLUSION_METHOD', 'METRIC_RETRIEVED', 'METRIC_IN_CONTEXT', 'METRIC_CITED', 'METRIC_INVALID_CITATIONS', 'METRIC_OUT_OF_CONTEXT_CITATIONS', 'METRIC_UNKNOWN_CITATIONS', 'METRIC_CONTEXT_PRECISION', 'METRIC_RECALL_PROXY', 'METRIC_RECALL_PROXY_WEIGHTED', 'METRIC_CONTEXT_UTILIZATION', 'METRIC_WASTED_CONTEXT_TOKENS', 'METRIC_DUPLICATE_CHUNKS', 'METRIC_CITED_POSITIONS', 'METRIC_RETRIEVED_FILES', 'METRIC_IN_CONTEXT_FILES', 'METRIC_CITED_FILES', 'METRIC_FILE_RECALL_PROXY', 'METRIC_FILE_CONTEXT_UTILIZATION', 'PROXY_METRICS', 'ALL_METRICS', 'FILE_PROXY_METRICS', 'FILE_METRICS', 'EMITTED_METRICS', 'EMITTED_PROXY_METRICS', 'EVALUATION_NAME_PREFIX', 'metric_attribute', 'STATUS_NO_RETRIEVAL', 'STATUS_EMPTY_RETRIEVAL', 'STATUS_UNREADABLE_RETRIEVAL', 'STATUS_RETRIEVAL_TRUNCATED', 'STATUS_NO_CONTEXT', 'STATUS_EMPTY_CONTEXT', 'STATUS_NO_ANSWER', 'STATUS_ANSWER_UNREADABLE', 'STATUS_ANSWER_INCOMPLETE', 'STATUS_CITATION_PATTERN_FAILED', 'STATUS_CITATIONS_UNRESOLVED', 'STATUS_INTERNAL_ERROR', 'STATUS_CONTEXT_NOT_LOCATED', 'STATUS_CITATIONS_FILE_LEVEL', 'STATUS_FILES_UNKNOWN', 'STATUS_SOURCE_UNREADABLE', 'STATUS_RESULTS_NOT_INCLUDED', 'STATUS_CITED_REFERENCES_ONLY', 'STATUS_STATE_EVICTED', 'STATUS_REQUEST_SPLIT', 'STATUS_OUTSIDE_PIPELINE', 'STATUS_CONTEXT_UNKNOWN', 'STATUS_ANSWER_CALL_AMBIGUOUS', 'STATUS_REMOTE_CONTEXT_MISSING', 'STATUS_REMOTE_CONTEXT_INVALID', 'STATUS_REMOTE_CONTEXT_TOO_LARGE', 'STATUS_DELEGATED', 'STATUS_TELEMETRY_OFF', 'METRICS_STATUS_REASONS', 'METRICS_STATUS_ELSEWHERE', 'METRICS_STATUS_MEASURED', 'METRICS_STATUS_OTHER', 'LABEL_VALUE_OTHER']

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
# a trace read without ragtrace's spans (inferred) whose model calls that wrote text show some of
# the same retrieved chunks but not the same ones (an answer beside an LLM grader shown every chunk,
# the sources of both unlabelled): which call answered can't be told from the trace, so no figure
# that rests on the answer's context or citations is given; R's figures stay
STATUS_ANSWER_CALL_AMBIGUOUS: Final = "answer_call_ambiguous"
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
    STATUS_OUTSIDE_PIPELINE, STATUS_CONTEXT_UNKNOWN, STATUS_ANSWER_CALL_AMBIGUOUS, STATUS_REMOTE_CONTEXT_MISSING, STATUS_REMOTE_CONTEXT_INVALID,
    STATUS_REMOTE_CONTEXT_TOO_LARGE, STATUS_DELEGATED, STATUS_TELEMETRY_OFF,
})
# statuses of runs whose figures another process measures and counts: out of the not-measurable shares
METRICS_STATUS_ELSEWHERE: Final = (STATUS_DELEGATED,)
# the rag.metrics.status label of rag.pipeline.runs besides the reasons
METRICS_STATUS_MEASURED: Final = "measured"  # every figure of the run was measured
METRICS_STATUS_OTHER: Final = "other"  # a reason missing from METRICS_STATUS_REASONS (a ragtrace bug)
# an app-supplied label's value past its first configure(max_label_values=) values (otel_metrics)
LABEL_VALUE_OTHER: Final = "other"
