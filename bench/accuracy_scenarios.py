"""The known-answer scenarios of ``bench_accuracy.py``: one RAG request each, built the way some app
builds it, with the truth set by construction.

Each ``Case`` carries the retrieved and kept chunks, the app's own prompt (``Built``: what it
rendered per chunk, its labels, the final prompt) and how ragtrace's template builds the same
request (``Case.recorded``). The scenarios are listed in ``SCENARIOS``.
"""

from __future__ import annotations

import json
import random
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ragtrace

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
]
QUESTION_TEMPLATE = "Sources:\n\n{context}\n\nQuestion: {question}\nAnswer:"


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
        elif style == "typographic":  # what HTML escaping and typesetting change: quotes, ampersands, dashes
            sentences.append(f'It\'s the "{self.rng.choice(WORDS)}" path - {self.rng.choice(WORDS)} & {self.rng.choice(WORDS)} <{self.count}>.')
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
    chunk_format: str | None = None  # ragtrace's chunk format when recorded (default "[{label}] {content}")
    unmeasurable: tuple[str, ...] = ()  # figures every method must leave out, with a status (not measurable)
    positional: bool = False  # the sources show no labels: the model cites [n] by order
    prose: str | None = None  # the answer cites in words: "paren" ("(Source 2)") or "line" ("Sources: id, id")
    shown_text: dict[str, str] | None = None  # id -> the text the prompt shows for it, labels excluded (wasted tokens)
    stale: tuple[str, ...] = ()  # labels the prompt shows outside this turn's sources (history, examples): naming nothing


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

