"""Other instrumentations' attributes, read and never emitted: ``ragtrace report`` reads them from
traces other tools produced, to infer inclusion and citations. They are not in ``ATTRIBUTES``.
"""

from __future__ import annotations

from typing import Final

from .gen_ai import (
    OP_CHAT,
)

__all__ = ['TRACELOOP_SPAN_KIND', 'TRACELOOP_WORKFLOW_NAME', 'LLM_REQUEST_TYPE', 'DB_SYSTEM', 'DB_VECTOR_QUERY_TOP_K', 'DB_QUERY_RESULT_EVENT', 'DB_QUERY_RESULT_ID', 'DB_QUERY_RESULT_SCORE', 'DB_QUERY_RESULT_DISTANCE', 'DB_QUERY_RESULT_DOCUMENT', 'GEN_AI_PROMPT', 'GEN_AI_COMPLETION', 'LEGACY_MESSAGE_ROLE', 'LEGACY_MESSAGE_CONTENT', 'AI_PROMPT', 'AI_PROMPT_MESSAGES', 'AI_RESPONSE_TEXT', 'AI_RESULT_TEXT', 'GENERATION_OPERATIONS']

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
