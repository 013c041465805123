"""examples/anthropic_citations.py against a local server that answers like the Anthropic Messages
API (the bodies of tests/integrations/anthropic_fake.py, validated by the SDK's types), plain and
streamed, and without its ragtrace lines (the same output).

The app's search ranks store-credit, refunds, shipping (word overlap with the question); the
answer cites result 1 (refunds), then result 0 (store credit). By hand: retrieved 3, in context 3
(provider), cited 2 at positions [1, 2], recall 2/3, weighted recall 9/11, utilisation 2/3,
wasted tokens 9 (the shipping entry: 8 words and a full stop).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from integrations.anthropic_fake import at_result, events, message, sse
from loopback import QuietHandler, serve
from test_examples import EXAMPLES, assert_same_app_without_ragtrace, by_trace, example_env, figures, read_spans, root_of, run, run_ok, stage

BODY = message(
    [
        ("Refunds take 5 business days.", [at_result(1, "kb/refunds", "Refunds reach the original card within 5 business days.", "Refunds")]),
        (" Store credit is instant.", [at_result(0, "kb/store-credit", "Store credit is issued immediately instead of a refund.", "Store credit")]),
    ]
)


class Messages(QuietHandler):
    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        sent = json.loads(self.body())
        self.received.append({"path": self.path, "key": self.headers.get("x-api-key") or self.headers.get("authorization"), "body": sent})
        if sent.get("stream"):
            self.reply(sse(events(BODY)), "text/event-stream")
        else:
            self.reply(json.dumps(BODY).encode(), "application/json")


@pytest.fixture
def anthropic_server():
    Messages.received = []
    for url in serve(Messages):
        yield url, Messages.received


def anthropic_env(url: str) -> dict[str, str]:
    return example_env(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="sk-ant-test", RAGTRACE_HASH_KEY="examples")


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_anthropic_citations_against_a_local_server(tmp_path: Path, anthropic_server, stream):
    url, received = anthropic_server
    args = ["--stream"] if stream else []
    out = run_ok("anthropic_citations", *args, f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=anthropic_env(url))
    assert "A: Refunds take 5 business days. Store credit is instant." in out
    assert "Cited: kb/refunds, kb/store-credit" in out
    (request,) = received
    assert request["path"] == "/v1/messages" and "sk-ant-test" in request["key"] and bool(request["body"].get("stream")) is stream
    assert [b.get("source") for b in request["body"]["messages"][0]["content"]] == ["kb/store-credit", "kb/refunds", "kb/shipping", None]

    (trace,) = by_trace(read_spans(tmp_path / "spans.jsonl")).values()
    ours = [s for s in trace if "rag.stage" in s["attributes"]]
    assert sorted(s["attributes"]["rag.stage"] for s in ours) == ["assemble", "generate", "pipeline", "retrieve"]
    # the SDK's own span (anthropic's built-in tracing, on wherever a tracer provider is set) sits
    # inside ragtrace's generate span: one trace
    (sdk,) = [s for s in trace if "rag.stage" not in s["attributes"]]
    assert sdk["name"] == "anthropic.messages.create" and sdk["parent"] == stage(trace, "generate")["id"]
    root = root_of(ours)
    assert root["name"] == "invoke_workflow anthropic" and root["resource"]["service.name"] == "anthropic-citations"
    assert stage(trace, "assemble")["attributes"]["rag.context.inclusion_method"] == "provider"
    assert stage(trace, "generate")["attributes"]["rag.citation.ids"] == ["kb/refunds", "kb/store-credit"]
    got = figures(root)
    assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"]) == (3, 3, 2, [1, 2])
    assert math.isclose(got["recall_proxy"], 2 / 3) and math.isclose(got["recall_proxy_weighted"], 9 / 11)
    assert math.isclose(got["context_utilization"], 2 / 3) and got["wasted_context_tokens"] == 9


def test_ragtrace_report_recomputes_the_same_figures_from_the_export(tmp_path: Path, anthropic_server):
    """The CLI reads the provider's placements and citations back and gets the online figures (a
    difference would make the run not measurable: "spans missing")."""
    url, _ = anthropic_server
    spans = tmp_path / "spans.jsonl"
    run_ok("anthropic_citations", f"jsonl:{spans}", cwd=tmp_path, env=anthropic_env(url))
    command = [sys.executable, "-m", "ragtrace.cli", "report", "--json", "--no-config", str(spans)]
    done = subprocess.run(command, cwd=tmp_path, env=anthropic_env(url), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["traces"]
    assert (row["inclusion"], row["verdict"], row["recorded_mismatch"], row["status"]) == ("provider", "ok", [], []), row
    assert (row["retrieved"], row["in_context"], row["cited"], row["cited_positions"], row["wasted_context_tokens"]) == (3, 3, 2, [1, 2], 9)
    assert math.isclose(row["recall_proxy"], 2 / 3) and math.isclose(row["recall_proxy_weighted"], 9 / 11)


def test_anthropic_citations_without_its_ragtrace_lines_is_the_same_app(tmp_path: Path, anthropic_server):
    url, _ = anthropic_server
    assert_same_app_without_ragtrace("anthropic_citations", tmp_path, anthropic_env(url))


def test_anthropic_citations_says_what_is_missing_without_a_key(tmp_path: Path):
    done = run(EXAMPLES / "anthropic_citations.py", cwd=tmp_path)
    assert done.returncode != 0 and "set ANTHROPIC_API_KEY" in done.stderr
