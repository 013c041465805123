"""Fixtures for the framework integrations: instrumented for one test, uninstrumented after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import ragtrace


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
