"""The base of ragtrace's instrumentors: OpenTelemetry's ``BaseInstrumentor`` plus ragtrace's checks.

Imported only by the integration modules, so ``opentelemetry-instrumentation`` stays out of the
core. Each subclass names its library in the registry and implements ``_instrument`` /
``_uninstrument``; this class checks the installed version first on every path (``ragtrace.instrument``,
``SomeInstrumentor().instrument()`` and ``opentelemetry-instrument``, which skips the base class's own
check), so an unsupported version is never half patched.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ..core.guard import logger
from . import LIBRARIES, Library, installed_version, lock, unsupported

_OPTIONS = frozenset({"tracer_provider"})


class RagtraceInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """``instrument(tracer_provider=None)`` / ``uninstrument()`` for one library of the registry."""

    library_name: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._instance = None  # BaseInstrumentor is a singleton per class: never share a parent's instance

    @property
    def library(self) -> Library:
        return LIBRARIES[self.library_name]

    def instrumentation_dependencies(self) -> Collection[str]:
        return self.library.requirements

    def instrument(self, **kwargs: Any) -> Any:
        unknown = set(kwargs) - _OPTIONS - {"skip_dep_check", "raise_exception_on_conflict"}
        if unknown:
            raise TypeError(f"{type(self).__name__}.instrument() got unknown options {sorted(unknown)}")
        with lock:
            if self.is_instrumented_by_opentelemetry:
                return None
            if installed_version(self.library.distribution) is None:
                logger.debug("ragtrace: %s is not installed; not instrumented", self.library.distribution)
                return None
            problem = unsupported(self.library)
            if problem is not None:
                logger.warning("ragtrace: not instrumenting %s: %s", self.library.name, problem)
                return None
            return super().instrument(skip_dep_check=True, **{k: v for k, v in kwargs.items() if k in _OPTIONS})

    def uninstrument(self, **kwargs: Any) -> Any:
        with lock:
            if not self.is_instrumented_by_opentelemetry:
                return None
            return super().uninstrument(**kwargs)

    @staticmethod
    def tracer_provider(kwargs: dict[str, Any]) -> trace.TracerProvider | None:
        provider = kwargs.get("tracer_provider")
        if provider is not None and not isinstance(provider, trace.TracerProvider):
            raise TypeError(f"tracer_provider must be a TracerProvider, got {type(provider).__name__}")
        return provider
