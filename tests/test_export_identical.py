"""What ragtrace exports does not change when only its speed should (issue #39).

The benchmark pipeline (``bench/bench_peers.py``, in every capture mode, with the simple and the
batch processor) and the examples run under a frozen clock and counting ids
(``tests/export_capture.py``), and their spans are compared with golden files made by the code
before the change: every span's name, kind, ids, parent, times, status, events and every attribute
value with its type, byte for byte as OTLP/JSON. Two things are set aside: the order of a span's
attributes (OTLP attributes are a map: a span built with one mapping instead of several calls has
the same attributes) and the resource's random ``service.instance.id`` and SDK version.

A change that is meant to alter the export regenerates the golden files with

    RAGTRACE_UPDATE_GOLDEN=1 python -m pytest tests/test_export_identical.py

(with ``RAGTRACE_GOLDEN_FROM=DIR``: from the ragtrace of the checkout in DIR, e.g. main before a
change that should leave the export alone) and says so, with the reason, in its commit. The examples that need a third-party SDK or framework
are heavy (they import large libraries and run once in CI, on the Python the goldens were made on).
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_examples import example_env, openai_env
from test_examples_providers import anthropic_env, anthropic_server  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden" / "exported"
CAPTURE = Path(__file__).resolve().parent / "export_capture.py"
UPDATE = os.environ.get("RAGTRACE_UPDATE_GOLDEN") == "1"
SOURCE = os.environ.get("RAGTRACE_GOLDEN_FROM", str(ROOT)) if UPDATE else str(ROOT)  # whose ragtrace is captured
LOOPBACK = "http://127.0.0.1:PORT"  # the loopback servers listen on a free port
SET_ASIDE = {"service.instance.id", "telemetry.sdk.version"}  # random per process; the installed SDK's

BENCH = ["full", "redact", "hash", "no-oi", "full+batch"]
PLAIN_EXAMPLES = ["decorators_only", "context_managers", "async_streaming", "redaction", "framework_documents"]
LIBRARY_EXAMPLES = [
    ("langchain_rag",), ("agentic_rag",), ("llamaindex_rag",), ("bedrock_knowledge_base",),
    ("cohere_rag",), ("cohere_rag", "--stream"), ("gemini_file_search",), ("gemini_file_search", "--stream"),
]


def canonical(path: Path, replace: dict[str, str] | None = None) -> str:
    """One line per exported span, in export order: resource, scope and span as OTLP/JSON, with
    each attribute list sorted by key (events keep their order)."""
    lines = []
    text = path.read_text(encoding="utf-8")
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    for request in text.splitlines():
        for resource_spans in json.loads(request)["resourceSpans"]:
            resource = [a for a in resource_spans.get("resource", {}).get("attributes", []) if a["key"] not in SET_ASIDE]
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    span = dict(span, attributes=_sorted(span.get("attributes")))
                    if "events" in span:
                        span["events"] = [dict(e, attributes=_sorted(e.get("attributes"))) for e in span["events"]]
                    record = {"resource": _sorted(resource), "scope": scope_spans.get("scope"), "span": span}
                    lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def loopback(url: str) -> dict[str, str]:
    """The loopback server's URL and port (``server.port``) as fixed text."""
    return {url: LOOPBACK, f'"intValue":"{url.rsplit(":", 1)[1]}"': '"intValue":"0"'}


def _sorted(attributes: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return sorted(attributes or [], key=lambda a: a["key"])


def capture(target: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    out = tmp_path / "spans.jsonl"
    environment = dict(env or example_env(), PYTHONPATH=SOURCE, RAGTRACE_HASH_KEY="examples", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    environment = {k: v for k, v in environment.items() if not k.startswith("OTEL_")}
    command = [sys.executable, str(CAPTURE), target, str(out), *args]
    done = subprocess.run(command, check=False, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{target} failed:\n{done.stdout}\n{done.stderr}"
    assert out.exists() and out.stat().st_size, f"{target} exported nothing"
    return out


def check(name: str, got: str) -> None:
    golden = GOLDEN / f"{name}.jsonl"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got, encoding="utf-8")
        return
    assert golden.exists(), f"no golden file {golden.name}: make it from the code before your change (RAGTRACE_UPDATE_GOLDEN=1)"
    want = golden.read_text(encoding="utf-8")
    if got != want:
        diff = difflib.unified_diff(_pretty(want), _pretty(got), f"golden/{golden.name}", "now", n=2)
        pytest.fail(f"{name}: the export changed\n" + "\n".join(list(diff)[:200]), pytrace=False)


def _pretty(text: str) -> list[str]:
    """Each span's JSON spread over lines, so that a diff points at the attribute that changed."""
    return [line for record in text.splitlines() for line in json.dumps(json.loads(record), indent=1, ensure_ascii=False).splitlines()]


@pytest.mark.parametrize("mode", BENCH)
def test_the_benchmark_pipeline_exports_the_same_spans(mode, tmp_path):
    check(f"bench-{mode}", canonical(capture(f"bench:{mode}", tmp_path)))


@pytest.mark.parametrize("name", PLAIN_EXAMPLES)
def test_the_examples_export_the_same_spans(name, tmp_path):
    check(f"example-{name}", canonical(capture(f"example:{name}", tmp_path)))


@pytest.mark.heavy
@pytest.mark.parametrize("name_args", LIBRARY_EXAMPLES, ids=["-".join(a) for a in LIBRARY_EXAMPLES])
def test_the_library_examples_export_the_same_spans(name_args, tmp_path):
    name, *args = name_args
    check("example-" + "".join(name_args), canonical(capture(f"example:{name}", tmp_path, *args)))


@pytest.mark.heavy
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_anthropic_example_exports_the_same_spans(stream, tmp_path, anthropic_server):  # noqa: F811 - the fixture
    url, _ = anthropic_server
    spans = capture("example:anthropic_citations", tmp_path, *(["--stream"] if stream else []), env=anthropic_env(url))
    check("example-anthropic_citations" + ("--stream" if stream else ""), canonical(spans, loopback(url)))


@pytest.mark.heavy
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_openai_example_exports_the_same_spans(stream, tmp_path, chat_server):
    url, _ = chat_server
    spans = capture("example:openai_rag", tmp_path, *(["--stream"] if stream else []), env=openai_env(url))
    check("example-openai_rag" + ("--stream" if stream else ""), canonical(spans, loopback(url)))
