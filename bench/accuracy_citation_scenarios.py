"""The citation cases of issue 27 as ``bench_accuracy.py`` scenarios: the frameworks' bare default
prompts, formatters that change case or escape text, chat history and few-shot examples holding
labelled copies of retrieved chunks, a chunk shown twice, list and quoted labels, prose citations.

Each ``Case`` also says which figures are honestly not measurable (``unmeasurable``: an answer
citing ``[n]`` against sources shown under no label) and the wasted context tokens by hand
(``wasted``: the tokens of the text the prompt shows for each in-context chunk the answer does not
cite, labels excluded), so the benchmark checks them too.
"""

from __future__ import annotations

import html
import random
from collections.abc import Callable
from typing import Any

from accuracy_scenarios import QUESTION_TEMPLATE, TOKENIZER, Built, Case, Text, _kept, _numbered, _scored, _string_prompt

from ragtrace._internal import names

CITATION_FIGURES = (names.METRIC_CITED, names.METRIC_INVALID_CITATIONS, names.METRIC_RECALL_PROXY)


def _add(ctx: Any, chunks: list[dict[str, Any]], render: Callable[[str], str] = lambda c: c) -> None:
    for c in chunks:
        ctx.add(dict(c, content=render(c["content"])))


def _labelled(name: str, rng: random.Random, text: Text, question: str, style: str, render: Callable[[str], str] = lambda c: c, docs: list[dict[str, Any]] | None = None) -> Case:
    docs = docs or _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    placed = _numbered(kept, style, render)

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add(ctx, kept, render)
        return ctx.render(QUESTION_TEMPLATE, question=q), [c["id"] for c in kept]

    shown = {c["id"]: render(c["content"]) for c in kept}
    return Case(name, docs, kept, Built(placed, _string_prompt(placed, question), [c["id"] for c in kept]), recorded, shown_text=shown)


def unlabelled(rng: random.Random, text: Text, question: str) -> Case:
    """LangChain's default document prompt and LlamaIndex's default engines: documents joined bare.
    An answer citing [n] can't be resolved on any path: its citation figures are not measurable."""
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    placed = [(c, c["content"], "") for c in kept]

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add(ctx, kept)
        return ctx.render(QUESTION_TEMPLATE, question=q), [c["id"] for c in kept]

    built = Built(placed, _string_prompt(placed, question), [c["id"] for c in kept])
    return Case("unlabelled default prompt", docs, kept, built, recorded, chunk_format="{content}", unmeasurable=CITATION_FIGURES, positional=True)


def lowercased(rng: random.Random, text: Text, question: str) -> Case:
    return _labelled("formatter changes case", rng, text, question, rng.choice(("[{n}] {content}", "Source {n}: {content}")), str.lower)


def escaped(rng: random.Random, text: Text, question: str) -> Case:
    docs = _scored([text.doc(style="typographic") for _ in range(rng.randint(6, 10))], rng)
    typographic = str.maketrans({"'": "’", '"': "”", "-": "–"})
    render = html.escape if rng.random() < 0.5 else (lambda c: c.translate(typographic))
    return _labelled("HTML-escaped or typographic", rng, text, question, "[{n}] {content}", render, docs)


def listed(rng: random.Random, text: Text, question: str) -> Case:
    return _labelled("numbered list or quoted labels", rng, text, question, rng.choice(("{n}. {content}", "[{n}] “{content}”", "{n}) {content}")))


def history(rng: random.Random, text: Text, question: str) -> Case:
    """The previous turn's labelled sources (one of them retrieved again, not kept) in the chat history,
    or a few-shot example in the system prompt showing a retrieved chunk under [1]."""
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    old = next(d for d in docs if d not in kept and d["id"] not in {c["id"] for c in kept})
    placed = _numbered(kept, "[{n}] {content}")
    context = "\n".join(t for _, t, _ in placed)
    if rng.random() < 0.5:
        earlier = f"Sources:\n[1] {text.sentence()}\n[2] {old['content']}\n\nQuestion: an earlier one?"
        template = [
            {"role": "system", "content": "You are a support assistant. Cite sources as [n]."},
            {"role": "user", "content": earlier},
            {"role": "assistant", "content": f"{text.sentence()[:-1]} [2]."},
            {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"},
        ]
    else:
        example = f"Example:\nSources:\n[1] {old['content']}\nQuestion: an example?\nAnswer: {text.sentence()[:-1]} [1].\n\n"
        template = [
            {"role": "system", "content": "Cite sources as [n].\n\n" + example},
            {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"},
        ]
    messages = [{"role": m["role"], "content": m["content"].replace("{context}", context).replace("{question}", question)} for m in template]

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add(ctx, kept)
        return ctx.render(template, question=q), [c["id"] for c in kept]

    shown = {c["id"]: c["content"] for c in kept}
    return Case("history or few-shot example", docs, kept, Built(placed, messages, [c["id"] for c in kept]), recorded, shown_text=shown)


def twice(rng: random.Random, text: Text, question: str) -> Case:
    """The app shows one chunk twice, under two labels; either label is that chunk."""
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    again = rng.choice(kept)
    placed = _numbered([*kept, again], "[{n}] {content}")

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add(ctx, [*kept, again])  # ragtrace refuses the repeat: the model sees it once
        return ctx.render(QUESTION_TEMPLATE, question=q), [c["id"] for c in kept]

    shown = {c["id"]: c["content"] for c in kept}
    return Case("chunk shown twice", docs, kept, Built(placed, _string_prompt(placed, question), [c["id"] for c in kept]), recorded, shown_text=shown)


def prose(rng: random.Random, text: Text, question: str) -> Case:
    """Sources labelled ``Source n:``; the answer cites them in words, ``(Source 2)``, or lists ids
    in a closing ``Sources:`` line."""
    case = _labelled("prose citations", rng, text, question, "Source {n}: {content}")
    case.prose = rng.choice(("paren", "line"))
    return case


def wasted(case: Case, shown: list[str], cited: set[str]) -> int | None:
    """Tokens of the text shown for each in-context chunk not cited, when the case knows that text."""
    if case.shown_text is None:
        return None
    return sum(TOKENIZER.count(case.shown_text[i]) for i in dict.fromkeys(shown) if i not in cited)


CITATION_SCENARIOS: list[Callable[[random.Random, Text, str], Case]] = [unlabelled, lowercased, escaped, listed, history, twice, prose]
