"""Declared placements: the app says what it rendered per chunk; offsets come from those fragments.

A known-answer scenario set: each scenario builds a prompt the way some app or framework does
(reformatting, truncation, chat messages, JSON escaping, duplicates, instructions that repeat a
chunk's text), declares what it rendered, and states the truth by hand: which chunks the model
saw, in what order, under which label. Every scenario must come out exactly right, through the
public API and real spans.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ragtrace
from ragtrace._internal.core import declared
from ragtrace._internal.core.chunks import to_chunk
from ragtrace._internal.core.declared import Declared, leading_label, resolve
from ragtrace._internal.core.tokens import DEFAULT_TOKENIZER

INVITES = {"id": "invites", "content": "Invites expire after **7 days**."}
YES = {"id": "yes", "content": "Yes."}
REFUNDS = {"id": "refunds", "content": "Refunds take 5 business days to arrive."}
SSO = {"id": "sso", "content": "SSO is available on the Enterprise plan only, configured under Settings."}


def strip_markdown(text: str) -> str:
    return text.replace("**", "")


@dataclass
class Scenario:
    name: str
    docs: list[dict[str, Any]]
    render: Callable[[int, dict[str, Any]], str]  # position, doc -> the text the app shows
    build: Callable[[list[str]], Any]  # rendered texts -> the final prompt
    answer: str
    in_context: list[str]  # truth: chunk ids the model saw, in prompt order
    labels: list[str]
    truncated: list[bool] | None = None
    dropped: dict[str, str] = field(default_factory=dict)
    cited: list[str] = field(default_factory=list)
    invalid: int = 0
    starts: Callable[[Any], list[int]] | None = None  # truth offsets where a text repeats in the prompt


def numbered(position: int, doc: dict[str, Any]) -> str:
    return f"[{position}] {strip_markdown(doc['content'])}"


INSTRUCTIONS = "Answer Yes. or No. Cite sources as [n]. Say Yes. only when a source says so."

SCENARIOS = [
    Scenario(
        "markdown stripped by the formatter",
        [INVITES, REFUNDS],
        numbered,
        lambda texts: "Sources:\n" + "\n\n".join(texts) + "\n\nQuestion: how long do invites last?",
        "Seven days [1].",
        ["invites", "refunds"],
        ["1", "2"],
        cited=["invites"],
    ),
    Scenario(
        "instructions repeat a short chunk, which is then dropped",
        [INVITES, YES],
        numbered,
        # the app rendered "Yes." but its window logic left it out of the final prompt
        lambda texts: INSTRUCTIONS + "\n\nSources:\n" + texts[0] + "\n\nQuestion: is it Yes.?",
        "Yes [1].",
        ["invites"],
        ["1"],
        dropped={"yes": "not_in_prompt"},
        cited=["invites"],
    ),
    Scenario(
        "instructions and question repeat a short chunk that is in context",
        [YES, INVITES],
        lambda position, doc: strip_markdown(doc["content"]),  # no label in the text
        lambda texts: INSTRUCTIONS + "\n\n" + "\n---\n".join(texts) + "\n\nQuestion: Yes.?",
        "Yes, invites expire [invites].",
        ["yes", "invites"],
        ["", ""],
        cited=["invites"],
        starts=lambda prompt: [prompt.index("\n\nYes.") + 2, prompt.index("Invites")],
    ),
    Scenario(
        "truncated to fit the window",
        [INVITES, SSO],
        numbered,
        lambda texts: ("Sources:\n" + "\n\n".join(texts))[:70],
        "Enterprise only [2].",
        ["invites", "sso"],
        ["1", "2"],
        truncated=[False, True],
        cited=["sso"],
    ),
    Scenario(
        "chat messages, sources in the system message",
        [REFUNDS, SSO],
        lambda position, doc: f"Source {position}: {doc['content']}",
        lambda texts: [
            {"role": "system", "content": "Use the sources.\n" + "\n".join(texts)},
            {"role": "user", "content": "Refunds take 5 business days to arrive? Source 1: ok"},
        ],
        "Yes [1].",
        ["refunds", "sso"],
        ["1", "2"],
        cited=["refunds"],
    ),
    Scenario(
        "the whole prompt JSON-escaped (a request body)",
        [{"id": "q", "content": 'He said "use \\\\server" then\nlogged in.'}, SSO],
        numbered,
        lambda texts: json.dumps({"prompt": "Sources:\n" + "\n\n".join(texts) + "\nQ: what?"}),
        "[1] and [3]",
        ["q", "sso"],
        ["1", "2"],
        cited=["q"],
        invalid=1,
    ),
    Scenario(
        "the same chunk rendered twice, and two chunks with equal text",
        [INVITES, INVITES, {"id": "copy", "content": "Invites expire after **7 days**."}],
        numbered,
        lambda texts: "\n".join(texts),
        "[2] [3]",
        ["invites", "copy"],
        ["1", "3"],
        dropped={"invites": "duplicate"},
        cited=["invites", "copy"],
        starts=lambda prompt: [0, prompt.index("[3]")],
    ),
    Scenario(
        "re-wrapped by a template (whitespace changed)",
        [SSO],
        numbered,
        lambda texts: "Context:\n" + texts[0].replace(" plan only, ", " plan only,\n    "),
        "[1]",
        ["sso"],
        ["1"],
        cited=["sso"],
    ),
]


def _run(scenario: Scenario, spans) -> tuple[Any, Any]:
    with ragtrace.rag_pipeline("declared") as run:
        with ragtrace.retrieve("q") as r:
            r.record([d for i, d in enumerate(scenario.docs) if d not in scenario.docs[:i]])
        with ragtrace.assemble() as ctx:
            texts = []
            for position, doc in enumerate(scenario.docs, start=1):
                text = scenario.render(position, doc)
                ctx.place(doc, text)
                texts.append(text)
            prompt = scenario.build(texts)
            ctx.set_prompt(prompt)
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record(scenario.answer)
    return run, ctx.snapshot()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_known_answer_scenarios(scenario: Scenario, spans):
    run, record = _run(scenario, spans)
    assert record.method == "declared"
    assert [p.chunk_id for p in record.placements] == scenario.in_context
    assert [p.position for p in record.placements] == list(range(1, len(scenario.in_context) + 1))
    assert [p.label for p in record.placements] == scenario.labels
    if scenario.truncated is not None:
        assert [p.truncated for p in record.placements] == scenario.truncated
    assert {d.chunk_id: d.reason for d in record.dropped if d.reason != "not_added"} == scenario.dropped
    # offsets point at the declared rendering itself (or its escaped / re-wrapped / cut form)
    for placement in record.placements:
        text = record.prompt if placement.message_index is None else record.prompt[placement.message_index]["content"]
        shown = text[placement.start : placement.end]
        position_text = scenario.render(_declared_position(scenario, placement.chunk_id), _doc(scenario, placement.chunk_id))
        assert _same_text(shown, position_text, placement.truncated), (shown, position_text)
    if scenario.starts is not None:
        assert [p.start for p in record.placements] == scenario.starts(record.prompt)
    assert run.metrics["in_context"] == len(scenario.in_context)
    assert run.metrics["cited"] == len(scenario.cited)
    assert run.metrics["invalid_citations"] == scenario.invalid
    assert spans.one("assemble").attributes["rag.context.inclusion_method"] == "declared"


def _doc(scenario: Scenario, chunk_id: str) -> dict[str, Any]:
    return next(d for d in scenario.docs if d["id"] == chunk_id)


def _declared_position(scenario: Scenario, chunk_id: str) -> int:
    """The position the app rendered the chunk at (its first rendering that the prompt shows)."""
    positions = [i for i, d in enumerate(scenario.docs, start=1) if d["id"] == chunk_id]
    return positions[0]


def _same_text(shown: str, rendered: str, truncated: bool) -> bool:
    for form in (rendered, json.dumps(rendered)[1:-1]):
        if shown == form or (truncated and form.startswith(shown) and len(shown) >= 16):
            return True
    return " ".join(shown.split()) == " ".join(rendered.split())


def test_scenario_set_is_all_right(spans):
    """The set as a whole: every chunk's inclusion and label right, 100%."""
    right = total = 0
    for scenario in SCENARIOS:
        _, record = _run(scenario, spans)
        truth = list(zip(scenario.in_context, scenario.labels))
        got = [(p.chunk_id, p.label) for p in record.placements]
        total += len(truth) + len(scenario.dropped)
        right += sum(1 for pair in got if pair in truth) + sum(
            1 for d in record.dropped if scenario.dropped.get(d.chunk_id) == d.reason
        )
        assert len(got) == len(truth)
    assert right == total


# --- the pieces ---------------------------------------------------------------------------------
def _declared(*pairs: tuple[dict[str, Any], str, str]) -> list[Declared]:
    return [Declared(to_chunk(doc, 0), text, label) for doc, text, label in pairs]


def test_offsets_in_a_plain_prompt_are_exact():
    prompt = "Q?\n[1] Yes.\n[2] Refunds take 5 business days to arrive."
    record = resolve(_declared((YES, "[1] Yes.", "1"), (REFUNDS, "[2] " + REFUNDS["content"], "2")), prompt, DEFAULT_TOKENIZER)
    # "Q?\n" is 3 chars: [1] Yes. = 3..11; "\n" -> 12; 12 + 4 + 39 = 55
    assert [(p.start, p.end) for p in record.placements] == [(3, 11), (12, 55)]
    # a placement's tokens are its chunk's, not its label's: the same figure a recorded placement gives
    assert [p.tokens for p in record.placements] == [DEFAULT_TOKENIZER.count("Yes."), DEFAULT_TOKENIZER.count(REFUNDS["content"])]


def test_the_tightest_order_wins_over_an_earlier_copy_in_the_instructions():
    prompt = "Reply Yes. or No.\n\nRefunds take 5 business days to arrive.\nYes."
    record = resolve(_declared((REFUNDS, REFUNDS["content"], ""), (YES, "Yes.", "")), prompt, DEFAULT_TOKENIZER)
    starts = [p.start for p in record.placements]
    assert starts == [prompt.index("Refunds"), prompt.rindex("Yes.")]


def test_a_fragment_out_of_order_is_not_placed_before_its_predecessor():
    prompt = "[2] beta text here\n[1] alpha text here"
    a, b = {"id": "a", "content": "alpha"}, {"id": "b", "content": "beta"}
    record = resolve(_declared((a, "[1] alpha text here", "1"), (b, "[2] beta text here", "2")), prompt, DEFAULT_TOKENIZER)
    # only one of the two can be found in declared order; the other did not reach the model in that order
    assert len(record.placements) == 1
    assert [d.reason for d in record.dropped] == ["not_in_prompt"]


def test_chat_message_indexes_and_offsets():
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "ctx: [1] Yes."}]
    record = resolve(_declared((YES, "[1] Yes.", "1")), prompt, DEFAULT_TOKENIZER)
    (placement,) = record.placements
    assert (placement.message_index, placement.start, placement.end) == (1, 5, 13)


def test_without_a_prompt_the_declarations_stand_without_offsets():
    record = resolve(_declared((YES, "[1] Yes.", "1")), None, DEFAULT_TOKENIZER)
    assert [(p.chunk_id, p.label, p.start, p.end) for p in record.placements] == [("yes", "1", -1, -1)]
    assert record.prompt is None


@pytest.mark.parametrize(
    "text, label",
    [("[2] x", "2"), ("  [doc-7] x", "doc-7"), ("Source 3: x", "3"), ("Document #4. x", "4"), ("plain x", ""), ("x [1]", "")],
)
def test_leading_label(text, label):
    assert leading_label(text) == label


def test_place_all_is_one_line_for_a_format_docs_function(spans):
    docs = [INVITES, REFUNDS]
    with ragtrace.rag_pipeline("p") as run:
        with ragtrace.retrieve("q") as r:
            r.record(docs)
        with ragtrace.assemble() as ctx:
            context = ctx.place_all(docs, lambda d: strip_markdown(d["content"]))
            ctx.set_prompt(f"Context:\n{context}\n\nQ?")
        with ragtrace.generate(model="m") as g:
            g.record("[invites]")
    assert context == "Invites expire after 7 days.\n\nRefunds take 5 business days to arrive."
    assert [(p.chunk_id, p.start) for p in ctx.snapshot().placements] == [("invites", 9), ("refunds", 9 + 28 + 2)]
    assert run.metrics["in_context"] == 2 and run.metrics["cited"] == 1


def test_place_all_with_a_numbered_format_string_labels_by_position(spans):
    with ragtrace.assemble() as ctx:
        block = ctx.place_all([INVITES, YES], "[{position}] {content}", separator="\n")
        ctx.set_prompt(block)
    assert block == "[1] Invites expire after **7 days**.\n[2] Yes."
    assert [(p.chunk_id, p.label) for p in ctx.snapshot().placements] == [("invites", "1"), ("yes", "2")]


def test_module_level_place_inside_an_assembler_function(spans):
    @ragtrace.assembler
    def build(question: str, docs: list[dict[str, Any]]) -> str:
        lines = []
        for i, doc in enumerate(docs, start=1):
            line = f"[{i}] {strip_markdown(doc['content'])}"
            ragtrace.place(doc, line, label=str(i))
            lines.append(line)
        return "\n".join(lines) + f"\nQ: {question}"

    with ragtrace.rag_pipeline("p") as run:
        with ragtrace.retrieve("q") as r:
            r.record([INVITES, YES])
        prompt = build("Yes.?", [INVITES, YES])
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("[2]")
    span = spans.one("assemble")
    assert span.attributes["rag.context.inclusion_method"] == "declared"
    assert list(span.attributes["rag.context.chunk_ids"]) == ["invites", "yes"]
    assert list(span.attributes["rag.context.char_starts"]) == [0, prompt.index("[2] Yes.")]
    assert run.metrics["cited"] == 1 and run.metrics["invalid_citations"] == 0


def test_module_level_functions_outside_an_assembly_record_nothing_and_still_render(spans, caplog):
    assert ragtrace.place(YES, "Yes.") is False
    assert ragtrace.place_all([YES, REFUNDS], lambda d: d["content"], separator=" | ") == "Yes. | " + REFUNDS["content"]
    assert "outside an assemble block" in caplog.text
    assert spans.all() == []


def test_place_returns_false_for_a_repeat_and_for_a_non_string(spans):
    with ragtrace.assemble() as ctx:
        assert ctx.place(YES, "[1] Yes.") is True
        assert ctx.place(YES, "[2] Yes.") is False
        assert ctx.place(REFUNDS, None) is False  # type: ignore[arg-type]
        ctx.set_prompt("[1] Yes. [2] Yes.")
    record = ctx.snapshot()
    assert [p.chunk_id for p in record.placements] == ["yes"]
    assert record.label_map()["2"] == "yes"  # the second rendering's label still names the chunk


def test_add_takes_a_list_of_chunks(spans):
    """Issue 16 item 14: ``ctx.add([c1, c2])`` placed nothing and said nothing."""
    with ragtrace.assemble() as ctx:
        assert ctx.add([INVITES, YES]) is True
        assert ctx.add([YES]) is False  # a duplicate: did not land
        prompt = ctx.render()
    assert prompt == "[1] Invites expire after **7 days**.\n\n[2] Yes."
    assert [p.chunk_id for p in ctx.snapshot().placements] == ["invites", "yes"]


# --- the whitespace-insensitive search, without compiling the chunk's words (issue 16 item 9) ---
@settings(max_examples=400, deadline=None)
@example(whole="a  b\t" * 50, text="a b")  # more occurrences than are kept
@example(whole="xa\n\u00a0b a\x00b", text=" a b ")  # mid-word, Unicode space, not across a NUL
@given(
    whole=st.text(alphabet="ab \t\n\u00a0\x00", max_size=40),
    text=st.text(alphabet="ab \n\u00a0", max_size=12),
)
def test_the_collapsed_search_finds_what_a_whitespace_regex_finds(whole, text):
    """``_Words.find_all`` against the ``w1\\s+w2...`` regex it replaced, as the reference."""
    words = text.split()
    expected = []
    if len(words) >= 2:
        for match in re.finditer(r"\s+".join(map(re.escape, words)), whole):
            expected.append(match.span())
            if len(expected) >= declared._MAX_OCCURRENCES:
                break
    assert declared._Words(whole).find_all(text) == expected


def test_a_cut_fragment_is_not_mistaken_for_a_later_one_that_opens_the_same_way():
    """Found by bench_accuracy: two unlabelled fragments both open "Reference T103-C"; the window
    cut the first. The second, never shown, matched its 16-character opening at the first's place
    and took it ("t103-c5" in context, "t103-c3" dropped). A cut text ends where the prompt does."""
    first = {"id": "c3", "content": "Reference T103-C3. Shard chunk gateway node certificate compaction budget."}
    second = {"id": "c5", "content": "Reference T103-C5. Seat schema webhook embedding audit region."}
    prompt = "Sources:\n\n" + "Earlier source text.\n\n" + first["content"][:40]
    record = resolve(_declared((first, first["content"], ""), (second, second["content"], "")), prompt, DEFAULT_TOKENIZER)
    assert [(p.chunk_id, p.truncated) for p in record.placements] == [("c3", True)]
    assert [(d.chunk_id, d.reason) for d in record.dropped] == [("c5", "not_in_prompt")]
