"""Gemini's grounding through LiteLLM (``completion(model="gemini/...")``, ``"vertex_ai/..."``),
read by the google-genai integration's reader (``_gemini_grounding``) and recorded by its
recorder (``google_genai.record_grounding``): the same stages and figures, no second path.

What LiteLLM passes on (checked against its code: ``llms/vertex_ai/gemini/``):

- the request: LiteLLM's own tool mapping knows no File Search or retrieval tool (it drops them
  with a warning), so such a tool reaches the API only through ``extra_body={"tools": [...]}``, in
  the API's JSON. The body LiteLLM sends is in the pre-call event's
  ``additional_args["complete_input_dict"]``: a call whose body has a ``fileSearch`` or
  ``retrieval`` tool is a RAG call, decided there, in the caller's context;
- the response: every candidate's ``groundingMetadata``, as the API returned it (camelCase), in
  one list, ``response.vertex_ai_grounding_metadata``; and the API's body as it came, in the logged
  kwargs' ``original_response``, whose candidate 0's parts the segments' byte offsets count in.

Read only when it is unambiguous: one choice and one grounding metadata (several candidates, or
LiteLLM's long-decode hops, give several, and which answer each belongs to is not said). The
answer's parts come from ``original_response``, and only when their text, joined, is the answer
LiteLLM returned; else the citations are kept without positions. A stream is not read (it is
scored from its text, as any answer).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.outputs import get
from . import _gemini_grounding as grounding

PROVIDERS = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})  # LiteLLM's names for Gemini's APIs


def request(kwargs: Mapping[str, Any]) -> tuple[Any, str | None] | None:
    """The RAG tool of the body LiteLLM sends and the last user turn's text, or None."""
    body = get(kwargs.get("additional_args"), "complete_input_dict")
    if not isinstance(body, Mapping):
        return None
    tool = grounding.rag_tool(grounding.api_json({"tools": body.get("tools")}))
    if tool is None:
        return None
    return tool, grounding.query_text(grounding.api_json(body.get("contents")))


def response_grounding(response: Any, kwargs: Mapping[str, Any]) -> tuple[Any, list[str | None]] | None:
    """The answer's grounding metadata and its parts (snake_case), or None when there is none or
    it can't be tied to one answer."""
    found = get(response, "vertex_ai_grounding_metadata")
    choices = get(response, "choices")
    if not isinstance(found, (list, tuple)) or len(found) != 1 or not isinstance(choices, (list, tuple)) or len(choices) != 1:
        return None
    answer = get(get(choices[0], "message"), "content")
    return grounding.api_json(found[0]), _parts(kwargs.get("original_response"), answer)


def _parts(raw: Any, answer: Any) -> list[str | None]:
    """Candidate 0's parts in the API's body, when their text is the answer LiteLLM returned."""
    try:
        body = json.loads(raw) if isinstance(raw, (str, bytes)) else None
    except ValueError:
        return []
    parts = grounding.part_texts(grounding.api_json(body)) if isinstance(body, Mapping) else []
    return parts if parts and "".join(p for p in parts if p is not None) == answer else []
