"""ragtrace's own ``rag.*`` span attributes: ids, scores, positions, labels, citations, figures,
and the carrier key.
"""

from __future__ import annotations

from typing import Final

__all__ = ['RAG_STAGE', 'RAG_PIPELINE_ATTRIBUTE_PREFIX', 'RAG_QUERY_ID', 'RAG_QUERY_HASH', 'RAG_CONTENT_MODE', 'RAG_CONTENT_SAMPLED', 'RAG_CONTENT_SAMPLE_SHARE', 'RAG_UNREADABLE_ITEMS', 'RAG_OMITTED_ITEMS', 'RAG_PIPELINE_DELEGATED', 'CARRIER_KEY', 'RAG_RETRIEVAL_CHUNK_IDS', 'RAG_RETRIEVAL_SCORES', 'RAG_RETRIEVAL_RANKS', 'RAG_RETRIEVAL_CHUNK_TOKENS', 'RAG_RETRIEVAL_CONTENT_HASHES', 'RAG_RETRIEVAL_FILE_IDS', 'RAG_RETRIEVAL_RESULT_COUNT', 'RAG_RETRIEVAL_TOP_SCORE', 'RAG_RETRIEVAL_ROUNDS', 'RAG_RETRIEVAL_ROUND', 'RAG_RETRIEVAL_NEW_CHUNKS', 'RAG_RERANK_TOP_N', 'RAG_RERANK_INPUT_COUNT', 'RAG_RERANK_OUTPUT_COUNT', 'RAG_RERANK_INPUT_IDS', 'RAG_RERANK_OUTPUT_IDS', 'RAG_RERANK_OUTPUT_SCORES', 'RAG_RERANK_SEARCH_UNITS', 'RAG_CONTEXT_INCLUSION_METHOD', 'RAG_CONTEXT_CHUNK_IDS', 'RAG_CONTEXT_POSITIONS', 'RAG_CONTEXT_LABELS', 'RAG_CONTEXT_CHAR_STARTS', 'RAG_CONTEXT_CHAR_ENDS', 'RAG_CONTEXT_MESSAGE_INDEXES', 'RAG_CONTEXT_CHUNK_TOKENS', 'RAG_CONTEXT_TRUNCATED', 'RAG_CONTEXT_TRUNCATED_COUNT', 'RAG_CONTEXT_TOTAL_TOKENS', 'RAG_CONTEXT_MAX_TOKENS', 'RAG_CONTEXT_DROPPED_IDS', 'RAG_CONTEXT_DROPPED_REASONS', 'RAG_CONTEXT_CONTENT_HASHES', 'RAG_GENERATION_ROLE', 'RAG_GENERATION_CONTEXT_SPAN_ID', 'ROLE_ANSWER', 'ROLE_REFINE', 'ANSWER_ROLES', 'ROLE_REWRITE', 'ROLE_GRADER', 'ROLE_TOOL_CHOICE', 'ROLE_DRAFT', 'RAG_ROLE_METADATA_KEY', 'RAG_CITATION_IDS', 'RAG_CITATION_VALID_COUNT', 'RAG_CITATION_INVALID_COUNT', 'RAG_CITATION_INVALID_LABELS', 'RAG_CITATION_OUT_OF_CONTEXT_COUNT', 'RAG_CITATION_UNKNOWN_COUNT', 'RAG_CITATION_OUT_OF_CONTEXT_IDS', 'RAG_CITATION_STATUS', 'RAG_CITATION_FORMAT', 'RAG_CITATION_CONFORMANT', 'RAG_CITATION_GRANULARITY', 'RAG_CITATION_FILE_IDS', 'RAG_CITATION_SEGMENT_STARTS', 'RAG_CITATION_SEGMENT_ENDS', 'RAG_CITATION_SEGMENT_IDS', 'RAG_RETRIEVAL_STATUS', 'RAG_RETRIEVAL_SCORE_KIND']

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
RAG_RETRIEVAL_SCORE_KIND: Final = "rag.retrieval.score_kind"  # a vector database's scores: similarity or distance
