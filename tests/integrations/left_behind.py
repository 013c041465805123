"""What a test that turns another tool's instrumentor on must leave as it found: the check the
``*_beside_*`` test modules run after every test (tests/integrations/conftest.py).

Another instrumentor that stays on after its test (a wrapt wrapper its ``uninstrument()`` misses, a
handler left on a dispatcher, a span left current) changes what every later test sees, so a
suite passes in one file order and fails in another. ``snapshot()`` records the state such a
leftover changes; ``left_behind(before)`` says what differs afterwards, each difference one line
naming the place and what is there now.

What is recorded, all of it cheap to read:
- every class and module attribute of the instrumented libraries loaded (``LIBRARIES``), by
  identity: a wrapper left on a method, a patched function;
- LlamaIndex's dispatchers' span and event handlers, LangChain's configure hooks, Haystack's
  tracer;
- which OpenTelemetry instrumentors (ragtrace's, OpenLLMetry's, OpenInference's...) are on;
- the global TracerProvider and the current OpenTelemetry context.
"""

from __future__ import annotations

import sys
from typing import Any

from opentelemetry import context, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

LIBRARIES = ("langchain", "langgraph", "llama_index", "openai", "anthropic", "botocore", "cohere", "google.genai", "haystack")

Snapshot = dict[str, Any]


def _patchable(key: str, value: object) -> bool:
    """What a tool patches: functions, methods and their descriptors. Not data (a library fills
    some in lazily: pydantic's schemas, LlamaIndex's ``global_tokenizer``), so not a leftover."""
    return (callable(value) or isinstance(value, (staticmethod, classmethod, property))) and ".__pydantic" not in key


def _attributes() -> dict[str, object]:
    """Every function-like module attribute and attribute of a class defined in a module of
    ``LIBRARIES`` loaded now, by dotted name."""
    found: dict[str, object] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(LIBRARIES):
            continue
        for key, value in list(vars(module).items()):
            found[f"{name}:{key}"] = value
            if isinstance(value, type) and value.__module__ == name:
                for attribute, member in list(vars(value).items()):
                    found[f"{name}:{key}.{attribute}"] = member
    return {key: value for key, value in found.items() if _patchable(key, value)}


def _kinds(handlers: list) -> list[str]:
    return [f"{type(h).__module__}.{type(h).__qualname__}" for h in handlers]


def _handlers() -> dict[str, list]:
    """The framework-level hooks another tool adds its handler to, by the handlers' classes."""
    found: dict[str, list] = {}
    dispatch = sys.modules.get("llama_index_instrumentation")
    if dispatch is not None:
        for name, dispatcher in dispatch.root_manager.dispatchers.items():
            found[f"llama_index dispatcher {name!r} span_handlers"] = _kinds(dispatcher.span_handlers)
            found[f"llama_index dispatcher {name!r} event_handlers"] = _kinds(dispatcher.event_handlers)
    hooks = sys.modules.get("langchain_core.tracers.context")
    if hooks is not None:
        found["langchain_core configure hooks"] = [repr(hook) for hook in hooks._configure_hooks]
    tracing = sys.modules.get("haystack.tracing.tracer")
    if tracing is not None:
        found["haystack tracer"] = _kinds([tracing.tracer.actual_tracer])
    return found


def _instrumentors_on() -> list[str]:
    """The OpenTelemetry instrumentors on now (each is a singleton: ``BaseInstrumentor.__new__``)."""
    found, pending = [], list(BaseInstrumentor.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        instance = vars(cls).get("_instance")
        if instance is not None and instance.is_instrumented_by_opentelemetry:
            found.append(f"{cls.__module__}.{cls.__qualname__}")
    return sorted(found)


def snapshot() -> Snapshot:
    return {
        "attributes": _attributes(),
        "handlers": _handlers(),
        "instrumentors": _instrumentors_on(),
        "tracer provider": trace._TRACER_PROVIDER,
        "context": context.get_current(),
    }


def _describe(value: object) -> str:
    wrapper = getattr(value, "_self_wrapper", None)
    if wrapper is not None and hasattr(value, "__wrapped__"):  # a wrapt FunctionWrapper
        return f"a wrapper from {getattr(wrapper, '__module__', None) or type(wrapper).__module__}"
    return repr(value)[:120]


def left_behind(before: Snapshot) -> list[str]:
    """What differs from ``before``: one line per place. Attributes of modules or classes loaded
    since are not compared (an import during the test is not a leftover)."""
    now = snapshot()
    found = []
    attributes = now["attributes"]
    for key, value in before["attributes"].items():
        if attributes.get(key, None) is not value:
            found.append(f"{key} is {_describe(attributes[key]) if key in attributes else 'gone'}")
    handlers = now["handlers"]
    for key, value in before["handlers"].items():
        if handlers.get(key) != value:
            found.append(f"{key}: {handlers.get(key)} (was {value})")
    for key in ("instrumentors", "tracer provider", "context"):
        if now[key] != before[key]:
            found.append(f"{key}: {now[key]!r} (was {before[key]!r})")
    return found
