"""What a test that turns another tool's instrumentor on must leave as it found: the check the
``*_beside_*`` test modules run after every test (tests/integrations/conftest.py).

Another instrumentor that stays on after its test (a wrapt wrapper its ``uninstrument()`` misses, a
handler left on a dispatcher, a span left current) changes what every later test sees, so a
suite passes in one file order and fails in another. ``snapshot()`` records the state such a
leftover changes; ``left_behind(before)`` says what differs afterwards, each difference one line
naming the place and what is there now. The libraries' attributes take ~0.1 s to read, so they
are compared once per module; the rest after every test.

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

# whose wrapt wrappers are instrumentors' (a library's own, e.g. a ``deprecated`` decorator, aren't)
INSTRUMENTATION = ("ragtrace", "opentelemetry.instrumentation", "openinference")

Snapshot = dict[str, Any]


def _patchable(members: dict[str, object]) -> dict[str, object]:
    """What a tool patches among ``members``: functions, methods, classes and their descriptors.
    Not data, which a library fills in lazily (pydantic's schemas, LlamaIndex's
    ``global_tokenizer``), so not a leftover."""
    return {
        key: value
        for key, value in members.items()
        if (callable(value) or type(value) in (staticmethod, classmethod, property)) and not key.startswith("__pydantic")
    }


def _attributes() -> dict[str, dict[str, object]]:
    """For every module of ``LIBRARIES`` loaded now, and every class defined in one, what
    ``_patchable`` keeps of its attributes."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(LIBRARIES):
            continue
        members = _patchable(vars(module))
        found[name] = members
        for key, value in members.items():
            # type(), not isinstance(): a lazy proxy (openai's) would import what it stands for
            if issubclass(type(value), type) and value.__module__ == name:
                found[f"{name}:{key}"] = _patchable(vars(value))
    return found


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


def snapshot(attributes: bool = True) -> Snapshot:
    """The state now; without the ``attributes`` of the libraries (the slow part, ~0.1 s)."""
    return {
        "attributes": _attributes() if attributes else {},
        "handlers": _handlers(),
        "instrumentors": _instrumentors_on(),
        "tracer provider": trace._TRACER_PROVIDER,
        "context": context.get_current(),
    }


def _wrapper_module(value: object) -> str:
    """The module of a wrapt function wrapper's wrapper, or '' for anything else."""
    wrapper = getattr(value, "_self_wrapper", None)
    if wrapper is None or not hasattr(value, "__wrapped__"):
        return ""
    return getattr(wrapper, "__module__", None) or type(wrapper).__module__


def _describe(value: object) -> str:
    module = _wrapper_module(value)
    return f"a wrapper from {module}" if module else repr(value)[:120]


def left_behind(before: Snapshot) -> list[str]:
    """What differs from ``before`` (taken with or without attributes): one line per place. Of
    modules and classes loaded since (an import is not a leftover), only an instrumentor's wrapper
    on one counts."""
    now = snapshot(attributes=bool(before["attributes"]))
    found = []
    for owner, members_now in now["attributes"].items():
        members = before["attributes"].get(owner, {})
        for key, value in members.items():
            if members_now.get(key) is not value:
                found.append(f"{owner}.{key} is {_describe(members_now[key]) if key in members_now else 'gone'}")
        for key in members_now.keys() - members.keys():  # loaded (or added) since: no instrumentor's wrapper
            if _wrapper_module(members_now[key]).startswith(INSTRUMENTATION):
                found.append(f"{owner}.{key} is {_describe(members_now[key])}")
    for key, value in before["handlers"].items():
        if now["handlers"].get(key) != value:
            found.append(f"{key}: {now['handlers'].get(key)} (was {value})")
    for key in ("instrumentors", "tracer provider", "context"):
        if now[key] != before[key]:
            found.append(f"{key}: {now[key]!r} (was {before[key]!r})")
    return found
