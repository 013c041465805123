"""OpenInference attributes (``openinference.*``, ``input.value``, ``retrieval.documents.{i}.*``...),
which Phoenix and other OpenInference tools read.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

__all__ = ['OI_SPAN_KIND', 'OI_KIND_CHAIN', 'OI_KIND_EMBEDDING', 'OI_KIND_RETRIEVER', 'OI_KIND_RERANKER', 'OI_KIND_PROMPT', 'OI_KIND_LLM', 'OI_KIND_EVALUATOR', 'OI_KIND_TOOL', 'OI_TOOL_NAME', 'OI_INPUT_VALUE', 'OI_INPUT_MIME_TYPE', 'OI_OUTPUT_VALUE', 'OI_OUTPUT_MIME_TYPE', 'OI_EMBEDDING_MODEL_NAME', 'OI_LLM_MODEL_NAME', 'OI_LLM_PROVIDER', 'OI_LLM_TOKEN_COUNT_PROMPT', 'OI_LLM_TOKEN_COUNT_COMPLETION', 'OI_LLM_TOKEN_COUNT_TOTAL', 'OI_LLM_COST_TOTAL', 'OI_PROMPT_TEMPLATE', 'OI_PROMPT_TEMPLATE_VARIABLES', 'OI_LLM_INPUT_MESSAGES', 'OI_LLM_OUTPUT_MESSAGES', 'OI_MESSAGE_ROLE', 'OI_MESSAGE_CONTENT', 'OI_RETRIEVAL_DOCUMENTS', 'OI_RERANKER_INPUT_DOCUMENTS', 'OI_RERANKER_OUTPUT_DOCUMENTS', 'OI_RERANKER_QUERY', 'OI_RERANKER_MODEL_NAME', 'OI_RERANKER_TOP_K', 'OI_DOCUMENT_ID', 'OI_DOCUMENT_SCORE', 'OI_DOCUMENT_CONTENT', 'OI_SESSION_ID', 'OI_USER_ID', 'OI_METADATA', 'OI_TAG_TAGS', 'ANNOTATOR_CODE', 'REDACTED', 'MIME_TEXT', 'MIME_JSON', 'indexed', 'document_keys']

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
