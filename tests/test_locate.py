"""Located inclusion is honest: found where it can be, never a fake invalid citation when it can't.

The two cases of issue 14 (item 1), as a user of ``@ragtrace.assembler`` meets them, and the rule
behind the second: a citation is flagged invalid only when ragtrace knows what the model was shown.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest

import ragtrace
from ragtrace._internal.core.chunks import to_chunk
from ragtrace._internal.core.locate import locate
from tests.citation_paths import measured

INVITES = {"id": "invites", "content": "Invites expire after **7 days**."}
YES = {"id": "yes", "content": "Yes."}
REFUNDS = {"id": "refunds", "content": "Refunds take 5 business days to arrive."}


def _pipeline(docs: list[dict[str, Any]], build, answer: str):
    with ragtrace.rag_pipeline("located") as run:
        with ragtrace.retrieve("q") as r:
            r.record(docs)
        prompt = build(docs)
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record(answer)
    return run


def test_a_chunk_whose_markdown_the_formatter_stripped_is_found_and_its_citation_valid(spans):
    @ragtrace.assembler
    def build(docs):
        return "Sources:\n" + "\n".join(f"[{i}] {d['content'].replace('**', '')}" for i, d in enumerate(docs, 1))

    run = _pipeline([INVITES], build, "Seven days [1].")
    assert (run.metrics["in_context"], run.metrics["invalid_citations"], run.metrics["recall_proxy"]) == (1, 0, 1.0)
    assemble = spans.one("assemble")
    assert assemble.attributes["rag.context.inclusion_method"] == "located"
    assert list(assemble.attributes["rag.context.labels"]) == ["1"]


def test_a_dropped_short_chunk_that_the_instructions_repeat_takes_no_position(spans):
    @ragtrace.assembler
    def build(docs):
        kept = [d for d in docs if d["id"] != "yes"]  # the app's own filter drops the short chunk
        return (
            "Answer Yes. or No., citing sources as [n].\n\nSources:\n"
            + "\n".join(f"[{i}] {d['content']}" for i, d in enumerate(kept, 1))
            + "\n\nQuestion: do refunds arrive within a week?"
        )

    run = _pipeline([REFUNDS, YES], build, "Yes [1].")
    assert run.metrics["context_precision"] == 0.5
    assert run.metrics["cited_positions"] == [1]
    assert run.metrics["in_context"] == 1
    attributes = spans.one("assemble").attributes
    assert list(attributes["rag.context.chunk_ids"]) == ["refunds"]
    assert dict(zip(attributes["rag.context.dropped_ids"], attributes["rag.context.dropped_reasons"]))["yes"] == "outside_sources"


def test_an_unlabelled_prompt_still_locates_unlabelled_chunks():
    chunks = [to_chunk(YES, 1), to_chunk(REFUNDS, 2)]
    record = locate(chunks, "Context:\nYes.\nRefunds take 5 business days to arrive.\n")
    assert [p.chunk_id for p in record.placements] == ["yes", "refunds"]
    assert record.dropped == []


def test_a_citation_ragtrace_cannot_resolve_in_a_located_prompt_with_gaps_is_not_called_invalid(spans):
    @ragtrace.assembler
    def build(docs):
        # REFUNDS is paraphrased beyond what a search can find
        return "[1] Invites expire after 7 days.\n[2] A refund reaches you within five working days."

    run = _pipeline([INVITES, REFUNDS], build, "Refunds: five days [2]. Invites [1].")
    assert "invalid_citations" not in run.metrics
    assert "recall_proxy" not in run.metrics  # [2] may be the chunk the search missed: not measurable
    assert "citations_unresolved" in run.status
    assert run.metrics["in_context"] == 1
    generate = spans.one("generate").attributes
    assert generate["rag.citation.status"] == "citations_unresolved"
    assert "rag.citation.invalid_count" not in generate
    assert spans.one("pipeline").attributes["rag.metrics.inclusion_method"] == "located"


def test_when_every_chunk_was_found_an_unresolved_citation_is_invalid(spans):
    @ragtrace.assembler
    def build(docs):
        return "[1] Invites expire after 7 days.\n[2] Refunds take 5 business days to arrive."

    run = _pipeline([INVITES, REFUNDS], build, "Refunds [2], invites [1], and [3].")
    assert run.metrics["invalid_citations"] == 1
    assert run.metrics["unknown_citations"] == 1
    assert run.metrics["recall_proxy"] == 1.0


def test_xml_tagged_sources_are_labelled_by_their_id_or_index_attribute(spans):
    """``<source id="2">`` / ``<document index="2">`` (the tag format model vendors recommend) is a
    label like ``[2]``: the answer's [2] resolves, and a dropped short chunk the instructions repeat
    is outside the sources."""

    @ragtrace.assembler
    def build(docs):
        kept = [d for d in docs if d["id"] != "yes"]
        tags = ('<source id="{n}">\n{text}\n</source>', "<document index='{n}'>{text}</document>")
        return "Answer Yes. or No.\n\n" + "\n".join(tags[n % 2].format(n=n, text=d["content"]) for n, d in enumerate(kept, 1))

    run = _pipeline([INVITES, YES, REFUNDS], build, "Five days [2], seven [1].")
    assert (run.metrics["in_context"], run.metrics["cited"], run.metrics["invalid_citations"]) == (2, 2, 0)
    attributes = spans.one("assemble").attributes
    assert list(attributes["rag.context.labels"]) == ["1", "2"]
    assert dict(zip(attributes["rag.context.dropped_ids"], attributes["rag.context.dropped_reasons"]))["yes"] == "outside_sources"


def test_a_word_that_merely_starts_with_a_label_keyword_is_no_label():
    """"... these passages.\\n\\n<chunk>" once read as label "s" (passage + s), which made a judge's
    unlabelled prompt look labelled; "Source 2:", "doc #3" and "[4]" still are labels."""
    chunks = [to_chunk(REFUNDS, 1)]
    for prompt, label in (
        ("Rate how well the answer is supported by these passages.\n\n", ""),
        ("Documents:\n", ""),
        ("Source 2: ", "2"),
        ("doc #3 - ", "3"),
        ("[4] ", "4"),
    ):
        record = locate(chunks, prompt + REFUNDS["content"])
        assert [p.label for p in record.placements] == [label], prompt


def test_a_parenthesised_number_opening_a_line_is_a_label():
    chunks = [to_chunk(REFUNDS, 1)]
    for prompt, label in (("Sources:\n(2) ", "2"), ("(3) ", "3"), ('{"p": "Sources:\\n(4) ', "4"), ("as in (5) ", "")):
        text = REFUNDS["content"] if not prompt.startswith("{") else REFUNDS["content"] + '"}'
        record = locate(chunks, prompt + text)
        assert [p.label for p in record.placements] == [label], prompt


# --- issue 36: what a search reads as this turn's sources, on both searched paths ---------------
# Each case is measured located (``ctx.observe``) and inferred (an OpenInference trace read back by
# ``ragtrace report``), and every figure is worked by hand from how the prompt was built.
A = {"id": "faq-7", "content": "Refunds reach the original card within five business days."}
B = {"id": "faq-8", "content": "Store credit is issued immediately instead of a refund."}
C = {"id": "faq-9", "content": "Shipping is free for orders over fifty euros."}
D = {"id": "faq-10", "content": "Returns are accepted for thirty days after delivery."}
SEARCHED = ("located", "inferred")
TOKENS = ragtrace.SimpleTokenizer()


def _sources(docs, style="[{n}] {text}", head="Answer from the sources and cite them.\n\nSources:\n", tail="\n\nQuestion: q\nAnswer:"):
    return head + "\n".join(style.format(n=n, text=d["content"] if isinstance(d, dict) else d) for n, d in enumerate(docs, 1)) + tail


def _check(method, got, status, **truth):
    assert status is None or "citations_unresolved" not in status, (method, status)
    for figure, value in truth.items():
        assert got.get(figure) == pytest.approx(value), (method, figure, got, status)


# class 1: a few-shot example under another label style is no source of this turn. Retrieved
# B, C, D; the example shows D; the sources are B at 1, C at 2; the answer cites C.
@pytest.mark.parametrize("method", SEARCHED)
@pytest.mark.parametrize("example_label", ["[A]", "[doc-7]", "Source A:", "[ex-1]"])
@pytest.mark.parametrize("where", ["system", "same-text"])
@pytest.mark.parametrize("source_style", ["[{n}] {text}", "Source {n}: {text}"])
def test_a_few_shot_example_under_another_label_style_takes_no_position(method, example_label, where, source_style):
    example = f"Example:\n{example_label} {D['content']}\nQuestion: returns?\nAnswer: Thirty days {example_label.rstrip(':')}.\n\n"
    sources = _sources([B, C], source_style, head="Sources:\n")
    if where == "system":
        prompt = [{"role": "system", "content": "Cite the sources you use.\n\n" + example}, {"role": "user", "content": sources}]
    else:
        prompt = "Cite the sources you use.\n\n" + example + sources
    cite = "[2]" if source_style.startswith("[") else "(Source 2)"
    got, status = measured(method, [B, C, D], prompt, f"Free shipping {cite}.")
    _check(
        method, got, status, in_context=2, context_precision=2 / 3, cited=1, invalid_citations=0, recall_proxy=1 / 3,
        cited_positions=[2], context_utilization=0.5, wasted_context_tokens=TOKENS.count(B["content"]),
    )


@pytest.mark.parametrize("method", SEARCHED)
@pytest.mark.parametrize(
    "example, sources, cite",
    [
        ("[doc-7]", ("[doc-3]", "[doc-5]"), "[doc-5]"),  # ids in one style, never repeated
        ("[1]", ("[2]", "[3]"), "[3]"),  # the example is [1], the sources go on from [2]
        ("Source 1:", ("Source 2:", "Source 3:"), "(Source 3)"),
    ],
    ids=["ids", "numbered-on", "keyword"],
)
@pytest.mark.parametrize("chat", [False, True], ids=["string", "one-user-message"])
def test_a_few_shot_example_written_like_the_sources_is_told_by_its_answer_line(method, example, sources, cite, chat):
    """Labels written alike that never repeat: the example is told from the sources by the
    prompt's structure, its worked answer citing its label, not by label numbers."""
    cited = example.rstrip(":").split()[-1].strip("[]")
    shown = f"Example:\n{example} {D['content']}\nQuestion: returns?\nAnswer: Thirty days [{cited}].\n\n"
    text = "Cite the sources you use.\n\n" + shown + f"Sources:\n{sources[0]} {B['content']}\n{sources[1]} {C['content']}\n\nQuestion: q"
    prompt = [{"role": "user", "content": text}] if chat else text
    got, status = measured(method, [B, C, D], prompt, f"Free shipping {cite}.")
    _check(method, got, status, in_context=2, context_precision=2 / 3, cited=1, invalid_citations=0, recall_proxy=1 / 3, cited_positions=[2])


# class 2: a chunk stored in one Unicode normal form and shown in the other is found whole
CAFE = {"id": "fr-1", "content": "Le café crème est servi à la réception après l'été."}
HANGUL = {"id": "ko-1", "content": "환불은 영업일 기준 오일 이내에 처리됩니다."}
VIET = {"id": "vi-1", "content": "Hoàn tiền được xử lý trong vòng năm ngày làm việc."}


@pytest.mark.parametrize("method", SEARCHED)
@pytest.mark.parametrize("stored, shown", [("NFD", "NFC"), ("NFC", "NFD")])
@pytest.mark.parametrize("doc", [CAFE, HANGUL, VIET], ids=["french", "korean", "vietnamese"])
@pytest.mark.parametrize("body", [False, True], ids=["text", "json-body"])
def test_a_chunk_in_another_unicode_normal_form_is_found_whole(method, stored, shown, doc, body):
    chunk = dict(doc, content=unicodedata.normalize(stored, doc["content"]))
    prompt = _sources([A, unicodedata.normalize(shown, doc["content"]), C])
    if body:  # the request body sent as one string: non-ASCII as \u escapes
        prompt = json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]})
    assert chunk["content"] not in prompt  # not the same code points: only a normalising search finds it
    got, status = measured(method, [A, chunk, C], prompt, "Five days [1], and this [2].")
    # in context A, chunk, C (1, 2, 3); cited A and the chunk; wasted: C's text
    _check(
        method, got, status, in_context=3, context_precision=1.0, cited=2, invalid_citations=0, recall_proxy=2 / 3,
        cited_positions=[1, 2], wasted_context_tokens=TOKENS.count(C["content"]),
    )


# class 3: a chunk whose whole text is the start of another's: the whole match wins
LONG = {"id": "faq-7-full", "content": A["content"] + " A refund to a card issued abroad can take up to ten days."}


@pytest.mark.parametrize("method", SEARCHED)
@pytest.mark.parametrize("order", ["long-first", "short-first"])
def test_a_chunk_that_is_the_start_of_a_longer_one_is_credited_not_the_longer(method, order):
    retrieved = [LONG, A, C] if order == "long-first" else [A, LONG, C]
    got, status = measured(method, retrieved, _sources([A, C]), "Five days [1].")
    # in context A (1) and C (2), not LONG; the answer cites A, at rank 2 or 1 of ranks 1, 2, 3
    rank = retrieved.index(A) + 1
    _check(
        method, got, status, in_context=2, context_precision=2 / 3, cited=1, recall_proxy=1 / 3,
        recall_proxy_weighted=(1 / rank) / (1 + 1 / 2 + 1 / 3), cited_positions=[1],
    )


@pytest.mark.parametrize("method", SEARCHED)
def test_a_longer_chunk_cut_beside_its_whole_prefix_chunk_is_both(method):
    cut = LONG["content"][: len(A["content"]) + 20]  # the app cut the long one in its second sentence
    got, status = measured(method, [A, LONG, C], _sources([A, cut, C]), "Abroad ten days [2].")
    _check(method, got, status, in_context=3, context_precision=1.0, cited=1, recall_proxy=1 / 3, cited_positions=[2])


def test_the_longer_chunk_is_dropped_not_found_and_the_short_one_placed_whole():
    record = locate([to_chunk(LONG, 1), to_chunk(A, 2)], _sources([A, C]))
    assert [(p.chunk_id, p.truncated, p.label) for p in record.placements] == [("faq-7", False, "1")]
    assert [(d.chunk_id, d.reason) for d in record.dropped] == [("faq-7-full", "not_found")]


# class 4: a chunk shown in pieces under several labels: each label names it
GUIDE = {
    "id": "guide-1",
    "content": "Refunds reach the original card within five business days. Store credit is issued immediately "
    "instead of a refund when the customer asks for it, and it never expires.",
}
_HALF = GUIDE["content"].index(" Store")
_THIRDS = (GUIDE["content"].index(" Store"), GUIDE["content"].index(" when"))


@pytest.mark.parametrize("method", SEARCHED)
@pytest.mark.parametrize(
    "pieces",
    [
        [GUIDE["content"][:_HALF], GUIDE["content"][_HALF + 1 :]],
        [GUIDE["content"][: _THIRDS[0]], GUIDE["content"][_THIRDS[0] + 1 : _THIRDS[1]], GUIDE["content"][_THIRDS[1] + 1 :]],
    ],
    ids=["halves", "thirds"],
)
@pytest.mark.parametrize("style", ["[{n}] {text}", "Source {n}:\n{text}"])
def test_a_chunk_shown_in_pieces_resolves_under_every_label(method, pieces, style):
    prompt = _sources([C, *pieces], style)
    last = len(pieces) + 1
    cite = "[{}]" if style.startswith("[") else "(Source {})"
    got, status = measured(method, [GUIDE, C], prompt, f"Store credit at once {cite.format(last)}.")
    # in context C (1) and the guide (2, its first piece); the last piece's label names the guide
    _check(method, got, status, in_context=2, context_precision=1.0, cited=1, invalid_citations=0, recall_proxy=0.5, cited_positions=[2])
    _check(method, got, status, wasted_context_tokens=TOKENS.count(C["content"]))


def test_a_chunk_shown_in_pieces_is_placed_whole_with_every_pieces_tokens():
    pieces = [GUIDE["content"][:_HALF], GUIDE["content"][_HALF + 1 :]]
    record = locate([to_chunk(GUIDE, 1), to_chunk(C, 2)], _sources([C, *pieces]))
    guide = next(p for p in record.placements if p.chunk_id == "guide-1")
    assert (guide.label, guide.position, guide.truncated) == ("2", 2, False)
    assert guide.tokens == sum(TOKENS.count(p) for p in pieces)
    assert record.label_map()["3"] == "guide-1"


# class 5: a label cited from an earlier turn's sources is one unknown citation, the rest scored
def _history():
    old = _sources([A, B, C, D], head="Sources:\n", tail="\n\nQuestion: earlier?")
    return [
        {"role": "system", "content": "Cite sources as [n]."},
        {"role": "user", "content": old},
        {"role": "assistant", "content": "Returns take thirty days [4]."},
        {"role": "user", "content": _sources([B, C], head="Sources:\n", tail="\n\nQuestion: shipping?")},
    ]


@pytest.mark.parametrize("method", SEARCHED)
@pytest.mark.parametrize("answer", ["As before, thirty days [4]. Free shipping [2].", "Free shipping [2], as said before [3]."])
def test_a_label_only_an_earlier_turn_shows_is_one_unknown_citation(method, answer):
    got, status = measured(method, [B, C, D], _history(), answer)
    # this turn: B (1), C (2); [4] / [3] name nothing of it: one unknown citation; C cited
    _check(
        method, got, status, in_context=2, context_precision=2 / 3, cited=1, invalid_citations=1, unknown_citations=1,
        out_of_context_citations=0, recall_proxy=1 / 3, cited_positions=[2],
    )


# an agent's rounds that each number from [1]: resolved against the rounds the answer's prompt shows
def _agent(rounds):
    messages = [{"role": "system", "content": "Answer from the retrieved documents and cite them as [n]."}, {"role": "user", "content": "q"}]
    for number, docs in enumerate(rounds):
        messages.append({"role": "assistant", "content": f"Searching ({number + 1})."})
        messages.append({"role": "tool", "content": "\n\n".join(f"[{n}] {d['content']}" for n, d in enumerate(docs, 1))})
    return messages


@pytest.mark.parametrize("method", SEARCHED)
def test_rounds_numbered_from_one_resolve_when_the_prompt_shows_one_round(method):
    got, status = measured(method, [A, B, C, D], _agent([[C, D]]), "Free shipping [1].")
    _check(method, got, status, in_context=2, context_precision=0.5, cited=1, invalid_citations=0, recall_proxy=0.25, cited_positions=[1])


@pytest.mark.parametrize("method", SEARCHED)
def test_a_label_two_shown_rounds_share_is_unresolved_not_guessed(method):
    got, status = measured(method, [A, B, C, D], _agent([[A, B], [C, D]]), "Free shipping [1].")
    assert status and "citations_unresolved" in status, (method, status)
    assert "cited" not in got and got["in_context"] == 4


@pytest.mark.parametrize("method", SEARCHED)
def test_a_label_two_shown_rounds_share_is_unresolved_even_when_one_chunk_is_in_both(method):
    # round 1: [1] A, [2] B; round 2: [1] C, [2] A. A is placed once (round 2's [2]); [1] is A or C
    got, status = measured(method, [A, B, C], _agent([[A, B], [C, A]]), "Free shipping [1].")
    assert status and "citations_unresolved" in status, (method, status, got)
    assert "cited" not in got and got["in_context"] == 3


@pytest.mark.parametrize("method", SEARCHED)
def test_a_chunk_two_rounds_returned_resolves_under_either_rounds_label(method):
    # round 1: [1] A, [2] B; round 2 numbered on: [3] C, [4] A. [1] and [4] both name A
    messages = _agent([[A, B], [C]])
    messages[-1]["content"] = f"[3] {C['content']}\n\n[4] {A['content']}"
    got, status = measured(method, [A, B, C], messages, "Five days [1], credit [2], as said [4].")
    _check(method, got, status, in_context=3, cited=2, invalid_citations=0, recall_proxy=2 / 3, cited_positions=[1, 2])


@pytest.mark.parametrize("method", SEARCHED)
@pytest.mark.parametrize("shown", [False, True], ids=["dropped", "shown"])
def test_bare_sources_a_short_chunk_the_instructions_repeat_is_in_context_only_where_shown(method, shown):
    """Sources joined bare (no labels): a chunk found only as a sentence of the instructions is
    not a source; shown as a paragraph of its own, it is, at its own place."""
    rule = {"id": "style", "content": "Never reveal internal ticket numbers."}
    head = "Cite every source you use. Always answer in English. Never reveal internal ticket numbers.\n\nSources:\n\n"
    bare = [A, rule, C] if shown else [A, C]
    prompt = head + "\n\n".join(d["content"] for d in bare) + "\n\nQuestion: q\nAnswer:"
    got, status = measured(method, [A, rule, C], prompt, "Five days.")
    assert got["in_context"] == len(bare) and got["context_precision"] == pytest.approx(len(bare) / 3), (method, got, status)
    assert got["cited_positions"] == [] and got["wasted_context_tokens"] == sum(TOKENS.count(d["content"]) for d in bare)


def test_entries_side_by_side_under_mixed_labels_are_one_block():
    """A title label then numbers ("[Refund policy] ...", "[2] ..."), nothing between them: one
    block of sources, not an example before them."""
    prompt = f"[Refund policy] {A['content']}\n[2] {B['content']}\n\nQ: q"
    record = locate([to_chunk(A, 1), to_chunk(B, 2)], prompt)
    assert [(p.chunk_id, p.label) for p in record.placements] == [("faq-7", "Refund policy"), ("faq-8", "2")]


@pytest.mark.parametrize("bullet", ["", "- ", "* ", "> "])
def test_bare_sources_as_bullets_fill_their_lines(bullet):
    rule = {"id": "style", "content": "Never reveal internal ticket numbers."}
    prompt = "Be brief. Never reveal internal ticket numbers.\n\nContext:\n" + "\n".join(bullet + d["content"] for d in (A, C)) + "\n\nQ: q"
    record = locate([to_chunk(A, 1), to_chunk(rule, 2), to_chunk(C, 3)], prompt)
    assert [p.chunk_id for p in record.placements] == ["faq-7", "faq-9"]
    assert [(d.chunk_id, d.reason) for d in record.dropped] == [("style", "outside_sources")]
