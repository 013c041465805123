"""Aggregates: exact nearest-rank percentiles, bounded series, verdicts, recommendations, gates."""

from __future__ import annotations

import pytest

from ragtrace._internal import names
from ragtrace.cli import aggregate
from ragtrace.cli import aggregator as aggregator_module
from ragtrace.cli import distribution as distribution_module
from ragtrace.cli.aggregator import Aggregator, top_k_bucket
from ragtrace.cli.distribution import Distribution, Series
from ragtrace.cli.recommend import recommend
from ragtrace.cli.verdicts import verdict
from ragtrace.cli.settings import DEFAULT_THRESHOLDS
from ragtrace.cli.traces import Row

from .helpers import pipeline, provider_to


def _row(n: int = 0, *, recall: float = 0.5, precision: float = 0.5, retrieved: int = 10, in_context: int = 5, positions=(1,), **fields) -> Row:
    figures = {
        names.METRIC_RETRIEVED: retrieved,
        names.METRIC_IN_CONTEXT: in_context,
        names.METRIC_CITED: len(positions),
        names.METRIC_INVALID_CITATIONS: 0,
        names.METRIC_CONTEXT_PRECISION: precision,
        names.METRIC_RECALL_PROXY: recall,
        names.METRIC_RECALL_PROXY_WEIGHTED: recall,
        names.METRIC_CONTEXT_UTILIZATION: 0.5,
        names.METRIC_WASTED_CONTEXT_TOKENS: 10,
        names.METRIC_DUPLICATE_CHUNKS: 0,
        names.METRIC_CITED_POSITIONS: list(positions),
    }
    figures.update(fields.pop("figures", {}))
    row = Row(f"{n:032x}", f"{n:016x}", "f:1", time=fields.pop("time", 0), answers=1, retrievals=1, retrieved_items=retrieved, **fields)
    row.figures = figures
    return row


def test_nearest_rank_percentiles():
    distribution = Distribution()
    for value in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        distribution.add(value)
    assert [distribution.percentile(p) for p in (25, 50, 90)] == [0.3, 0.5, 0.9]
    assert Distribution().percentile(50) is None
    distribution = Distribution()
    distribution.add(3, count=7)
    distribution.add(10, count=3)
    assert distribution.percentile(50) == 3 and distribution.percentile(90) == 10
    assert distribution.histogram(2, 0, 20) == [7, 3]


def test_distribution_stays_bounded(monkeypatch):
    monkeypatch.setattr(distribution_module, "MAX_DISTINCT", 100)
    distribution = Distribution()
    for index in range(10_000):
        distribution.add(index / 10_000)
    assert distribution.n == 10_000
    assert len(distribution.counts) <= 100
    assert distribution.percentile(50) == pytest.approx(0.5, abs=0.05)
    distribution.add(0.123456)
    assert 0.1 in distribution.counts  # later values are rounded the same way


def test_series_buckets_double_to_stay_bounded(monkeypatch):
    monkeypatch.setattr(distribution_module, "MAX_BUCKETS", 8)
    series = Series()
    minute = 60 * 10**9
    for index in range(100):
        series.add(1_000 * minute + index * minute, {names.METRIC_RECALL_PROXY: index % 2})
    points = series.points()
    assert len(points) <= 8
    assert sum(p["traces"] for p in points) == 100
    assert all(p[names.METRIC_RECALL_PROXY] == pytest.approx(0.5, abs=0.07) for p in points)


def test_verdicts():
    assert verdict(_row(recall=0.5, precision=0.9), DEFAULT_THRESHOLDS).label == "ok"
    low = verdict(_row(recall=0.1, precision=0.9), DEFAULT_THRESHOLDS)
    assert low.label == "check" and low.reasons == ("recall<0.2", "recall_w<0.3")
    unmeasured = Row("t", "s", "f:1", status=["no_answer"])
    assert str(verdict(unmeasured, DEFAULT_THRESHOLDS)) == "not measurable: no answer"
    no_cites = _row(recall=0.5, precision=0.9, nonconformant=1)
    assert "no citations" in verdict(no_cites, DEFAULT_THRESHOLDS).reasons


def test_top_k_buckets():
    assert [top_k_bucket(k) for k in (1, 10, 11, 20, 50, 64, 500)] == ["1", "10", "11-20", "11-20", "21-50", "51-100", ">100"]


def test_no_recommendation_without_support():
    aggregator = Aggregator(DEFAULT_THRESHOLDS, min_traces=5)
    for n in range(20):
        aggregator.add(_row(n, top_k=10, placed_depth=10, in_context=10, precision=1.0, positions=(1, 2)))
    assert aggregator.recommendations() == []
    few = Aggregator(DEFAULT_THRESHOLDS, min_traces=5)
    for n in range(4):  # strong pattern, too few runs
        few.add(_row(n, top_k=10, placed_depth=2, in_context=2, nonconformant=1))
    assert few.recommendations() == []


def test_mid_prompt_and_duplicate_recommendations():
    aggregator = Aggregator(DEFAULT_THRESHOLDS, min_traces=5)
    for n in range(10):
        positions = [(4, 5), (5, 6), (4, 6), (5,), (6,)][n % 5]
        aggregator.add(_row(n, in_context=8, positions=positions, retrieved=8, figures={names.METRIC_DUPLICATE_CHUNKS: 1}))
    texts = aggregator.recommendations()
    assert "Cited chunks cluster mid-prompt (positions 4–6 of 8): reorder by relevance so the best chunks come first" in texts
    assert "12% of retrieved chunks are duplicates: deduplicate the index or the merged retrievals" in texts  # 10 of 80


def test_empty_retrievals_and_not_measurable_recommendations():
    aggregator = Aggregator(DEFAULT_THRESHOLDS, min_traces=5)
    for n in range(6):
        aggregator.add(_row(n))
    for n in range(6, 10):
        row = Row(f"{n:032x}", "s", "f:1", retrievals=1, empty_retrievals=1, status=["empty_retrieval"])
        row.figures = {names.METRIC_RETRIEVED: 0, names.METRIC_DUPLICATE_CHUNKS: 0}
        aggregator.add(row)
    texts = aggregator.recommendations()
    assert "40% of retrievals return nothing: check the index, filters and query rewriting" in texts
    assert "40% of traces are not measurable (most often: empty retrieval)" in texts


def test_issue_examples_from_real_traces(cli, tmp_path):
    """"Reduce top_k 10→4: median 3 of 10..." and "Answers cite nothing in 40% of traces"."""
    path = tmp_path / "topk.jsonl"
    provider = provider_to(path)
    ids = [f"d{i}" for i in range(1, 11)]
    for n in range(10):
        placed = ids[:3] if n < 6 else ids[:4]
        answer = "Cited [1]." if n % 5 not in (0, 1) else "No citation at all."
        pipeline(provider, "kb", f"question {n}", ids, placed, answer, top_k=10)
    provider.shutdown()
    result = cli("report", "--json", path)
    recommendations = result.json()["recommendations"]
    assert recommendations[0] == (
        "Reduce top_k 10→4: median 3 of 10 retrieved chunks reach the prompt (90% of traces use no chunk ranked below 4)"
    )
    assert "Answers cite nothing in 40% of traces: check the citation instruction" in recommendations
    assert len(recommendations) == 2


def test_recommendations_per_pipeline_when_there_are_several():
    aggregator = Aggregator(DEFAULT_THRESHOLDS, min_traces=5)
    for n in range(10):
        aggregator.add(_row(n, pipeline="a" if n % 2 else "b", nonconformant=1 if n % 2 else 0))
    assert aggregator.recommendations() == ["[a] Answers cite nothing in 100% of traces: check the citation instruction"]


def test_group_values_are_capped(monkeypatch):
    monkeypatch.setattr(aggregator_module, "MAX_GROUP_VALUES", 3)
    aggregator = Aggregator(DEFAULT_THRESHOLDS)
    for n in range(10):
        aggregator.add(_row(n, pipeline=f"p{n}"))
    groups = aggregator.groups["pipeline"]
    assert set(groups) == {"p0", "p1", "p2", "(other)"}
    assert groups["(other)"].traces == 7


def test_gate():
    aggregator = Aggregator(DEFAULT_THRESHOLDS)
    for n, recall in enumerate((0.1, 0.3, 0.5)):
        aggregator.add(_row(n, recall=recall))
    assert aggregator.gate({names.METRIC_RECALL_PROXY: 0.3}) == []
    assert aggregator.gate({names.METRIC_RECALL_PROXY: 0.4}) == ["recall_proxy: p50 0.300 < 0.4"]
    empty = Aggregator(DEFAULT_THRESHOLDS)
    assert empty.gate({names.METRIC_RECALL_PROXY: 0.1}) == ["recall_proxy: no measurable traces (bar 0.1)"]


def test_worst_rows_are_kept_in_order():
    aggregator = Aggregator(DEFAULT_THRESHOLDS, rows=3)
    for n, recall in enumerate((0.9, 0.05, 0.6, 0.15, 0.5)):
        aggregator.add(_row(n, recall=recall, precision=0.9))
    aggregator.add(Row("f" * 32, "s", "f:1", status=["no_answer"]))
    kept = [(row.figures.get(names.METRIC_RECALL_PROXY), v.label) for row, v in aggregator.worst()]
    assert kept == [(0.05, "check"), (0.15, "check"), (None, "not measurable")]


def test_small_recommendation_helpers():
    group = aggregate.Group()
    assert recommend(group, 5) == []


def _state(group: aggregate.Group) -> dict:
    """Everything a group holds, with the insertion order of every map (it shows in the output)."""
    def dist(d: Distribution) -> tuple:
        return (d.n, list(d.counts.items()))

    return {
        "totals": [getattr(group, name) for name in ("traces", "measurable", "inferred", "answers", "nonconformant", "traces_with_answers",
                                                      "traces_citing_nothing", "traces_with_invalid", "retrievals", "empty_retrievals",
                                                      "retrieved_items", "duplicates", "out_of_context_citations", "unknown_citations")],
        "figures": {metric: dist(d) for metric, d in group.figures.items()},
        "maps": [list(group.reasons.items()), list(group.verdicts.items()), list(group.positions.items()), list(group.sizes.items()),
                 list(group.inclusion.items())],
        "by_top_k": [(k, {name: dist(d) for name, d in slot.items()}) for k, slot in group.by_top_k.items()],
    }


@pytest.mark.parametrize("limit", [1, 3, aggregator_module.PENDING_LIMIT])
def test_counted_contributions_equal_adding_rows_one_by_one(monkeypatch, limit):
    """The Aggregator counts equal rows before applying them: the groups must end up exactly as
    if every row had been added on its own (Group.add), whatever the flush limit."""
    import random

    monkeypatch.setattr(aggregator_module, "PENDING_LIMIT", limit)
    rng = random.Random(limit)
    rows = []
    for n in range(400):
        kind = rng.randrange(5)
        if kind == 0:
            row = Row(f"{n:032x}", "s", "f:1", status=[rng.choice(["no_answer", "empty_retrieval", "spans_missing"])], retrievals=rng.randrange(2), empty_retrievals=1)
        else:
            size = rng.choice([3, 5, 8])
            row = _row(
                n,
                recall=rng.choice([0.0, 0.25, 0.5, 1.0, 1]),
                precision=rng.choice([0.5, 0.75, 0.5000000001]),
                in_context=size,
                positions=tuple(sorted(rng.sample(range(1, size + 1), rng.randrange(size)))),
                top_k=rng.choice([None, 4, 10]),
                placed_depth=rng.choice([None, 2, 3]),
                pipeline=rng.choice(["a", "b"]),
                labels={"version": rng.choice(["v1", "v2"]), "route": rng.choice(["faq", "search"])},
                nonconformant=rng.randrange(2),
                inferred=kind == 4,
                inclusion=rng.choice([None, "recorded", "declared", "located,recorded"]),
                figures={names.METRIC_DUPLICATE_CHUNKS: rng.choice([0, 1, None]), names.METRIC_INVALID_CITATIONS: rng.choice([0, 0, 2]),
                         names.METRIC_OUT_OF_CONTEXT_CITATIONS: rng.choice([0, 1])},
            )
        rows.append(row)

    counted = Aggregator(DEFAULT_THRESHOLDS)
    verdicts = [counted.add(row) for row in rows]

    one_by_one = Aggregator(DEFAULT_THRESHOLDS)
    reference = {"overall": aggregate.Group()}
    for row, row_verdict in zip(rows, verdicts):
        numbers = aggregate.summary_numbers(row.figures)
        reference["overall"].add(row, row_verdict, numbers)
        for dimension in one_by_one.group_by:
            value = one_by_one._dimension_value(row, dimension)
            if value is not None:
                reference.setdefault((dimension, value), aggregate.Group()).add(row, row_verdict, numbers)

    assert _state(counted.overall) == _state(reference["overall"])
    groups = {(dimension, value): group for dimension, values in counted.groups.items() for value, group in values.items()}
    for dimension in counted.group_by:  # same groups, created in the same order
        assert [k for k in groups if k[0] == dimension] == [k for k in reference if k != "overall" and k[0] == dimension]
    for key, group in groups.items():
        assert _state(group) == _state(reference[key]), key


def test_invalid_citation_advice_tells_the_two_kinds_apart():
    aggregator = Aggregator(DEFAULT_THRESHOLDS)
    for n in range(10):
        figures = {names.METRIC_INVALID_CITATIONS: 3, names.METRIC_OUT_OF_CONTEXT_CITATIONS: 1, names.METRIC_UNKNOWN_CITATIONS: 2} if n < 2 else {}
        aggregator.add(_row(n, figures=figures))
    (advice,) = [text for text in aggregator.recommendations() if "not in the prompt" in text]
    assert advice == (
        "Answers cite sources that are not in the prompt in 20% of traces: 2 name a retrieved chunk the prompt did not show "
        "(stale labels, truncation?); 4 name nothing retrieved (check the labels the model is shown)"
    )
