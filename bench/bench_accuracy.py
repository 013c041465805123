"""Accuracy of inclusion: ragtrace's recorded context and citations against substring inference.

Generates traces with known ground truth, runs each through ragtrace on the real OpenTelemetry SDK
(in-memory exporter), then reads the exported spans two ways:

* **ragtrace**: what it recorded: ``rag.context.chunk_ids`` of the assemble span(s),
  ``rag.citation.ids`` of the answer generation, ``rag.metrics.context_precision`` of the root.
* **substring** (``bench/substring_baseline.py``): how a trace-only tool infers the same from the
  retrieved chunks' text and every LLM prompt of the trace: ``chunk.content in prompt``.

Scenarios (``PER_SCENARIO`` traces each, randomised: 6-10 retrieved chunks, 3-7 kept, random
citations, some invalid): plain; chunks reformatted by a user assembler (whitespace collapsed or
re-wrapped); truncation at the token budget; duplicates (same content under two ids) placed once,
and shown twice by a user assembler; chat messages; instructions that repeat a short chunk's text
while the chunk is dropped (ragtrace's assemble, and a user-built prompt); an LLM grader that is
shown every retrieved chunk.

Ground truth is set by construction: a chunk is *in context* when it is placed in the answer
prompt as a labelled source (a truncated chunk counts; a duplicate copy that isn't shown doesn't);
it is *cited* when the answer cites its label. Precision and recall of "in context" are over all
(trace, retrieved chunk) pairs; the context precision error is the mean |derived - true| of
|C|/|R| per trace. The issue sets no number here; the check is that ragtrace is no worse than the
substring baseline on any overall figure.

    python bench/bench_accuracy.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
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
import substring_baseline  # noqa: E402
from ragtrace._internal import config as rt_config  # noqa: E402
from ragtrace._internal import guard as rt_guard  # noqa: E402

PER_SCENARIO = 40
SEED = 7
TOKENIZER = ragtrace.SimpleTokenizer()

WORDS = (
    "index shard replica query vector embedding cosine passage chunk token budget prompt latency cache "
    "tenant region bucket policy retention snapshot backup restore cluster node failover quorum lease "
    "ingest pipeline schema field filter facet ranking score threshold window batch stream partition "
    "offset consumer producer topic broker storage tier archive compaction merge segment commit log "
    "audit access role permission token secret rotation certificate endpoint gateway route timeout "
    "retry backoff quota limit invoice billing plan upgrade downgrade trial seat license webhook event"
).split()
INSTRUCTIONS = [
    "Always answer in English.",
    "Cite every source you use.",
    "Never reveal internal ticket numbers.",
    "Keep the answer under five sentences.",
    "Say you do not know when the sources disagree.",
    "Do not speculate about future releases.",
]


# --- ground truth and text generation ---------------------------------------------------------
@dataclass
class Truth:
    scenario: str
    retrieved: list[str]  # unique ids, rank order
    in_context: set[str]
    cited: set[str]
    answer_prompt_texts: list[str] = field(default_factory=list)  # for the sanity check
    placed_content: dict[str, str] = field(default_factory=dict)

    @property
    def context_precision(self) -> float:
        return len(self.in_context & set(self.retrieved)) / len(self.retrieved)


class Text:
    def __init__(self, rng: random.Random, trace_no: int) -> None:
        self.rng, self.trace_no, self.count = rng, trace_no, 0

    def sentence(self, low: int = 8, high: int = 16) -> str:
        words = self.rng.choices(WORDS, k=self.rng.randint(low, high))
        return " ".join(words).capitalize() + "."

    def doc(self, *, hard_wrapped: bool = False) -> dict[str, Any]:
        self.count += 1
        sentences = [self.sentence() for _ in range(self.rng.randint(2, 4))]
        sentences.insert(self.rng.randrange(len(sentences) + 1), f"Reference T{self.trace_no}-C{self.count}.")
        content = " ".join(sentences)
        if hard_wrapped:  # source text with hard line breaks and double spaces, as PDFs extract
            words = content.split(" ")
            content = "".join(
                word + ("" if i == len(words) - 1 else self.rng.choice([" ", " ", " ", "\n", "  "]))
                for i, word in enumerate(words)
            )
        return {"id": f"t{self.trace_no}-c{self.count}", "content": content}

    def answer(self, labels: Sequence[str], invalid: str | None = None) -> str:
        parts = []
        for label in labels:
            parts.append(f"{self.sentence(6, 12)[:-1]} [{label}].")
        if invalid is not None:
            parts.insert(self.rng.randrange(len(parts) + 1), f"{self.sentence(6, 10)[:-1]} [{invalid}].")
        if len(labels) >= 2 and self.rng.random() < 0.3:  # a grouped marker
            parts.append(f"{self.sentence(5, 8)[:-1]} [{labels[0]}, {labels[-1]}].")
        return " ".join(parts)


def _scored(docs: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    scores = sorted((round(rng.uniform(0.3, 0.95), 3) for _ in docs), reverse=True)
    return [dict(d, score=s) for d, s in zip(docs, scores)]


def _citations(rng: random.Random, count: int) -> tuple[list[int], bool]:
    """1-based positions the answer cites, and whether it adds an invalid label."""
    k = rng.randint(1, min(3, count))
    return sorted(rng.sample(range(1, count + 1), k)), rng.random() < 0.15


# --- the user's own prompt builder (ragtrace locates the chunks in what it returns) -----------
@ragtrace.assembler
def build_prompt(question: str, chunks: list[dict[str, Any]], style: str = "collapse", shown: int | None = None, instructions: str = "") -> str:
    lines = []
    for label, chunk in enumerate(chunks[:shown] if shown is not None else chunks, start=1):
        text = " ".join(chunk["content"].split())
        if style == "rewrap":
            text = textwrap.fill(text, width=random.Random(label).randint(50, 90))
        lines.append(f"[{label}] {text}")
    head = f"{instructions}\n\n" if instructions else ""
    return f"{head}Sources:\n\n" + "\n\n".join(lines) + f"\n\nQuestion: {question}\nAnswer:"


@ragtrace.assembler
def build_prompt_skipping_short(question: str, chunks: list[dict[str, Any]], instructions: str = "") -> str:
    """Like many hand-written builders: drops chunks too short to be useful."""
    useful = [c for c in chunks if len(c["content"]) >= 60]
    body = "\n\n".join(f"[{i}] {c['content']}" for i, c in enumerate(useful, start=1))
    return f"{instructions}\n\nSources:\n\n{body}\n\nQuestion: {question}\nAnswer:"


# --- scenarios --------------------------------------------------------------------------------
Scenario = Callable[[random.Random, Text, str], Truth]


def _retrieve_and_rerank(docs: list[dict[str, Any]], kept: list[dict[str, Any]], query: str) -> None:
    with ragtrace.retrieve(query, data_source="kb", top_k=len(docs)) as r:
        r.record(docs)
    with ragtrace.rerank(model="cross-encoder", top_n=len(kept)) as rr:
        rr.record(kept)


def _answer(text: Text, rng: random.Random, placed: list[dict[str, Any]], prompt: Any, labels: list[str] | None = None) -> set[str]:
    labels = labels or [str(i) for i in range(1, len(placed) + 1)]
    positions, invalid = _citations(rng, len(placed))
    answer = text.answer([labels[p - 1] for p in positions], invalid=str(len(placed) + rng.randint(2, 5)) if invalid else None)
    with ragtrace.generate(model="answer-model", provider="local", prompt=prompt) as g:
        g.record(answer)
    return {placed[p - 1]["id"] for p in positions}


def _texts(prompt: Any) -> list[str]:
    return [prompt] if isinstance(prompt, str) else [m["content"] for m in prompt]


def _pick(rng: random.Random, docs: list[dict[str, Any]], low: int = 3, high: int = 7) -> list[dict[str, Any]]:
    kept = rng.sample(docs, rng.randint(low, min(high, len(docs) - 1)))
    return [dict(d, score=round(1 - 0.1 * i, 2)) for i, d in enumerate(kept)]


def plain(rng: random.Random, text: Text, query: str, *, grade: bool = False) -> Truth:
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _pick(rng, docs)
    _retrieve_and_rerank(docs, kept, query)
    with ragtrace.assemble(max_tokens=4000) as ctx:
        for d in kept:
            ctx.add(d)
        prompt = ctx.render(question=query)
    cited = _answer(text, rng, kept, prompt)
    if grade:  # an LLM judge shown every retrieved chunk; traced, left out of ragtrace's figures
        grading = "Rate 1-5 how well the answer is supported by these passages.\n\n" + "\n\n".join(d["content"] for d in docs)
        with ragtrace.generate(model="judge-model", provider="local", prompt=grading, role="grader") as g:
            g.record("Score: 4")
    return Truth("plain", [d["id"] for d in docs], {d["id"] for d in kept}, cited, _texts(prompt), {d["id"]: d["content"] for d in kept})


def reformatted(rng: random.Random, text: Text, query: str) -> Truth:
    docs = _scored([text.doc(hard_wrapped=True) for _ in range(rng.randint(6, 10))], rng)
    kept = _pick(rng, docs)
    shown = rng.randint(max(1, len(kept) - 2), len(kept))  # the builder may show only the best few
    _retrieve_and_rerank(docs, kept, query)
    prompt = build_prompt(query, chunks=kept, style=rng.choice(["collapse", "rewrap"]), shown=shown)
    placed = kept[:shown]
    cited = _answer(text, rng, placed, prompt)
    return Truth("reformatted (user assembler)", [d["id"] for d in docs], {d["id"] for d in placed}, cited, _texts(prompt), {d["id"]: d["content"] for d in placed})


def truncated(rng: random.Random, text: Text, query: str) -> Truth:
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _pick(rng, docs, 4, 7)
    counts = [TOKENIZER.count(d["content"]) for d in kept]
    fit = rng.randint(1, len(kept) - 2)  # chunks that fit whole; the next one is cut, the rest dropped
    room = rng.randint(10, counts[fit] - 4)
    _retrieve_and_rerank(docs, kept, query)
    with ragtrace.assemble(max_tokens=sum(counts[:fit]) + room) as ctx:
        for d in kept:
            ctx.add(d)
        prompt = ctx.render(question=query)
    placed = kept[: fit + 1]
    cited = _answer(text, rng, placed, prompt)
    return Truth("truncated at budget", [d["id"] for d in docs], {d["id"] for d in placed}, cited, _texts(prompt), {d["id"]: d["content"] for d in placed})


def _with_mirror(rng: random.Random, text: Text) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    docs = [text.doc() for _ in range(rng.randint(5, 9))]
    original = rng.choice(docs)
    mirror = {"id": original["id"] + "-mirror", "content": original["content"]}
    docs.insert(rng.randint(docs.index(original) + 1, len(docs)), mirror)
    return _scored(docs, rng), original, mirror


def duplicates_placed_once(rng: random.Random, text: Text, query: str) -> Truth:
    docs, original, mirror = _with_mirror(rng, text)
    others = [d for d in docs if d["id"] not in (original["id"], mirror["id"])]
    kept = _pick(rng, others, 1, 4) + [dict(original), dict(mirror)]
    rng.shuffle(kept)
    _retrieve_and_rerank(docs, kept, query)
    with ragtrace.assemble(max_tokens=4000) as ctx:
        for d in kept:
            ctx.add(d)  # the second copy is refused: the model sees the text once
        prompt = ctx.render(question=query)
    seen: set[str] = set()
    placed = []
    for d in kept:
        if d["content"] not in seen:
            seen.add(d["content"])
            placed.append(d)
    cited = _answer(text, rng, placed, prompt)
    return Truth("duplicates, placed once", [d["id"] for d in docs], {d["id"] for d in placed}, cited, _texts(prompt), {d["id"]: d["content"] for d in placed})


def duplicates_shown_twice(rng: random.Random, text: Text, query: str) -> Truth:
    docs, original, mirror = _with_mirror(rng, text)
    others = [d for d in docs if d["id"] not in (original["id"], mirror["id"])]
    kept = _pick(rng, others, 1, 4) + [dict(original), dict(mirror)]
    rng.shuffle(kept)
    _retrieve_and_rerank(docs, kept, query)
    prompt = build_prompt(query, chunks=kept, style="collapse")  # no dedup: both copies, two labels
    cited = _answer(text, rng, kept, prompt)
    return Truth("duplicates, shown twice (user assembler)", [d["id"] for d in docs], {d["id"] for d in kept}, cited, _texts(prompt), {d["id"]: d["content"] for d in kept})


def chat(rng: random.Random, text: Text, query: str) -> Truth:
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _pick(rng, docs)
    _retrieve_and_rerank(docs, kept, query)
    if rng.random() < 0.5:
        template = [
            {"role": "system", "content": "You are a support assistant. Answer from the sources and cite them as [n].\n\nSources:\n{context}"},
            {"role": "user", "content": "{question}"},
        ]
    else:
        template = [
            {"role": "system", "content": "You are a support assistant. Cite sources as [n]."},
            {"role": "user", "content": "Earlier question about billing."},
            {"role": "assistant", "content": "Billing questions go to the billing team."},
            {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"},
        ]
    with ragtrace.assemble(max_tokens=4000) as ctx:
        for d in kept:
            ctx.add(d)
        prompt = ctx.render(template, question=query)
    cited = _answer(text, rng, kept, prompt)
    return Truth("chat messages", [d["id"] for d in docs], {d["id"] for d in kept}, cited, _texts(prompt), {d["id"]: d["content"] for d in kept})


def _with_instruction_chunk(rng: random.Random, text: Text) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    docs = [text.doc() for _ in range(rng.randint(5, 9))]
    rule = rng.choice(INSTRUCTIONS)
    text.count += 1
    short = {"id": f"t{text.trace_no}-c{text.count}", "content": rule}  # e.g. a style-guide page
    docs.insert(rng.randrange(len(docs) + 1), short)
    others = rng.sample(INSTRUCTIONS, 2)
    instructions = " ".join(dict.fromkeys([*others, rule]))
    return _scored(docs, rng), short, instructions


def instructions_recorded(rng: random.Random, text: Text, query: str) -> Truth:
    docs, short, instructions = _with_instruction_chunk(rng, text)
    kept = _pick(rng, [d for d in docs if d["id"] != short["id"]])
    _retrieve_and_rerank(docs, kept, query)  # the short chunk is reranked out
    with ragtrace.assemble(max_tokens=4000) as ctx:
        for d in kept:
            ctx.add(d)
        template = f"{instructions}\n\nSources:\n{{context}}\n\nQuestion: {{question}}\nAnswer:"
        prompt = ctx.render(template, question=query)
    cited = _answer(text, rng, kept, prompt)
    return Truth("instructions repeat a dropped chunk", [d["id"] for d in docs], {d["id"] for d in kept}, cited, _texts(prompt), {d["id"]: d["content"] for d in kept})


def instructions_located(rng: random.Random, text: Text, query: str) -> Truth:
    docs, short, instructions = _with_instruction_chunk(rng, text)
    kept = _pick(rng, [d for d in docs if d["id"] != short["id"]], 2, 6) + [dict(short)]
    rng.shuffle(kept)
    _retrieve_and_rerank(docs, kept, query)
    prompt = build_prompt_skipping_short(query, chunks=kept, instructions=instructions)
    placed = [d for d in kept if len(d["content"]) >= 60]
    cited = _answer(text, rng, placed, prompt)
    return Truth("instructions repeat a dropped chunk (user assembler)", [d["id"] for d in docs], {d["id"] for d in placed}, cited, _texts(prompt), {d["id"]: d["content"] for d in placed})


def grader(rng: random.Random, text: Text, query: str) -> Truth:
    truth = plain(rng, text, query, grade=True)
    truth.scenario = "LLM grader sees every chunk"
    return truth


SCENARIOS: list[Scenario] = [
    plain,
    reformatted,
    truncated,
    duplicates_placed_once,
    duplicates_shown_twice,
    chat,
    instructions_recorded,
    instructions_located,
    grader,
]


# --- reading the spans ------------------------------------------------------------------------
@dataclass
class Reading:
    in_context: set[str]
    cited: set[str]
    context_precision: float | None


def ragtrace_reading(spans: Sequence[Any]) -> Reading:
    in_context: set[str] = set()
    cited: set[str] = set()
    precision = None
    for span in spans:
        attributes = span.attributes or {}
        stage = attributes.get("rag.stage")
        if stage == "assemble":
            in_context.update(attributes.get("rag.context.chunk_ids", ()))
        elif stage == "generate" and attributes.get("rag.generation.role") == "answer":
            cited.update(attributes.get("rag.citation.ids", ()))
        elif stage == "pipeline":
            precision = attributes.get("rag.metrics.context_precision")
    return Reading(in_context, cited, precision)


def baseline_reading(spans: Sequence[Any]) -> Reading:
    inferred = substring_baseline.infer(spans)
    return Reading(inferred.in_context, inferred.cited, inferred.context_precision)


# --- scoring ----------------------------------------------------------------------------------
@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    cite_tp: int = 0
    cite_fp: int = 0
    cite_fn: int = 0
    errors: list[float] = field(default_factory=list)

    def add(self, truth: Truth, reading: Reading) -> None:
        retrieved = set(truth.retrieved)
        got = reading.in_context & retrieved
        self.tp += len(got & truth.in_context)
        self.fp += len(got - truth.in_context)
        self.fn += len(truth.in_context - got)
        self.cite_tp += len(reading.cited & truth.cited)
        self.cite_fp += len(reading.cited - truth.cited)
        self.cite_fn += len(truth.cited - reading.cited)
        derived = reading.context_precision if reading.context_precision is not None else 0.0
        self.errors.append(abs(derived - truth.context_precision))

    @staticmethod
    def _ratio(a: int, b: int) -> float:
        return a / b if b else 1.0

    @property
    def precision(self) -> float:
        return self._ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return self._ratio(self.tp, self.tp + self.fn)

    @property
    def cite_precision(self) -> float:
        return self._ratio(self.cite_tp, self.cite_tp + self.cite_fp)

    @property
    def cite_recall(self) -> float:
        return self._ratio(self.cite_tp, self.cite_tp + self.cite_fn)

    @property
    def mae(self) -> float:
        return statistics.fmean(self.errors) if self.errors else 0.0


def sanity_check(truth: Truth) -> None:
    """The ground truth's in-context chunks really are in the answer prompt (a prefix at least)."""
    prompt = " ".join(" ".join(t.split()) for t in truth.answer_prompt_texts)
    for chunk_id, content in truth.placed_content.items():
        prefix = " ".join(content.split())[:24]
        if prefix not in prompt:
            raise AssertionError(f"{truth.scenario}: ground truth says {chunk_id} is in context, but the prompt lacks it")


def main() -> int:
    rt_guard.set_strict(True)  # a ragtrace bug must fail the benchmark, not hide behind the guard
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # prompts are well under this, so no attribute is trimmed and the baseline sees whole prompts
    rt_config.configure(tracer_provider=provider, capture_content="full", max_content_chars=100_000)
    rng = random.Random(SEED)
    totals = {"ragtrace": Score(), "substring": Score()}
    per: dict[str, dict[str, Score]] = {}
    traces = 0
    for round_ in range(PER_SCENARIO):
        for scenario in SCENARIOS:
            traces += 1
            text = Text(rng, traces)
            query = f"Question {traces}: how do I {' '.join(rng.sample(WORDS, 4))}?"
            with ragtrace.rag_pipeline("accuracy", query=query):
                truth = scenario(rng, text, query)
            sanity_check(truth)
            spans = exporter.get_finished_spans()
            exporter.clear()
            if len({s.context.trace_id for s in spans}) != 1:
                raise AssertionError("one pipeline must be one trace")
            readings = {"ragtrace": ragtrace_reading(spans), "substring": baseline_reading(spans)}
            for method, reading in readings.items():
                totals[method].add(truth, reading)
                per.setdefault(truth.scenario, {"ragtrace": Score(), "substring": Score()})[method].add(truth, reading)
    provider.shutdown()

    print(f"{traces} traces ({PER_SCENARIO} per scenario, seed {SEED}); in-context P/R over (trace, retrieved chunk) pairs")
    header = f"{'scenario':<52} {'ragtrace P':>10} {'R':>5} {'cite P':>6} {'R':>5} {'CP err':>6} | {'substr P':>8} {'R':>5} {'cite P':>6} {'R':>5} {'CP err':>6}"
    print(header)
    print("-" * len(header))

    def row(label: str, scores: dict[str, Score]) -> str:
        r, s = scores["ragtrace"], scores["substring"]
        return (
            f"{label:<52} {r.precision:>10.3f} {r.recall:>5.3f} {r.cite_precision:>6.3f} {r.cite_recall:>5.3f} {r.mae:>6.3f} |"
            f" {s.precision:>8.3f} {s.recall:>5.3f} {s.cite_precision:>6.3f} {s.cite_recall:>5.3f} {s.mae:>6.3f}"
        )

    for label, scores in per.items():
        print(row(label, scores))
    print("-" * len(header))
    print(row(f"all {traces} traces", totals))

    print("\nOverall, against the substring baseline (the issue sets no number: ragtrace must be no worse)")
    header = f"{'figure':<40} {'ragtrace':>9} {'substring':>10}  result"
    print(header)
    print("-" * len(header))
    r, s = totals["ragtrace"], totals["substring"]
    ok = True
    for label, mine, theirs, higher_is_better in (
        ("in-context precision", r.precision, s.precision, True),
        ("in-context recall", r.recall, s.recall, True),
        ("citation precision", r.cite_precision, s.cite_precision, True),
        ("citation recall", r.cite_recall, s.cite_recall, True),
        ("context precision |C|/|R|, mean abs error", r.mae, s.mae, False),
    ):
        passed = mine >= theirs if higher_is_better else mine <= theirs
        ok &= passed
        print(f"{label:<40} {mine:>9.3f} {theirs:>10.3f}  {'PASS' if passed else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
