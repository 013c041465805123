"""The accuracy benchmark's known-answer scenarios, run small: recorded and declared inclusion are
exactly right on every one (markdown stripped, re-wrapped, truncated, chat messages, a JSON-escaped
request body, duplicate chunks, instructions that repeat a chunk's text, an LLM grader), and the
searches (located, inferred) on issue 36's cases, whose sources all show their labels.

``bench/bench_accuracy.py`` runs the same set larger and prints located and inferred beside them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_accuracy.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_accuracy", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_recorded_and_declared_are_exactly_right_on_every_scenario(bench):
    totals, per = bench.measure(per_scenario=3, seed=11)
    assert len(per) == len(bench.SCENARIOS) == 22  # the first nine, issue 27's seven citation cases, issue 36's six search cases
    for name, scores in per.items():
        for method in ("recorded", "declared"):
            score = scores[method]
            assert score.traces == 3, (name, method)
            assert (score.precision, score.recall, score.cite_precision, score.cite_recall) == (1.0, 1.0, 1.0, 1.0), (name, method)
            assert score.right == 3 and not score.wrong_examples, (name, method, score.wrong_examples)
    for method in bench.METHODS:  # every method saw every request, inferred through ragtrace report's reader
        assert totals[method].traces == 66, method
        assert totals[method].tp > 0
        # the searches may leave a figure out (not measurable), never give a wrong one: an LLM
        # grader's call beside an answer shown the chunks alike is no answer's context
        assert totals[method].wrong == 0, (method, totals[method].wrong_examples)


def test_the_searches_read_every_issue_36_case_right(bench):
    """Few-shot examples under another label style, Unicode normal forms, a chunk that starts
    another, pieces, an earlier turn's labels, agent rounds: every source shows its label, so the
    located and inferred figures are all right (none wrong, none left out)."""
    from accuracy_search_scenarios import SEARCH_SCENARIOS

    names = {"few-shot example, other label style", "Unicode normal forms", "chunk that starts another", "chunk shown in pieces",
             "earlier turn's labels cited", "agent rounds numbered from [1]"}
    assert len(SEARCH_SCENARIOS) == len(names)
    _, per = bench.measure(per_scenario=4, seed=5)
    for name in names:
        for method in ("located", "inferred"):
            score = per[name][method]
            assert score.traces == 4 and score.right == 4, (name, method, score.wrong_examples, score.unmeasured)


def test_the_scoring_catches_a_wrong_figure(bench):
    """The benchmark can fail: a reading that misses a chunk and adds another is wrong, not right."""
    truth = bench.Truth(["a", "b", "c"], {"a", "b"}, {"a"}, 0)
    score = bench.Score()
    score.add(truth, bench.Reading({"a", "c"}, {"a"}, truth.figures()), "exact figures, wrong ids")
    off = dict(truth.figures(), in_context=3)
    score.add(truth, bench.Reading({"a", "b"}, {"a"}, off), "one figure off")
    score.add(truth, bench.Reading({"a", "b"}, {"a"}, {k: v for k, v in truth.figures().items() if k != "recall_proxy"}), "left out")
    assert (score.tp, score.fp, score.fn) == (5, 1, 1)
    assert (score.right, score.wrong, score.unmeasured) == (1, 1, 1) and not score.exact


def test_a_context_left_out_counts_as_not_measurable_not_as_missed_chunks(bench):
    """A reading with no in_context figure (answer_call_ambiguous) claims no chunk in or out: it
    adds no pair to the in-context P / R, and the trace counts as not measurable."""
    truth = bench.Truth(["a", "b", "c"], {"a", "b"}, {"a"}, 0, unmeasurable=("cited", "invalid_citations", "recall_proxy"))
    score = bench.Score()
    score.add(truth, bench.Reading(set(), set(), {"retrieved": 3}), "context left out")
    assert (score.tp, score.fp, score.fn) == (0, 0, 0)
    assert (score.right, score.wrong, score.unmeasured) == (0, 0, 1)
    score.add(truth, bench.Reading({"a"}, set(), {"retrieved": 3, "in_context": 1, "context_precision": 1 / 3}), "one chunk missed")
    assert (score.tp, score.fp, score.fn) == (1, 0, 1) and score.wrong == 1


def test_a_figure_given_where_the_truth_is_not_measurable_is_wrong(bench):
    """Unlabelled sources: a reading that counts the citations anyway is wrong, one that leaves them out right."""
    truth = bench.Truth(["a", "b"], {"a", "b"}, {"a"}, 0, unmeasurable=("cited", "invalid_citations", "recall_proxy"))
    measured = {"retrieved": 2, "in_context": 2, "context_precision": 1.0}
    score = bench.Score()
    score.add(truth, bench.Reading({"a", "b"}, set(), measured), "left out")
    score.add(truth, bench.Reading({"a", "b"}, set(), dict(measured, cited=0, invalid_citations=2, recall_proxy=0.0)), "counted")
    assert (score.right, score.wrong, score.unmeasured) == (1, 1, 0)
