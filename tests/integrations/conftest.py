"""Fixtures for the framework integrations: instrumented for one test, uninstrumented after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import ragtrace


@pytest.fixture
def langchain_on(spans) -> Iterator[None]:
    """``ragtrace.instrument("langchain")`` (the one line), undone after the test."""
    assert ragtrace.instrument("langchain") == ["langchain"]
    yield
    ragtrace.uninstrument("langchain")
