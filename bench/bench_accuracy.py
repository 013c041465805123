"""Accuracy of inclusion, split by how ragtrace knew it: recorded, declared, located, inferred.

Every scenario builds one RAG request the way some app does, with the ground truth set by
construction, then runs it four times, each as its own trace on the real OpenTelemetry SDK:

* **recorded**: ragtrace builds the prompt (``ragtrace.assemble``: ``add`` / ``render``);
* **declared**: the app builds it and declares each chunk's rendering (``ctx.place`` /
  ``ctx.set_prompt``);
* **located**: the app builds it and ragtrace searches it for the chunks (``ctx.observe``, what
  ``@ragtrace.assembler`` does without declarations);
* **inferred**: no ragtrace in the app at all: OpenInference-shaped spans (retriever documents, an
  LLM call's prompt and output), exported to OTLP/JSON and read back by ``ragtrace report``'s own
  reader and inference (``cli.foreign.infer``).

Scenarios (``accuracy_scenarios.py``; randomised, ``PER_SCENARIO`` each, seeded): plain; markdown
stripped by the app's formatter; hard-wrapped text re-wrapped; the prompt truncated (the token budget for recorded, a
character window for the app's own builder); chat messages; the whole request JSON-escaped (a
request body); duplicate chunks (the same text under two ids, shown twice by the app, placed once by
ragtrace); instructions that repeat a short chunk's text (the chunk dropped, or shown); an LLM grader
shown every retrieved chunk after the answer. Sources are labelled ``[n]``, ``Source n:``,
``<source id="n">``, ``(n)`` or not at all (joined, as LangChain's default ``format_docs`` does);
the answer cites ``[n]``. Issue 27's citation cases (``accuracy_citation_scenarios.py``) and issue
36's search cases (``accuracy_search_scenarios.py``: few-shot examples under another label style,
Unicode normal forms, a chunk that starts another, a chunk shown in pieces, an earlier turn's
labels cited, agent rounds numbered from ``[1]``) follow.

Scored per method: precision / recall of "chunk in context" over (trace, retrieved chunk) pairs
of the traces whose ``in_context`` the method gave, citation precision / recall over cited chunks, and the per-trace figures against the known
answers (retrieved, in_context, cited, invalid_citations, context_precision, recall_proxy; floats
to 1e-9): *right*; *wrong* when a figure it gives differs from the truth; else *not measurable*
(some figure left out, with a status saying why, instead of a guess), and *avoidable* when every
source showed its label so a search could have read it. Recorded and
declared must be exactly right (exit code 1 otherwise); located and inferred are what they are.

    python bench/bench_accuracy.py [--per-scenario N]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import io  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import ragtrace  # noqa: E402
from ragtrace._internal.setup import config as rt_config  # noqa: E402
from ragtrace._internal.core import guard as rt_guard  # noqa: E402
from ragtrace._internal import names  # noqa: E402
from ragtrace.cli.diagnostics import Diagnostics  # noqa: E402
from ragtrace.cli.foreign import infer  # noqa: E402
from ragtrace.cli.reader import TraceReader  # noqa: E402
from ragtrace.exporters import JsonLinesExporter  # noqa: E402

from accuracy_citation_scenarios import CITATION_SCENARIOS, wasted  # noqa: E402
from accuracy_scenarios import SCENARIOS as FIRST_SCENARIOS, WORDS, Case, Text  # noqa: E402
from accuracy_search_scenarios import SEARCH_SCENARIOS  # noqa: E402

PER_SCENARIO = 30
SEED = 7
METHODS = ("recorded", "declared", "located", "inferred")
EXACT_METHODS = ("recorded", "declared")  # must be 1.000 / 1.000 and every figure right
SCENARIOS = FIRST_SCENARIOS + CITATION_SCENARIOS + SEARCH_SCENARIOS


# --- running one case under one method ---------------------------------------------------------
@dataclass
class Truth:
    retrieved: list[str]
    in_context: set[str]
    cited: set[str]
    invalid: int
    unmeasurable: tuple[str, ...] = ()  # figures that must be left out (None below)
    wasted: int | None = None  # wasted_context_tokens, where the scenario knows the shown text
    readable: bool = True  # every source shows its label: a search can read every figure, so "not measurable" is avoidable
    shown: tuple[str, ...] = ()  # the in-context ids in prompt order (cited_positions)

    def figures(self) -> dict[str, Any]:
        r = len(self.retrieved)
        truth: dict[str, Any] = {
            names.METRIC_RETRIEVED: r,
            names.METRIC_IN_CONTEXT: len(self.in_context),
            names.METRIC_CITED: len(self.cited),
            names.METRIC_INVALID_CITATIONS: self.invalid,
            names.METRIC_CONTEXT_PRECISION: len(self.in_context) / r,
            names.METRIC_RECALL_PROXY: len(self.cited) / r,
        }
        if self.wasted is not None:
            truth[names.METRIC_WASTED_CONTEXT_TOKENS] = self.wasted
        if self.shown:
            order = list(dict.fromkeys(self.shown))
            truth[names.METRIC_CITED_POSITIONS] = None if names.METRIC_CITED in self.unmeasurable else sorted(order.index(c) + 1 for c in self.cited if c in order)
        truth.update(dict.fromkeys(self.unmeasurable))
        return truth

    @staticmethod
    def of(case: Case, shown: Sequence[str], cited: set[str], invalid: int) -> Truth:
        readable = not case.positional and all(label and label in fragment for _, fragment, label in case.built.placed)
        return Truth([d["id"] for d in case.docs], set(shown), cited, invalid, case.unmeasurable, wasted(case, list(shown), cited), readable, tuple(shown))


@dataclass
class Reading:
    in_context: set[str]
    cited: set[str]
    figures: dict[str, Any]


def _answer(rng: random.Random, text: Text, labels: dict[str, str], prose: str | None = None, stale: Sequence[str] = ()) -> tuple[str, set[str], int]:
    """An answer citing 1-3 of the labels the model saw, sometimes plus one that names nothing:
    as ``[n]``, or in words (``prose``): ``(Source n)``, or a closing ``Sources:`` line of ids.
    ``stale``: labels only an earlier turn or an example shows; the one that names nothing is
    then, half the time, one of them (an unknown citation all the same)."""
    keys = list(labels)
    chosen = sorted(rng.sample(keys, rng.randint(1, min(3, len(keys)))), key=keys.index)
    invalid = rng.random() < (0.5 if stale else 0.15)
    if prose == "line":
        cited = [labels[k] for k in chosen] + ([f"kb-none-{len(keys) + rng.randint(2, 5)}"] if invalid else [])
        body = " ".join(text.sentence(6, 12) for _ in chosen)
        return f"{body}\n\nSources: {', '.join(cited)}", {labels[k] for k in chosen}, int(invalid)
    mark = "(Source {})" if prose == "paren" else "[{}]"
    parts = [f"{text.sentence(6, 12)[:-1]} {mark.format(k)}." for k in chosen]
    if invalid:
        at = rng.randrange(len(parts) + 1)
        wrong = rng.choice(stale) if stale and rng.random() < 0.5 else len(keys) + rng.randint(2, 5)
        parts.insert(at, f"{text.sentence(6, 10)[:-1]} {mark.format(wrong)}.")
    return " ".join(parts), {labels[k] for k in chosen}, int(invalid)


def _answer_labels(case: Case) -> dict[str, str]:
    """The labels the app's model cites by: the ones it saw, or (sources shown bare) positions."""
    if case.positional:
        return {str(n): chunk_id for n, chunk_id in enumerate(case.built.shown, start=1)}
    return _labels(case.built.placed, case.built.shown)


def _labels(placed: Sequence[tuple[dict[str, Any], str, str]], shown: Sequence[str]) -> dict[str, str]:
    visible = set(shown)
    return {label: c["id"] for c, _, label in placed if c["id"] in visible}


def _sdk_pipeline(case: Case, method: str, question: str, answer_for: Callable[[dict[str, str]], tuple[str, set[str], int]]) -> tuple[Truth, Any]:
    with ragtrace.rag_pipeline("accuracy", query=question) as run:
        with ragtrace.retrieve(question, data_source="kb", top_k=len(case.docs)) as r:
            r.record(case.docs)
        with ragtrace.rerank(model="cross-encoder", top_n=len(case.kept)) as rr:
            rr.record(case.kept)
        built = case.built
        if method == "recorded":
            options = {"chunk_format": case.chunk_format} if case.chunk_format is not None else {}
            with ragtrace.assemble(max_tokens=case.max_tokens, **options) as ctx:
                sent, shown = case.recorded(ctx, question)
            labels = {str(n): chunk_id for n, chunk_id in enumerate(shown, start=1)}
        else:
            with ragtrace.assemble() as ctx:
                if method == "declared":
                    for chunk, shown_text, label in built.placed:
                        ctx.place(chunk, shown_text, label=label)
                    ctx.set_prompt(built.prompt)
                else:
                    ctx.observe(case.kept, built.prompt)
            sent, shown, labels = built.sent or built.prompt, built.shown, _answer_labels(case)
        answer, cited, invalid = answer_for(labels)
        with ragtrace.generate(model="answer-model", provider="local", prompt=sent) as g:
            g.record(answer)
        if case.grader:
            _grade(case.docs)
    return Truth.of(case, shown, cited, invalid), run


def grading_prompt(docs: Sequence[dict[str, Any]]) -> str:
    return "Rate 1-5 how well the answer is supported by these passages.\n\n" + "\n\n".join(d["content"] for d in docs)


def _grade(docs: Sequence[dict[str, Any]]) -> None:
    with ragtrace.generate(model="judge-model", provider="local", prompt=grading_prompt(docs), role="grader") as g:
        g.record("Score: 4")


def sdk_reading(spans: Sequence[Any], run: Any) -> Reading:
    in_context: set[str] = set()
    cited: set[str] = set()
    for span in spans:
        attributes = span.attributes or {}
        stage = attributes.get(names.RAG_STAGE)
        if stage == "assemble":
            in_context.update(attributes.get(names.RAG_CONTEXT_CHUNK_IDS, ()))
        elif stage == "generate" and attributes.get(names.RAG_GENERATION_ROLE) == "answer":
            cited.update(attributes.get(names.RAG_CITATION_IDS, ()))
    return Reading(in_context, cited, dict(run.metrics))


def foreign_trace(tracer: Any, case: Case, question: str, answer: str) -> None:
    """The same request traced by another instrumentation (OpenInference attributes), no ragtrace."""
    with tracer.start_as_current_span("RetrievalQA") as root:
        root.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_CHAIN)
        root.set_attribute(names.OI_INPUT_VALUE, question)
        with tracer.start_as_current_span("VectorStoreRetriever") as retriever:
            retriever.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_RETRIEVER)
            for index, doc in enumerate(case.docs):
                for key, value in ((names.OI_DOCUMENT_ID, doc["id"]), (names.OI_DOCUMENT_SCORE, doc["score"]), (names.OI_DOCUMENT_CONTENT, doc["content"])):
                    retriever.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, key), value)
        calls = [(case.built.sent or case.built.prompt, answer)]
        if case.grader:
            calls.append((grading_prompt(case.docs), "Score: 4"))
        for prompt, output in calls:
            with tracer.start_as_current_span("ChatModel") as llm:
                llm.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_LLM)
                if isinstance(prompt, str):
                    llm.set_attribute(names.OI_INPUT_VALUE, prompt)  # a raw request body stays one string
                else:
                    for index, message in enumerate(prompt):
                        llm.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, index, names.OI_MESSAGE_ROLE), message["role"])
                        llm.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, index, names.OI_MESSAGE_CONTENT), message["content"])
                llm.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_ROLE), "assistant")
                llm.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT), output)


def inferred_readings(path: Path) -> dict[str, Reading]:
    """Each trace of the file as ``ragtrace report`` infers it, by root input (the question)."""
    readings = {}
    for trace in TraceReader([path], Diagnostics(io.StringIO())):
        inference = infer(trace)
        if inference is None:
            continue
        in_context = {p.chunk_id for a in inference.answers for p in (a.placements or ())}
        in_context.update(p.chunk_id for placements in inference.contexts for p in placements)
        cited = {chunk_id for a in inference.answers for chunk_id in a.cited_ids}
        readings[inference.row.query or ""] = Reading(in_context, cited, dict(inference.row.figures))
    return readings


# --- scoring ------------------------------------------------------------------------------------
def _differs(got: Any, truth: Any) -> bool:
    if isinstance(truth, list):
        return list(got) != truth
    return abs(got - truth) > 1e-9


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    cite_tp: int = 0
    cite_fp: int = 0
    cite_fn: int = 0
    right: int = 0
    unmeasured: int = 0
    avoidable: int = 0  # not measurable though every source showed its label
    wrong: int = 0
    wrong_examples: list[str] = field(default_factory=list)

    def add(self, truth: Truth, reading: Reading, where: str) -> None:
        # a trace whose in_context the method left out (not measurable) claims no chunk in or out:
        # it counts in the not-measurable share below, not as missed chunks
        if names.METRIC_IN_CONTEXT in reading.figures:
            got = reading.in_context & set(truth.retrieved)
            self.tp += len(got & truth.in_context)
            self.fp += len(got - truth.in_context)
            self.fn += len(truth.in_context - got)
        if names.METRIC_CITED not in truth.unmeasurable:  # citations that can't be resolved are not scored
            self.cite_tp += len(reading.cited & truth.cited)
            self.cite_fp += len(reading.cited - truth.cited)
            self.cite_fn += len(truth.cited - reading.cited)
        # wrong: a figure given that differs from the truth; not measurable: none wrong, some left out
        expected, figures = truth.figures(), reading.figures
        # a figure given where the truth is "not measurable" (None) is wrong too
        diff = {k: (figures[k], v) for k, v in expected.items() if figures.get(k) is not None and (v is None or _differs(figures[k], v))}
        if diff:
            self.wrong += 1
            if len(self.wrong_examples) < 3:
                self.wrong_examples.append(f"{where}: (got, truth) {diff}")
        elif any(figures.get(k) is None for k, v in expected.items() if v is not None):
            self.unmeasured += 1
            self.avoidable += truth.readable
        else:
            self.right += 1

    @staticmethod
    def ratio(a: int, b: int) -> float:
        return a / b if b else 1.0

    @property
    def precision(self) -> float:
        return self.ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return self.ratio(self.tp, self.tp + self.fn)

    @property
    def cite_precision(self) -> float:
        return self.ratio(self.cite_tp, self.cite_tp + self.cite_fp)

    @property
    def cite_recall(self) -> float:
        return self.ratio(self.cite_tp, self.cite_tp + self.cite_fn)

    @property
    def traces(self) -> int:
        return self.right + self.unmeasured + self.wrong

    @property
    def exact(self) -> bool:
        return self.fp == self.fn == self.cite_fp == self.cite_fn == self.unmeasured == self.wrong == 0


def measure(per_scenario: int = PER_SCENARIO, seed: int = SEED) -> tuple[dict[str, Score], dict[str, dict[str, Score]]]:
    """Run every scenario ``per_scenario`` times under each method; the totals and per scenario."""
    rt_guard.set_strict(True)  # a ragtrace bug must fail the benchmark, not hide behind the guard
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rt_config.configure(tracer_provider=provider, capture_content="full", max_content_chars=100_000, hash_key="bench-accuracy")
    with tempfile.TemporaryDirectory() as folder:
        foreign_path = Path(folder) / "openinference.jsonl"
        foreign_provider = TracerProvider()
        foreign_provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(foreign_path)))
        tracer = foreign_provider.get_tracer("openinference.instrumentation.langchain")
        rng = random.Random(seed)
        totals = {m: Score() for m in METHODS}
        per: dict[str, dict[str, Score]] = {}
        pending: list[tuple[str, str, Truth]] = []  # inferred: scored once the file is read back
        traces = 0
        try:
            for _ in range(per_scenario):
                for scenario in SCENARIOS:
                    traces += 1
                    text = Text(rng, traces)
                    question = f"Question {traces}: how do I {' '.join(rng.sample(WORDS, 4))}?"
                    case = scenario(rng, text, question)
                    scores = per.setdefault(case.name, {m: Score() for m in METHODS})
                    user_answer = _answer(rng, text, _answer_labels(case), case.prose, case.stale)
                    for method in METHODS[:3]:
                        answer_for = (lambda labels: _answer(rng, text, labels, case.prose, case.stale)) if method == "recorded" else (lambda labels: user_answer)
                        truth, run = _sdk_pipeline(case, method, question, answer_for)
                        spans = exporter.get_finished_spans()
                        exporter.clear()
                        if len({s.context.trace_id for s in spans}) != 1:
                            raise AssertionError("one pipeline must be one trace")
                        reading = sdk_reading(spans, run)
                        for score in (totals[method], scores[method]):
                            score.add(truth, reading, f"{case.name} #{traces}")
                    answer, cited, invalid = user_answer
                    foreign_trace(tracer, case, question, answer)
                    pending.append((question, case.name, Truth.of(case, case.built.shown, cited, invalid)))
        finally:
            provider.shutdown()
            foreign_provider.shutdown()
            rt_guard.set_strict(False)
        readings = inferred_readings(foreign_path)
    if len(readings) != len(pending):
        raise AssertionError(f"ragtrace report read {len(readings)} of the {len(pending)} foreign traces")
    for question, name, truth in pending:
        reading = readings[question]
        for score in (totals["inferred"], per[name]["inferred"]):
            score.add(truth, reading, f"{name} ({question[:12]})")
    return totals, per


def _cell(score: Score) -> str:
    return f"{score.precision:.3f} {score.recall:.3f} {score.right}/{score.traces}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-scenario", type=int, default=PER_SCENARIO)
    args = parser.parse_args(argv)
    totals, per = measure(args.per_scenario)
    count = next(iter(totals.values())).traces
    print(f"{count} requests ({args.per_scenario} per scenario, seed {SEED}), each traced once per method")
    print("per scenario: in-context precision, recall, and traces whose figures are all right\n")
    header = f"{'scenario':<36}" + "".join(f" {m:>20}" for m in METHODS)
    print(header)
    print("-" * len(header))
    for name, scores in per.items():
        print(f"{name:<36}" + "".join(f" {_cell(scores[m]):>20}" for m in METHODS))
    print("\nby method (P, R over (trace, retrieved chunk) pairs where in_context was given; figures: retrieved, in_context, cited,")
    print("invalid_citations, context_precision, recall_proxy against the known answers, to 1e-9)\n")
    header = f"{'method':<10} {'incl. P':>8} {'incl. R':>8} {'cite P':>7} {'cite R':>7} {'right':>7} {'not meas.':>9} {'avoidable':>9} {'wrong':>6}"
    print(header)
    print("-" * len(header))
    for method in METHODS:
        s = totals[method]
        print(
            f"{method:<10} {s.precision:>8.3f} {s.recall:>8.3f} {s.cite_precision:>7.3f} {s.cite_recall:>7.3f}"
            f" {s.ratio(s.right, s.traces):>7.1%} {s.ratio(s.unmeasured, s.traces):>9.1%} {s.avoidable:>9} {s.wrong:>6}"
        )
    print("\n(avoidable: traces not measurable though every source showed its label; wrong: traces with a wrong figure)")
    for method in METHODS:
        for example in totals[method].wrong_examples:
            print(f"  {method} wrong: {example}")
    failed = [m for m in EXACT_METHODS if not totals[m].exact]
    if failed:
        print(f"\nMISS: {', '.join(failed)} must be exactly right")
        return 1
    print(f"\nPASS: {' and '.join(EXACT_METHODS)} are 1.000 / 1.000 with every figure right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
