"""Attribute and event names of *other* instrumentations, read (never emitted) by the CLI.

ragtrace's own names, and the OpenInference and GenAI names ragtrace also emits, come from
``ragtrace._internal.names``. The names below are only read, from traces that other tools
produced, to infer inclusion and citations; they are kept together here so no other CLI module
spells an attribute name.
"""

from __future__ import annotations

from typing import Final

# OpenLLMetry (traceloop/openllmetry, opentelemetry-semantic-conventions-ai)
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_WORKFLOW_NAME: Final = "traceloop.workflow.name"
LLM_REQUEST_TYPE: Final = "llm.request.type"
DB_SYSTEM: Final = "db.system"
DB_VECTOR_QUERY_TOP_K: Final = "db.vector.query.top_k"
DB_QUERY_RESULT_EVENT: Final = "db.query.result"
DB_QUERY_RESULT_ID: Final = "db.query.result.id"
DB_QUERY_RESULT_SCORE: Final = "db.query.result.score"
DB_QUERY_RESULT_DISTANCE: Final = "db.query.result.distance"
DB_QUERY_RESULT_DOCUMENT: Final = "db.query.result.document"
# Legacy flattened GenAI prompt/completion attributes (OpenLLMetry and older OTel GenAI):
# gen_ai.prompt.{i}.role / .content, gen_ai.completion.{i}.role / .content
GEN_AI_PROMPT: Final = "gen_ai.prompt"
GEN_AI_COMPLETION: Final = "gen_ai.completion"
ROLE: Final = "role"
CONTENT: Final = "content"

# gen_ai.operation.name values of a model call (besides ragtrace's own "chat")
GENERATION_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content", "completion"})
