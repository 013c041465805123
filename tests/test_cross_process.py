"""Pipelines that cross a process, end to end: process A (this test) retrieves and assembles, then
hands the prompt to process B with ``ragtrace.inject``; B answers inside
``ragtrace.continue_pipeline``. Two real processes over HTTP on 127.0.0.1 (B is
``cross_process_apps.py``, exporting its spans to a JSON-lines file), and a multiprocessing queue
hand-off. Also the two topologies that need no new API: the answer comes back to A, and the
retrieval happens in another service that returns documents with ids.
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import subprocess
import sys
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ragtrace
from cross_process_apps import DOCS, MARKER, QUESTION, answer_for, assemble_part, documents, one_process, queue_worker
from loopback import QuietHandler, serve
from ragtrace._internal.core import keyed
from ragtrace._internal import names

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# the pipeline's figures, worked by hand (cross_process_apps.DOCS): six results, the id-less copy
# of the first is the first again (5 distinct, 1 duplicate); the prompt shows refunds, credit and
# shipping (the copy is dropped as a duplicate); the answer cites 1 and 3 and a made-up 9
TRUTH = {
    "retrieved": 5,
    "duplicate_chunks": 1,
    "in_context": 3,
    "context_precision": 3 / 5,
    "cited": 2,
    "invalid_citations": 1,
    "out_of_context_citations": 0,
    "unknown_citations": 1,
    "recall_proxy": 2 / 5,
    "recall_proxy_weighted": (1 + 1 / 3) / (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5),
    "context_utilization": 2 / 3,
    "cited_positions": [1, 3],
}


def is_truth(figures: dict[str, Any]) -> bool:
    """The hand-worked figures; the wasted tokens are those of the one uncited chunk shown (credit)."""
    expected = {**TRUTH, "wasted_context_tokens": ragtrace.SimpleTokenizer().count(DOCS[1][2])}
    return figures.keys() == expected.keys() and all(figures[k] == pytest.approx(v) for k, v in expected.items())


LABELS = {"gen_ai.workflow.name": "support-qa", "rag.pipeline.version": "v3", "rag.pipeline.route": "kb"}


def start_b(spans_path: Path, **env_changes: str | None) -> tuple[subprocess.Popen[str], str]:
    """Process B on a free loopback port, in full content mode: (the process, its URL)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this worktree's ragtrace, as in the test process
    for name, value in env_changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    process = subprocess.Popen(
        [sys.executable, str(TESTS / "cross_process_apps.py"), "--spans", str(spans_path)], stdout=subprocess.PIPE, env=env, text=True
    )
    return process, f"http://127.0.0.1:{int(process.stdout.readline())}"  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def service_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Process B: (its URL, the file its spans go to)."""
    spans_path = tmp_path_factory.mktemp("b") / "b.jsonl"
    process, url = start_b(spans_path)
    try:
        yield url, spans_path
    finally:
        process.terminate()
        process.wait(10)


def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(url + "/answer", json.dumps(body).encode(), {**headers, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def hand_off(url: str, labeller: str, mode: str, *, count: int | None = None, change: Any = None) -> tuple[Any, dict[str, str], dict[str, Any]]:
    """A's side: the pipeline up to its assembly, then the prompt to B with the record."""
    with ragtrace.rag_pipeline("support-qa", query=QUESTION, version="v3", route="kb", capture_content=mode) as run:
        prompt = assemble_part(labeller, count)
        headers: dict[str, str] = {}
        assert ragtrace.inject(headers)
        if change is not None:
            change(headers)
        reply = post(url, {"prompt": prompt, "labeller": labeller}, headers)
    return run, headers, reply


def b_spans(path: Path) -> list[dict[str, Any]]:
    spans = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                spans += scope["spans"]
    return spans


def attribute(span: dict[str, Any], key: str) -> Any:
    for item in span.get("attributes", []):
        if item["key"] == key:
            return next(iter(item["value"].values()))
    return None


def recall_points(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        return json.loads(response.read())


def inflated(token: str) -> str:
    payload = token.split(".")[1]
    return zlib.decompress(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))).decode()


@pytest.mark.parametrize(("labeller", "mode"), [("index", "full"), ("title", "redact")])
def test_one_trace_across_two_processes_with_the_figures_of_one(service_b, spans, labeller, mode) -> None:
    url, b_path = service_b
    golden = one_process(labeller, mode)
    assert is_truth(golden)
    spans.clear()
    before = sum(p["count"] for p in recall_points(url) if p["attributes"] == {**LABELS, "rag.stage": names.STAGE_SEGMENT, "gen_ai.operation.name": "invoke_workflow"})

    run, headers, reply = hand_off(url, labeller, mode)

    assert reply["metrics"] == golden  # B's figures are those of the same pipeline in one process, types included
    assert reply["status"] is None and reply["answer"] == answer_for("", labeller)
    # one trace: B's segment is a child of A's root, where inject was called
    assert reply["trace_id"] == run.trace_id
    segment = next(s for s in b_spans(b_path) if s["spanId"] == reply["span_id"])
    assert segment["traceId"] == run.trace_id and segment["parentSpanId"] == run.span_id
    assert attribute(segment, names.RAG_STAGE) == names.STAGE_SEGMENT
    assert attribute(segment, names.GEN_AI_WORKFLOW_NAME) == "support-qa"
    assert attribute(segment, names.metric_attribute("recall_proxy")) == pytest.approx(0.4)
    generation = next(s for s in b_spans(b_path) if s.get("parentSpanId") == reply["span_id"] and attribute(s, names.RAG_STAGE) == "generate")
    assert attribute(generation, names.RAG_GENERATION_CONTEXT_SPAN_ID) == spans.one("assemble").context.span_id.to_bytes(8, "big").hex()
    # A's root is delegated: no figures of its own, counted once
    root = spans.one("pipeline")
    assert root.attributes[names.RAG_PIPELINE_DELEGATED] is True
    assert root.attributes[names.RAG_METRICS_STATUS] == "delegated"
    assert not [key for key in root.attributes if key.startswith(names.RAG_METRICS_PREFIX) and key != names.RAG_METRICS_STATUS]
    assert run.metrics == {} and run.status == "delegated"
    # B recorded the figure under A's pipeline labels
    points = [p for p in recall_points(url) if p["attributes"] == {**LABELS, "rag.stage": names.STAGE_SEGMENT, "gen_ai.operation.name": "invoke_workflow"}]
    assert sum(p["count"] for p in points) == before + 1
    # the carried header: the record only, never the baggage; in redact mode no content in it
    received = reply["received"]
    assert received["ragtrace-context"] == headers[names.CARRIER_KEY] and received["baggage"] is None
    record = inflated(received["ragtrace-context"])
    assert "kb-refunds" in record  # ids travel
    if mode == "redact":
        assert MARKER not in record and MARKER not in received["ragtrace-context"]
        assert not any(text[:12] in record or title[:8] in record for _, title, text in DOCS)
    else:
        assert "Refund" not in record  # index labels: nothing of the text, in any mode


def _flip(headers: dict[str, str]) -> None:
    token = headers[names.CARRIER_KEY]
    middle = len(token) // 3
    headers[names.CARRIER_KEY] = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]


def test_a_record_that_cant_be_used_gets_its_status_and_the_request_goes_on(service_b, spans) -> None:
    url, _ = service_b
    _, other_headers, _ = hand_off(url, "index", "full")  # a record of another trace, to replay
    outcomes = {
        "remote_context_invalid": hand_off(url, "index", "full", change=_flip)[2],
        "remote_context_missing": hand_off(url, "index", "full", change=lambda h: h.pop(names.CARRIER_KEY))[2],
        "remote_context_too_large": hand_off(url, "index", "full", count=400)[2],
        "other trace": hand_off(url, "index", "full", change=lambda h: h.update({names.CARRIER_KEY: other_headers[names.CARRIER_KEY]}))[2],
    }
    for expected, reply in outcomes.items():
        status = "remote_context_invalid" if expected == "other trace" else expected
        assert reply["status"] == status, expected
        assert reply["metrics"] == {}, expected  # nothing measured, never a silent zero
        assert reply["answer"] == answer_for("", "index")  # the app's request went on unchanged
    assert len(hand_off(url, "index", "full", count=400)[1][names.CARRIER_KEY]) < 300  # a stand-in, not a 4 KB header


def _expire(headers: dict[str, str]) -> None:
    """The record as it arrives after its expiry: re-signed by A with a ttl already over."""
    from ragtrace._internal.boundaries import carrier

    token = headers[names.CARRIER_KEY]
    document = json.loads(inflated(token))
    headers[names.CARRIER_KEY] = carrier._signed({**document, "e": int(document["e"]) - 10_000}, os.environ["RAGTRACE_HASH_KEY"].encode())


def segment_of(path: Path, reply: dict[str, Any]) -> list[dict[str, Any]]:
    """B's exported spans of one segment: the segment and its children."""
    return [s for s in b_spans(path) if reply["span_id"] in (s["spanId"], s.get("parentSpanId"))]


def test_a_full_mode_receiver_redacts_a_segment_whose_record_is_unusable_or_missing(service_b, spans) -> None:
    """B is in full mode, A in redact: without a usable record B can't know what A allowed, so its
    segment exports no content (the prompt A sent holds the planted marker)."""
    url, b_path = service_b
    changes = {
        "remote_context_invalid": _flip,
        "expired": _expire,
        "remote_context_missing": lambda h: h.pop(names.CARRIER_KEY),
    }
    for expected, change in changes.items():
        _, _, reply = hand_off(url, "index", "redact", change=change)
        assert reply["status"] == ("remote_context_invalid" if expected == "expired" else expected), expected
        exported = segment_of(b_path, reply)
        segment = next(s for s in exported if s["spanId"] == reply["span_id"])
        assert len(exported) == 2 and attribute(segment, names.RAG_CONTENT_MODE) == "redact", expected
        assert MARKER not in json.dumps(exported), expected
    _, _, reply = hand_off(url, "index", "redact", count=400)
    assert reply["status"] == "remote_context_too_large" and MARKER not in json.dumps(segment_of(b_path, reply))
    # a usable redact record: redacted as before; a usable full record: B's own full mode
    _, _, reply = hand_off(url, "index", "full")
    assert reply["status"] is None and MARKER in json.dumps(segment_of(b_path, reply))


def test_a_reused_carrier_takes_the_new_trace_and_b_never_joins_a_trace_its_record_doesnt_name(service_b, spans) -> None:
    url, b_path = service_b
    headers: dict[str, str] = {}  # one dict reused for two requests, as a client session's headers
    first, _, first_reply = hand_off(url, "index", "full", change=lambda h: headers.update(h))
    with ragtrace.rag_pipeline("support-qa", query=QUESTION, version="v3", route="kb") as second:
        prompt = assemble_part("index")
        assert ragtrace.inject(headers)
        reply = post(url, {"prompt": prompt, "labeller": "index"}, headers)
    assert first.trace_id != second.trace_id and first_reply["trace_id"] == first.trace_id
    assert reply["status"] is None and reply["trace_id"] == second.trace_id and is_truth(reply["metrics"])
    segment = next(s for s in b_spans(b_path) if s["spanId"] == reply["span_id"])
    assert segment["traceId"] == second.trace_id and segment["parentSpanId"] == second.span_id
    # a stale traceparent put back after inject: B takes neither trace
    stale = {"traceparent": f"00-{first.trace_id}-{first.span_id}-01"}
    run, _, reply = hand_off(url, "index", "full", change=lambda h: h.update(stale))
    assert reply["status"] == "remote_context_invalid" and reply["trace_id"] not in (first.trace_id, run.trace_id)
    segment = next(s for s in b_spans(b_path) if s["spanId"] == reply["span_id"])
    assert not segment.get("parentSpanId")


def test_a_hand_off_without_the_hash_key_degrades_and_never_fails_the_request(service_b, spans, tmp_path, monkeypatch) -> None:
    """A replica deployed without RAGTRACE_HASH_KEY, on either side: every request is answered
    (no 500), and both sides say remote_context_missing."""
    url, _ = service_b
    process, keyless_url = start_b(tmp_path / "keyless.jsonl", RAGTRACE_HASH_KEY=None)
    try:
        for _ in range(2):
            run, headers, reply = hand_off(keyless_url, "index", "redact")  # A has the key, B not
            assert reply["status"] == "remote_context_missing" and reply["metrics"] == {}
            assert reply["answer"] == answer_for("", "index") and run.status == "delegated"
            assert MARKER not in (tmp_path / "keyless.jsonl").read_text()  # full-mode B, redacted segment
    finally:
        process.terminate()
        process.wait(10)
    monkeypatch.delenv("RAGTRACE_HASH_KEY")
    keyed.set_key(None)
    with ragtrace.rag_pipeline("support-qa", query=QUESTION, version="v3", route="kb") as run:  # A without, B with
        prompt = assemble_part("index")
        headers = {}
        assert ragtrace.inject(headers) is False
        reply = post(url, {"prompt": prompt, "labeller": "index"}, headers)
    assert names.CARRIER_KEY not in headers and run.status == "remote_context_missing"
    assert reply["status"] == "remote_context_missing" and reply["trace_id"] == run.trace_id


def test_a_queue_hand_off_carries_the_record_in_the_message(spans, tmp_path) -> None:
    golden = one_process("index", "redact")
    context = multiprocessing.get_context("spawn")
    inbox, outbox = context.Queue(), context.Queue()
    worker = context.Process(target=queue_worker, args=(inbox, outbox, str(tmp_path / "worker.jsonl")))
    worker.start()
    try:
        with ragtrace.rag_pipeline("support-qa", query=QUESTION, version="v3", route="kb", capture_content="redact") as run:
            message: dict[str, Any] = {"attributes": {}, "body": {"prompt": assemble_part("index"), "labeller": "index"}}
            assert ragtrace.inject(message["attributes"])
            inbox.put(message)
        reply = outbox.get(timeout=120)
    finally:
        inbox.put(None)
        worker.join(30)
    assert reply["metrics"] == golden and is_truth(golden)
    assert reply["trace_id"] == run.trace_id and run.status == "delegated"
    assert [p["attributes"]["gen_ai.workflow.name"] for p in reply["points"]] == ["support-qa"]
    assert MARKER not in inflated(message["attributes"][names.CARRIER_KEY])


# --- the topologies that work with today's API --------------------------------------------------
class _Gateway(QuietHandler):
    """An LLM gateway: answers the prompt it is sent; the answer comes back to the caller."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.body())
        self.reply(json.dumps({"answer": answer_for(body["prompt"], "index")}).encode(), "application/json")


class _Search(QuietHandler):
    """A retrieval service in another process's place: returns documents with their ids."""

    def do_POST(self) -> None:  # noqa: N802
        self.reply(json.dumps(documents()).encode(), "application/json")


def _call(url: str, body: Any) -> Any:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_an_answer_that_comes_back_is_scored_where_the_prompt_was_built(spans) -> None:
    golden = one_process("index", "full")
    for url in serve(_Gateway):
        with ragtrace.rag_pipeline("support-qa", query=QUESTION, version="v3", route="kb") as run:
            prompt = assemble_part("index")
            with ragtrace.generate("gateway", prompt=prompt) as generation:
                generation.record(_call(url, {"prompt": prompt})["answer"])
    assert run.metrics == golden and run.status is None


def test_documents_from_a_search_service_keep_their_ids(spans) -> None:
    golden = one_process("index", "full")
    spans.clear()
    for url in serve(_Search):
        with ragtrace.rag_pipeline("support-qa", query=QUESTION, version="v3", route="kb") as run:
            docs = _call(url, {"query": QUESTION})
            with ragtrace.retrieve(QUESTION, data_source="kb") as found:
                found.record(docs)
            with ragtrace.rerank("cross-encoder") as kept:
                kept.record(docs[:-1])
            with ragtrace.assemble(max_tokens=4000) as context:
                for doc in docs[:3] + docs[-1:]:
                    context.add(doc)
                prompt = context.render(question=QUESTION)
            with ragtrace.generate("local", prompt=prompt) as generation:
                generation.record(answer_for(prompt, "index"))
    assert run.metrics == golden
    assert spans.one("retrieve").attributes[names.RAG_RETRIEVAL_CHUNK_IDS][:2] == ("kb-refunds", "kb-credit")





def test_report_joins_the_two_sides_of_one_trace_and_checks_they_agree(service_b, spans, tmp_path, capsys) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from ragtrace.cli import main
    from ragtrace.exporters.jsonl import JsonLinesExporter

    url, b_path = service_b
    a_path = tmp_path / "a.jsonl"
    spans.provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(a_path)))
    golden = one_process("index", "full")
    a_path.write_text("")  # only the hand-off below
    run, _, reply = hand_off(url, "index", "full")

    def report(*paths: Path) -> dict[str, Any]:
        capsys.readouterr()
        assert main(["report", "--no-config", "--json", *map(str, paths)]) == 0
        rows = [row for row in json.loads(capsys.readouterr().out)["traces"] if row["trace_id"] == run.trace_id]
        assert len(rows) == 1  # one pipeline, counted once
        return rows[0]

    joined = report(a_path, b_path)
    # recomputed from A's retrieve and assemble spans and B's answer: the figures online, both files
    # in either order; content duplicates are visible offline in hash mode only
    assert {k: joined[k] for k in golden if k != "duplicate_chunks"} == {k: v for k, v in golden.items() if k != "duplicate_chunks"}
    assert joined["status"] == [] and joined["recorded_mismatch"] in ([], ["duplicate_chunks"]) and joined["answers"] == 1
    assert joined["labels"] == {"version": "v3", "route": "kb"}
    assert {k: report(b_path, a_path)[k] for k in golden} == {k: joined[k] for k in golden}
    alone = report(a_path)  # the answering side's export is missing: not measurable, never A's partial figures
    assert alone["status"][0] == "pipeline_segment_missing" and alone["recall_proxy"] is None
    # a segment whose recorded figures disagree with the joined recomputation is flagged, not trusted
    changed = tmp_path / "b-changed.jsonl"
    changed.write_text(b_path.read_text().replace('"rag.metrics.recall_proxy","value":{"doubleValue":0.4}', '"rag.metrics.recall_proxy","value":{"doubleValue":0.8}'))
    assert changed.read_text() != b_path.read_text()
    disagreeing = report(a_path, changed)
    assert "recall_proxy" in disagreeing["recorded_mismatch"] and disagreeing["status"][0] == "spans_missing"
