"""``ragtrace report`` end to end on SDK-built traces: the known numbers, in every input shape."""

from __future__ import annotations

import gzip
import re

import pytest

import ragtrace

from .conftest import by_query
from .helpers import DATA, KNOWN, docs, gzip_file, lines, pipeline, provider_to, split, to_collector, to_phoenix

FIGURES = ("retrieved", "in_context", "cited", "context_precision", "recall_proxy", "recall_proxy_weighted",
           "context_utilization", "wasted_context_tokens", "cited_positions")


def test_known_numbers_exactly(cli, known):
    path, metrics = known
    result = cli("report", "--json", path)
    assert result.code == 0
    assert result.err == ""  # no warnings on a clean export
    document = result.json()
    rows = by_query(document)
    assert set(rows) == set(KNOWN)
    for query, expected in KNOWN.items():
        row = rows[query]
        assert row["verdict"] == expected["verdict"], query
        for figure in FIGURES:
            if figure in expected:
                assert row[figure] == pytest.approx(expected[figure], rel=1e-12), (query, figure)
    # offline == online, figure for figure (the same function on the same inputs)
    for query, online in zip(KNOWN, metrics):
        row = rows[query]
        for figure, value in online.items():
            assert row[figure] == value, (query, figure)
    assert document["inputs"]["recorded_mismatches"] == 0
    assert document["inputs"]["traces"] == 5 and document["inputs"]["spans"] == 4 * 4 + 2


def test_known_aggregates(cli, known):
    document = cli("report", "--json", known[0]).json()
    summary = document["summary"]
    assert summary["traces"] == 5 and summary["measurable"] == 3 and summary["not_measurable"] == 2
    # nearest rank over the three measured runs: recall [0, .5, .5], precision [.5, .75, 1]
    assert summary["figures"]["recall_proxy"] == {"p25": 0.0, "p50": 0.5, "p90": 0.5, "n": 3}
    assert summary["figures"]["context_precision"] == {"p25": 0.5, "p50": 0.75, "p90": 1.0, "n": 3}
    assert summary["answers"] == 5 and summary["answers_without_citations"] == 3
    assert summary["answers_without_citations_share"] == 3 / 5
    assert summary["retrievals"] == 4 and summary["empty_retrievals"] == 1
    assert summary["empty_retrieval_rate"] == 0.25
    assert summary["verdicts"] == {"ok": 2, "check": 1, "not measurable": 2}
    assert summary["not_measurable_reasons"] == {"empty retrieval": 1, "no retrieval": 1}
    groups = document["groups"]
    assert set(groups["pipeline"]) == {"support-qa", "chat-only"}
    assert groups["version"]["v2"]["figures"]["recall_proxy"]["p50"] == 0.0  # [0, .5] -> lower value
    assert groups["route"]["faq"]["traces"] == 2 and groups["route"]["search"]["traces"] == 2
    assert set(groups["top_k"]) == {"2", "4"}
    assert groups["top_k"]["4"]["empty_retrievals"] == 1


def _rows(document):
    """Rows without the fields that name the input file."""
    return sorted(({k: v for k, v in row.items() if k != "where"} for row in document["traces"]), key=lambda r: r["trace_id"])


@pytest.mark.parametrize(
    "shape",
    ["gzip", "gzip-members", "halves", "interleaved", "three-files-reversed-halves", "collector", "collector-shuffled", "phoenix", "phoenix-compact", "directory"],
)
def test_every_input_shape_gives_the_same_rows(cli, known, tmp_path, shape):
    path, _ = known
    reference = _rows(cli("report", "--json", path).json())
    if shape == "gzip":
        target = tmp_path / "known.json.gz"
        gzip_file(path, target)
        args = [target]
    elif shape == "gzip-members":  # JsonLinesExporter's own gzip: one member per line
        target = tmp_path / "members.jsonl.gz"
        with open(target, "wb") as handle:
            for line in lines(path):
                handle.write(gzip.compress(line.encode()))
        args = [target]
    elif shape in ("halves", "interleaved"):
        parts = [tmp_path / "part-1.jsonl", tmp_path / "part-2.jsonl"]
        split(path, parts, interleave=shape == "interleaved")
        args = parts
    elif shape == "three-files-reversed-halves":
        parts = [tmp_path / f"p{i}.jsonl" for i in range(3)]
        split(path, parts)
        args = parts[::-1]  # newest first: roots come before their children, within --grace-spans
    elif shape in ("collector", "collector-shuffled"):
        target = tmp_path / "collector.jsonl"
        to_collector(path, target, shuffle_all=shape == "collector-shuffled")
        args = [target]
    elif shape == "directory":
        folder = tmp_path / "rotated"
        folder.mkdir()
        split(path, [folder / "traces-1.jsonl", folder / "traces-2.jsonl.gz"])
        gzip_file(folder / "traces-2.jsonl.gz", folder / "traces-2.gz")
        (folder / "traces-2.jsonl.gz").unlink()
        args = [folder]
    else:
        target = tmp_path / "phoenix.json"
        to_phoenix(path, target, pretty=shape == "phoenix")
        args = [target]
    grace = ["--grace-spans", "100"] if shape in ("three-files-reversed-halves", "collector-shuffled") else []
    result = cli("report", "--json", *grace, *args)
    assert result.code == 0, result.err
    assert result.err == ""
    assert _rows(result.json()) == reference


def test_newest_file_first_needs_a_grace_window(cli, known, tmp_path):
    parts = [tmp_path / f"p{i}.jsonl" for i in range(3)]
    split(known[0], parts)
    result = cli("report", "--json", *parts[::-1])
    assert result.code == 0
    assert "arrived after its trace was finished and reported; it is left out" in result.err
    assert result.json()["inputs"]["late_spans"] >= 1


def test_collector_lines_really_mix_traces_and_resources(known, tmp_path):
    target = tmp_path / "collector.jsonl"
    to_collector(known[0], target)
    import json

    mixed = root_first = 0
    for line in lines(target):
        request = json.loads(line)
        assert len(request["resourceSpans"]) in (1, 2)
        spans = [s for r in request["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
        mixed += len({s["traceId"] for s in spans}) > 1
        ids = [s["spanId"] for s in spans]
        root_first += any(s.get("parentSpanId") in ids[:index] for index, s in enumerate(spans))
    assert mixed >= 1  # the fixture exercises joining, not just reading
    assert root_first >= 1  # and parents listed before their children within a line


def test_real_phoenix_page(cli):
    """A page saved from Phoenix 20.26.1's /spans/otlpv1 (see tests/cli/data/README.md)."""
    result = cli("report", "--json", DATA / "phoenix_otlpv1.json")
    assert result.code == 0 and result.err == ""
    (row,) = result.json()["traces"]
    assert row["pipeline"] == "support-qa" and row["labels"] == {"version": "v2"}
    assert row["query"] == "What is BM25?"
    assert (row["retrieved"], row["in_context"], row["cited"]) == (4, 3, 2)
    assert row["context_precision"] == 0.75 and row["recall_proxy"] == 0.5
    assert row["cited_positions"] == [1, 3]
    assert row["inferred"] is False and row["recorded_mismatch"] == []


def test_terminal_table(cli, known):
    result = cli("report", "--plain", known[0])
    assert result.code == 0
    out = result.out
    assert "5 pipeline runs" in out
    assert "3 measured, 2 not measurable; inclusion: recorded 4 (~ marks figures resting on located or inferred inclusion)" in out
    assert "Answers without conformant citations: 60% of 5" in out
    assert "Empty retrievals: 25% of 4" in out
    table = out[out.index("Runs (5)") :]
    # worst first: the failing run, then the two not measurable, then the healthy ones
    first = table.splitlines()[3]
    assert "How does dense retrieval work?" in first and "check: recall<0.2" in first
    assert "not measurable: empty retrieval" in table and "not measurable: no retrieval" in table
    assert "What is BM25?" in table and "0.75" in table


def test_rows_limit_keeps_the_worst(cli, known):
    out = cli("report", "--plain", "--rows", "1", known[0]).out
    table = out[out.index("Runs (1 worst of 5)") :]
    assert "How does dense retrieval work?" in table
    assert "What is BM25?" not in table
    assert "Runs (" not in cli("report", "--plain", "--rows", "0", known[0]).out


def test_markdown(cli, known):
    result = cli("report", "--markdown", known[0])
    assert result.code == 0
    assert "## ragtrace report" in result.out
    assert "| figure | p25 | p50 | p90 | n |" in result.out
    assert "| recall_proxy | 0.00 | 0.50 | 0.50 | 3 |" in result.out
    assert "\\|R\\|" in result.out  # pipes in headers are escaped


def test_redacted_queries_are_shown_as_redacted(cli, tmp_path):
    path = tmp_path / "redacted.jsonl"
    provider = provider_to(path)
    pipeline(provider, "private", "secret question", ["d1", "d2"], ["d1"], "[1]", capture_content="redact")
    provider.shutdown()
    assert "secret question" not in path.read_text()
    result = cli("report", "--json", path)
    (row,) = result.json()["traces"]
    assert row["query"] == "(redacted)"
    assert row["recall_proxy"] == 0.5 and row["context_precision"] == 0.5
    assert "secret" not in result.out


def test_hash_mode_content_duplicates_match_online(cli, tmp_path):
    path = tmp_path / "hash.jsonl"
    provider = provider_to(path)
    same_text = [{"id": "a", "content": "identical text"}, {"id": "b", "content": "identical text"}, {"id": "a", "content": "identical text"}]
    import ragtrace

    with ragtrace.rag_pipeline("dups", query="q", tracer_provider=provider, capture_content="hash") as run:
        with ragtrace.retrieve("q", tracer_provider=provider) as r:
            r.record(same_text)
        with ragtrace.assemble(tracer_provider=provider) as ctx:
            ctx.add(same_text[0])
        with ragtrace.generate(tracer_provider=provider) as g:
            g.record("[1]")
    provider.shutdown()
    assert run.metrics["duplicate_chunks"] == 2
    (row,) = cli("report", "--json", path).json()["traces"]
    assert row["duplicate_chunks"] == 2 and row["recorded_mismatch"] == []


@pytest.mark.parametrize(
    "docs, duplicates",
    [
        ([{"id": "a", "content": "same"}, {"id": "b", "content": "same"}, {"id": "c", "content": "other"}], 1),
        # an empty text is still a duplicate key, and a text that looks like a hash is not one
        ([{"id": "a", "content": ""}, {"id": "b", "content": ""}, {"id": "c", "content": "0123456789abcdef"}, {"id": "d", "content": "0123456789abcdef "}], 1),
    ],
)
def test_full_mode_content_duplicates_come_from_document_text(cli, tmp_path, docs, duplicates):
    path = tmp_path / "full.jsonl"
    provider = provider_to(path)
    import ragtrace

    with ragtrace.rag_pipeline("dups", query="q", tracer_provider=provider) as run:
        with ragtrace.retrieve("q", tracer_provider=provider) as r:
            r.record(docs)
        with ragtrace.assemble(tracer_provider=provider) as ctx:
            ctx.add(docs[0])
        with ragtrace.generate(tracer_provider=provider) as g:
            g.record("[1]")
    provider.shutdown()
    assert run.metrics["duplicate_chunks"] == duplicates
    result = cli("report", "--json", path)
    (row,) = result.json()["traces"]
    assert row["duplicate_chunks"] == duplicates and row["recorded_mismatch"] == []
    assert result.err == ""


def test_rich_terminal_table_when_stdout_is_a_terminal(cli, tmp_path, monkeypatch):
    """With rich installed and a terminal on stdout the tables are rich's; trace text is never markup."""
    import sys

    import rich  # noqa: F401 - in the test extra: this path must run, not be skipped

    path = tmp_path / "markup.jsonl"
    provider = provider_to(path)
    pipeline(provider, "support-qa", "why [bold]is[/bold] this [1] odd?", ["d1", "d2"], ["d1"], "[1]")
    provider.shutdown()
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "250")  # wide enough that rich doesn't wrap the query cell
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    out = cli("report", path).out
    assert "┃" in out or "│" in out  # rich drew the table
    assert "why [bold]is[/bold] this [1] odd?" in out  # shown literally, not as markup
    plain = cli("report", "--plain", path).out
    assert "┃" not in plain and "│" not in plain and "why [bold]is[/bold] this [1] odd?" in plain


# --- issue 14, item 6 (report side), and how each run's inclusion was known -----------------------
def _run(provider, query: str, retrieved: list[str], answer: str, *, method: str) -> None:
    """retrieve -> assemble the first two retrieved chunks (recorded, declared or located) -> generate."""
    with ragtrace.rag_pipeline("qa", query=query, tracer_provider=provider):
        with ragtrace.retrieve(query, tracer_provider=provider) as r:
            r.record(docs(*retrieved))
        with ragtrace.assemble(tracer_provider=provider) as ctx:
            placed = docs(*retrieved[:2])
            if method == "recorded":
                for doc in placed:
                    ctx.add(doc)
                prompt = ctx.render(question=query)
            else:
                prompt = "Sources:\n" + "\n".join(f"[{n}] {doc['content']}" for n, doc in enumerate(placed, start=1)) + f"\nQuestion: {query}"
                if method == "declared":
                    for n, doc in enumerate(placed, start=1):
                        ctx.place(doc, doc["content"], label=str(n))
                    ctx.set_prompt(prompt)
                else:
                    ctx.observe(placed, prompt)
        with ragtrace.generate(model="m", prompt=prompt, tracer_provider=provider) as g:
            g.record(answer)


def test_invalid_citations_are_counted_apart_in_every_output(cli, tmp_path):
    """[d3] names a retrieved chunk the prompt did not show (out of context), [7] names nothing."""
    path = tmp_path / "invalid.jsonl"
    provider = provider_to(path)
    _run(provider, "q1", ["d1", "d2", "d3"], "See [1], [d3] and [7].", method="recorded")
    _run(provider, "q2", ["d1", "d2", "d3"], "See [2] and [9].", method="recorded")
    provider.shutdown()
    document = cli("report", "--json", path).json()
    rows = by_query(document)
    assert (rows["q1"]["invalid_citations"], rows["q1"]["out_of_context_citations"], rows["q1"]["unknown_citations"]) == (2, 1, 1)
    assert rows["q1"]["reasons"] == ["2 invalid citations (1 out of context, 1 unknown)"]
    assert rows["q2"]["reasons"] == ["recall_w<0.3", "1 invalid citation (0 out of context, 1 unknown)"]
    summary = document["summary"]["invalid_citations"]
    assert summary == {"traces": 2, "out_of_context": 1, "unknown": 2}
    line = "Invalid citations: 3 in 2 of 2 runs with an answer: 1 out of context (a retrieved chunk the prompt did not show), 2 unknown (naming nothing retrieved)"
    for style in ("--plain", "--markdown"):
        assert line in cli("report", style, path).out, style


def test_every_run_says_how_its_inclusion_was_known(cli, tmp_path):
    from .test_inferred import openinference

    path = tmp_path / "methods.jsonl"
    provider = provider_to(path)
    for method in ("recorded", "declared", "located"):
        _run(provider, method, ["d1", "d2", "d3"], "BM25 ranks lexically [1].", method=method)
    provider.shutdown()
    foreign = tmp_path / "oi.jsonl"
    openinference(foreign)
    document = cli("report", "--json", path, foreign).json()
    inclusion = {row["query"]: row["inclusion"] for row in document["traces"]}
    assert inclusion == {"recorded": "recorded", "declared": "declared", "located": "located", "What is BM25?": "inferred"}
    assert document["summary"]["inclusion"] == {"recorded": 1, "declared": 1, "located": 1, "inferred": 1}
    for style in ("--plain", "--markdown"):
        out = cli("report", style, path, foreign).out
        assert "4 measured, 0 not measurable; inclusion: recorded 1, declared 1, located 1, inferred 1 (~ marks figures resting on located or inferred inclusion)" in out
        runs = {name: line for line in out.splitlines() for name in ("recorded", "declared", "located") if f" {name} " in line and "qa" in line}
        assert "~0.67" not in runs["recorded"] and "0.67" in runs["recorded"]  # context precision 2/3
        assert "~0.67" not in runs["declared"]
        assert "~0.67" in runs["located"]
    page = tmp_path / "methods.html"
    assert cli("report", "--html", page, path, foreign).code == 0
    html = page.read_text()
    cells = {name: row for row in re.findall(r'<tr class="run[^"]*"[^>]*>(.*?)</tr>', html) for name in inclusion if f"<td>{name}</td>" in row}
    assert '<td class="n">~0.67</td>' in cells["located"]  # context precision 2/3, located: marked as in the text report
    assert '<td class="n">0.67</td>' in cells["recorded"] and "~" not in cells["recorded"]
    assert "~" not in cells["declared"] and '<td class="n">~' in cells["What is BM25?"]
    assert '"~" marks figures resting on located or inferred inclusion' in html


def test_a_retrieval_over_max_retrieved_is_not_measured_offline_either(cli, tmp_path):
    """Online, a retrieval of 5 with max_retrieved=3 records d1..d3 and counts 2 as omitted: the
    figures over R are left out (retrieval_truncated). The report recomputes the same from the
    spans, so it agrees with the online figures (no mismatch) and says why it can't measure R."""
    from ragtrace._internal.setup import config

    path = tmp_path / "truncated.jsonl"
    provider = provider_to(path)
    previous = config.current()
    ragtrace.configure(max_retrieved=3)
    try:
        online = pipeline(provider, "p", "q", ["d1", "d2", "d3", "d4", "d5"], ["d1", "d2"], "d1 says [1]")
    finally:
        config.restore(previous)
    provider.shutdown()
    assert "retrieved" not in online and online["in_context"] == 2 and online["cited"] == 1
    result = cli("report", "--json", path)
    assert result.code == 0
    row = result.json()["traces"][0]
    assert row["verdict"] == "not measurable" and row["status"][0] == "retrieval_truncated"
    assert row["recorded_mismatch"] == [] and result.json()["inputs"]["recorded_mismatches"] == 0
    assert row.get("retrieved") is None and row.get("recall_proxy") is None and row.get("context_precision") is None
    assert (row["in_context"], row["cited"], row["context_utilization"]) == (2, 1, 0.5)
    plain = cli("report", path)
    assert plain.code == 0 and "retrieval over max_retrieved" in plain.out
