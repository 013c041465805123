"""The search classes of issue 36 as ``bench_accuracy.py`` scenarios: what a search must read as this
turn's sources, and what it must find there.

- a few-shot example showing a retrieved chunk under another label style (``[A]``, ``[doc-7]``,
  ``Source A:``), in the system prompt or right before the sources;
- chunks stored in one Unicode normal form and shown in the other (French, Vietnamese, Korean),
  sometimes in a JSON request body that escapes them (``\u00e9``);
- a chunk whose whole text is the start of another retrieved chunk's (the long one not shown,
  shown whole, or shown cut);
- a chunk shown in pieces under several labels (``[2]`` and ``[3]``, LlamaIndex's ``Source n:``);
- an earlier turn's labelled sources in the chat history, whose labels the answer may cite;
- an agent's retrieval rounds as tool messages, each numbered from ``[1]``, the answer's prompt
  showing the last round only (LangGraph's custom RAG agent), or every round numbered on.

Truth by construction, as in ``accuracy_scenarios``: the ids each prompt shows as this turn's
sources, and the text shown for each (``shown_text``, for wasted tokens).
"""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from accuracy_scenarios import QUESTION_TEMPLATE, Built, Case, Text, _kept, _numbered, _scored, _string_prompt

LABELLED = ("[{n}] {content}", "Source {n}: {content}", '<source id="{n}">\n{content}\n</source>', "({n}) {content}")
EXAMPLE_LABELS = ("[A]", "[B]", "[doc-{k}]", "[ex-{k}]", "Source A:", "Example A:")
ACCENTED = (
    "café", "résumé", "naïve", "crème brûlée", "façade", "Ångström", "jalapeño", "über", "déjà vu", "élève",
    "Hoàn tiền", "được xử lý", "tiếng Việt", "năm ngày", "환불은", "영업일 기준", "처리됩니다",
)


def _add(ctx: Any, chunks: Sequence[dict[str, Any]]) -> None:
    for c in chunks:
        ctx.add(c)


def _recorded(kept: Sequence[dict[str, Any]], template: Any) -> Callable[[Any, str], tuple[Any, list[str]]]:
    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        _add(ctx, kept)
        return ctx.render(template, question=q), [c["id"] for c in kept]

    return recorded


def _fill(template: list[dict[str, str]], context: str, question: str) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": m["content"].replace("{context}", context).replace("{question}", question)} for m in template]


def few_shot_styles(rng: random.Random, text: Text, question: str) -> Case:
    """An example of a retrieved chunk (not kept) under a label written unlike the sources', or
    written alike and numbered before them (the example's [1], the sources from [2] on), with an
    example answer citing it."""
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    kept_ids = {c["id"] for c in kept}
    others = [d for d in docs if d["id"] not in kept_ids]
    example_docs = rng.sample(others, min(len(others), rng.randint(1, 2)))
    if rng.random() < 0.3:  # the example shows one of this turn's sources too
        again = rng.choice(kept)["id"]
        example_docs[-1] = next(d for d in docs if d["id"] == again)
    style = rng.choice(LABELLED)
    label = rng.choice(EXAMPLE_LABELS + ("same",))
    first = len(example_docs) + 1 if label == "same" else 1  # "same": the example is [1], the sources go on from [2]
    placed = [(c, style.format(n=n, content=c["content"]), str(n)) for n, c in enumerate(kept, first)]
    labels = [label.format(k=rng.randint(3, 99)) for _ in example_docs]
    if label == "same":
        labels = [style.format(n=n, content="").rstrip() for n in range(1, first)]
        labels = [lab[: -len("</source>")].rstrip() if lab.endswith("</source>") else lab for lab in labels]
    elif label in ("[A]", "[B]"):
        labels = [f"[{chr(ord(label[1]) + i)}]" for i in range(len(example_docs))]
    elif label.endswith("A:"):
        labels = [label.replace("A", chr(ord("A") + i)) for i in range(len(example_docs))]
    shown_example = "\n".join(f"{lab} {d['content']}" for lab, d in zip(labels, example_docs))
    keys = [str(n) for n in range(1, first)] if label == "same" else [lab.rstrip(":").split()[-1].strip("[]") for lab in labels]
    cite = keys[0]
    example = f"Example:\nSources:\n{shown_example}\nQuestion: an example?\nAnswer: {text.sentence()[:-1]} [{cite}].\n\n"
    where = rng.choice(("system", "user", "string"))
    if where == "string":
        template: Any = "Cite the sources you use.\n\n" + example + QUESTION_TEMPLATE
        prompt: Any = _string_prompt(placed, question, "Cite the sources you use.\n\n" + example)
    else:
        system = "Cite the sources you use." + ("\n\n" + example if where == "system" else "")
        user = ("" if where == "system" else example) + QUESTION_TEMPLATE
        template = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        prompt = _fill(template, "\n\n".join(t for _, t, _ in placed), question)
    # the example's labels name nothing this turn (only an id or number reads as a citation: [A]
    # does not); numbered on, ragtrace's own template (recorded) numbers its sources from [1]
    stale = tuple(key for key in keys if any(c.isdigit() for c in key)) if label != "same" else ()
    shown = {c["id"]: c["content"] for c in kept}
    offered = kept + [d for d in example_docs if d["id"] not in kept_ids]  # the assembler is handed them too
    built = Built(placed, prompt, [c["id"] for c in kept])
    return Case("few-shot example, other label style", docs, offered, built, _recorded(kept, template), shown_text=shown, stale=stale)


def normal_forms(rng: random.Random, text: Text, question: str) -> Case:
    """Chunks with accented or Hangul words, stored NFD and shown NFC, or the reverse."""
    docs = []
    for _ in range(rng.randint(6, 10)):
        doc = text.doc()
        words = doc["content"].split(" ")
        for _ in range(rng.randint(1, 3)):
            words.insert(rng.randrange(len(words)), rng.choice(ACCENTED))
        docs.append(dict(doc, content=" ".join(words)))
    stored, shown_form = ("NFD", "NFC") if rng.random() < 0.5 else ("NFC", "NFD")
    docs = _scored([dict(d, content=unicodedata.normalize(stored, d["content"])) for d in docs], rng)
    kept = _kept(rng, docs)

    def render(content: str) -> str:
        return unicodedata.normalize(shown_form, content)

    placed = _numbered(kept, rng.choice(LABELLED), render)

    as_body = rng.random() < 0.3  # sent as one JSON request body: non-ASCII as \u escapes

    def sent(prompt: str) -> str:
        return json.dumps({"model": "answer-model", "messages": [{"role": "user", "content": prompt}]}) if as_body else prompt

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        for c in kept:
            ctx.add(dict(c, content=render(c["content"])))
        return sent(ctx.render(QUESTION_TEMPLATE, question=q)), [c["id"] for c in kept]

    shown = {c["id"]: render(c["content"]) for c in kept}
    request = sent(_string_prompt(placed, question))
    built = Built(placed, request, [c["id"] for c in kept], sent=request if as_body else None)
    return Case("Unicode normal forms", docs, kept, built, recorded, shown_text=shown)


def prefix_chunks(rng: random.Random, text: Text, question: str) -> Case:
    """A retrieved chunk whose whole text is the start of another's: the long one not kept, kept and
    shown whole (the short one then not shown), or kept and shown cut past the short one's end."""
    docs = [text.doc() for _ in range(rng.randint(5, 8))]
    short = rng.choice(docs)
    text.count += 1
    long = {"id": f"t{text.trace_no}-c{text.count}", "content": short["content"] + " " + text.sentence() + " " + text.sentence()}
    docs.insert(rng.randrange(len(docs) + 1), long)
    docs = _scored(docs, rng)
    short, long = next(d for d in docs if d["id"] == short["id"]), next(d for d in docs if d["id"] == long["id"])
    rest = _kept(rng, [d for d in docs if d["id"] not in (short["id"], long["id"])], 2, 4)
    variant = rng.choice(("long not shown", "long shown whole", "long shown cut"))
    if variant == "long not shown":
        kept = rest + [short]
    elif variant == "long shown whole":
        kept = rest + [long]
    else:
        kept = rest + [short, long]
    rng.shuffle(kept)
    offered = rest + [short, long]  # the assembler is handed both; the app shows ``kept``
    style = rng.choice(LABELLED)
    words = long["content"].split(" ")
    at = len(short["content"].split(" ")) + rng.randint(2, 6)
    cut = " ".join(words[:at])
    shown_text = {c["id"]: (cut if variant == "long shown cut" and c["id"] == long["id"] else c["content"]) for c in kept}
    placed = [(c, style.format(n=n, content=shown_text[c["id"]]), str(n)) for n, c in enumerate(kept, 1)]

    def recorded(ctx: Any, q: str) -> tuple[Any, list[str]]:
        for c in kept:
            ctx.add(dict(c, content=shown_text[c["id"]]))
        return ctx.render(QUESTION_TEMPLATE, question=q), [c["id"] for c in kept]

    built = Built(placed, _string_prompt(placed, question), [c["id"] for c in kept])
    return Case("chunk that starts another", docs, offered, built, recorded, shown_text=shown_text)


def in_pieces(rng: random.Random, text: Text, question: str) -> Case:
    """One or two kept chunks shown in pieces (cut at word ends), each piece under its own label."""
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs)
    cut_ids = {c["id"] for c in rng.sample(kept, rng.randint(1, min(2, len(kept))))}
    style = rng.choice(("[{n}] {content}", "Source {n}:\n{content}", "({n}) {content}"))
    placed: list[tuple[dict[str, Any], str, str]] = []
    for c in kept:
        words = c["content"].split(" ")
        if c["id"] in cut_ids and len(words) >= 12:
            parts = rng.randint(2, 3)
            bounds = sorted(rng.sample(range(5, len(words) - 4), parts - 1))
            pieces = [" ".join(words[a:b]) for a, b in zip([0, *bounds], [*bounds, len(words)])]
        else:
            pieces = [c["content"]]
        for piece in pieces:
            n = len(placed) + 1
            placed.append((c, style.format(n=n, content=piece), str(n)))
    shown = {c["id"]: c["content"] for c in kept}
    built = Built(placed, _string_prompt(placed, question), [c["id"] for c in kept])
    return Case("chunk shown in pieces", docs, kept, built, _recorded(kept, QUESTION_TEMPLATE), shown_text=shown)


def history_labels(rng: random.Random, text: Text, question: str) -> Case:
    """An earlier turn's sources in the history, numbered past this turn's; the answer may cite one
    of those labels (an unknown citation: it names nothing this turn shows)."""
    docs = _scored([text.doc() for _ in range(rng.randint(6, 10))], rng)
    kept = _kept(rng, docs, 2, 4)
    earlier = rng.sample(docs, min(len(docs), len(kept) + rng.randint(2, 4)))
    style = rng.choice(LABELLED[:2])
    placed = _numbered(kept, style)
    old = "\n".join(style.format(n=n, content=d["content"]) for n, d in enumerate(earlier, 1))
    template = [
        {"role": "system", "content": "You are a support assistant. Cite sources as [n]."},
        {"role": "user", "content": f"Sources:\n{old}\n\nQuestion: an earlier one?"},
        {"role": "assistant", "content": f"{text.sentence()[:-1]} [{len(earlier)}]."},
        {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"},
    ]
    prompt = _fill(template, "\n".join(t for _, t, _ in placed), question)
    stale = tuple(str(n) for n in range(len(kept) + 1, len(earlier) + 1))
    shown = {c["id"]: c["content"] for c in kept}
    recorded = _recorded(kept, [dict(m) for m in template])
    offered = list({d["id"]: d for d in kept + earlier}.values())  # the history's chunks were retrieved again
    built = Built(placed, prompt, [c["id"] for c in kept])
    return Case("earlier turn's labels cited", docs, offered, built, recorded, shown_text=shown, stale=stale)


GENERATE_PROMPT = (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to answer the question, "
    "citing them as [n].\nQuestion: {question}\nContext: {context}"
)


def agent_rounds(rng: random.Random, text: Text, question: str) -> Case:
    """Two retrieval rounds as tool messages. The answer's prompt shows the last round only
    (LangGraph's ``generate_answer``), or both, the second numbered on from the first."""
    docs = _scored([text.doc() for _ in range(rng.randint(6, 9))], rng)
    first = rng.sample(docs, 2)
    second = rng.sample([d for d in docs if d not in first], 2)
    if rng.random() < 0.3:  # the second round returns one of the first's again
        second[rng.randrange(2)] = rng.choice(first)
    last_only = rng.random() < 0.5
    offered = list({d["id"]: d for d in first + second}.values())  # every round's documents
    if last_only:
        placed = _numbered(second, "[{n}] {content}")
        template: Any = [{"role": "user", "content": GENERATE_PROMPT}]
        prompt: Any = _fill(template, "\n\n".join(t for _, t, _ in placed), question)
        recorded = _recorded(second, template)
    else:
        placed = [(c, f"[{n}] {c['content']}", str(n)) for n, c in enumerate(first + second, 1)]
        template = [
            {"role": "system", "content": "Answer from the retrieved documents and cite them as [n]."},
            {"role": "user", "content": "{question}"},
            {"role": "assistant", "content": "Searching."},
            {"role": "tool", "content": "\n\n".join(t for _, t, _ in placed[:2])},
            {"role": "assistant", "content": "Searching again."},
            {"role": "tool", "content": "{context}"},
        ]
        prompt = _fill(template, "\n\n".join(t for _, t, _ in placed[2:]), question)
        recorded = _recorded(offered, QUESTION_TEMPLATE)
    shown_ids = list(dict.fromkeys(c["id"] for c, _, _ in placed))
    shown = {c["id"]: c["content"] for c, _, _ in placed}
    return Case("agent rounds numbered from [1]", docs, offered, Built(placed, prompt, shown_ids), recorded, shown_text=shown)


SEARCH_SCENARIOS: list[Callable[[random.Random, Text, str], Case]] = [
    few_shot_styles, normal_forms, prefix_chunks, in_pieces, history_labels, agent_rounds,
]
