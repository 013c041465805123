"""``ragtrace report`` gives the SDK's verdict on the citation cases of issue 27, on the same
traces exported in full, redact and hash modes: the figures come from one rule, so the mode of
the export changes nothing but what text travels."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ragtrace

from .helpers import provider_to

MODES = ("full", "redact", "hash")
DOCS = [
    {"id": "faq-7", "content": "Refunds reach the original card within 5 business days."},
    {"id": "faq-8", "content": "Store credit is issued immediately instead of a refund."},
    {"id": "faq-9", "content": "Shipping is free for orders over 50 euros."},
]
TEXT = {d["id"]: d["content"] for d in DOCS}


def _export(tmp_path: Path, mode: str, build: Callable[[Any], None], answer: str) -> tuple[dict[str, Any], list[str]]:
    """One pipeline (retrieve DOCS, ``build(ctx)`` assembles, ``answer`` generated) exported in ``mode``."""
    path = tmp_path / f"{mode}.jsonl"
    provider = provider_to(path)
    with ragtrace.rag_pipeline("cases", query="q", tracer_provider=provider, capture_content=mode) as run:
        with ragtrace.retrieve("q", tracer_provider=provider) as r:
            r.record(DOCS)
        with ragtrace.assemble(tracer_provider=provider) as ctx:
            prompt = build(ctx)
        with ragtrace.generate(model="m", prompt=prompt, tracer_provider=provider) as g:
            g.record(answer)
    provider.shutdown()
    return dict(run.metrics), (run.status or "").split(",")


def _report(cli, path: Path) -> dict[str, Any]:
    result = cli("report", "--json", path)
    assert "figures differ" not in result.err
    (row,) = result.json()["traces"]
    assert row["recorded_mismatch"] == []
    return row


def _agree(row: dict[str, Any], online: dict[str, Any], expected: dict[str, Any]) -> None:
    for figure, value in expected.items():
        if value is None:
            assert row[figure] is None and figure not in online, figure
        else:
            assert row[figure] == pytest.approx(value) and online[figure] == pytest.approx(value), figure


@pytest.mark.parametrize("mode", MODES)
def test_redact_exports_do_not_compare_placeholders_as_chunk_text(cli, tmp_path, mode):
    """Case 9: three distinct chunks are no duplicates, whichever text the export kept."""

    def build(ctx):
        ctx.add(DOCS[0])
        return ctx.render(question="q")

    online, _ = _export(tmp_path, mode, build, "Five days [1].")
    row = _report(cli, tmp_path / f"{mode}.jsonl")
    _agree(row, online, {"duplicate_chunks": 0, "retrieved": 3, "in_context": 1, "cited": 1, "recall_proxy": 1 / 3})


@pytest.mark.parametrize("mode", MODES)
def test_unlabelled_declared_sources_leave_citations_unresolved_in_every_mode(cli, tmp_path, mode):
    """Case 1: documents joined bare (LangChain's default document prompt) and an answer citing [1], [3]."""

    def build(ctx):
        for doc in DOCS:
            ctx.place(doc, doc["content"])
        prompt = "Answer from the context.\n\n" + "\n\n".join(TEXT.values()) + "\n\nQuestion: q"
        ctx.set_prompt(prompt)
        return prompt

    online, status = _export(tmp_path, mode, build, "Five days [1]; free shipping [3].")
    row = _report(cli, tmp_path / f"{mode}.jsonl")
    assert "citations_unresolved" in status and "citations_unresolved" in row["status"]
    _agree(row, online, {"in_context": 3, "context_precision": 1.0, "cited": None, "recall_proxy": None, "wasted_context_tokens": None})


def _located(fragments: list[str], head: str = "Sources:\n") -> Callable[[Any], Any]:
    def build(ctx):
        prompt = head + "\n".join(fragments) + "\n\nQuestion: q"
        ctx.observe(DOCS, prompt)
        return prompt

    return build


def _declared(fragments: list[tuple[dict[str, Any], str, str]]) -> Callable[[Any], Any]:
    def build(ctx):
        for doc, text, label in fragments:
            ctx.place(doc, text, label=label)
        prompt = "Sources:\n" + "\n".join(text for _, text, _ in fragments) + "\n\nQuestion: q"
        ctx.set_prompt(prompt)
        return prompt

    return build


A, B, C = DOCS
TOKENS = {d["id"]: ragtrace.SimpleTokenizer().count(d["content"]) for d in DOCS}  # the default tokenizer
CASES = {
    # case 3: a formatter that lowercases; located through case
    "lowercased": (_located([f"[{n}] {d['content'].lower()}" for n, d in enumerate(DOCS, 1)]), "Five days [1].", {"in_context": 3, "cited": 1, "recall_proxy": 1 / 3}, None),
    # case 3: nothing found of a non-empty retrieval in a non-empty prompt
    "not located": (_located(["[1] A summary.", "[2] Another one."]), "Five days [1].", {"in_context": None, "context_precision": None, "cited": None}, "context_not_located"),
    # case 6: a chunk shown twice, cited under its second label
    "twice": (_located([f"[1] {A['content']}", f"[2] {B['content']}", f"[3] {A['content']}"]), "Five days [3].", {"in_context": 2, "cited": 1, "invalid_citations": 0, "cited_positions": [1]}, None),
    # case 7: a numbered list
    "numbered list": (_located([f"{n}. {d['content']}" for n, d in enumerate(DOCS, 1)]), "Free above fifty euros [3].", {"in_context": 3, "cited": 1, "cited_positions": [3]}, None),
    # case 8: declared placements count the chunk's tokens, not the label's
    "declared tokens": (_declared([(d, f"[{n}] {d['content']}", str(n)) for n, d in enumerate(DOCS, 1)]), "Five days [1].", {"wasted_context_tokens": TOKENS["faq-8"] + TOKENS["faq-9"]}, None),
    # case 10: prose citations
    "prose": (_located([f"Source {n}: {d['content']}" for n, d in enumerate(DOCS, 1)]), "Five days.\n\nSources: faq-7, faq-9", {"cited": 2, "invalid_citations": 0, "recall_proxy": 2 / 3, "cited_positions": [1, 3]}, None),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(CASES))
def test_each_case_reads_the_same_in_the_report_in_every_content_mode(cli, tmp_path, mode, case):
    build, answer, expected, status = CASES[case]
    online, online_status = _export(tmp_path, mode, build, answer)
    row = _report(cli, tmp_path / f"{mode}.jsonl")
    _agree(row, online, expected)
    if status is not None:
        assert status in online_status and status in row["status"]
