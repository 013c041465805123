"""``ragtrace.instrument()``: the framework integrations, turned on with one line.

A registry of the libraries ragtrace integrates with, each a ``BaseInstrumentor`` subclass from
``opentelemetry-instrumentation`` in a module of its own, imported only when that library is
instrumented: importing ``ragtrace`` never imports a framework or ``opentelemetry-instrumentation``.
The same classes are the ``opentelemetry_instrumentor`` entry points, so ``opentelemetry-instrument
python app.py`` turns them on with no code change (see docs/integrations.md).

Version ranges are declared here and checked before anything is patched: a version outside them
gets a warning and the library is left alone.
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from importlib import metadata
from typing import Any

logger = logging.getLogger("ragtrace")


@dataclass(frozen=True)
class Library:
    """A supported library: where its instrumentor lives and which versions it was built for."""

    name: str  # what users pass to instrument(): "langchain"
    module: str  # the integration module, imported lazily
    instrumentor: str  # the BaseInstrumentor subclass in it
    requirements: tuple[str, ...]  # distributions and supported ranges, as requirement strings
    extra: str  # the ragtrace extra that installs what the integration needs

    @property
    def distribution(self) -> str:
        """The distribution whose presence means "installed" (the first requirement's)."""
        return _requirement_name(self.requirements[0])


LIBRARIES: dict[str, Library] = {
    library.name: library
    for library in (
        Library(
            "langchain",
            "ragtrace._internal.integrations.langchain",
            "LangChainInstrumentor",
            ("langchain-core >= 1.0, < 2",),
            "langchain",
        ),
        Library(
            "llama_index",
            "ragtrace._internal.integrations.llama_index",
            "LlamaIndexInstrumentor",
            ("llama-index-core >= 0.14, < 0.15",),
            "llama-index",
        ),
        Library(
            "openai",
            "ragtrace._internal.integrations.openai",
            "OpenAIInstrumentor",
            ("openai >= 1.40, < 4",),
            "openai",
        ),
        Library(
            "anthropic",
            "ragtrace._internal.integrations.anthropic",
            "AnthropicInstrumentor",
            ("anthropic >= 0.50, < 3",),
            "anthropic",
        ),
        Library(
            "bedrock",
            "ragtrace._internal.integrations.bedrock",
            "BedrockInstrumentor",
            ("botocore >= 1.35, < 2",),
            "bedrock",
        ),
        Library(
            "cohere",
            "ragtrace._internal.integrations.cohere",
            "CohereInstrumentor",
            ("cohere >= 5.11, < 8",),
            "cohere",
        ),
        Library(
            "litellm",
            "ragtrace._internal.integrations.litellm",
            "LiteLLMInstrumentor",
            ("litellm >= 1.70, < 2",),
            "litellm",
        ),
        Library(
            "google_genai",
            "ragtrace._internal.integrations.google_genai",
            "GoogleGenAIInstrumentor",
            ("google-genai >= 1.0, < 4",),
            "google-genai",
        ),
        Library(
            "qdrant",
            "ragtrace._internal.integrations.qdrant",
            "QdrantInstrumentor",
            ("qdrant-client >= 1.10, < 2",),
            "qdrant",
        ),
        Library(
            "chroma",
            "ragtrace._internal.integrations.chroma",
            "ChromaInstrumentor",
            ("chromadb >= 1.0, < 2",),
            "chroma",
        ),
        Library(
            "sentence_transformers",
            "ragtrace._internal.integrations.sentence_transformers",
            "SentenceTransformersInstrumentor",
            ("sentence-transformers >= 2.2, < 6",),
            "sentence-transformers",
        ),
        Library(
            "flashrank",
            "ragtrace._internal.integrations.flashrank",
            "FlashRankInstrumentor",
            ("flashrank >= 0.2, < 1",),
            "flashrank",
        ),
        Library(
            "haystack",
            "ragtrace._internal.integrations.haystack",
            "HaystackInstrumentor",
            ("haystack-ai >= 2.24, < 4",),
            "haystack",
        ),
    )
}

_MISSING_EXTRA = "needs opentelemetry-instrumentation"

# instrument/uninstrument change process-wide hooks: one at a time
lock = threading.RLock()


def _requirement_name(requirement: str) -> str:
    for stop in "<>=!~ ;[":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip()


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def unsupported(library: Library) -> str | None:
    """Why ``library``'s installed version can't be instrumented (None when it can, or is absent).

    Needs ``packaging``, which ``opentelemetry-instrumentation`` depends on.
    """
    from packaging.requirements import Requirement

    for text in library.requirements:
        requirement = Requirement(text)
        found = installed_version(requirement.name)
        if found is not None and not requirement.specifier.contains(found, prereleases=True):
            return f"{requirement.name} {found} is outside the supported range {requirement.specifier}"
    return None


def instrumentor(library: Library) -> Any:
    """The library's instrumentor (a singleton, as every ``BaseInstrumentor`` is)."""
    try:
        module = importlib.import_module(library.module)
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith("opentelemetry.instrumentation"):
            raise ImportError(
                f"ragtrace.instrument({library.name!r}) {_MISSING_EXTRA}: "
                f"pip install 'ragtrace[{library.extra}]'"
            ) from error
        raise
    return getattr(module, library.instrumentor)()


def _selected(libraries: tuple[str, ...]) -> list[Library]:
    unknown = [name for name in libraries if name not in LIBRARIES]
    if unknown:
        raise ValueError(f"ragtrace can't instrument {unknown}: the supported libraries are {sorted(LIBRARIES)}")
    return [LIBRARIES[name] for name in dict.fromkeys(libraries or LIBRARIES)]


def instrument(*libraries: str, **options: Any) -> list[str]:
    """Instrument the named libraries, or, with none named, every supported one that is installed
    and can be instrumented.

    A named library that is not installed raises ``ModuleNotFoundError``, and one whose extra is
    missing (``opentelemetry-instrumentation``) ``ImportError``. With none named, the absent ones are
    skipped, and the installed ones that lack their extra are left out with one log line naming
    the extra that adds them (one library can bring another along: LiteLLM installs ``openai``).
    An installed version outside the supported range is left alone with a warning. Calling it again
    is harmless. ``tracer_provider=`` sends the integration's spans to that provider instead of
    ragtrace's configured one. Returns the libraries instrumented now.
    """
    named = bool(libraries)
    done, lacking = [], []
    with lock:
        for library in _selected(libraries):
            if installed_version(library.distribution) is None:
                if named:
                    raise ModuleNotFoundError(
                        f"ragtrace.instrument({library.name!r}): {library.distribution} is not installed "
                        f"(pip install 'ragtrace[{library.extra}]')",
                        name=library.distribution,
                    )
                continue
            try:
                found = instrumentor(library)
            except ImportError as error:
                if named:
                    raise
                lacking.append((library, error))
                continue
            if not found.is_instrumented_by_opentelemetry:
                found.instrument(**options)
            if found.is_instrumented_by_opentelemetry:
                done.append(library.name)
    if lacking:
        _say_lacking(lacking)
    return done


_said_lacking: set[tuple[str, ...]] = set()


def _say_lacking(lacking: list[tuple[Library, ImportError]]) -> None:
    """One line, once per set of libraries, naming the extra that would instrument them (or, for
    a library whose own import failed, why)."""
    key = tuple(library.name for library, _ in lacking)
    if key in _said_lacking:
        return
    _said_lacking.add(key)
    extra = [library for library, error in lacking if _MISSING_EXTRA in str(error)]
    broken = [f"{library.name} ({error})" for library, error in lacking if _MISSING_EXTRA not in str(error)]
    parts = []
    if extra:
        names = ", ".join(library.name for library in extra)
        extras = ",".join(dict.fromkeys(library.extra for library in extra))
        parts.append(f"{names} installed but not instrumented: pip install 'ragtrace[{extras}]' adds opentelemetry-instrumentation")
    if broken:
        parts.append("not instrumented, the import failed: " + ", ".join(broken))
    logger.warning("ragtrace.instrument(): %s", "; ".join(parts))


def uninstrument(*libraries: str) -> list[str]:
    """Undo ``instrument()`` for the named libraries (default: all); harmless when not instrumented.

    Returns the libraries that were uninstrumented.
    """
    done = []
    with lock:
        for library in _selected(libraries):
            if installed_version(library.distribution) is None:
                continue
            try:
                found = instrumentor(library)
            except ImportError:  # never instrumented: opentelemetry-instrumentation isn't even there
                continue
            if found.is_instrumented_by_opentelemetry:
                found.uninstrument()
                done.append(library.name)
    return done
