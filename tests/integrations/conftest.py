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


def _beside(request) -> bool:
    return "_beside_" in request.module.__name__


@pytest.fixture(autouse=True, scope="module")
def _no_wrapper_left_behind(request) -> Iterator[None]:
    """A module of tests beside another tool's instrumentor (``*_beside_*``) leaves the
    instrumented libraries' functions and methods as it found them (tests/integrations/left_behind.py),
    so later modules run the same in any file order."""
    before = left_behind.snapshot() if _beside(request) else None
    yield
    if before is not None:
        found = left_behind.left_behind(before)
        assert not found, "left behind:\n" + "\n".join(found)


@pytest.fixture(autouse=True)
def _nothing_left_behind(request) -> Iterator[None]:
    """Each such test leaves the frameworks' handlers, the instrumentors on and the OpenTelemetry
    globals (provider, current context) as it found them."""
    before = left_behind.snapshot(attributes=False) if _beside(request) else None
    yield
    if before is not None:
        found = left_behind.left_behind(before)
        assert not found, "left behind:\n" + "\n".join(found)
