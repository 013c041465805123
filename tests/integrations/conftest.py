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


@pytest.fixture(autouse=True)
def _nothing_left_behind(request) -> Iterator[None]:
    """A test beside another tool's instrumentor (the ``*_beside_*`` modules) leaves every
    instrumented library, framework hook and the OpenTelemetry globals as it found them
    (tests/integrations/left_behind.py), so later tests run the same in any file order."""
    if "_beside_" not in request.module.__name__:
        yield
        return
    before = left_behind.snapshot()
    yield
    found = left_behind.left_behind(before)
    assert not found, "left behind:\n" + "\n".join(found)
