"""ragtrace.testing, used the way users use it: a pytest run of their own test file (pytester)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import TracerProvider

import ragtrace
from ragtrace._internal.setup import config
from ragtrace.testing import CapturedSpans, PipelineFigures, capture

pytest_plugins = ["pytester"]


def _entry_point_installed() -> bool:
    return any(ep.value == "ragtrace.testing" for ep in importlib.metadata.entry_points(group="pytest11"))


# Until the pytest11 entry point is installed the plugin is loaded explicitly; once it is, pytest
# loads it by itself.
PLUGIN_ARGS = [] if _entry_point_installed() else ["-p", "ragtrace.testing"]

# A user's application: a small RAG function instrumented with ragtrace, and nothing else.
APP = '''
import ragtrace

CORPUS = {
    "bm25": "BM25 is a lexical ranking function.",
    "dense": "Dense retrieval embeds queries and documents.",
    "rerank": "Rerankers reorder candidate documents.",
    "chunk": "Chunking splits documents into passages.",
}


def answer(question, *, cite=("[1]",), query_id=None):
    with ragtrace.rag_pipeline("support-qa", query=question, query_id=query_id):
        with ragtrace.retrieve(question, data_source="docs", top_k=4) as r:
            r.record([{"id": k, "score": 1.0 - i / 10, "content": v} for i, (k, v) in enumerate(CORPUS.items())])
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks[:2]:
                ctx.add(chunk)
            prompt = ctx.render(question=question)
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            text = "BM25 is lexical " + " ".join(cite)
            g.record(text)
    return text


def chat_only(question):
    with ragtrace.rag_pipeline("chit-chat", query=question):
        with ragtrace.generate(model="gpt-4o-mini") as g:
            g.record("hello")
'''

USER_TESTS = '''
import pytest
from app import answer, chat_only


def test_recall_did_not_drop(ragtrace_spans):
    answer("What is BM25?", cite=("[1]", "[2]"))
    assert ragtrace_spans.assert_figure("recall_proxy", at_least=0.5) == 0.5
    ragtrace_spans.assert_figure("context_precision", equals=0.5)
    ragtrace_spans.assert_figure("cited_positions", equals=[1, 2])
    figures = ragtrace_spans.last_pipeline()
    assert figures.name == "support-qa"
    assert figures["retrieved"] == 4 and figures["in_context"] == 2 and figures["cited"] == 2
    assert figures.status == ()


def test_spans_by_stage(ragtrace_spans):
    answer("What is BM25?")
    assert [s.name for s in ragtrace_spans.by_stage("retrieve")] == ["retrieval docs"]
    assert ragtrace_spans.one("generate").attributes["rag.citation.ids"] == ("bm25",)
    assert [s.attributes["rag.stage"] for s in ragtrace_spans.spans] == ["retrieve", "assemble", "generate", "pipeline"]


def test_each_test_starts_empty(ragtrace_spans):
    assert ragtrace_spans.spans == []
    assert ragtrace_spans.figures() == []


def test_every_pipeline_and_by_name(ragtrace_spans):
    answer("q1", cite=("[1]", "[2]"), query_id="g-1")
    answer("q2", cite=("[1]",), query_id="g-2")
    chat_only("hi")
    assert [f.name for f in ragtrace_spans.figures()] == ["support-qa", "support-qa", "chit-chat"]
    assert [f.query_id for f in ragtrace_spans.figures("support-qa")] == ["g-1", "g-2"]
    assert ragtrace_spans.assert_figure("recall_proxy", at_least=0.25, every=True, pipeline="support-qa") == [0.5, 0.25]
    last = ragtrace_spans.last_pipeline()
    assert last.name == "chit-chat" and "no_retrieval" in last.status and "recall_proxy" not in last
    assert ragtrace_spans.last_pipeline("support-qa").query_id == "g-2"


@pytest.mark.ragtrace(capture_content="redact")
def test_marker_passes_configure_options(ragtrace_spans):
    answer("a secret question")
    root = ragtrace_spans.one("pipeline")
    assert root.attributes["rag.content_mode"] == "redact"
    assert "input.value" not in root.attributes
    ragtrace_spans.assert_figure("retrieved", equals=4)


def test_recall_dropped(ragtrace_spans):
    answer("What is BM25?", cite=("[1]",))
    ragtrace_spans.assert_figure("recall_proxy", at_least=0.5)


def test_figure_not_measured(ragtrace_spans):
    chat_only("hi")
    ragtrace_spans.assert_figure("recall_proxy")
'''


@pytest.fixture
def user_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(app=APP, test_user=USER_TESTS)
    return pytester


def test_plugin_in_a_user_test_suite(user_project: pytest.Pytester) -> None:
    """A fresh pytest process, as in a user's CI: five tests pass, the two regressions fail clearly."""
    result = user_project.runpytest_subprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_recall_dropped*",
            "*AssertionError: ragtrace figure recall_proxy = 0.25 for pipeline 'support-qa' is below the minimum 0.5",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*test_figure_not_measured*",
            "*AssertionError: ragtrace figure 'recall_proxy' was not measured for pipeline 'chit-chat'; status: no_retrieval*",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_user.py::test_recall_dropped*", "FAILED test_user.py::test_figure_not_measured*"])


def test_fixture_restores_the_previous_configuration(user_project: pytest.Pytester) -> None:
    """In-process run: the app's own configuration is back after the user's tests, and was kept during them."""
    own = TracerProvider()
    ragtrace.configure(tracer_provider=own, capture_content="hash", max_documents=3, openinference=True)
    before = config.current()
    user_project.makepyfile(
        test_kept="""
        from app import answer
        from ragtrace._internal.setup import config

        def test_configuration_kept_but_spans_captured(ragtrace_spans):
            answer("q")
            assert config.current().max_documents == 3
            assert config.current().tracer_provider is ragtrace_spans.provider
            assert ragtrace_spans.one("pipeline").attributes["rag.content_mode"] == "hash"
            assert len(ragtrace_spans.one("retrieve").attributes["rag.retrieval.content_hashes"]) == 4
        """
    )
    result = user_project.runpytest_inprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", "test_kept.py")
    result.assert_outcomes(passed=1)
    assert config.current() == before
    assert config.current().tracer_provider is own


def test_fixture_restores_the_unconfigured_state(user_project: pytest.Pytester) -> None:
    config.reset()
    unconfigured = config.current()
    result = user_project.runpytest_inprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", "-k", "by_stage or marker")
    result.assert_outcomes(passed=2, deselected=5)
    assert config.current() == unconfigured
    assert config.current().tracer_provider is None


def test_capture_without_pytest() -> None:
    """``ragtrace.testing`` imports and works where pytest is not installed (here: import blocked)."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["pytest"] = None  # any `import pytest` now raises ImportError
        import ragtrace
        import ragtrace.testing as t
        assert not hasattr(t, "ragtrace_spans")
        with t.capture() as captured:
            with ragtrace.rag_pipeline("qa", query="q"):
                with ragtrace.retrieve("q") as r:
                    r.record(["alpha text", "beta text"])
        print(captured.last_pipeline()["retrieved"], captured.last_pipeline().status)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 ('no_context', 'no_answer')"


def test_capture_nests_and_restores() -> None:
    with capture(max_documents=1) as outer:
        with capture(openinference=False) as inner:
            assert config.current().max_documents == 1 and config.current().openinference is False
            with ragtrace.rag_pipeline("inner", query="q"):
                pass
        assert config.current().tracer_provider is outer.provider and config.current().openinference is True
        with ragtrace.rag_pipeline("outer", query="q"):
            pass
    assert [f.name for f in inner.figures()] == ["inner"]
    assert [f.name for f in outer.figures()] == ["outer"]
    assert "openinference.span.kind" not in inner.one("pipeline").attributes
    assert config.current().tracer_provider is None


def test_capture_rejects_its_own_exporter_options() -> None:
    for option in ("tracer_provider", "exporter", "service_name", "batch"):
        with pytest.raises(TypeError, match=option):
            with capture(**{option: None}):
                pass
    with pytest.raises(ValueError, match="capture_content"):
        with capture(capture_content="everything"):
            pass
    assert config.current() == config._initial()


def test_helpers_on_an_empty_capture() -> None:
    captured = CapturedSpans()
    with pytest.raises(AssertionError, match="no ragtrace pipeline finished"):
        captured.last_pipeline()
    with pytest.raises(AssertionError, match="no ragtrace pipeline named 'qa' finished"):
        captured.assert_figure("recall_proxy", pipeline="qa", every=True)
    with pytest.raises(AssertionError, match="expected one 'retrieve' span, found 0"):
        captured.one("retrieve")


def test_pipeline_figures_is_a_read_only_mapping() -> None:
    with capture() as captured:
        with ragtrace.rag_pipeline("qa", query="q") as run:
            with ragtrace.retrieve("q") as r:
                r.record([{"id": "a", "content": "alpha"}, {"id": "b", "content": "beta"}])
            with ragtrace.assemble() as ctx:
                ctx.add(r.chunks[0])
            with ragtrace.generate() as g:
                g.record("alpha [1] and [7]")
    figures = captured.last_pipeline()
    assert isinstance(figures, PipelineFigures)
    assert figures == run.metrics and dict(figures) == run.metrics
    assert figures["invalid_citations"] == 1 and figures.get("nope") is None
    assert figures["cited_positions"] == [1] and isinstance(figures["cited_positions"], list)
    with pytest.raises(KeyError, match="'nope' was not measured for pipeline 'qa'"):
        figures["nope"]
    assert captured.assert_figure("context_utilization", equals=1.0) == 1.0
    with pytest.raises(AssertionError, match="cited_positions = \\[1\\] for pipeline 'qa' is not a number"):
        captured.assert_figure("cited_positions", at_least=1)
    with pytest.raises(AssertionError, match="recall_proxy = 0.5 for pipeline 'qa' is above the maximum 0.4"):
        captured.assert_figure("recall_proxy", at_most=0.4)
    with pytest.raises(AssertionError, match="expected 0.6"):
        captured.assert_figure("recall_proxy", equals=0.6)


def test_a_pytest11_entry_point_loads_the_plugin(user_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``[project.entry-points.pytest11] "ragtrace.testing" = "ragtrace.testing"`` does, with a stand-in
    distribution on PYTHONPATH while ragtrace's own metadata doesn't declare it (yet).

    The entry point is named like the module so that an explicit ``-p ragtrace.testing`` (or
    ``pytest_plugins = ["ragtrace.testing"]``) next to it is harmless: pytest then finds the plugin
    already registered under that name instead of registering the module twice (a ValueError).
    """
    if not _entry_point_installed():
        site = user_project.mkdir("site")
        dist_info = site / "ragtrace_plugin_standin-0.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: ragtrace-plugin-standin\nVersion: 0\n")
        (dist_info / "entry_points.txt").write_text("[pytest11]\nragtrace.testing = ragtrace.testing\n")
        monkeypatch.setenv("PYTHONPATH", str(site))
    result = user_project.runpytest_subprocess("-p", "no:cacheprovider", "-k", "by_stage")
    result.assert_outcomes(passed=1, deselected=6)
    result = user_project.runpytest_subprocess("-p", "ragtrace.testing", "-p", "no:cacheprovider", "-k", "by_stage")
    output = result.stdout.str() + result.stderr.str()
    assert "already registered under a different name" not in output, (
        "name the pytest11 entry point like the module, \"ragtrace.testing\" = \"ragtrace.testing\": under another "
        "name an explicit -p ragtrace.testing or pytest_plugins = [\"ragtrace.testing\"] registers it twice"
    )
    result.assert_outcomes(passed=1, deselected=6)
