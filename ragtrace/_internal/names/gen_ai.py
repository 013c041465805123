"""Span names, ``gen_ai.operation.name`` values and the OpenTelemetry GenAI attributes (``gen_ai.*``).

The newest 2026 shape (``gen_ai.retrieval.top_k`` as an int, ``gen_ai.provider.name``). The
``opentelemetry-semantic-conventions`` package still carries the v1.41 names, so they are kept here
instead of imported.
"""

from __future__ import annotations

from typing import Final

__all__ = ['STAGE_PIPELINE', 'STAGE_EMBED', 'STAGE_RETRIEVE', 'STAGE_RERANK', 'STAGE_ASSEMBLE', 'STAGE_GENERATE', 'STAGE_EVALUATION', 'STAGE_TOOL', 'STAGE_SEGMENT', 'OP_WORKFLOW', 'OP_EMBEDDINGS', 'OP_RETRIEVAL', 'OP_RERANK', 'OP_CHAT', 'OP_EXECUTE_TOOL', 'ASSEMBLE_SPAN_NAME', 'EVALUATION_SPAN_NAME', 'ERROR_TYPE', 'GEN_AI_OPERATION_NAME', 'GEN_AI_PROVIDER_NAME', 'GEN_AI_REQUEST_MODEL', 'GEN_AI_RESPONSE_MODEL', 'GEN_AI_RESPONSE_ID', 'GEN_AI_RESPONSE_FINISH_REASONS', 'GEN_AI_REQUEST_TEMPERATURE', 'GEN_AI_REQUEST_MAX_TOKENS', 'GEN_AI_REQUEST_STREAM', 'GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK', 'GEN_AI_CONVERSATION_ID', 'GEN_AI_WORKFLOW_NAME', 'GEN_AI_DATA_SOURCE_ID', 'GEN_AI_TOOL_NAME', 'GEN_AI_TOOL_CALL_ID', 'GEN_AI_TOOL_TYPE', 'TOOL_TYPE_FUNCTION', 'GEN_AI_RETRIEVAL_TOP_K', 'GEN_AI_RETRIEVAL_QUERY_TEXT', 'GEN_AI_RETRIEVAL_DOCUMENTS', 'GEN_AI_USAGE_INPUT_TOKENS', 'GEN_AI_USAGE_OUTPUT_TOKENS', 'GEN_AI_EMBEDDINGS_DIMENSION_COUNT', 'GEN_AI_INPUT_MESSAGES', 'GEN_AI_OUTPUT_MESSAGES', 'GEN_AI_SYSTEM_INSTRUCTIONS', 'GEN_AI_EVALUATION_RESULT', 'GEN_AI_EVALUATION_NAME', 'GEN_AI_EVALUATION_SCORE_VALUE', 'GEN_AI_EVALUATION_SCORE_LABEL', 'GEN_AI_EVALUATION_EXPLANATION', 'RAG_EVALUATION_SCORER', 'SCORER_LLM', 'SCORER_HUMAN', 'SCORER_CODE']

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
