"""Fixtures for the framework integrations: instrumented for one test, uninstrumented after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import ragtrace
from integrations import left_behind


@pytest.fixture
def langchain_on(spans) -> Iterator[None]:
    """``ragtrace.instrument("langchain")`` (the one line), undone after the test."""
    from ragtrace._internal.integrations import langchain

    assert ragtrace.instrument("langchain") == ["langchain"]
    yield
    ragtrace.uninstrument("langchain")
    assert len(langchain._handler.runs) == 0, "every run that started has ended"


@pytest.fixture
def llama_index_on(spans):
    """``ragtrace.instrument("llama_index")``, undone after the test; yields the spans."""
    ragtrace.instrument("llama_index")
    yield spans
    ragtrace.uninstrument("llama_index")


# besides the *_beside_* modules, those with tests beside OpenInference's instrumentors
_BESIDE_OTHERS_TOO = {"test_langchain", "test_llama_index", "test_openai", "test_instrument"}


def _beside(request) -> bool:
    name = request.module.__name__
    return "_beside_" in name or name.rpartition(".")[2] in _BESIDE_OTHERS_TOO


@pytest.fixture(autouse=True, scope="module")
def _no_wrapper_left_behind(request) -> Iterator[None]:
    """A module of tests beside another tool's instrumentor (``*_beside_*`` and ``_BESIDE_OTHERS_TOO``) leaves the
    instrumented libraries' functions and methods as it found them (tests/integrations/left_behind.py),
    so later modules run the same in any file order."""
    before = left_behind.snapshot() if _beside(request) else None
    yield
    if before is not None:
        found = left_behind.left_behind(before)
        assert not found, "left behind:\n" + "\n".join(found)


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Every test here leaves the frameworks' handlers, the instrumentors on and the OpenTelemetry
    globals (provider, current context) as it found them (0.3 ms)."""
    before = left_behind.snapshot(attributes=False)
    yield
    found = left_behind.left_behind(before)
    assert not found, "left behind:\n" + "\n".join(found)


@pytest.fixture
def context_put_back() -> Iterator[None]:
    """The OpenTelemetry context of before put back after the test (``left_behind.context_put_back``)."""
    with left_behind.context_put_back():
        yield
