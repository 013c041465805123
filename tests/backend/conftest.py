"""Fixtures for tests against a real Phoenix trace backend (see phoenix.py); the session's server,
``phoenix_server``, is in tests/conftest.py (the CLI tests use it too)."""

from __future__ import annotations

import re
import uuid
import pytest


@pytest.fixture
def phoenix_project(request: pytest.FixtureRequest) -> str:
    """A project name unique to this test: put it in the resource as ``openinference.project.name``."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60]
    return f"{base}-{uuid.uuid4().hex[:8]}"
