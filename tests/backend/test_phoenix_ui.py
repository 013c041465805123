"""Phoenix's own UI, in headless Chromium, on a trace exported by ragtrace's PhoenixExporter: the
retriever span's document cards must show each document's placed and cited marks, and the root
span and the project's trace annotation chart its figures. Screenshots go to out/phoenix-*.png
(docs/openinference.md shows them)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from browser import headless_chromium
from ragtrace._internal import names

from .phoenix import PhoenixServer
from .test_phoenix_annotations import FIGURES, annotated, document_marks, hex_id  # noqa: F401 - annotated is a fixture
from .test_phoenix_roundtrip import run_pipeline

pytestmark = pytest.mark.heavy

OUT = Path(__file__).resolve().parents[2] / "out"
# Per retriever document, in rank order: its card's id line, then its two marks' explanations.
CARDS = [
    ("document d1", "in the prompt at position 2 of 3 as [2]", "the answer cited it as [2]"),
    ("document d2", "in the prompt at position 1 of 3 as [1]", "the answer cited it as [1]"),
    ("document d3", "in the prompt at position 3 of 3 as [3]", "the answer did not cite it"),
    ("document d4", "not in the prompt: reranked_out", "the answer did not cite it"),
]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"the page never showed {what}"
        time.sleep(0.25)


def test_document_cards_show_the_marks(annotated, phoenix_server: PhoenixServer) -> None:
    a = annotated()
    run = run_pipeline(session_id="sess-ui")
    a.flush()
    (retrieve,) = a.sdk_spans(names.STAGE_RETRIEVE)
    assert len(document_marks(phoenix_server, a.project, hex_id(retrieve), 8)) == 8  # stored before the page is opened
    assert len(a.span_annotations([hex_id(run)], len(FIGURES))) == len(FIGURES)
    spans = phoenix_server.get_spans(a.project)
    retrieve_node = next(s["id"] for s in spans if s["context"]["span_id"] == hex_id(retrieve))
    projects = phoenix_server.client.request("POST", "/graphql", body={"query": "{ projects { edges { node { id name } } } }"})
    project_node = next(e["node"]["id"] for e in projects["data"]["projects"]["edges"] if e["node"]["name"] == a.project)
    trace_id = format(run.span.get_span_context().trace_id, "032x")

    OUT.mkdir(exist_ok=True)
    with headless_chromium(1400, 2600) as browser:
        browser.get(f"{phoenix_server.base_url}/projects/{project_node}/traces/{trace_id}?selectedSpanNodeId={retrieve_node}")
        text = lambda: browser.find_element("tag name", "body").text  # noqa: E731
        wait_for(lambda: CARDS[-1][1] in text(), 60, "the last document's marks")
        shown = text()
        # each card carries its own marks: the texts come in card order, each mark after its card's id line
        at = 0
        for card in CARDS:
            for line in card:
                found = shown.find(line, at)
                assert found >= 0, f"{line!r} not shown after position {at}: {shown[at:at + 400]!r}"
                at = found + len(line)
        assert shown.count("ragtrace.in_prompt") == 4 and shown.count("ragtrace.cited") >= 4
        assert "placed" in shown and "not cited" in shown and "CODE" in shown
        browser.save_screenshot(str(OUT / "phoenix-retriever-documents.png"))

        # the root span's own panel: its figure annotations, counted in its Annotations header
        root_node = next(s["id"] for s in spans if s["parent_id"] is None)
        browser.get(f"{phoenix_server.base_url}/projects/{project_node}/traces/{trace_id}?selectedSpanNodeId={root_node}")
        wait_for(lambda: re.search(rf"^Annotations\n{len(FIGURES)}$", text(), re.M) is not None, 60, "the root's figure annotations")
        browser.save_screenshot(str(OUT / "phoenix-trace.png"))

        # the project's Traces tab: the proxies in the trace annotation score chart, which was empty ("No data")
        browser.get(f"{phoenix_server.base_url}/projects/{project_node}/traces")
        chart = lambda: text().partition("Trace annotation scores")[2][:300]  # noqa: E731
        wait_for(lambda: "ragtrace.recall_proxy" in chart(), 60, "the trace annotation score chart")
        assert "No data" not in chart()
        for metric in names.PROXY_METRICS:
            assert f"ragtrace.{metric}" in chart()
        browser.save_screenshot(str(OUT / "phoenix-traces.png"))
