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

Scenarios (randomised, ``PER_SCENARIO`` each, seeded): plain; markdown stripped by the app's
formatter; hard-wrapped text re-wrapped; the prompt truncated (the token budget for recorded, a
character window for the app's own builder); chat messages; the whole request JSON-escaped (a
request body); duplicate chunks (the same text under two ids, shown twice by the app, placed once by
ragtrace); instructions that repeat a short chunk's text (the chunk dropped, or shown); an LLM grader
shown every retrieved chunk after the answer. Sources are labelled ``[n]``, ``Source n:``,
``<source id="n">``, ``(n)`` or not at all (joined, as LangChain's default ``format_docs`` does);
the answer cites ``[n]``.

Scored per method: precision / recall of "chunk in context" over (trace, retrieved chunk) pairs,
citation precision / recall over cited chunks, and the per-trace figures against the known
answers (retrieved, in_context, cited, invalid_citations, context_precision, recall_proxy; floats
to 1e-9): *right*; *wrong* when a figure it gives differs from the truth; else *not measurable*
(some figure left out, with a status saying why, instead of a guess). Recorded and
declared must be exactly right (exit code 1 otherwise); located and inferred are what they are.

    python bench/bench_accuracy.py [--per-scenario N]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import ragtrace  # noqa: E402
from ragtrace._internal import config as rt_config  # noqa: E402
from ragtrace._internal import guard as rt_guard  # noqa: E402
from ragtrace._internal import names  # noqa: E402
from ragtrace.cli.diagnostics import Diagnostics  # noqa: E402
from ragtrace.cli.foreign import infer  # noqa: E402
from ragtrace.cli.reader import TraceReader  # noqa: E402
from ragtrace.exporters import JsonLinesExporter  # noqa: E402

PER_SCENARIO = 30
SEED = 7
TOKENIZER = ragtrace.SimpleTokenizer()
METHODS = ("recorded", "declared", "located", "inferred")
EXACT_METHODS = ("recorded", "declared")  # must be 1.000 / 1.000 and every figure right

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
]
QUESTION_TEMPLATE = "Sources:\n\n{context}\n\nQuestion: {question}\nAnswer:"
FIGURES = (
    names.METRIC_RETRIEVED,
    names.METRIC_IN_CONTEXT,
    names.METRIC_CITED,
    names.METRIC_INVALID_CITATIONS,
    names.METRIC_CONTEXT_PRECISION,
    names.METRIC_RECALL_PROXY,
)


# --- text -------------------------------------------------------------------------------------
class Text:
    def __init__(self, rng: random.Random, trace_no: int) -> None:
        self.rng, self.trace_no, self.count = rng, trace_no, 0

    def sentence(self, low: int = 8, high: int = 16) -> str:
        words = self.rng.choices(WORDS, k=self.rng.randint(low, high))
        return " ".join(words).capitalize() + "."

    def doc(self, *, style: str = "plain") -> dict[str, Any]:
        self.count += 1
        sentences = [self.sentence() for _ in range(self.rng.randint(2, 4))]
        sentences.insert(self.rng.randrange(len(sentences) + 1), f"Reference T{self.trace_no}-C{self.count}.")
        if style == "markdown":  # bold and code that the app's formatter strips
            words = sentences[0].split(" ")
            at = self.rng.randrange(len(words) - 1)
            words[at] = f"**{words[at]}**"
            sentences[0] = " ".join(words)
            sentences.append(f"Set `{self.rng.choice(WORDS)}_{self.count}` to enable it.")
        elif style == "escapes":  # what JSON escaping changes: quotes, backslashes, newlines
            sentences.append(f'The path is "C:\\{self.rng.choice(WORDS)}\\{self.count}".\nThen restart.')
        content = " ".join(sentences)
        if style == "hard_wrapped":  # line breaks and double spaces, as PDFs extract
            content = "".join(w + self.rng.choice([" ", " ", "\n", "  "]) for w in content.split(" ")).rstrip()
        return {"id": f"t{self.trace_no}-c{self.count}", "content": content}


def strip_markdown(text: str) -> str:
    return text.replace("**", "").replace("`", "")


def collapse(text: str) -> str:
    return " ".join(text.split())


# --- a scenario: the data and the two ways of building its prompt -------------------------------
@dataclass
class Built:
    """The app's own prompt: what it rendered per chunk, in prompt order, and the final prompt."""

    placed: list[tuple[dict[str, Any], str, str]]  # (chunk, the text shown for it, its label)
    prompt: Any  # a string or chat messages
    shown: list[str]  # truth: ids the model saw as sources, in prompt order
    sent: Any = None  # what goes to the model when it is not ``prompt`` itself (a JSON body)


@dataclass
class Case:
    name: str
    docs: list[dict[str, Any]]  # retrieved, rank order
    kept: list[dict[str, Any]]  # after reranking: what the prompt builder gets
    built: Built
    recorded: Callable[[Any, str], tuple[Any, list[str]]]  # (ctx, question) -> (prompt sent, truth shown)
    max_tokens: int | None = 4000
    grader: bool = False


def _scored(docs: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    scores = sorted((round(rng.uniform(0.3, 0.95), 3) for _ in docs), reverse=True)
    return [dict(d, score=s) for d, s in zip(docs, scores)]


def _kept(rng: random.Random, docs: list[dict[str, Any]], low: int = 3, high: int = 6) -> list[dict[str, Any]]:
    kept = rng.sample(docs, rng.randint(low, min(high, len(docs) - 1)))
    return [dict(d, score=round(1 - 0.1 * i, 2)) for i, d in enumerate(kept)]


# How apps label their sources; the answer cites [n] in every case.
# The last one shows no label at all (LangChain's default format_docs): the model cites by order.
LABEL_STYLES = ("[{n}] {content}", "Source {n}: {content}", '<source id="{n}">\n{content}\n</source>', "({n}) {content}", "{content}")


def _numbered(chunks: Sequence[dict[str, Any]], style: str, render: Callable[[str], str] = lambda c: c) -> list[tuple[dict[str, Any], str, str]]:
    return [(c, style.format(n=n, content=render(c["content"])), str(n)) for n, c in enumerate(chunks, start=1)]


def _string_prompt(placed: Sequence[tuple[Any, str, str]], question: str, head: str = "") -> str:
    return head + QUESTION_TEMPLATE.format(context="\n\n".join(t for _, t, _ in placed), question=question)


def _add_all(ctx: Any, chunks: Sequence[dict[str, Any]], render: Callable[[str], str] | None = None) -> None:
    for c in chunks:
        ctx.add(c if render is None else dict(c, content=render(c["content"])))


def plain(rng: random.Random, text: Text, question: str, *, grader: bool = False) -> Case:
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    placed = _numbered(kept, rng.choice(LABEL_STYLES))

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add_all(ctx, kept)
        return ctx.render(QUESTION_TEMPLATE, question=q), [c["id"] for c in kept]

    name = "LLM grader shown every chunk" if grader else "plain"
    return Case(name, docs, kept, Built(placed, _string_prompt(placed, question), [c["id"] for c in kept]), recorded, grader=grader)


def grader(rng: random.Random, text: Text, question: str) -> Case:
    return plain(rng, text, question, grader=True)


def markdown_stripped(rng: random.Random, text: Text, question: str) -> Case:
    docs = _scored([text.doc(style="markdown") for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    placed = _numbered(kept, rng.choice(LABEL_STYLES), strip_markdown)

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add_all(ctx, kept, strip_markdown)  # the app hands ragtrace the text it wants shown
        return ctx.render(QUESTION_TEMPLATE, question=q), [c["id"] for c in kept]

    return Case("markdown stripped", docs, kept, Built(placed, _string_prompt(placed, question), [c["id"] for c in kept]), recorded)


def rewrapped(rng: random.Random, text: Text, question: str) -> Case:
    docs = _scored([text.doc(style="hard_wrapped") for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    width = rng.randint(50, 90)
    render = (lambda c: textwrap.fill(collapse(c), width=width)) if rng.random() < 0.5 else collapse
    placed = _numbered(kept, rng.choice(LABEL_STYLES), render)

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add_all(ctx, kept, render)
        return ctx.render(QUESTION_TEMPLATE, question=q), [c["id"] for c in kept]

    return Case("re-wrapped", docs, kept, Built(placed, _string_prompt(placed, question), [c["id"] for c in kept]), recorded)


def truncated(rng: random.Random, text: Text, question: str) -> Case:
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs, 4, 6)
    placed = _numbered(kept, rng.choice(LABEL_STYLES))
    full = _string_prompt(placed, question)
    cut = rng.randint(1, len(kept) - 2)  # this chunk is cut; the ones after it fall out of the window
    start = full.index(placed[cut][1])
    window = full[: start + placed[cut][1].index(kept[cut]["content"]) + rng.randint(30, len(kept[cut]["content"]) - 10)]
    shown = [c["id"] for c in kept[: cut + 1]]
    counts = [TOKENIZER.count(c["content"]) for c in kept]
    budget = sum(counts[:cut]) + rng.randint(10, counts[cut] - 4)

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add_all(ctx, kept)  # the budget cuts kept[cut] and drops the rest
        return ctx.render(QUESTION_TEMPLATE, question=q), shown

    return Case("truncated", docs, kept, Built(placed, window, shown), recorded, max_tokens=budget)


def chat(rng: random.Random, text: Text, question: str) -> Case:
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    placed = _numbered(kept, rng.choice(LABEL_STYLES))
    if rng.random() < 0.5:
        template = [
            {"role": "system", "content": "You are a support assistant. Cite the sources as [n].\n\nSources:\n{context}"},
            {"role": "user", "content": "{question}"},
        ]
    else:
        template = [
            {"role": "system", "content": "You are a support assistant. Cite sources as [n]."},
            {"role": "user", "content": "Earlier question about billing."},
            {"role": "assistant", "content": "Billing questions go to the billing team."},
            {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"},
        ]
    context = "\n\n".join(t for _, t, _ in placed)
    messages = [{"role": m["role"], "content": m["content"].replace("{context}", context).replace("{question}", question)} for m in template]

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add_all(ctx, kept)
        return ctx.render(template, question=q), [c["id"] for c in kept]

    return Case("chat messages", docs, kept, Built(placed, messages, [c["id"] for c in kept]), recorded)


def json_escaped(rng: random.Random, text: Text, question: str) -> Case:
    docs = _scored([text.doc(style="escapes") for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    placed = _numbered(kept, rng.choice(LABEL_STYLES))
    prompt = _string_prompt(placed, question)

    def body(prompt_text: str) -> str:
        return json.dumps({"model": "answer-model", "messages": [{"role": "user", "content": prompt_text}]})

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add_all(ctx, kept)
        return body(ctx.render(QUESTION_TEMPLATE, question=q)), [c["id"] for c in kept]

    request = body(prompt)  # the app sends, and declares, the escaped request body
    return Case("JSON-escaped request body", docs, kept, Built(placed, request, [c["id"] for c in kept], sent=request), recorded)


def duplicates(rng: random.Random, text: Text, question: str) -> Case:
    docs = [text.doc() for _ in range(rng.randint(5, 9))]
    original = rng.choice(docs)
    mirror = {"id": original["id"] + "-mirror", "content": original["content"]}
    docs.insert(rng.randint(docs.index(original) + 1, len(docs)), mirror)
    docs = _scored(docs, rng)
    others = [d for d in docs if d["id"] not in (original["id"], mirror["id"])]
    kept = _kept(rng, others, 1, 3) + [dict(original), dict(mirror)]
    rng.shuffle(kept)
    placed = _numbered(kept, rng.choice(LABEL_STYLES))  # the app shows both copies, under two labels
    once: list[str] = []
    seen: set[str] = set()
    for c in kept:
        if c["content"] not in seen:
            seen.add(c["content"])
            once.append(c["id"])

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add_all(ctx, kept)  # ragtrace refuses the second copy: the model sees the text once
        return ctx.render(QUESTION_TEMPLATE, question=q), once

    return Case("duplicate chunks", docs, kept, Built(placed, _string_prompt(placed, question), [c["id"] for c in kept]), recorded)


def instructions(rng: random.Random, text: Text, question: str) -> Case:
    docs = [text.doc() for _ in range(rng.randint(5, 9))]
    rule = rng.choice(INSTRUCTIONS)
    text.count += 1
    short = {"id": f"t{text.trace_no}-c{text.count}", "content": rule}  # a style-guide page
    docs.insert(rng.randrange(len(docs) + 1), short)
    docs = _scored(docs, rng)
    head = " ".join(dict.fromkeys([*rng.sample(INSTRUCTIONS, 2), rule])) + "\n\n"
    kept = _kept(rng, [d for d in docs if d["id"] != short["id"]], 2, 5) + [dict(short, score=0.1)]
    rng.shuffle(kept)
    show_short = rng.random() < 0.5  # the app skips short chunks, or shows this one under its label
    shown_chunks = [c for c in kept if show_short or c["id"] != short["id"]]
    placed = _numbered(shown_chunks, rng.choice(LABEL_STYLES))

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add_all(ctx, shown_chunks)
        return ctx.render(head + QUESTION_TEMPLATE, question=q), [c["id"] for c in shown_chunks]

    name = "instructions repeat a chunk"
    return Case(name, docs, kept, Built(placed, _string_prompt(placed, question, head), [c["id"] for c in shown_chunks]), recorded)


SCENARIOS: list[Callable[[random.Random, Text, str], Case]] = [
    plain, markdown_stripped, rewrapped, truncated, chat, json_escaped, duplicates, instructions, grader,
]


# --- running one case under one method ---------------------------------------------------------
@dataclass
class Truth:
    retrieved: list[str]
    in_context: set[str]
    cited: set[str]
    invalid: int

    def figures(self) -> dict[str, Any]:
        r = len(self.retrieved)
        return {
            names.METRIC_RETRIEVED: r,
            names.METRIC_IN_CONTEXT: len(self.in_context),
            names.METRIC_CITED: len(self.cited),
            names.METRIC_INVALID_CITATIONS: self.invalid,
            names.METRIC_CONTEXT_PRECISION: len(self.in_context) / r,
            names.METRIC_RECALL_PROXY: len(self.cited) / r,
        }


@dataclass
class Reading:
    in_context: set[str]
    cited: set[str]
    figures: dict[str, Any]


def _answer(rng: random.Random, text: Text, labels: dict[str, str]) -> tuple[str, set[str], int]:
    """An answer citing 1-3 of the labels the model saw, sometimes plus one that names nothing."""
    keys = list(labels)
    chosen = sorted(rng.sample(keys, rng.randint(1, min(3, len(keys)))), key=keys.index)
    parts = [f"{text.sentence(6, 12)[:-1]} [{k}]." for k in chosen]
    invalid = rng.random() < 0.15
    if invalid:
        parts.insert(rng.randrange(len(parts) + 1), f"{text.sentence(6, 10)[:-1]} [{len(keys) + rng.randint(2, 5)}].")
    return " ".join(parts), {labels[k] for k in chosen}, int(invalid)


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
            with ragtrace.assemble(max_tokens=case.max_tokens) as ctx:
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
            sent, shown, labels = built.sent or built.prompt, built.shown, _labels(built.placed, built.shown)
        answer, cited, invalid = answer_for(labels)
        with ragtrace.generate(model="answer-model", provider="local", prompt=sent) as g:
            g.record(answer)
        if case.grader:
            _grade(case.docs)
    return Truth([d["id"] for d in case.docs], set(shown), cited, invalid), run


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
    wrong: int = 0
    wrong_examples: list[str] = field(default_factory=list)

    def add(self, truth: Truth, reading: Reading, where: str) -> None:
        retrieved = set(truth.retrieved)
        got = reading.in_context & retrieved
        self.tp += len(got & truth.in_context)
        self.fp += len(got - truth.in_context)
        self.fn += len(truth.in_context - got)
        self.cite_tp += len(reading.cited & truth.cited)
        self.cite_fp += len(reading.cited - truth.cited)
        self.cite_fn += len(truth.cited - reading.cited)
        # wrong: a figure given that differs from the truth; not measurable: none wrong, some left out
        expected, figures = truth.figures(), reading.figures
        diff = {k: (figures[k], v) for k, v in expected.items() if figures.get(k) is not None and abs(figures[k] - v) > 1e-9}
        if diff:
            self.wrong += 1
            if len(self.wrong_examples) < 3:
                self.wrong_examples.append(f"{where}: (got, truth) {diff}")
        elif any(figures.get(k) is None for k in expected):
            self.unmeasured += 1
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
                    user_answer = _answer(rng, text, _labels(case.built.placed, case.built.shown))
                    for method in METHODS[:3]:
                        answer_for = (lambda labels: _answer(rng, text, labels)) if method == "recorded" else (lambda labels: user_answer)
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
                    pending.append((question, case.name, Truth([d["id"] for d in case.docs], set(case.built.shown), cited, invalid)))
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
    header = f"{'scenario':<30}" + "".join(f" {m:>20}" for m in METHODS)
    print(header)
    print("-" * len(header))
    for name, scores in per.items():
        print(f"{name:<30}" + "".join(f" {_cell(scores[m]):>20}" for m in METHODS))
    print("\nby method (P, R over (trace, retrieved chunk) pairs; figures: retrieved, in_context, cited,")
    print("invalid_citations, context_precision, recall_proxy against the known answers, to 1e-9)\n")
    header = f"{'method':<10} {'incl. P':>8} {'incl. R':>8} {'cite P':>7} {'cite R':>7} {'right':>7} {'not meas.':>9} {'wrong':>6}"
    print(header)
    print("-" * len(header))
    for method in METHODS:
        s = totals[method]
        print(
            f"{method:<10} {s.precision:>8.3f} {s.recall:>8.3f} {s.cite_precision:>7.3f} {s.cite_recall:>7.3f}"
            f" {s.ratio(s.right, s.traces):>7.1%} {s.ratio(s.unmeasured, s.traces):>9.1%} {s.ratio(s.wrong, s.traces):>6.1%}"
        )
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
