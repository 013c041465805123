"""Located inclusion is honest: found where it can be, never a fake invalid citation when it can't.

The two cases of issue 14 (item 1), as a user of ``@ragtrace.assembler`` meets them, and the rule
behind the second: a citation is flagged invalid only when ragtrace knows what the model was shown.
"""

from __future__ import annotations

from typing import Any

import ragtrace
from ragtrace._internal.core.chunks import to_chunk
from ragtrace._internal.core.locate import locate

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
