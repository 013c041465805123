"""Every example in examples/ runs, in a subprocess, and does what its docstring says.

Each example takes an exporter argument; the tests pass ``jsonl:PATH`` and check the exported
spans (names, parents, stage facts, figures), as well as what the example printed. The
OpenAI-compatible client runs against a local chat-completions server, the OTLP example against a
local OTLP/HTTP receiver that decodes the protobuf. The demo and the report/eval example on its
output run the real models (heavy).
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loopback import ANSWER, QuietHandler, serve
from ragtrace._internal.export.otlp_json import attributes_to_dict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
QUICK_EXAMPLES = ["quickstart", "decorators_only", "context_managers", "async_streaming", "redaction", "framework_documents"]


# --- helpers ----------------------------------------------------------------------------------
def example_env(**extra: str) -> dict[str, str]:
    """The environment minus anything that would change ragtrace's or the exporters' behaviour."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGTRACE_", "OPENAI_"))}
    # PYTHONPATH: the ragtrace of this checkout, whatever the venv's editable install points at
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), **extra)
    return env


def run(script: Path, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=env or example_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_ok(name: str, *args: str, cwd: Path, env: dict[str, str] | None = None, key_warning: bool = False) -> str:
    """The example's output; it ran without a hash key, so ragtrace's random-key warning is in its
    log exactly when ``key_warning`` (an exported value depends on the key), as one line."""
    done = run(EXAMPLES / f"{name}.py", *args, cwd=cwd, env=env)
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    warned = [line for line in done.stderr.splitlines() if "no hash key" in line]
    assert len(warned) == key_warning, done.stderr
    return done.stdout


def read_spans(path: Path) -> list[dict[str, Any]]:
    """The spans of an OTLP/JSON lines file: name, ids, parent, attributes, resource, raw JSON."""
    spans = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource_spans in json.loads(line)["resourceSpans"]:
            resource = attributes_to_dict(resource_spans.get("resource", {}).get("attributes", []))
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    spans.append(
                        {
                            "name": span["name"],
                            "trace": span["traceId"],
                            "id": span["spanId"],
                            "parent": span.get("parentSpanId") or None,
                            "attributes": attributes_to_dict(span.get("attributes", [])),
                            "resource": resource,
                            "raw": json.dumps(span, ensure_ascii=False),
                        }
                    )
    return spans


def by_trace(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        traces.setdefault(span["trace"], []).append(span)
    return traces


def root_of(trace: list[dict[str, Any]]) -> dict[str, Any]:
    roots = [s for s in trace if s["parent"] is None]
    assert len(roots) == 1, [s["name"] for s in roots]
    assert all(s["parent"] == roots[0]["id"] for s in trace if s is not roots[0]), "stage spans are children of the root"
    return roots[0]


def stage(trace: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [s for s in trace if s["attributes"].get("rag.stage") == name]
    assert len(found) == 1, f"expected one {name} span, got {[s['name'] for s in trace]}"
    return found[0]


def figures(span: dict[str, Any]) -> dict[str, Any]:
    return {k.removeprefix("rag.metrics."): v for k, v in span["attributes"].items() if k.startswith("rag.metrics.")}


# --- the console tree, for every self-contained example ------------------------------------------
@pytest.mark.parametrize("name", QUICK_EXAMPLES)
def test_example_prints_span_trees_and_figures(name, tmp_path):
    out = run_ok(name, cwd=tmp_path, key_warning=name == "redaction")  # redact mode: rag.query.hash
    assert re.search(r"^trace [0-9a-f]{32}$", out, re.M), out
    assert re.search(r"^invoke_workflow \S+ +[\d.]+ ms", out, re.M), out
    assert re.search(r"^│  recall_proxy +\d\.\d\d$", out, re.M), out
    assert re.search(r"^[├└]─ assemble_context ", out, re.M), out
    assert re.search(r"^└─ chat \S+ .*cites \[", out, re.M), out


def test_every_example_has_a_docstring_a_run_line_and_a_test():
    for script in sorted(EXAMPLES.glob("*.py")):
        source = script.read_text(encoding="utf-8")
        assert source.startswith('"""'), script.name
        assert f"examples/{script.name}" in source.split('"""')[1], f"{script.name}: docstring says how to run it"
        assert len(source.splitlines()) <= 100, f"{script.name} is meant to be short"
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for script in EXAMPLES.glob("*.py"):
        assert script.name in readme, f"examples/README.md doesn't list {script.name}"


# --- decorators only ----------------------------------------------------------------------------
def test_decorators_only(tmp_path):
    out = run_ok("decorators_only", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)
    assert "A: Refunds are paid back to the original card within 5 business days. [1]" in out
    assert "A: Shipping is free for orders over 50 euros. [1]" in out

    traces = by_trace(read_spans(tmp_path / "spans.jsonl"))
    assert len(traces) == 2
    for trace in traces.values():
        root = root_of(trace)
        assert sorted(s["name"] for s in trace) == sorted(
            [
                "invoke_workflow support-qa",
                "embeddings hashed-words-16",
                "retrieval kb",
                "rerank word-overlap",
                "assemble_context",
                "chat extractive",
            ]
        )
        assert root["attributes"]["rag.pipeline.version"] == "1"
        assert root["resource"]["service.name"] == "decorators-example"
        assert stage(trace, "embed")["attributes"]["gen_ai.embeddings.dimension.count"] == 16
        assert len(stage(trace, "retrieve")["attributes"]["rag.retrieval.chunk_ids"]) == 3
        assert stage(trace, "rerank")["attributes"]["rag.rerank.output_count"] == 2
        assembled = stage(trace, "assemble")["attributes"]
        assert assembled["rag.context.inclusion_method"] == "located"  # a prompt the user built
        assert assembled["rag.context.positions"] == [1, 2]
        assert stage(trace, "generate")["attributes"]["rag.citation.conformant"] is True
        got = figures(root)
        assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 2, 1)
        assert math.isclose(got["recall_proxy"], 1 / 3)
        assert math.isclose(got["context_precision"], 2 / 3)
        assert got["context_utilization"] == 0.5


# --- context managers ---------------------------------------------------------------------------
def test_context_managers(tmp_path):
    out = run_ok("context_managers", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)
    assert "(left out: pol-returns)" in out
    assert "A: Refunds take 5 business days [1]; store credit is immediate [2]." in out
    printed = eval(out.strip().splitlines()[-1])  # the run.metrics dict the example prints  # noqa: S307
    assert printed["recall_proxy"] == 0.4 and printed["cited_positions"] == [1, 2]

    (trace,) = by_trace(read_spans(tmp_path / "spans.jsonl")).values()
    root = root_of(trace)
    assert root["name"] == "invoke_workflow refund-bot"
    assert root["attributes"]["rag.query.id"] == "q-refunds"
    embed = stage(trace, "embed")["attributes"]
    assert (embed["gen_ai.embeddings.dimension.count"], embed["gen_ai.usage.input_tokens"]) == (1536, 7)
    rerank = stage(trace, "rerank")["attributes"]
    assert rerank["rag.rerank.output_ids"] == ["pol-refunds", "pol-refunds-2019", "pol-store-credit", "pol-returns"]
    assembled = stage(trace, "assemble")["attributes"]
    assert assembled["rag.context.inclusion_method"] == "recorded"
    assert assembled["rag.context.chunk_ids"] == ["pol-refunds", "pol-store-credit"]
    assert assembled["rag.context.max_tokens"] == 40
    assert dict(zip(assembled["rag.context.dropped_ids"], assembled["rag.context.dropped_reasons"])) == {
        "pol-refunds-2019": "stale",
        "pol-returns": "over_budget",
        "pol-shipping": "reranked_out",
    }
    assert assembled["rag.context.message_indexes"] == [1, 1]  # both in the user message
    generated = stage(trace, "generate")
    assert generated["name"] == "chat gpt-4o-mini"
    assert generated["attributes"]["gen_ai.usage.input_tokens"] == 96
    assert generated["attributes"]["gen_ai.usage.output_tokens"] == 14
    assert generated["attributes"]["rag.citation.ids"] == ["pol-refunds", "pol-store-credit"]
    assert [m["role"] for m in json.loads(generated["attributes"]["gen_ai.input.messages"])] == ["system", "user"]
    got = figures(root)
    assert (got["retrieved"], got["in_context"], got["cited"], got["wasted_context_tokens"]) == (5, 2, 2, 0)
    assert (got["context_precision"], got["recall_proxy"], got["context_utilization"]) == (0.4, 0.4, 1.0)


# --- async with streaming -----------------------------------------------------------------------
def test_async_streaming_keeps_concurrent_pipelines_apart(tmp_path):
    out = run_ok("async_streaming", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)
    assert "A: Electronics carry a two-year warranty. [1]" in out
    assert out.count("in_context=2 cited=1 recall_proxy=0.5") == 3

    expected = {
        "How long do refunds take?": "faq-refunds",
        "Is shipping free?": "faq-shipping",
        "What warranty do electronics carry?": "faq-warranty",
    }
    traces = by_trace(read_spans(tmp_path / "spans.jsonl"))
    assert len(traces) == 3
    seen = {}
    for trace in traces.values():
        root = root_of(trace)
        question = root["attributes"]["input.value"]
        retrieved = stage(trace, "retrieve")["attributes"]
        generated = stage(trace, "generate")["attributes"]
        assert retrieved["gen_ai.retrieval.query.text"] == question
        assert retrieved["rag.retrieval.chunk_ids"][0] == expected[question]
        assert generated["gen_ai.request.stream"] is True
        assert generated["rag.citation.ids"] == [expected[question]]  # its own chunks, not another task's
        output = json.loads(generated["gen_ai.output.messages"])[0]["parts"][0]["content"]
        assert output == f"{stage(trace, 'retrieve')['attributes']['retrieval.documents.0.document.content']} [1]"
        assert (figures(root)["in_context"], figures(root)["cited"]) == (2, 1)
        seen[question] = True
    assert set(seen) == set(expected)


# --- redaction ----------------------------------------------------------------------------------
def test_redaction_modes_keep_secrets_in_and_figures_equal(tmp_path):
    out = run_ok("redaction", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, key_warning=True)
    lines = [line.split(None, 1) for line in out.splitlines() if line.split(None, 1)[0] in ("full", "redact", "hash")]
    assert [mode for mode, _ in lines] == ["full", "redact", "hash"]
    assert len({rest for _, rest in lines}) == 1  # the same figures in every mode

    traces = {root_of(t)["attributes"]["rag.content_mode"]: t for t in by_trace(read_spans(tmp_path / "spans.jsonl")).values()}
    assert set(traces) == {"full", "redact", "hash"}
    secrets = ("jane.doe@example.com", "4111 1111 1111 1111", "billing@shop.example")
    for mode, trace in traces.items():
        raw = "\n".join(s["raw"] for s in trace)
        for secret in secrets:
            assert secret not in raw, f"{secret!r} leaked in {mode} mode"
    full = "\n".join(s["raw"] for s in traces["full"])
    assert "I am <email>, why was card <card> declined?" in full  # content kept, through the redactor
    assert "write to <email>" in full
    for mode in ("redact", "hash"):
        raw = "\n".join(s["raw"] for s in traces[mode])
        for text in ("Declined cards", "card <card>", "Daily card limits", "Your bank"):
            assert text not in raw, f"content {text!r} exported in {mode} mode"
        assert stage(traces[mode], "retrieve")["attributes"]["rag.retrieval.chunk_ids"] == ["kb-declined", "kb-limits"]
    assert "rag.retrieval.content_hashes" in stage(traces["hash"], "retrieve")["attributes"]
    assert "rag.retrieval.content_hashes" not in stage(traces["redact"], "retrieve")["attributes"]
    assert figures(root_of(traces["full"])) == figures(root_of(traces["redact"])) == figures(root_of(traces["hash"]))
    assert figures(root_of(traces["hash"]))["cited"] == 1


# --- judge scores from another process -----------------------------------------------------------
def test_judge_scores_join_their_runs_in_the_report(tmp_path):
    out = run_ok("judge_scores", str(tmp_path / "judge"), cwd=tmp_path)
    runs = by_trace(read_spans(tmp_path / "judge" / "runs.jsonl"))
    scores = read_spans(tmp_path / "judge" / "scores.jsonl")
    assert len(runs) == 6 and len(scores) == 6
    for score in scores:  # the judge's spans sit in the runs' traces, under their roots
        root = root_of(runs[score["trace"]])
        assert score["parent"] == root["id"] and score["name"] == "evaluation groundedness"
        assert score["resource"]["service.name"] == "judge" and root["resource"]["service.name"] == "qa-app"
    assert "unsupported: It was invented in 1962" in "".join(s["raw"] for s in scores)  # full mode: the explanation
    # the quadrants of the six canned answers, worked out by hand: two cite and are grounded, one
    # cites and overclaims, one is grounded without citing, two neither cite nor are grounded
    table = out.split("recall_proxy (high ≥ 0.2) × groundedness (high ≥ 0.7): 6 runs")[1]
    counts = {}
    for line in table.splitlines()[3:7]:
        cells = re.split(r"\s{2,}", line.strip())
        counts[cells[2]] = int(cells[3])
    assert counts == {
        "healthy": 2,
        "cites its sources but claims more than they say": 1,
        "right without leaning on retrieval (or citing badly)": 1,
        "retrieval or generation is broken": 2,
    }
    assert "Retrieval or generation is broken in 33% of scored runs" in out


# --- LangChain / LlamaIndex shapes --------------------------------------------------------------
def test_framework_documents(tmp_path):
    out = run_ok("framework_documents", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)
    assert "'duplicate_chunks': 1" in out

    (trace,) = by_trace(read_spans(tmp_path / "spans.jsonl")).values()
    root = root_of(trace)
    retrievals = {s["name"]: s["attributes"] for s in trace if s["attributes"].get("rag.stage") == "retrieve"}
    dense, sparse = retrievals["retrieval chroma"], retrievals["retrieval bm25"]
    # (Document, score) pairs: ids from Document.id, text from page_content, the pair's score
    assert dense["rag.retrieval.chunk_ids"] == ["guide-config", "guide-install"]
    assert [d["score"] for d in json.loads(dense["gen_ai.retrieval.documents"])] == [0.82, 0.61]
    assert dense["retrieval.documents.0.document.content"].startswith("The agent reads its settings")
    # NodeWithScore(TextNode): ids from node.id_, text from the node, the wrapper's score
    assert sparse["rag.retrieval.chunk_ids"] == ["guide-proxy", "guide-config"]
    assert [d["score"] for d in json.loads(sparse["gen_ai.retrieval.documents"])] == [7.1, 5.4]
    assert sparse["retrieval.documents.0.document.content"].startswith("Behind a proxy")
    assembled = stage(trace, "assemble")["attributes"]
    assert assembled["rag.context.chunk_ids"] == ["guide-config", "guide-install", "guide-proxy"]
    assert assembled["rag.context.dropped_reasons"] == ["duplicate"]
    assert stage(trace, "generate")["attributes"]["rag.citation.ids"] == ["guide-config", "guide-proxy"]
    got = figures(root)
    assert (got["retrieved"], got["in_context"], got["cited"], got["duplicate_chunks"]) == (3, 3, 2, 1)
    assert math.isclose(got["recall_proxy"], 2 / 3)


# --- the examples' lines changed against the uninstrumented app --------------------------------
def without_ragtrace_lines(name: str, tmp_path: Path) -> tuple[Path, list[str]]:
    """The example with its ``# ragtrace`` lines removed (the plain app), and those lines."""
    body = (EXAMPLES / f"{name}.py").read_text(encoding="utf-8").split('"""', 2)[2].splitlines()
    ours = [line for line in body if line.endswith("# ragtrace")]
    assert not any("ragtrace" in line for line in body if line not in ours)
    plain = tmp_path / f"{name}_plain.py"
    plain.write_text("\n".join(line for line in body if line not in ours) + "\n", encoding="utf-8")
    return plain, [line.strip().split("(")[0] for line in ours]


# --- LangChain, turned on with one line ----------------------------------------------------------
def test_langchain_rag(tmp_path):
    out = run_ok("langchain_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)
    answers = re.findall(r"^A: (.+)$", out, re.M)
    assert len(answers) == 2 and answers[0].endswith("[1]")

    traces = by_trace(read_spans(tmp_path / "spans.jsonl"))
    assert len(traces) == 2
    lcel, qa = sorted(traces.values(), key=lambda t: root_of(t)["name"])
    assert [root_of(t)["name"] for t in (lcel, qa)] == ["invoke_workflow RunnableSequence", "invoke_workflow retrieval_chain"]
    for trace, method in ((lcel, "located"), (qa, "declared")):
        assert sorted(s["attributes"]["rag.stage"] for s in trace) == ["assemble", "generate", "pipeline", "retrieve"]
        assert stage(trace, "assemble")["attributes"]["rag.context.inclusion_method"] == method
        assert root_of(trace)["resource"]["service.name"] == "langchain-rag"
        retrieved = stage(trace, "retrieve")["attributes"]["rag.retrieval.chunk_ids"]
        got = figures(root_of(trace))
        assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 1)
        assert math.isclose(got["recall_proxy"], 1 / 3)
    assert stage(lcel, "generate")["attributes"]["rag.citation.ids"] == [retrieved[0]]
    assert stage(qa, "generate")["attributes"]["rag.citation.ids"] == [retrieved[1]]


def test_langchain_rag_without_its_ragtrace_lines_is_the_same_app(tmp_path):
    """The lines changed against the uninstrumented app (docs/integrations.md counts them)."""
    plain, ours = without_ragtrace_lines("langchain_rag", tmp_path)
    assert ours == ["import ragtrace  # ragtrace", "ragtrace.configure", "ragtrace.instrument"]
    done = run(plain, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == run_ok("langchain_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)


# --- an agent (LangChain create_agent), turned on with one line -----------------------------------
def test_agentic_rag(tmp_path):
    pytest.importorskip("langchain.agents", reason="langchain 1.x (create_agent) needs Python >= 3.11")
    out = run_ok("agentic_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)
    assert re.findall(r"^A: (.+)$", out, re.M) == ["A refund takes 5 business days [kb-refunds]; returns are open for 30 days [kb-returns]."]
    (trace,) = by_trace(read_spans(tmp_path / "spans.jsonl")).values()
    (root,) = [s for s in trace if s["parent"] is None]
    tools = {s["id"] for s in trace if s["attributes"]["rag.stage"] == "tool"}
    for span in trace:  # each retrieval under its tool call, the rest under the root
        if span is not root:
            assert (span["parent"] in tools) is (span["attributes"]["rag.stage"] == "retrieve")
            assert span["parent"] in tools or span["parent"] == root["id"]
    assert root["name"] == "invoke_workflow LangGraph" and root["resource"]["service.name"] == "agentic-rag"
    assert sorted(s["attributes"]["rag.stage"] for s in trace) == ["assemble", "generate", "generate", "generate", "pipeline", "retrieve", "retrieve", "tool", "tool"]
    assert [s["attributes"]["rag.generation.role"] for s in trace if s["attributes"]["rag.stage"] == "generate"] == ["tool_choice", "tool_choice", "answer"]
    rounds = [s["attributes"]["rag.retrieval.chunk_ids"] for s in trace if s["attributes"]["rag.stage"] == "retrieve"]
    assert rounds == [["kb-refunds", "kb-credit"], ["kb-returns", "kb-refunds"]]
    assert stage(trace, "assemble")["attributes"]["rag.context.chunk_ids"] == ["kb-refunds", "kb-credit", "kb-returns"]
    # R = {refunds, credit, returns} (refunds twice), C = R, K = {refunds (round 1), returns (round 2)}
    got = figures(root)
    assert (got["retrieved"], got["duplicate_chunks"], got["in_context"], got["cited"], got["cited_positions"]) == (3, 1, 3, 2, [1, 3])
    assert math.isclose(got["recall_proxy"], 2 / 3) and math.isclose(got["context_utilization"], 2 / 3)
    assert root["attributes"]["rag.retrieval.rounds"] == 2


def test_agentic_rag_without_its_ragtrace_lines_is_the_same_app(tmp_path):
    pytest.importorskip("langchain.agents", reason="langchain 1.x (create_agent) needs Python >= 3.11")
    plain, ours = without_ragtrace_lines("agentic_rag", tmp_path)
    assert ours == ["import ragtrace  # ragtrace", "ragtrace.configure", "ragtrace.instrument"]
    done = run(plain, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == run_ok("agentic_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)


# --- LlamaIndex, turned on with one line ---------------------------------------------------------
def test_llamaindex_rag(tmp_path):
    out = run_ok("llamaindex_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)
    answers = re.findall(r"^A(?: \(streamed\))?: (.+)$", out, re.M)
    assert len(answers) == 2 and answers[0] == answers[1]
    cited = re.fullmatch(r".+ \[(\w+)\]", answers[0]).group(1)

    traces = by_trace(read_spans(tmp_path / "spans.jsonl"))
    assert len(traces) == 2  # the plain and the streamed query
    for trace in traces.values():
        root = root_of_pipeline(trace)
        assert root["name"] == "invoke_workflow RetrieverQueryEngine"
        assert sorted(s["attributes"]["rag.stage"] for s in trace) == ["assemble", "embed", "generate", "pipeline", "retrieve"]
        retrieved = stage(trace, "retrieve")["attributes"]["rag.retrieval.chunk_ids"]
        assembled = stage(trace, "assemble")["attributes"]
        assert assembled["rag.context.inclusion_method"] == "declared"
        assert assembled["rag.context.chunk_ids"] == retrieved
        assert stage(trace, "generate")["attributes"]["rag.citation.ids"] == [cited] == retrieved[:1]
        got = figures(root)
        assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"]) == (3, 3, 1, [1])
        assert math.isclose(got["recall_proxy"], 1 / 3)


def root_of_pipeline(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """The root of a trace whose embed span sits under its retrieve span."""
    (root,) = [s for s in trace if s["parent"] is None]
    by_id = {s["id"]: s for s in trace}
    for span in trace:
        if span is not root:
            parent = by_id[span["parent"]]
            assert parent is root or (span["attributes"]["rag.stage"], parent["attributes"]["rag.stage"]) == ("embed", "retrieve")
    return root


def test_llamaindex_rag_without_its_ragtrace_lines_is_the_same_app(tmp_path):
    plain, ours = without_ragtrace_lines("llamaindex_rag", tmp_path)
    assert ours == ["import ragtrace  # ragtrace", "ragtrace.configure", "ragtrace.instrument"]
    done = run(plain, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == run_ok("llamaindex_rag", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path)


# --- the OpenAI SDK against a chat-completions server on loopback (tests/loopback.py) ------------
def openai_env(url: str) -> dict[str, str]:
    """With a hash key: the vector store's chunk ids are file_id#digest (see the warning test)."""
    return example_env(OPENAI_BASE_URL=f"{url}/v1", OPENAI_API_KEY="sk-test-key", OPENAI_VECTOR_STORE_ID="vs_kb", RAGTRACE_HASH_KEY="examples")


def test_openai_rag_without_a_hash_key_warns_once_that_its_chunk_ids_differ_between_processes(tmp_path, chat_server):
    url, _ = chat_server
    env = openai_env(url)
    del env["RAGTRACE_HASH_KEY"]
    done = run(EXAMPLES / "openai_rag.py", f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert "OpenAI vector-store chunk ids (file_id#digest) differ between processes" in line and "RAGTRACE_HASH_KEY" in line


@pytest.mark.parametrize("stream", [False, True], ids=["completion", "stream"])
def test_openai_rag_against_a_local_server(tmp_path, chat_server, stream):
    """The app searches the store (3 chunks, two of one file), shows 2 as [1], [2], and the answer
    cites [1]: retrieved 3, in context 2 (located), cited 1; recall 1/3, utilisation 1/2."""
    url, received = chat_server
    args = ["--stream"] if stream else []
    out = run_ok("openai_rag", *args, f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=openai_env(url))
    assert f"A: {ANSWER}" in out

    search, request = received
    assert search["path"] == "/v1/vector_stores/vs_kb/search" and search["body"]["max_num_results"] == 3
    assert request["path"] == "/v1/chat/completions"
    assert request["authorization"] == "Bearer sk-test-key"
    body = request["body"]
    assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0 and bool(body.get("stream")) is stream
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert "[1] Refunds reach the original card within 5 business days." in user["content"]
    assert "[2] Store credit is issued immediately instead of a refund." in user["content"]
    assert "Shipping" not in user["content"]  # retrieved, not shown
    assert user["content"].endswith("Question: How long does a refund take?")

    (trace,) = by_trace(read_spans(tmp_path / "spans.jsonl")).values()
    root = root_of(trace)
    assert root["name"] == "invoke_workflow openai"  # the automatic root the search opened
    assert {s["parent"] for s in trace if s is not root} == {root["id"]}
    assert sorted(s["attributes"]["rag.stage"] for s in trace) == ["assemble", "generate", "pipeline", "retrieve"]
    retrieved = stage(trace, "retrieve")["attributes"]["rag.retrieval.chunk_ids"]
    assert [i.split("#")[0] for i in retrieved] == ["file-refunds", "file-refunds", "file-shipping"] and len(set(retrieved)) == 3
    assembled = stage(trace, "assemble")["attributes"]
    assert assembled["rag.context.inclusion_method"] == "located"  # messages the app built
    assert assembled["rag.context.chunk_ids"] == retrieved[:2]
    generated = stage(trace, "generate")
    attributes = generated["attributes"]
    assert generated["name"] == "chat gpt-4o-mini"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (42, 9)
    assert attributes["rag.citation.ids"] == retrieved[:1]
    assert json.loads(attributes["gen_ai.input.messages"])[1]["parts"][0]["content"] == user["content"]
    assert attributes["gen_ai.response.id"] == "chatcmpl-test-1"
    assert attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert attributes.get("gen_ai.request.stream", False) is stream
    got = figures(root)
    assert got["inclusion_method"] == "located"
    assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"]) == (3, 2, 1, [1])
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_utilization"] == 0.5


def test_openai_rag_without_its_ragtrace_lines_is_the_same_app(tmp_path, chat_server):
    """One line, ``ragtrace.instrument()``, with ``import ragtrace`` two (and ``configure``, which
    an app that already exports OpenTelemetry does not need)."""
    url, _ = chat_server
    assert_same_app_without_ragtrace("openai_rag", tmp_path, openai_env(url))


def assert_same_app_without_ragtrace(name: str, tmp_path: Path, env: dict[str, str]) -> None:
    """The example without its three ``# ragtrace`` lines prints the same, plain and ``--stream``."""
    plain, ours = without_ragtrace_lines(name, tmp_path)
    assert ours == ["import ragtrace  # ragtrace", "ragtrace.configure", "ragtrace.instrument"]
    for args in ([], ["--stream"]):
        done = run(plain, *args, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout == run_ok(name, *args, f"jsonl:{tmp_path / 'spans.jsonl'}", cwd=tmp_path, env=env)


def test_openai_rag_says_what_is_missing_without_a_key(tmp_path):
    done = run(EXAMPLES / "openai_rag.py", cwd=tmp_path)
    assert done.returncode != 0
    assert "set OPENAI_API_KEY and OPENAI_VECTOR_STORE_ID" in done.stderr


# --- OTLP/HTTP to a local receiver --------------------------------------------------------------
class OtlpReceiver(QuietHandler):
    received: list[tuple[str, str | None, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802
        self.received.append((self.path, self.headers.get("Content-Type"), self.body()))
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        self.reply(ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")


def any_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def test_otlp_export_reaches_a_receiver(tmp_path):
    trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    OtlpReceiver.received = []
    for url in serve(OtlpReceiver):
        out = run_ok("otlp_export", cwd=tmp_path, env=example_env(OTEL_EXPORTER_OTLP_ENDPOINT=url))
    assert f"spans flushed to {url}/v1/traces" in out
    assert OtlpReceiver.received, "nothing arrived at the receiver"

    spans = []
    for path, content_type, payload in OtlpReceiver.received:
        assert (path, content_type) == ("/v1/traces", "application/x-protobuf")
        request = trace_service.ExportTraceServiceRequest()
        request.ParseFromString(payload)
        for resource_spans in request.resource_spans:
            resource = {a.key: any_value(a.value) for a in resource_spans.resource.attributes}
            assert resource["service.name"] == "ops-assistant"
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "ragtrace"
                spans += [(s, {a.key: any_value(a.value) for a in s.attributes}) for s in scope_spans.spans]
    assert sorted(s.name for s, _ in spans) == sorted(
        ["invoke_workflow ops-assistant", "retrieval runbooks", "assemble_context", "chat gpt-4o-mini"]
    )
    (root,) = [attributes for span, attributes in spans if not span.parent_span_id]
    assert root["rag.pipeline.version"] == "2024-06"
    assert (root["rag.metrics.retrieved"], root["rag.metrics.in_context"], root["rag.metrics.cited"]) == (3, 2, 2)
    assert math.isclose(root["rag.metrics.recall_proxy"], 2 / 3)
    assert root["rag.metrics.context_utilization"] == 1.0
    assert len({span.trace_id for span, _ in spans}) == 1


# --- the real demo and the report/eval commands on its output (heavy) ----------------------------
STAGE_LINES = (
    "embeddings all-MiniLM-L6-v2",
    "retrieval ragtrace-docs",
    "rerank bm25",
    "assemble_context",
    "chat SmolLM2-135M-Instruct",
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[str, Any]:
    """Run the offline demo once on two questions; its output feeds the two heavy tests."""
    try:
        import xllamacpp  # noqa: F401 - the demo's LLM (make test installs the demo extra)
    except ImportError as error:
        pytest.fail(f"the demo's model packages are not installed ({error}): run make test", pytrace=False)
    folder = tmp_path_factory.mktemp("demo")
    out = folder / "demo.jsonl"
    started = time.perf_counter()
    done = run(ROOT / "examples" / "demo" / "run_demo.py", "--questions", "2", "--out", str(out), cwd=folder, timeout=300)
    return {"done": done, "out": out, "seconds": time.perf_counter() - started, "cwd": folder}


@pytest.mark.heavy
def test_demo_runs_the_real_pipeline(demo):
    done = demo["done"]
    print(f"\ndemo with 2 questions took {demo['seconds']:.1f} s")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    out = done.stdout
    assert len(re.findall(r"^trace [0-9a-f]{32}$", out, re.M)) == 2
    for line in STAGE_LINES:
        assert len(re.findall(rf"^[├└]─ {re.escape(line)}  [\d.]+ ms", out, re.M)) == 2, line
    assert len(re.findall(r"^│  recall_proxy +\d\.\d\d$", out, re.M)) == 2
    assert len(re.findall(r"^│  context_precision +\d\.\d\d$", out, re.M)) == 2
    assert len(re.findall(r"^A: ", out, re.M)) == 2
    assert "6 chunks top=" in out and "6→3" in out and "3 in context" in out

    traces = by_trace(read_spans(demo["out"]))
    assert len(traces) == 2
    for trace in traces.values():
        root = root_of(trace)
        assert root["name"] == "invoke_workflow ragtrace-docs-qa"
        assert sorted(s["name"] for s in trace if s is not root) == sorted(STAGE_LINES)
        assert root["attributes"]["rag.metrics.retrieved"] == 6
        assert root["attributes"]["rag.metrics.in_context"] == 3
        assert "rag.metrics.recall_proxy" in root["attributes"]
        (llm,) = [s["attributes"] for s in trace if s["name"] == "chat SmolLM2-135M-Instruct"]
        # a model name rather than the GGUF file's path, and the parameters the call ran with (its defaults)
        assert (llm["gen_ai.request.model"], llm["gen_ai.response.model"]) == ("SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct-Q4_1")
        assert (llm["gen_ai.request.temperature"], llm["gen_ai.request.max_tokens"]) == (0.0, 64)
    assert len({root_of(t)["attributes"]["session.id"] for t in traces.values()}) == 1
    # the closing line counts the answers citing a chunk they were shown: the exported figures' count
    closing = re.fullmatch(r"(\d+) of (\d+) answers cited a chunk that was in their context", out.rstrip().splitlines()[-1])
    assert closing, out[-500:]
    citing = sum(root_of(t)["attributes"]["rag.metrics.cited"] > 0 for t in traces.values())
    assert (int(closing[1]), int(closing[2])) == (citing, 2)
    assert demo["seconds"] < 120  # well under a minute on 2 cores; loose here so CI noise can't fail it


@pytest.mark.heavy
def test_report_and_eval_on_the_demo_output(demo):
    assert demo["done"].returncode == 0, demo["done"].stderr
    done = run(EXAMPLES / "report_and_eval.py", str(demo["out"]), cwd=demo["cwd"])
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    report, _, evaluation = done.stdout.partition("$ ragtrace eval")
    assert report.startswith("$ ragtrace report")
    assert re.search(r"\b2 traces\b", report), report
    assert re.search(r"\b2 pipeline runs\b", report), report
    assert "recall@k" in evaluation, evaluation
    assert re.search(r"golden queries: 4, matched: 2\b", evaluation), evaluation
    # the two demo questions asked, with the golden labels: every relevant passage is in the top 6
    for question in ("What is the cited-chunk recall proxy?", "What is a golden set?"):
        row = next((line for line in evaluation.splitlines() if line.strip().startswith(question[:30])), None)
        assert row is not None, evaluation
        assert re.search(r"\s1\s+6\s+1\.00\s", row), row  # 1 trace, k=6, recall@6 = 1.00


def test_report_and_eval_without_the_demo_output(tmp_path):
    done = run(EXAMPLES / "report_and_eval.py", str(tmp_path / "missing.jsonl"), cwd=tmp_path)
    assert done.returncode == 2
    assert "run `make demo` first" in done.stderr


def test_golden_set_names_real_corpus_passages():
    corpus = {p.stem for p in (EXAMPLES / "demo" / "corpus").glob("*.md")}
    source = (EXAMPLES / "demo" / "run_demo.py").read_text(encoding="utf-8")
    (assignment,) = [n for n in ast.parse(source).body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "QUESTIONS"]
    lines = [json.loads(line) for line in (EXAMPLES / "golden.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["query"] for line in lines] == ast.literal_eval(assignment.value)
    for line in lines:
        assert line["relevant_ids"] and set(line["relevant_ids"]) <= corpus, line
