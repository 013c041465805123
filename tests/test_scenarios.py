"""End-to-end scenarios through the public API, each with its exact figures worked out by hand.

Every scenario asserts ``run.metrics``, the root span's ``rag.metrics.*`` and the span attributes
that matter, and compares ragtrace's recorded inclusion with what a substring-matching tool
(``chunk.content in prompt``) would infer: where they differ is why ragtrace exists.

Notation: R = unique retrieved ids with best rank, C = in-context ids, K = validly cited ids.
Tokens are the default tokenizer's words + punctuation marks ("Paris is the capital of France."
is 7). Σ1/rank over ranks 1..3 is 11/6, over 1..4 is 25/12.
"""

from __future__ import annotations

import json

import pytest

import ragtrace
from ragtrace._internal import names

D1 = {"id": "d1", "score": 0.9, "content": "Paris is the capital of France."}  # 7 tokens, 31 chars
D2 = {"id": "d2", "score": 0.8, "content": "Berlin is the capital of Germany."}  # 7 tokens, 33 chars
D3 = {"id": "d3", "score": 0.7, "content": "Madrid is the capital of Spain."}  # 7 tokens
D4 = {"id": "d4", "score": 0.6, "content": "Rome is the capital of Italy."}  # 7 tokens
DOCS = [D1, D2, D3, D4]


# --- helpers ----------------------------------------------------------------------------------
def plain(value):
    return list(value) if isinstance(value, tuple) else value


def figures_on(span) -> dict:
    return {
        key[len(names.RAG_METRICS_PREFIX) :]: plain(value)
        for key, value in span.attributes.items()
        if key.startswith(names.RAG_METRICS_PREFIX) and key not in (names.RAG_METRICS_STATUS, names.RAG_METRICS_INCLUSION_METHOD)
    }


def assert_exact(got: dict, expected: dict) -> None:
    assert set(got) == set(expected), (sorted(got), sorted(expected))
    for key, value in expected.items():
        if isinstance(value, float):
            assert isinstance(got[key], float), key
            assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        else:
            assert got[key] == value and type(got[key]) is type(value), (key, got[key], value)


def assert_figures(run, spans, expected: dict, *, answer_span=None) -> None:
    """run.metrics, the root's rag.metrics.* and (one answer) the generate span all agree."""
    assert_exact(run.metrics, expected)
    root = spans.one("pipeline")
    assert figures_on(root) == run.metrics
    assert names.RAG_METRICS_STATUS not in root.attributes
    assert run.status is None
    events = {e.attributes["gen_ai.evaluation.name"]: e.attributes for e in root.events if e.name == "gen_ai.evaluation.result"}
    assert set(events) == {"ragtrace." + k for k in names.PROXY_METRICS if k in expected}
    for key in names.PROXY_METRICS:
        if key in expected:
            assert events["ragtrace." + key]["gen_ai.evaluation.score.value"] == pytest.approx(expected[key])
    if answer_span is not None:
        assert figures_on(answer_span) == run.metrics


def answer_span(spans):
    found = [s for s in spans.by_stage("generate") if s.attributes[names.RAG_GENERATION_ROLE] == "answer"]
    assert len(found) == 1
    return found[0]


def prompt_texts(prompt) -> list[str]:
    return [prompt] if isinstance(prompt, str) else [m["content"] for m in prompt if isinstance(m.get("content"), str)]


def substring_says(docs, prompt) -> set[str]:
    """What a substring-matching tool infers: a chunk is in context if its text is in the prompt."""
    texts = prompt_texts(prompt)
    return {d["id"] for d in docs if any(d["content"] in t for t in texts)}


def context_attrs(spans, index: int = 0):
    return spans.by_stage("assemble")[index].attributes


def assert_offsets_point_at(attrs, prompt, expected_text: dict[str, str]) -> None:
    """Each recorded (start, end) slices exactly the expected text out of the prompt (or its message)."""
    ids = list(attrs[names.RAG_CONTEXT_CHUNK_IDS])
    starts, ends = list(attrs[names.RAG_CONTEXT_CHAR_STARTS]), list(attrs[names.RAG_CONTEXT_CHAR_ENDS])
    indexes = list(attrs.get(names.RAG_CONTEXT_MESSAGE_INDEXES, [None] * len(ids)))
    assert len(ids) == len(starts) == len(ends) == len(indexes)
    for chunk_id, start, end, message in zip(ids, starts, ends, indexes):
        text = prompt if message is None else prompt[message]["content"]
        assert text[start:end] == expected_text[chunk_id], chunk_id


# --- 1. reformatted and truncated chunks, located in a user-built prompt -----------------------
MESSY = [
    {"id": "r1", "score": 0.9, "content": "Paris is the\ncapital of   France."},
    {"id": "r2", "score": 0.8, "content": "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."},
    {"id": "r3", "score": 0.7, "content": "Madrid is the capital of Spain."},
]


@ragtrace.assembler
def six_word_prompt(question: str, docs: list) -> str:
    """Collapses whitespace and cuts every chunk to six words, like many hand-written builders."""
    lines = []
    for position, doc in enumerate(docs[:2], start=1):
        words = doc["content"].split()
        lines.append(f"[{position}] " + " ".join(words[:6]) + (" ..." if len(words) > 6 else ""))
    return "Answer with citations.\n" + "\n".join(lines) + f"\nQuestion: {question}"


def test_reformatted_and_truncated_chunks_in_a_decorated_assembler(spans):
    question = "When was the Eiffel Tower completed?"
    with ragtrace.rag_pipeline("located", query=question) as run:
        with ragtrace.retrieve(question) as r:
            r.record(MESSY)
        prompt = six_word_prompt(question, MESSY)
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("It was completed in 1889 [2].")

    assert prompt == (
        "Answer with citations.\n"
        "[1] Paris is the capital of France.\n"
        "[2] The Eiffel Tower was completed in ...\n"
        "Question: When was the Eiffel Tower completed?"
    )
    a = context_attrs(spans)
    assert a[names.RAG_CONTEXT_INCLUSION_METHOD] == "located"
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["r1", "r2"]
    assert list(a[names.RAG_CONTEXT_POSITIONS]) == [1, 2]
    assert list(a[names.RAG_CONTEXT_LABELS]) == ["1", "2"]
    # "Answer with citations.\n" 23 + "[1] " -> r1 27..58 (31 chars); "\n" 59 + "[2] " -> 63;
    # "The Eiffel Tower was completed in" is 33 chars -> 63..96
    assert list(a[names.RAG_CONTEXT_CHAR_STARTS]) == [27, 63]
    assert list(a[names.RAG_CONTEXT_CHAR_ENDS]) == [58, 96]
    assert_offsets_point_at(a, prompt, {"r1": "Paris is the capital of France.", "r2": "The Eiffel Tower was completed in"})
    assert list(a[names.RAG_CONTEXT_TRUNCATED]) == [False, True]
    assert a[names.RAG_CONTEXT_TRUNCATED_COUNT] == 1
    assert list(a[names.RAG_CONTEXT_CHUNK_TOKENS]) == [7, 6]  # as placed: the cut r2 has 6 tokens
    assert a[names.RAG_CONTEXT_TOTAL_TOKENS] == 13
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["r3"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["not_found"]

    g = answer_span(spans).attributes
    assert list(g[names.RAG_CITATION_IDS]) == ["r2"]
    assert g[names.RAG_CITATION_FORMAT] == "inline"

    # R = r1:1 r2:2 r3:3, C = {r1, r2}, K = {r2}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 3,
            "in_context": 2,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 2 / 3,
            "recall_proxy": 1 / 3,
            "recall_proxy_weighted": 3 / 11,  # (1/2) / (11/6)
            "context_utilization": 0.5,
            "wasted_context_tokens": 7,  # r1, never cited
            "duplicate_chunks": 0,
            "cited_positions": [2],
        },
        answer_span=answer_span(spans),
    )
    # a substring tool finds neither r1 (reformatted) nor r2 (cut): it would report C = {} and
    # precision 0, and could not resolve [2] to anything
    assert substring_says(MESSY, prompt) == set()
    assert set(a[names.RAG_CONTEXT_CHUNK_IDS]) == {"r1", "r2"}


def test_chunk_truncated_by_the_token_budget(spans):
    with ragtrace.rag_pipeline("budget", query="Who won?") as run:
        with ragtrace.retrieve("Who won?") as r:
            r.record([D1, H3, D2])  # d1:1 h3:2 d2:3
        with ragtrace.assemble(max_tokens=15) as ctx:
            # d1: 7 tokens; h3: 7 + 11 > 15, room 8 >= min(8, 11): cut to 8 tokens; d2: room 0
            landed = [ctx.add(doc) for doc in (D1, H3, D2)]
            prompt = ctx.render(question="Who won?")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("Paris [1].")

    assert landed == [True, True, False]
    cut = "Marie Curie won the Nobel Prize in Physics"  # Marie Curie won the Nobel Prize in Physics = 8
    a = context_attrs(spans)
    assert a[names.RAG_CONTEXT_INCLUSION_METHOD] == "recorded"
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["d1", "h3"]
    assert list(a[names.RAG_CONTEXT_TRUNCATED]) == [False, True]
    assert a[names.RAG_CONTEXT_TRUNCATED_COUNT] == 1
    assert list(a[names.RAG_CONTEXT_CHUNK_TOKENS]) == [7, 8]
    assert a[names.RAG_CONTEXT_TOTAL_TOKENS] == 15
    assert a[names.RAG_CONTEXT_MAX_TOKENS] == 15
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["d2"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["over_budget"]
    # default template head is 93 chars: d1 at 97..128; "\n\n" 130 + "[2] " -> h3 134..176 (42 chars)
    assert list(a[names.RAG_CONTEXT_CHAR_STARTS]) == [97, 134]
    assert list(a[names.RAG_CONTEXT_CHAR_ENDS]) == [128, 176]
    assert_offsets_point_at(a, prompt, {"d1": D1["content"], "h3": cut})

    # R = d1:1 h3:2 d2:3 (11/6); C = {d1, h3}; K = {d1}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 3,
            "in_context": 2,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 2 / 3,
            "recall_proxy": 1 / 3,
            "recall_proxy_weighted": 6 / 11,  # 1 / (11/6)
            "context_utilization": 0.5,
            "wasted_context_tokens": 8,  # h3 as placed (8), not as retrieved (11)
            "duplicate_chunks": 0,
            "cited_positions": [1],
        },
        answer_span=answer_span(spans),
    )
    # substring: h3's full text is not in the prompt, so "not included"; ragtrace: included, cut
    assert substring_says([D1, H3, D2], prompt) == {"d1"}


# --- 2. same content under two ids, same id from two retrievals --------------------------------
A = {"id": "a", "content": "Photosynthesis converts light into chemical energy."}  # 7 tokens
B = {"id": "b", "content": "Chlorophyll absorbs mostly blue and red light."}  # 8 tokens
B_COPY = {"id": "b-copy", "content": "Chlorophyll absorbs mostly blue and red light."}
CC = {"id": "c", "content": "The Calvin cycle fixes carbon dioxide."}  # 7 tokens
DD = {"id": "d", "content": "Stomata regulate gas exchange in leaves."}  # 7 tokens


def test_duplicates_by_content_and_by_id_across_retrievals(spans):
    with ragtrace.rag_pipeline("dups", query="How do plants make energy?") as run:
        with ragtrace.retrieve("plants energy") as r1:
            r1.record([A, B, B_COPY, CC])  # ranks a1 b2 b-copy3 c4
        with ragtrace.retrieve("carbon fixation") as r2:
            r2.record([CC, DD])  # c1 d2
        with ragtrace.assemble() as ctx:
            # everything from both retrievals, in order: a b b-copy c (hop 1), c d (hop 2)
            added = [ctx.add(doc) for doc in (A, B, B_COPY, CC, CC, DD)]
            prompt = ctx.render(question="How do plants make energy?")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("Light becomes chemical energy [1]; carbon is fixed by the Calvin cycle [3] [3].")

    assert added == [True, True, False, True, False, True]
    a = context_attrs(spans)
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["a", "b", "c", "d"]
    assert list(a[names.RAG_CONTEXT_POSITIONS]) == [1, 2, 3, 4]
    assert list(a[names.RAG_CONTEXT_LABELS]) == ["1", "2", "3", "4"]
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["b-copy", "c"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["duplicate", "duplicate"]
    assert a[names.RAG_CONTEXT_TOTAL_TOKENS] == 29  # 7 + 8 + 7 + 7
    assert_offsets_point_at(a, prompt, {d["id"]: d["content"] for d in (A, B, CC, DD)})
    second = spans.by_stage("retrieve")[1].attributes
    assert list(second[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["c", "d"]
    assert names.RAG_RETRIEVAL_RANKS not in second  # 1..n, each retrieval's own (the readers' default)

    # R = a:1 b:2 b-copy:3 c:min(4,1)=1 d:2, Σ1/rank = 1 + 1/2 + 1/3 + 1 + 1/2 = 10/3
    # duplicates: b-copy (content of b) + c (id seen twice) = 2; C = {a, b, c, d}; K = {a, c}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 5,
            "in_context": 4,
            "cited": 2,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 0.8,  # 4 / 5
            "recall_proxy": 0.4,  # 2 / 5
            "recall_proxy_weighted": 0.6,  # (1/1 + 1/1) / (10/3): c counts at its best rank, 1
            "context_utilization": 0.5,  # 2 / 4
            "wasted_context_tokens": 15,  # b 8 + d 7
            "duplicate_chunks": 2,
            "cited_positions": [1, 3],
        },
        answer_span=answer_span(spans),
    )
    # substring: b-copy's text is in the prompt (as b), so a substring tool counts it in context
    docs = [A, B, B_COPY, CC, DD]
    assert substring_says(docs, prompt) == {"a", "b", "b-copy", "c", "d"}
    assert "b-copy" not in a[names.RAG_CONTEXT_CHUNK_IDS]
    # ...and would report precision 5/5 where ragtrace measures 4/5
    assert len(substring_says(docs, prompt)) / 5 == 1.0 != run.metrics["context_precision"]



# --- 3. a short chunk whose words also appear in the instructions ------------------------------
STYLE = {"id": "style", "score": 0.95, "content": "Be concise."}  # 3 tokens
NOISE = {"id": "noise", "score": 0.5, "content": "Cats sleep most of the day."}  # 7 tokens
INSTRUCTIONS = "Answer in one word. Be concise.\n\nSources:\n{context}\n\nQuestion: {question}"


def test_short_chunk_dropped_but_its_words_are_in_the_instructions(spans):
    with ragtrace.rag_pipeline("instructions", query="Capital of France?") as run:
        with ragtrace.retrieve("Capital of France?") as r:
            r.record([STYLE, D1, NOISE])  # style1 d1:2 noise3
        with ragtrace.assemble() as ctx:
            ctx.drop(STYLE, reason="style_hint")
            ctx.add(D1)
            prompt = ctx.render(INSTRUCTIONS, question="Capital of France?")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("Paris [1].")

    # "Answer in one word. Be concise.\n\nSources:\n" is 42 chars; "[1] " -> d1 at 46..77
    assert prompt == "Answer in one word. Be concise.\n\nSources:\n[1] Paris is the capital of France.\n\nQuestion: Capital of France?"
    a = context_attrs(spans)
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["d1"]
    assert list(a[names.RAG_CONTEXT_CHAR_STARTS]) == [46]
    assert list(a[names.RAG_CONTEXT_CHAR_ENDS]) == [77]
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["style", "noise"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["style_hint", "not_added"]

    # R = style:1 d1:2 noise:3; C = {d1}; K = {d1}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 3,
            "in_context": 1,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 1 / 3,
            "recall_proxy": 1 / 3,
            "recall_proxy_weighted": 3 / 11,  # (1/2) / (11/6)
            "context_utilization": 1.0,
            "wasted_context_tokens": 0,
            "duplicate_chunks": 0,
            "cited_positions": [1],
        },
        answer_span=answer_span(spans),
    )
    # substring: "Be concise." is in the prompt (the instructions), so it "was included"
    assert substring_says([STYLE, D1, NOISE], prompt) == {"style", "d1"}
    assert "style" not in a[names.RAG_CONTEXT_CHUNK_IDS]


@ragtrace.assembler
def labelled_prompt(question: str, docs: list) -> str:
    sources = "\n".join(f"[{i}] {d['content']}" for i, d in enumerate(docs, start=1))
    return f"Answer in one word. Be concise.\n\nSources:\n{sources}\n\nQuestion: {question}"


def test_short_chunk_included_is_credited_at_its_label_not_the_instructions(spans):
    with ragtrace.rag_pipeline("instructions-located") as run:
        with ragtrace.retrieve() as r:
            r.record([STYLE, D1, NOISE])
        prompt = labelled_prompt("Capital of France?", [STYLE, D1])
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("Paris [2].")

    a = context_attrs(spans)
    assert a[names.RAG_CONTEXT_INCLUSION_METHOD] == "located"
    # "Answer in one word. " 20 + "Be concise." 11 + "\n\n" 2 + "Sources:\n" 9 = 42; "[1] " -> 46..57;
    # "\n" 58, "[2] " -> d1 62..93
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["style", "d1"]
    assert list(a[names.RAG_CONTEXT_LABELS]) == ["1", "2"]
    assert list(a[names.RAG_CONTEXT_CHAR_STARTS]) == [46, 62]
    assert list(a[names.RAG_CONTEXT_CHAR_ENDS]) == [57, 93]
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["noise"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["not_added"]
    # a substring search credits the instruction text, at offset 20
    assert prompt.find(STYLE["content"]) == 20

    # R = style:1 d1:2 noise:3; C = {style, d1}; K = {d1}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 3,
            "in_context": 2,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 2 / 3,
            "recall_proxy": 1 / 3,
            "recall_proxy_weighted": 3 / 11,
            "context_utilization": 0.5,
            "wasted_context_tokens": 3,  # "Be concise." = Be, concise, .
            "duplicate_chunks": 0,
            "cited_positions": [2],
        },
        answer_span=answer_span(spans),
    )


# --- 4. a grader call that sees every chunk ----------------------------------------------------
def test_grader_that_sees_every_chunk_is_left_out(spans):
    with ragtrace.rag_pipeline("graded", query="Capital of France?") as run:
        with ragtrace.retrieve("Capital of France?") as r:
            r.record(DOCS)
        with ragtrace.assemble() as answer_ctx:
            answer_ctx.add(D1)
            answer_ctx.add(D2)
            answer_prompt = answer_ctx.render(question="Capital of France?")
        with ragtrace.assemble() as grader_ctx:
            for doc in DOCS:
                grader_ctx.add(doc)
            grader_prompt = grader_ctx.render("Grade every source for relevance:\n{context}")
        with ragtrace.generate(model="judge", role="grader", prompt=grader_prompt, context=grader_ctx) as grader:
            grader.record("[1] relevant [2] partly [3] no [4] no")
        with ragtrace.generate(model="m", prompt=answer_prompt, context=answer_ctx) as g:
            g.record("Paris [1].")

    grader_span = next(s for s in spans.by_stage("generate") if s.attributes[names.RAG_GENERATION_ROLE] == "grader")
    assert not any(k.startswith("rag.metrics.") or k.startswith("rag.citation.") for k in grader_span.attributes)
    assert list(context_attrs(spans, 1)[names.RAG_CONTEXT_CHUNK_IDS]) == ["d1", "d2", "d3", "d4"]

    # R = d1..d4 (Σ1/rank = 25/12); C = {d1, d2} (the answer's context only); K = {d1}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 4,
            "in_context": 2,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 0.5,
            "recall_proxy": 0.25,
            "recall_proxy_weighted": 0.48,  # 1 / (25/12) = 12/25
            "context_utilization": 0.5,
            "wasted_context_tokens": 7,  # d2
            "duplicate_chunks": 0,
            "cited_positions": [1],
        },
        answer_span=answer_span(spans),
    )
    # a substring tool scanning every LLM call sees all four chunks "in context" (and all four
    # "cited" by the grader): precision 4/4 and recall 4/4 instead of 2/4 and 1/4
    seen = substring_says(DOCS, answer_prompt) | substring_says(DOCS, grader_prompt)
    assert seen == {"d1", "d2", "d3", "d4"}
    assert substring_says(DOCS, answer_prompt) == {"d1", "d2"}


# --- 5. chat-message prompts -------------------------------------------------------------------
CHAT = [
    {"role": "system", "content": "You are a geography tutor. Be concise. Cite sources as [n]."},
    {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"},
]


def test_chat_message_prompt_recorded(spans):
    with ragtrace.rag_pipeline("chat", query="Capitals?") as run:
        with ragtrace.retrieve("Capitals?") as r:
            r.record([D1, D2, D3])
        with ragtrace.assemble() as ctx:
            ctx.add(D1)
            ctx.add(D2)
            messages = ctx.render(CHAT, question="Capitals?")
        with ragtrace.generate(model="m", prompt=messages) as g:
            g.record({"choices": [{"message": {"role": "assistant", "content": "Paris [1] and Berlin [2]."}, "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 40, "completion_tokens": 9}})

    assert messages[1]["content"] == "Sources:\n[1] Paris is the capital of France.\n\n[2] Berlin is the capital of Germany.\n\nQuestion: Capitals?"
    a = context_attrs(spans)
    assert a[names.RAG_CONTEXT_INCLUSION_METHOD] == "recorded"
    assert list(a[names.RAG_CONTEXT_MESSAGE_INDEXES]) == [1, 1]
    # "Sources:\n" 9 + "[1] " -> 13..44 (31 chars); "\n\n" 46 + "[2] " -> 50..83 (33 chars)
    assert list(a[names.RAG_CONTEXT_CHAR_STARTS]) == [13, 50]
    assert list(a[names.RAG_CONTEXT_CHAR_ENDS]) == [44, 83]
    assert_offsets_point_at(a, messages, {"d1": D1["content"], "d2": D2["content"]})
    assert json.loads(a[names.OI_OUTPUT_VALUE])[1]["content"] == messages[1]["content"]
    g = answer_span(spans).attributes
    assert g[names.GEN_AI_USAGE_INPUT_TOKENS] == 40 and g[names.GEN_AI_USAGE_OUTPUT_TOKENS] == 9
    assert list(g[names.RAG_CITATION_IDS]) == ["d1", "d2"]

    # R = d1 d2 d3 (11/6); C = {d1, d2}; K = {d1, d2}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 3,
            "in_context": 2,
            "cited": 2,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 2 / 3,
            "recall_proxy": 2 / 3,
            "recall_proxy_weighted": 9 / 11,  # (1 + 1/2) / (11/6)
            "context_utilization": 1.0,
            "wasted_context_tokens": 0,
            "duplicate_chunks": 0,
            "cited_positions": [1, 2],
        },
        answer_span=answer_span(spans),
    )
    assert substring_says([D1, D2, D3], messages) == set(a[names.RAG_CONTEXT_CHUNK_IDS])  # agree here


@ragtrace.assembler
def chat_builder(question: str, docs: list) -> list:
    sources = "\n".join(f"[{i}] {d['content']}" for i, d in enumerate(docs, start=1))
    return [
        {"role": "system", "content": "You are a geography tutor. Be concise."},
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"},
    ]


def test_chat_message_prompt_located_short_chunk_also_in_system_message(spans):
    with ragtrace.rag_pipeline("chat-located") as run:
        with ragtrace.retrieve() as r:
            r.record([STYLE, D1, D3])
        messages = chat_builder("Capital of France?", [STYLE, D1])
        with ragtrace.generate(model="m", prompt=messages) as g:
            g.record("Paris [2].")

    a = context_attrs(spans)
    assert a[names.RAG_CONTEXT_INCLUSION_METHOD] == "located"
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["style", "d1"]
    # both in message 1: "Sources:\n" 9 + "[1] " -> 13..24; "\n" 25 + "[2] " -> 29..60
    assert list(a[names.RAG_CONTEXT_MESSAGE_INDEXES]) == [1, 1]
    assert list(a[names.RAG_CONTEXT_CHAR_STARTS]) == [13, 29]
    assert list(a[names.RAG_CONTEXT_CHAR_ENDS]) == [24, 60]
    assert list(a[names.RAG_CONTEXT_LABELS]) == ["1", "2"]
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["d3"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["not_added"]
    # a substring tool's first hit for "Be concise." is the system message
    first_hit = next(i for i, t in enumerate(prompt_texts(messages)) if STYLE["content"] in t)
    assert first_hit == 0

    # R = style:1 d1:2 d3:3; C = {style, d1}; K = {d1}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 3,
            "in_context": 2,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 2 / 3,
            "recall_proxy": 1 / 3,
            "recall_proxy_weighted": 3 / 11,
            "context_utilization": 0.5,
            "wasted_context_tokens": 3,
            "duplicate_chunks": 0,
            "cited_positions": [2],
        },
        answer_span=answer_span(spans),
    )


# --- 6. citation formats: [n], [id], JSON, fenced JSON ------------------------------------------
@pytest.mark.parametrize(
    ("labeller", "answer", "fmt"),
    [
        ("index", "Paris [1] and Madrid [3].", "inline"),
        ("id", "Paris [d1] and Madrid [d3].", "inline"),
        ("index", '{"answer": "Paris and Madrid", "citations": [1, 3]}', "json"),
        ("index", 'Paris and Madrid.\n\n```json\n{"citations": ["d1", "d3"]}\n```\n', "json"),
    ],
    ids=["n", "id", "json", "fenced-json"],
)
def test_citation_formats(spans, labeller, answer, fmt):
    with ragtrace.rag_pipeline("formats") as run:
        with ragtrace.retrieve() as r:
            r.record(DOCS)
        with ragtrace.assemble(labeller=labeller) as ctx:
            for doc in (D1, D2, D3):
                ctx.add(doc)
            prompt = ctx.render(question="Capitals?")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record(answer)

    a = context_attrs(spans)
    expected_labels = ["1", "2", "3"] if labeller == "index" else ["d1", "d2", "d3"]
    assert list(a[names.RAG_CONTEXT_LABELS]) == expected_labels
    assert all(f"[{label}] " in prompt for label in expected_labels)
    g = answer_span(spans).attributes
    assert list(g[names.RAG_CITATION_IDS]) == ["d1", "d3"]
    assert g[names.RAG_CITATION_VALID_COUNT] == 2
    assert g[names.RAG_CITATION_INVALID_COUNT] == 0
    assert g[names.RAG_CITATION_FORMAT] == fmt
    assert g[names.RAG_CITATION_CONFORMANT] is True

    # R = d1..d4 (25/12); C = {d1, d2, d3}; K = {d1, d3}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 4,
            "in_context": 3,
            "cited": 2,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 0.75,
            "recall_proxy": 0.5,
            "recall_proxy_weighted": 0.64,  # (1 + 1/3) / (25/12) = 16/25
            "context_utilization": 2 / 3,
            "wasted_context_tokens": 7,  # d2
            "duplicate_chunks": 0,
            "cited_positions": [1, 3],
        },
        answer_span=answer_span(spans),
    )
    assert substring_says(DOCS, prompt) == {"d1", "d2", "d3"} == set(a[names.RAG_CONTEXT_CHUNK_IDS])


# --- 7. invalid citations, markdown links, code blocks -----------------------------------------
NOISY_ANSWER = (
    "Paris is the capital [1]. See [the docs](https://example.com/page[2]) and [4].\n"
    "\n"
    "```python\n"
    "x = docs[3]\n"
    "```\n"
    "Also `arr[2]` and [9]. Done [1]."
)


def test_invalid_citations_links_and_code_are_not_counted(spans):
    with ragtrace.rag_pipeline("noisy") as run:
        with ragtrace.retrieve() as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            for doc in (D1, D2, D3):
                ctx.add(doc)
            prompt = ctx.render(question="Capital of France?")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record(NOISY_ANSWER)

    g = answer_span(spans).attributes
    # [1] valid (twice: counted once); the link and its [2] skipped; [4] was retrieved but not shown
    # to the model: invalid; docs[3] in fenced code and arr[2] in inline code skipped; [9] invalid
    assert list(g[names.RAG_CITATION_IDS]) == ["d1"]
    assert g[names.RAG_CITATION_VALID_COUNT] == 1
    assert g[names.RAG_CITATION_INVALID_COUNT] == 2
    assert list(g[names.RAG_CITATION_INVALID_LABELS]) == ["4", "9"]
    assert g[names.RAG_CITATION_FORMAT] == "inline"
    assert g[names.RAG_CITATION_CONFORMANT] is True

    # R = d1..d4; C = {d1, d2, d3}; K = {d1}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 4,
            "in_context": 3,
            "cited": 1,
            "invalid_citations": 2,
            "out_of_context_citations": 0,
            "unknown_citations": 2,
            "context_precision": 0.75,
            "recall_proxy": 0.25,
            "recall_proxy_weighted": 0.48,  # 1 / (25/12)
            "context_utilization": 1 / 3,
            "wasted_context_tokens": 14,  # d2 7 + d3 7
            "duplicate_chunks": 0,
            "cited_positions": [1],
        },
        answer_span=answer_span(spans),
    )
    assert substring_says(DOCS, prompt) == set(context_attrs(spans)[names.RAG_CONTEXT_CHUNK_IDS])


# --- 8. multi-hop retrieval with a rerank ------------------------------------------------------
H1 = {"id": "h1", "content": "Marie Curie was born in Warsaw in 1867."}  # 9 tokens
H2 = {"id": "h2", "content": "Warsaw is the capital of Poland."}  # 7 tokens
H3 = {"id": "h3", "content": "Marie Curie won the Nobel Prize in Physics in 1903."}  # 11 tokens
H4 = {"id": "h4", "content": "She won a second Nobel Prize in Chemistry in 1911."}  # 11 tokens


def test_multi_hop_retrieval_uses_the_best_rank(spans):
    with ragtrace.rag_pipeline("multi-hop", query="Which prizes did Marie Curie win?") as run:
        with ragtrace.retrieve("Marie Curie") as hop1:
            hop1.record([H1, H2, H3])  # h1:1 h2:2 h3:3
        with ragtrace.retrieve("Marie Curie Nobel Prize") as hop2:
            hop2.record([H4, H3])  # h4:1 h3:2
        with ragtrace.rerank(model="cross-encoder", top_n=2) as rr:
            rr.record([H3, H4], candidates=[H1, H2, H3, H4])
        with ragtrace.assemble() as ctx:
            for doc in rr.chunks:
                ctx.add(doc)
        with ragtrace.generate(model="m", prompt=ctx.prompt) as g:
            g.record("Physics in 1903 [1].")

    rerank = spans.one("rerank").attributes
    assert [rerank[f"reranker.input_documents.{i}.document.id"] for i in range(4)] == ["h1", "h2", "h3", "h4"]
    assert names.RAG_RERANK_INPUT_IDS not in rerank  # written once, in the reranker's documents
    assert list(rerank[names.RAG_RERANK_OUTPUT_IDS]) == ["h3", "h4"]
    a = context_attrs(spans)
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["h3", "h4"]
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["h1", "h2"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["reranked_out", "reranked_out"]
    assert list(a[names.RAG_CONTEXT_CHUNK_TOKENS]) == [11, 11]

    # R = h1:1 h2:2 h3:min(3,2)=2 h4:1, Σ1/rank = 1 + 1/2 + 1/2 + 1 = 3; duplicates: h3 once
    # C = {h3, h4}; K = {h3}
    assert_figures(
        run,
        spans,
        {
            "retrieved": 4,
            "in_context": 2,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 0.5,
            "recall_proxy": 0.25,
            "recall_proxy_weighted": 1 / 6,  # (1/2) / 3; with hop 1's rank 3 it would be (1/3) / 3
            "context_utilization": 0.5,
            "wasted_context_tokens": 11,  # h4
            "duplicate_chunks": 1,
            "cited_positions": [1],
        },
        answer_span=answer_span(spans),
    )
    assert substring_says([H1, H2, H3, H4], ctx.prompt) == {"h3", "h4"}


# --- 9. everything decorated, with a user assembler ----------------------------------------------
class Document:
    """LangChain-style document."""

    def __init__(self, page_content: str, metadata: dict) -> None:
        self.page_content = page_content
        self.metadata = metadata


X1 = Document("Paris is the capital of France.", {"id": "x1"})  # 7 tokens
X2 = Document("Lyon is known for its cuisine.", {"id": "x2"})  # 7 tokens
X3 = Document("The Louvre is the most visited museum.", {"id": "x3"})  # 8 tokens, 38 chars


@ragtrace.retriever(data_source="kb", top_k=3)
def search(query: str) -> list:
    return [X1, X2, X3]


@ragtrace.reranker(model="xrank", top_n=2)
def rerank_docs(query: str, documents: list) -> list:
    return [documents[2], documents[0]]


@ragtrace.assembler
def source_prompt(question: str, docs: list) -> str:
    lines = [f"Source {i}: {d.page_content}" for i, d in enumerate(docs, start=1)]
    return "Context:\n" + "\n".join(lines) + f"\nQ: {question}"


@ragtrace.generator(model="gpt-test", provider="openai")
def llm(prompt: str) -> dict:
    text = "The Louvre, in Paris [Source 2], is the most visited museum [Source 1]."
    return {"choices": [{"message": {"content": text}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 50, "completion_tokens": 12}}


@ragtrace.rag_pipeline("decorated")
def answer_question(question: str) -> str:
    docs = search(question)
    top = rerank_docs(question, docs)
    prompt = source_prompt(question, top)
    return llm(prompt)["choices"][0]["message"]["content"]


def test_fully_decorated_pipeline_with_user_assembler(spans):
    answer = answer_question("Where is the Louvre?")
    assert answer.startswith("The Louvre, in Paris")

    a = context_attrs(spans)
    assert a[names.RAG_CONTEXT_INCLUSION_METHOD] == "located"
    assert list(a[names.RAG_CONTEXT_CHUNK_IDS]) == ["x3", "x1"]
    assert list(a[names.RAG_CONTEXT_LABELS]) == ["1", "2"]
    # "Context:\n" 9 + "Source 1: " 10 -> x3 19..57; "\n" 58 + "Source 2: " -> x1 68..99
    assert list(a[names.RAG_CONTEXT_CHAR_STARTS]) == [19, 68]
    assert list(a[names.RAG_CONTEXT_CHAR_ENDS]) == [57, 99]
    assert names.RAG_CONTEXT_TRUNCATED not in a and a[names.RAG_CONTEXT_TRUNCATED_COUNT] == 0  # flags only when some is cut
    assert list(a[names.RAG_CONTEXT_DROPPED_IDS]) == ["x2"]
    assert list(a[names.RAG_CONTEXT_DROPPED_REASONS]) == ["reranked_out"]
    g = answer_span(spans).attributes
    assert list(g[names.RAG_CITATION_IDS]) == ["x1", "x3"]  # first cited first
    assert g[names.GEN_AI_USAGE_INPUT_TOKENS] == 50

    # R = x1:1 x2:2 x3:3 (11/6); C = {x3, x1}; K = {x1, x3}
    expected = {
        "retrieved": 3,
        "in_context": 2,
        "cited": 2,
        "invalid_citations": 0,
        "out_of_context_citations": 0,
        "unknown_citations": 0,
        "context_precision": 2 / 3,
        "recall_proxy": 2 / 3,
        "recall_proxy_weighted": 8 / 11,  # (1 + 1/3) / (11/6)
        "context_utilization": 1.0,
        "wasted_context_tokens": 0,
        "duplicate_chunks": 0,
        "cited_positions": [1, 2],
    }
    root = spans.one("pipeline")
    assert_exact(figures_on(root), expected)
    assert names.RAG_METRICS_STATUS not in root.attributes
    assert figures_on(answer_span(spans)) == figures_on(root)


# --- 10. no citations at all --------------------------------------------------------------------
def test_no_citations_is_measured_as_zero(spans):
    with ragtrace.rag_pipeline("uncited") as run:
        with ragtrace.retrieve() as r:
            r.record([D1, D2, D3])
        with ragtrace.assemble() as ctx:
            ctx.add(D1)
            ctx.add(D2)
            prompt = ctx.render(question="Capitals?")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("Paris is the capital of France.")

    g = answer_span(spans).attributes
    assert g[names.RAG_CITATION_CONFORMANT] is False
    assert g[names.RAG_CITATION_FORMAT] == "none"
    assert g[names.RAG_CITATION_VALID_COUNT] == 0
    assert g[names.RAG_CITATION_INVALID_COUNT] == 0
    assert list(g[names.RAG_CITATION_IDS]) == []

    # R = d1 d2 d3; C = {d1, d2}; K = {}: the zeros are measurements of an uncited answer
    assert_figures(
        run,
        spans,
        {
            "retrieved": 3,
            "in_context": 2,
            "cited": 0,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 2 / 3,
            "recall_proxy": 0.0,
            "recall_proxy_weighted": 0.0,
            "context_utilization": 0.0,
            "wasted_context_tokens": 14,  # d1 7 + d2 7
            "duplicate_chunks": 0,
            "cited_positions": [],
        },
        answer_span=answer_span(spans),
    )
    recall = next(e for e in spans.one("pipeline").events if e.attributes["gen_ai.evaluation.name"] == "ragtrace.recall_proxy")
    assert recall.attributes["gen_ai.evaluation.score.label"] == "none"
    assert substring_says([D1, D2, D3], prompt) == {"d1", "d2"}


# --- 11. a generation outside any pipeline, given its context -----------------------------------
def test_generation_outside_a_pipeline_in_an_app_trace_with_explicit_context(spans):
    tracer = spans.provider.get_tracer("app")
    with tracer.start_as_current_span("request"):
        with ragtrace.retrieve("Capitals?") as r:
            r.record([D1, D2, D3])
        with ragtrace.assemble() as ctx:
            ctx.add(D1)
            ctx.add(D2)
            prompt = ctx.render(question="Capitals?")
        with ragtrace.assemble() as later:  # a later assembly: not the one this answer saw
            later.add(D3)
        with ragtrace.generate(model="m", prompt=prompt, context=ctx) as g:
            g.record("Berlin [2].")

    assert spans.by_stage("pipeline") == []
    generate = answer_span(spans)
    # R = d1 d2 d3 (11/6); C = {d1, d2}; K = {d2}
    assert_exact(
        figures_on(generate),
        {
            "retrieved": 3,
            "in_context": 2,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_precision": 2 / 3,
            "recall_proxy": 1 / 3,
            "recall_proxy_weighted": 3 / 11,  # (1/2) / (11/6)
            "context_utilization": 0.5,
            "wasted_context_tokens": 7,  # d1
            "duplicate_chunks": 0,
            "cited_positions": [2],
        },
    )
    assert g.metrics == figures_on(generate)
    assert names.RAG_METRICS_STATUS not in generate.attributes
    assert list(generate.attributes[names.RAG_CITATION_IDS]) == ["d2"]


def test_generation_with_no_trace_and_no_retrieval_says_so(spans):
    with ragtrace.assemble() as ctx:
        ctx.add(D1)
        ctx.add(D2)
    with ragtrace.generate(model="m", context=ctx) as g:
        g.record("Paris [1].")

    generate = answer_span(spans)
    assert generate.context.trace_id != spans.one("assemble").context.trace_id
    # no retrieval in this trace: no |R|, no precision, no recall; what was measured stays
    assert_exact(
        figures_on(generate),
        {
            "in_context": 2,
            "cited": 1,
            "invalid_citations": 0,
            "out_of_context_citations": 0,
            "unknown_citations": 0,
            "context_utilization": 0.5,
            "wasted_context_tokens": 7,  # d2
            "cited_positions": [1],
        },
    )
    assert generate.attributes[names.RAG_METRICS_STATUS] == "no_retrieval"


# --- a context still being assembled, and no recorded context at all ----------------------------
def test_generation_inside_the_open_assemble_block_uses_that_context(spans):
    with ragtrace.rag_pipeline("nested") as run:
        with ragtrace.retrieve() as r:
            r.record([D1])
        with ragtrace.assemble() as ctx:
            ctx.add(D1)
            with ragtrace.generate(model="m", prompt=ctx.prompt, context=ctx) as g:
                g.record("Paris [1].")
    # R = {d1}; C = {d1}; K = {d1}
    assert run.metrics["cited"] == 1
    assert run.metrics["recall_proxy"] == 1.0
    assert run.status is None


def test_uninstrumented_assembly_leaves_recall_out(spans):
    with ragtrace.rag_pipeline("no-assembly") as run:
        with ragtrace.retrieve() as r:
            r.record([D1])
        with ragtrace.generate(model="m", prompt="[1] Paris is the capital of France.\nQ?") as g:
            g.record("Paris [1].")
    assert "no_context" in run.status
    # the citation could not be resolved against anything: neither a 0.0 recall nor an invalid
    # citation is a measurement
    assert "recall_proxy" not in run.metrics
    assert "recall_proxy_weighted" not in run.metrics
    assert run.metrics.get("invalid_citations", 0) == 0
