"""``figures.compute`` on hand-built inputs with exact answers, and properties that must always hold.

Notation of the comments: R = unique retrieved ids with their best rank, C = in-context ids,
K = validly cited ids. Every expected number is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult

import ragtrace
from ragtrace._internal import names
from ragtrace._internal.core.assembly import Placement
from ragtrace._internal.core.chunks import Chunk
from ragtrace._internal.core.figures import Answer, compute, label

PROXIES = ("context_precision", "recall_proxy", "recall_proxy_weighted", "context_utilization")


def C(chunk_id: str, rank: int, content_hash: str | None = None) -> Chunk:
    return Chunk(chunk_id, rank, None, None, None, None, content_hash)


def P(chunk_id: str, position: int, tokens: int) -> Placement:
    return Placement(chunk_id, position, str(position), 0, 0, tokens, False)


def assert_values(figures, expected: dict) -> None:
    """Exactly these keys, with these values (floats to 1e-12)."""
    assert set(figures.values) == set(expected)
    for key, value in expected.items():
        got = figures.values[key]
        if isinstance(value, float):
            assert isinstance(got, float), key
            assert got == pytest.approx(value, rel=1e-12, abs=1e-12), key
        else:
            assert got == value and type(got) is type(value), key


# --- exact figures ----------------------------------------------------------------------------
def test_one_retrieval_one_answer():
    figures = compute(
        [[C("a", 1), C("b", 2), C("c", 3), C("d", 4)]],
        [Answer([P("a", 1, 5), P("b", 2, 7), P("c", 3, 11)], cited_ids=("b", "c"), invalid_citations=1, out_of_context_citations=1)],
    )
    assert_values(
        figures,
        {
            "retrieved": 4,
            "duplicate_chunks": 0,
            "in_context": 3,
            "context_precision": 0.75,  # |C ∩ R| / |R| = 3 / 4
            "cited": 2,
            "invalid_citations": 1,
            "out_of_context_citations": 1,  # e.g. [d]: retrieved, not in context
            "unknown_citations": 0,
            "recall_proxy": 0.5,  # |K ∩ R| / |R| = 2 / 4
            # (1/2 + 1/3) / (1 + 1/2 + 1/3 + 1/4) = (10/12) / (25/12) = 10/25
            "recall_proxy_weighted": 0.4,
            "context_utilization": 2 / 3,  # |K ∩ C| / |C|
            "wasted_context_tokens": 5,  # a (5 tokens) was never cited
            "cited_positions": [2, 3],
        },
    )
    assert figures.status == [] and figures.status_text is None


def test_a_truncated_retrieval_keeps_only_the_figures_of_c_and_k():
    # the same trace as above, but the retriever returned 6 items and only a..d were kept (2 omitted):
    # |R| is unknown, so are the ratios over R, the duplicates and which invalid citation names a
    # retrieved chunk; C = {a, b, c} and K = {b, c} are known whole
    figures = compute(
        [[C("a", 1), C("b", 2), C("c", 3), C("d", 4)]],
        [Answer([P("a", 1, 5), P("b", 2, 7), P("c", 3, 11)], cited_ids=("b", "c"), invalid_citations=1, out_of_context_citations=1)],
        omitted=2,
    )
    assert_values(
        figures,
        {
            "in_context": 3,
            "cited": 2,
            "invalid_citations": 1,
            "context_utilization": 2 / 3,
            "wasted_context_tokens": 5,
            "cited_positions": [2, 3],
        },
    )
    assert figures.status == ["retrieval_truncated"]
    # with no context and no answer: those reasons stay, after the truncation
    assert compute([[C("a", 1)]], [], omitted=1).status == ["retrieval_truncated", "no_context", "no_answer"]


def test_multi_hop_union_keeps_best_rank():
    # hop 1: a1 b2 c3; hop 2: c1 d2 a3  ->  R = {a:1, b:2, c:1, d:2}; c and a seen twice
    figures = compute(
        [[C("a", 1), C("b", 2), C("c", 3)], [C("c", 1), C("d", 2), C("a", 3)]],
        [Answer([P("c", 1, 4), P("d", 2, 6)], cited_ids=("d",))],
    )
    assert_values(
        figures,
        {
            "retrieved": 4,
            "duplicate_chunks": 2,
            "in_context": 2,
            "context_precision": 0.5,  # 2 / 4
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "recall_proxy": 0.25,  # 1 / 4
            "recall_proxy_weighted": 1 / 6,  # (1/2) / (1 + 1/2 + 1 + 1/2 = 3)
            "context_utilization": 0.5,  # 1 / 2
            "wasted_context_tokens": 4,  # c
            "cited_positions": [2],
        },
    )


def test_duplicates_by_content_and_by_id_are_not_double_counted():
    # a and b share content h1 (1 duplicate); c is new; then a again with h1: an id repeat (1),
    # not also a content repeat -> 2 in all. R keeps both a and b: they are different ids.
    figures = compute([[C("a", 1, "h1"), C("b", 2, "h1"), C("c", 3, "h2")], [C("a", 1, "h1")]], [])
    assert figures.values == {"retrieved": 3, "duplicate_chunks": 2}


def test_citations_of_chunks_not_in_context_are_not_counted():
    figures = compute([[C("a", 1), C("b", 2)]], [Answer([P("a", 1, 3)], cited_ids=("a", "b"))])
    # b was retrieved but not shown: citing it can't be valid, K = {a}
    assert figures.values["cited"] == 1
    assert figures.values["recall_proxy"] == 0.5
    assert figures.values["context_utilization"] == 1.0
    assert figures.values["wasted_context_tokens"] == 0


def test_in_context_chunk_that_was_never_retrieved():
    # the user added x by hand: it counts for C and K but not for precision's C ∩ R or recall
    figures = compute([[C("a", 1), C("b", 2)]], [Answer([P("a", 1, 3), P("x", 2, 4)], cited_ids=("x",))])
    assert_values(
        figures,
        {
            "retrieved": 2,
            "duplicate_chunks": 0,
            "in_context": 2,
            "context_precision": 0.5,  # |C ∩ R| = |{a}| = 1, / 2
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "recall_proxy": 0.0,  # K ∩ R is empty: a measured zero
            "recall_proxy_weighted": 0.0,
            "context_utilization": 0.5,  # 1 / 2
            "wasted_context_tokens": 3,  # a
            "cited_positions": [2],
        },
    )


def test_two_answers_union_their_contexts():
    figures = compute(
        [[C("a", 1), C("b", 2), C("c", 3), C("d", 4)]],
        [
            Answer([P("a", 1, 2), P("b", 2, 3)], cited_ids=("a",)),
            Answer([P("b", 1, 3), P("c", 2, 5)], cited_ids=("c",), invalid_citations=2),
        ],
    )
    # C = {a (pos 1), b (pos 2, first seen), c (pos 2)}; K = {a, c}
    assert_values(
        figures,
        {
            "retrieved": 4,
            "duplicate_chunks": 0,
            "in_context": 3,
            "context_precision": 0.75,  # 3 / 4
            "cited": 2,
            "invalid_citations": 2,  # 0 + 2
            "out_of_context_citations": 0,
            "unknown_citations": 2,
            "recall_proxy": 0.5,  # 2 / 4
            "recall_proxy_weighted": 0.64,  # (1 + 1/3) / (25/12) = (16/12) / (25/12)
            "context_utilization": 2 / 3,
            "wasted_context_tokens": 3,  # b
            "cited_positions": [1, 2],
        },
    )


def test_the_same_chunk_cited_twice_counts_once():
    figures = compute([[C("a", 1)]], [Answer([P("a", 1, 2)], cited_ids=("a", "a"))])
    assert figures.values["cited"] == 1
    assert figures.values["cited_positions"] == [1]


def test_unanswered_context_still_gives_in_context_and_precision():
    figures = compute([[C("a", 1), C("b", 2)]], [], contexts=[[P("a", 1, 2)]])
    assert_values(figures, {"retrieved": 2, "duplicate_chunks": 0, "in_context": 1, "context_precision": 0.5})
    assert figures.status_text == "no_answer"


# --- status: what could not be measured is left out, and said why -----------------------------
ANSWER_A = Answer([P("a", 1, 2)], cited_ids=("a",))


def test_no_retrieval():
    figures = compute([], [ANSWER_A])
    assert_values(
        figures,
        {
            "in_context": 1,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_utilization": 1.0,
            "wasted_context_tokens": 0,
            "cited_positions": [1],
        },
    )
    assert figures.status_text == "no_retrieval"


def test_empty_retrieval():
    figures = compute([[]], [ANSWER_A])
    assert_values(
        figures,
        {
            "retrieved": 0,  # a real count: the retriever returned nothing
            "duplicate_chunks": 0,
            "in_context": 1,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_utilization": 1.0,
            "wasted_context_tokens": 0,
            "cited_positions": [1],
        },
    )
    assert figures.status_text == "empty_retrieval"


def test_unreadable_retrieval():
    figures = compute([[]], [ANSWER_A], unreadable=3)
    assert "recall_proxy" not in figures.values and "context_precision" not in figures.values
    assert figures.status_text == "retrieved_chunks_unreadable"


def test_some_unreadable_items_do_not_block_the_figures():
    figures = compute([[C("a", 1)]], [ANSWER_A], unreadable=2)
    assert figures.values["recall_proxy"] == 1.0
    assert figures.status_text is None


def test_no_context():
    # without a known context a citation can't be resolved: no cited count, no recall (not 0.0)
    figures = compute([[C("a", 1), C("b", 2)]], [Answer(None, cited_ids=("a",))])
    assert_values(figures, {"retrieved": 2, "duplicate_chunks": 0})
    assert figures.status_text == "no_context"


def test_answer_without_context_next_to_an_unanswered_context():
    figures = compute([[C("a", 1)]], [Answer(None, cited_ids=("a",))], contexts=[[]])
    # the unanswered (empty) context still gives |C| = 0 and precision 0/1; the answer is unscored
    assert_values(figures, {"retrieved": 1, "duplicate_chunks": 0, "in_context": 0, "context_precision": 0.0})
    assert figures.status_text == "no_context"


def test_empty_context():
    figures = compute([[C("a", 1), C("b", 2)]], [Answer([], cited_ids=())])
    assert_values(
        figures,
        {
            "retrieved": 2,
            "duplicate_chunks": 0,
            "in_context": 0,
            "context_precision": 0.0,  # nothing placed out of 2: measured
            "cited": 0,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "recall_proxy": 0.0,
            "recall_proxy_weighted": 0.0,
            "wasted_context_tokens": 0,
            "cited_positions": [],
        },
    )
    assert figures.status_text == "empty_context"


def test_no_answer():
    figures = compute([[C("a", 1)]], [])
    assert figures.values == {"retrieved": 1, "duplicate_chunks": 0}
    assert figures.status_text == "no_context,no_answer"


def test_nothing_at_all():
    figures = compute([], [])
    assert figures.values == {}
    assert figures.status_text == "no_retrieval,no_context,no_answer"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.0, "none"), (0.2, "low"), (1 / 3, "medium"), (0.5, "medium"), (2 / 3, "high"), (1.0, "high")],
)
def test_score_labels(value, expected):
    assert label(value) == expected


# --- properties -------------------------------------------------------------------------------
IDS = st.sampled_from(list("abcdefgh"))
EXTRA_IDS = st.sampled_from(list("abcdefghxyz"))  # x, y, z are never retrieved
HASHES = st.one_of(st.none(), st.sampled_from(["h1", "h2", "h3", "h4"]))


@st.composite
def retrieval(draw):
    items = draw(st.lists(st.tuples(IDS, HASHES), max_size=6))
    return [C(chunk_id, rank, digest) for rank, (chunk_id, digest) in enumerate(items, start=1)]


@st.composite
def placements(draw):
    ids = draw(st.lists(EXTRA_IDS, unique=True, max_size=6))
    tokens = draw(st.lists(st.integers(0, 50), min_size=len(ids), max_size=len(ids)))
    return [P(chunk_id, position, t) for position, (chunk_id, t) in enumerate(zip(ids, tokens), start=1)]


@st.composite
def answer(draw, known_context: bool):
    shown = draw(placements()) if known_context else draw(st.one_of(st.none(), placements()))
    cited = draw(st.lists(EXTRA_IDS, max_size=6))
    return Answer(shown, tuple(cited), draw(st.integers(0, 5)))


def retrieved_oracle(retrievals):
    best: dict[str, int] = {}
    for r in retrievals:
        for chunk in r:
            best[chunk.id] = min(best.get(chunk.id, chunk.rank), chunk.rank)
    return best


@settings(max_examples=400, deadline=None)
@given(
    st.lists(retrieval(), max_size=3),
    st.lists(answer(known_context=False), max_size=3),
    st.lists(placements(), max_size=2),
    st.integers(0, 3),
)
def test_every_proxy_stays_in_the_unit_interval(retrievals, answers, contexts, unreadable):
    figures = compute(retrievals, answers, contexts=contexts, unreadable=unreadable)
    for key in PROXIES:
        if key in figures.values:
            value = figures.values[key]
            assert isinstance(value, float) and math.isfinite(value)
            assert 0.0 <= value <= 1.0, (key, value)
    # nothing is missing without a reason
    if any(key not in figures.values for key in names.ALL_METRICS):
        assert figures.status, figures.values
    else:
        assert figures.status_text is None


@settings(max_examples=400, deadline=None)
@given(st.lists(retrieval(), min_size=1, max_size=3), st.lists(answer(known_context=True), min_size=1, max_size=3))
def test_counts_are_consistent(retrievals, answers):
    figures = compute(retrievals, answers)
    v = figures.values
    best = retrieved_oracle(retrievals)
    placed: dict[str, Placement] = {}
    for a in answers:
        for p in a.placements:
            placed.setdefault(p.chunk_id, p)
    cited = {c for a in answers for c in a.cited_ids if c in placed}

    assert v["retrieved"] == len(best)
    total = sum(len(r) for r in retrievals)
    assert total - len(best) <= v["duplicate_chunks"] <= max(total - 1, 0)
    assert v["in_context"] == len(placed)
    assert v["cited"] == len(cited) <= v["in_context"]
    assert v["invalid_citations"] == sum(a.invalid_citations for a in answers)
    assert len(v["cited_positions"]) == v["cited"]
    assert v["cited_positions"] == sorted(v["cited_positions"])
    assert 0 <= v["wasted_context_tokens"] <= sum(p.tokens for p in placed.values())
    if best:
        in_both = sum(1 for c in placed if c in best)
        assert v["context_precision"] * len(best) == pytest.approx(in_both)
        cited_retrieved = sum(1 for c in cited if c in best)
        assert v["recall_proxy"] * len(best) == pytest.approx(cited_retrieved)
        assert cited_retrieved <= v["cited"]
        # the weighted proxy is zero exactly when the plain one is, and full exactly when it is
        assert (v["recall_proxy_weighted"] == 0.0) == (v["recall_proxy"] == 0.0)
        if v["recall_proxy"] == 1.0:
            assert v["recall_proxy_weighted"] == pytest.approx(1.0)
    if placed:
        assert v["context_utilization"] * len(placed) == pytest.approx(v["cited"])
        assert v["wasted_context_tokens"] == sum(p.tokens for c, p in placed.items() if c not in cited)


# --- via the SDK: export batching can't change the figures -------------------------------------
class BatchRecorder(SpanExporter):
    """Keeps each export() call's spans as one batch."""

    def __init__(self) -> None:
        self.batches: list[list] = []

    def export(self, spans):
        self.batches.append(list(spans))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


PROCESSORS = {
    "simple": lambda exporter: SimpleSpanProcessor(exporter),
    "batch_of_one": lambda exporter: BatchSpanProcessor(exporter, max_export_batch_size=1, schedule_delay_millis=5),
    "one_big_batch": lambda exporter: BatchSpanProcessor(
        exporter, max_queue_size=4096, max_export_batch_size=4096, schedule_delay_millis=600_000
    ),
}


@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 6))
    # one pair of docs may share content under two ids
    texts = [f"passage number {i} about topic {i}" for i in range(n)]
    if n >= 2 and draw(st.booleans()):
        texts[1] = texts[0]
    docs = [{"id": f"d{i}", "score": 1.0 - i / 10, "content": t} for i, t in enumerate(texts)]
    second_hop = draw(st.lists(st.sampled_from(range(n)), unique=True, max_size=n))
    added = draw(st.lists(st.sampled_from(range(n)), unique=True, max_size=n))
    max_tokens = draw(st.one_of(st.none(), st.integers(0, 40)))
    labels = draw(st.lists(st.integers(1, n + 2), max_size=5))
    answer = " ".join(f"claim [{k}]." for k in labels) or "No citations here."
    grader = draw(st.booleans())
    return docs, second_hop, added, max_tokens, answer, grader


def run_scenario(scenario):
    docs, second_hop, added, max_tokens, answer, grader = scenario
    with ragtrace.rag_pipeline("prop", query="q") as run:
        with ragtrace.retrieve("q") as r:
            r.record(docs)
        if second_hop:
            with ragtrace.retrieve("q2") as r2:
                r2.record([docs[i] for i in second_hop])
        with ragtrace.assemble(max_tokens=max_tokens) as ctx:
            for i in added:
                ctx.add(docs[i])
            prompt = ctx.render(question="q")
        if grader:
            with ragtrace.assemble() as everything:
                for d in docs:
                    everything.add(d)
            with ragtrace.generate(model="judge", role="grader", context=everything) as g:
                g.record(" ".join(f"[{i + 1}]" for i in range(len(docs))))
        with ragtrace.generate(model="m", prompt=prompt, context=ctx) as g:
            g.record(answer)
    return run


def exported(processor_name: str, scenario):
    exporter = BatchRecorder()
    provider = TracerProvider()
    provider.add_span_processor(PROCESSORS[processor_name](exporter))
    ragtrace.configure(tracer_provider=provider)
    try:
        run = run_scenario(scenario)
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
    spans = [s for batch in exporter.batches for s in batch]
    root = next(s for s in spans if s.attributes.get("rag.stage") == "pipeline")
    answer_span = next(
        s for s in spans if s.attributes.get("rag.stage") == "generate" and s.attributes.get("rag.generation.role") == "answer"
    )

    def figures_of(span):
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in span.attributes.items() if k.startswith("rag.metrics.")}

    return run, exporter.batches, figures_of(root), figures_of(answer_span)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_figures_do_not_depend_on_export_batching(scenario):
    results = {name: exported(name, scenario) for name in PROCESSORS}
    span_count = len(results["simple"][1])  # SimpleSpanProcessor: one export per span
    assert all(len(batch) == 1 for batch in results["simple"][1])
    assert all(len(batch) == 1 for batch in results["batch_of_one"][1])
    assert len(results["batch_of_one"][1]) == span_count
    assert [len(b) for b in results["one_big_batch"][1]] == [span_count]

    run, _, root_figures, answer_figures = results["simple"]
    assert root_figures  # at least the counts are always there
    for name, (other_run, _, other_root, other_answer) in results.items():
        assert other_root == root_figures, name
        assert other_answer == answer_figures, name
        assert other_run.metrics == run.metrics, name
    # the root carries exactly run.metrics (and the status when something was unmeasurable)
    expected = {"rag.metrics." + k: v for k, v in run.metrics.items()}
    if run.status is not None:
        expected["rag.metrics.status"] = run.status
    if run.inclusion_method is not None:
        expected["rag.metrics.inclusion_method"] = run.inclusion_method
    assert root_figures == expected
    for key in PROXIES:
        if key in run.metrics:
            assert 0.0 <= run.metrics[key] <= 1.0


# --- file granularity ----------------------------------------------------------------------------
# Citations that name files (OpenAI's file_citation): F_R, F_C = the files of R's and C's chunks,
# F_K = the cited files that have a chunk in C. The chunks below: a1, a2 of file fa; b1 of fb; c1 of fc.
def F(chunk_id: str, rank: int, file_id: str | None) -> Chunk:
    return Chunk(chunk_id, rank, None, None, None, None, None, file_id)


FILES = [F("a1", 1, "fa"), F("a2", 2, "fa"), F("b1", 3, "fb"), F("c1", 4, "fc")]
SHOWN = [P("a1", 1, 5), P("a2", 2, 7), P("b1", 3, 11), P("c1", 4, 2)]


def test_a_cited_file_with_several_chunks_in_context_still_gives_the_file_figures():
    # fa cited, resolving to a1 and a2: which of them the answer rests on is not known, so the
    # chunk-counting figures are not measurable; F_R = F_C = {fa, fb, fc}, F_K = {fa}
    answer = Answer(SHOWN, ("a1", "a2"), unmeasured=names.STATUS_CITATIONS_FILE_LEVEL, cited_files=("fa",))
    figures = compute([FILES], [answer])
    assert_values(
        figures,
        {
            "retrieved": 4, "duplicate_chunks": 0, "in_context": 4, "context_precision": 1.0,
            "retrieved_files": 3, "in_context_files": 3, "cited_files": 1,
            "file_recall_proxy": 1 / 3,  # |F_K ∩ F_R| / |F_R|
            "file_context_utilization": 1 / 3,  # |F_K ∩ F_C| / |F_C|
        },
    )
    assert figures.status == [names.STATUS_CITATIONS_FILE_LEVEL]


def test_exact_file_citations_give_both_the_chunk_and_the_file_figures():
    # fb and fc cited, one chunk each: K = {b1, c1} exactly; F_K = {fb, fc}
    answer = Answer(SHOWN, ("b1", "c1"), cited_files=("fb", "fc"))
    figures = compute([FILES], [answer])
    assert figures.values["recall_proxy"] == 0.5 and figures.values["cited"] == 2  # 2 / 4 chunks
    assert (figures.values["cited_files"], figures.values["file_recall_proxy"], figures.values["file_context_utilization"]) == (2, 2 / 3, 2 / 3)
    assert figures.status == []


def test_a_cited_file_outside_the_context_is_no_cited_file():
    # the context holds a1 and b1 only (F_C = {fa, fb}); fc (retrieved, not shown) and fa are
    # cited: F_K = {fa}; recall over F_R = {fa, fb, fc}: 1/3; utilisation over F_C: 1/2
    answer = Answer(SHOWN[:1] + SHOWN[2:3], ("a1",), invalid_citations=1, out_of_context_citations=1, cited_files=("fc", "fa"))
    figures = compute([FILES], [answer])
    assert (figures.values["retrieved_files"], figures.values["in_context_files"], figures.values["cited_files"]) == (3, 2, 1)
    assert figures.values["file_recall_proxy"] == pytest.approx(1 / 3) and figures.values["file_context_utilization"] == 0.5


def test_a_chunk_whose_file_is_not_known_leaves_the_file_figures_out_and_says_so():
    # d1, of the app's own retriever, has no file: F_R is not known, nor any ratio of files
    answer = Answer(SHOWN, ("a1", "a2"), unmeasured=names.STATUS_CITATIONS_FILE_LEVEL, cited_files=("fa",))
    figures = compute([FILES, [F("d1", 1, None)]], [answer])
    assert not set(names.FILE_METRICS) & set(figures.values)
    assert figures.status == [names.STATUS_CITATIONS_FILE_LEVEL, names.STATUS_FILES_UNKNOWN]
    # a placed chunk that no retrieval returned has no known file either
    placed = compute([FILES], [Answer([*SHOWN, P("x", 5, 1)], ("a1", "a2"), unmeasured=names.STATUS_CITATIONS_FILE_LEVEL, cited_files=("fa",))])
    assert (placed.values["retrieved_files"], names.STATUS_FILES_UNKNOWN in placed.status) == (3, True)
    assert "file_recall_proxy" not in placed.values and "in_context_files" not in placed.values


def test_beside_a_file_level_answer_a_chunk_level_one_cites_its_chunks_files():
    # answer 1 cites file fa (a1, a2); answer 2's citations name chunk c1: F_K = {fa, fc}
    first = Answer(SHOWN, ("a1", "a2"), unmeasured=names.STATUS_CITATIONS_FILE_LEVEL, cited_files=("fa",))
    second = Answer(SHOWN, ("c1",))
    figures = compute([FILES], [first, second])
    assert (figures.values["cited_files"], figures.values["file_recall_proxy"]) == (2, 2 / 3)


def test_file_figures_only_where_citations_name_files_and_only_when_the_rest_is_known():
    chunk_level = compute([FILES], [Answer(SHOWN, ("b1",))])
    assert not set(names.FILE_METRICS) & set(chunk_level.values) and chunk_level.status == []
    # another reason the answer can't be scored (the stream broke off): no file figure either
    broken = compute([FILES], [Answer(SHOWN, unmeasured=names.STATUS_ANSWER_INCOMPLETE, cited_files=("fa",))])
    assert not set(names.FILE_METRICS) & set(broken.values) and broken.status == [names.STATUS_ANSWER_INCOMPLETE]
    # a retrieval cut at max_retrieved: F_R is not known whole, F_C and F_K are
    cut = compute([FILES], [Answer(SHOWN, ("a1", "a2"), unmeasured=names.STATUS_CITATIONS_FILE_LEVEL, cited_files=("fa",))], omitted=2)
    assert "retrieved_files" not in cut.values and "file_recall_proxy" not in cut.values
    assert (cut.values["in_context_files"], cut.values["cited_files"], cut.values["file_context_utilization"]) == (3, 1, 1 / 3)
    assert cut.status[0] == names.STATUS_RETRIEVAL_TRUNCATED


def test_an_empty_context_gives_no_file_utilisation():
    figures = compute([FILES], [Answer([], (), cited_files=("fa",))])
    assert (figures.values["in_context_files"], figures.values["cited_files"], figures.values["file_recall_proxy"]) == (0, 0, 0.0)
    assert "file_context_utilization" not in figures.values and names.STATUS_EMPTY_CONTEXT in figures.status


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(["f1", "f2", "f3"])), max_size=5), max_size=3),
    st.lists(st.sampled_from("abcdefg"), unique=True, max_size=6),
    st.lists(st.sampled_from(["f1", "f2", "f3", "f9"]), max_size=4),
)
def test_file_figures_against_an_oracle(retrieved, shown, cited):
    """Each chunk id has one file (the first drawn for it), as a provider's ids do."""
    owner: dict[str, str] = {}
    retrievals = [[F(c, rank, owner.setdefault(c, f)) for rank, (c, f) in enumerate(r, start=1)] for r in retrieved]
    answer = Answer([P(c, i, 1) for i, c in enumerate(shown, start=1)], (), cited_files=tuple(cited))
    figures = compute(retrievals, [answer])
    if any(c not in owner for c in shown):
        assert names.STATUS_FILES_UNKNOWN in figures.status and "in_context_files" not in figures.values
        return
    f_r, f_c = set(owner.values()), {owner[c] for c in shown}
    f_k = set(cited) & f_c
    assert (figures.values["in_context_files"], figures.values["cited_files"]) == (len(f_c), len(f_k))
    if retrievals:
        assert figures.values["retrieved_files"] == len(f_r)
    if f_r:
        assert figures.values["file_recall_proxy"] == len(f_k & f_r) / len(f_r)
    if f_c:
        assert figures.values["file_context_utilization"] == len(f_k) / len(f_c)
    assert names.STATUS_FILES_UNKNOWN not in figures.status
