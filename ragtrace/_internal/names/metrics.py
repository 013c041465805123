"""The OpenTelemetry metric instrument names ragtrace emits, and their labels.
"""

from __future__ import annotations

from typing import Final

__all__ = ['METRIC_OPERATION_DURATION', 'METRIC_RETRIEVAL_TOP_SCORE', 'METRIC_CONTEXT_TOKENS', 'METRIC_RECALL_PROXY_HISTOGRAM', 'METRIC_FILE_RECALL_PROXY_HISTOGRAM', 'METRIC_CONTEXT_PRECISION_HISTOGRAM', 'METRIC_EMPTY_RETRIEVALS', 'METRIC_PHOENIX_DROPPED_ANNOTATIONS', 'METRIC_TIME_TO_FIRST_CHUNK', 'METRIC_TIME_PER_OUTPUT_CHUNK', 'RAG_PIPELINE_VERSION', 'RAG_PIPELINE_ROUTE', 'RAG_ROOT_ABANDONED', 'METRIC_PIPELINE_RUNS', 'METRIC_CITATIONS', 'METRIC_CONTEXT_WASTED_TOKENS', 'METRIC_EVAL_SCORE', 'RAG_EVAL_NAME', 'RAG_CITATION_KIND', 'CITATION_KIND_VALID', 'CITATION_KIND_OUT_OF_CONTEXT', 'CITATION_KIND_UNKNOWN', 'CITATION_KINDS']

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
