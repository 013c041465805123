"""What the integrations share."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace

from .. import names


def inside_generation() -> bool:
    """Is the current span a ragtrace generate span? Then an LLM call made inside it (the user's
    ``with ragtrace.generate()``, or a framework LLM calling the OpenAI SDK) is already recorded
    there. A span that is not recording (sampled out, tracing off) can't tell, and says no."""
    attributes = getattr(trace.get_current_span(), "attributes", None)
    return isinstance(attributes, Mapping) and attributes.get(names.RAG_STAGE) == names.STAGE_GENERATE
