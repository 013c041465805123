"""ContextBuilder records exactly which chunk landed where; locate finds chunks in user prompts.

Every offset below is counted by hand from the literal strings (the arithmetic is in comments).
The default tokenizer counts words and punctuation marks: "alpha text" is 2 tokens.
"""

from __future__ import annotations

import pytest

from ragtrace._internal.core.assembly import ContextBuilder, Drop, Placement
from ragtrace._internal.core.locate import locate
from ragtrace._internal.core.chunks import Chunk, content_hash

A = {"id": "a", "content": "alpha text"}  # 2 tokens, 10 chars
B = {"id": "b", "content": "beta gamma delta"}  # 3 tokens, 16 chars

# "[1] alpha text\n\n[2] beta gamma delta"
#  a: "[1] " is 4 chars -> 4..14; then "\n\n" -> 16, "[2] " -> 20; b: 20..36
BLOCK = "[1] alpha text\n\n[2] beta gamma delta"


def built(*items, **options) -> ContextBuilder:
    builder = ContextBuilder(**options)
    for item in items:
        builder.add(item)
    return builder


def spans_of(record) -> list[tuple[str, int, int]]:
    return [(p.chunk_id, p.start, p.end) for p in record.placements]


def assert_offsets_exact(record, texts: dict[str, str]) -> None:
    """prompt[start:end] is exactly the placed text, for every placement."""
    for p in record.placements:
        prompt = record.prompt if p.message_index is None else record.prompt[p.message_index]["content"]
        assert prompt[p.start : p.end] == texts[p.chunk_id], p


# --- positions, labels, offsets ---------------------------------------------------------------
def test_default_block_positions_labels_offsets_tokens():
    builder = built(A, B)
    record = builder.record()
    assert record.method == "recorded"
    assert record.prompt == BLOCK
    assert record.placements == [
        Placement("a", 1, "1", 4, 14, 2, False, None, content_hash("alpha text")),
        Placement("b", 2, "2", 20, 36, 3, False, None, content_hash("beta gamma delta")),
    ]
    assert record.dropped == []
    assert record.total_tokens == 5  # 2 + 3
    assert record.truncated_count == 0
    assert record.max_tokens is None
    assert_offsets_exact(record, {"a": "alpha text", "b": "beta gamma delta"})


def test_id_labels():
    builder = built({"id": "doc-a", "content": "alpha text"}, {"id": "doc-b", "content": "beta gamma delta"}, labeller="id")
    record = builder.record()
    # "[doc-a] " is 8 chars -> 8..18; "\n\n" -> 20; "[doc-b] " -> 28; 28 + 16 = 44
    assert record.prompt == "[doc-a] alpha text\n\n[doc-b] beta gamma delta"
    assert [(p.label, p.start, p.end) for p in record.placements] == [("doc-a", 8, 18), ("doc-b", 28, 44)]
    assert record.label_map() == {"doc-a": "doc-a", "doc-b": "doc-b"}


def test_custom_labeller_gets_chunk_and_position():
    builder = built(A, B, labeller=lambda chunk, position: f"S{position}:{chunk.id}")
    record = builder.record()
    # "[S1:a] " is 7 chars -> 7..17; "\n\n" -> 19; "[S2:b] " -> 26; 26 + 16 = 42
    assert record.prompt == "[S1:a] alpha text\n\n[S2:b] beta gamma delta"
    assert [(p.label, p.start, p.end) for p in record.placements] == [("S1:a", 7, 17), ("S2:b", 26, 42)]
    assert record.label_map() == {"a": "a", "b": "b", "S1:a": "a", "S2:b": "b"}


def test_labels_win_over_ids_in_the_label_map():
    # chunk "2" is shown as [1] and chunk "1" as [2]: "[1]" in the answer means chunk "2"
    record = built({"id": "2", "content": "two text"}, {"id": "1", "content": "one text"}).record()
    assert record.label_map() == {"1": "2", "2": "1"}


def test_custom_chunk_format_and_separator():
    builder = built(A, B, chunk_format="<doc id={label}>\n{content}\n</doc>", separator="\n")
    record = builder.record()
    # "<doc id=1>\n" is 11 chars -> a 11..21; piece = 11 + 10 + len("\n</doc>")=7 -> 28; sep -> 29
    # b: 29 + 11 = 40 -> 40..56
    assert record.prompt == "<doc id=1>\nalpha text\n</doc>\n<doc id=2>\nbeta gamma delta\n</doc>"
    assert spans_of(record) == [("a", 11, 21), ("b", 40, 56)]
    assert_offsets_exact(record, {"a": "alpha text", "b": "beta gamma delta"})


def test_label_that_looks_like_a_placeholder_is_literal():
    builder = built(A, labeller=lambda chunk, position: "{content}")
    record = builder.record()
    # "[{content}] " is 12 chars -> 12..22
    assert record.prompt == "[{content}] alpha text"
    assert spans_of(record) == [("a", 12, 22)]


# --- templates --------------------------------------------------------------------------------
def test_template_with_context_variables_and_literal_braces():
    template = 'Reply as JSON {"answer": str, "citations": [n]}.\nSources:\n{context}\nQuestion: {question} {unknown}'
    builder = built(A, B)
    prompt = builder.render(template, question="What is alpha?")
    # head 'Reply as JSON {"answer": str, "citations": [n]}.\nSources:\n':
    #   "Reply as JSON " 14 + '{"answer": str, "citations": [n]}' 33 + "." 1 + "\n" 1 + "Sources:\n" 9 = 58
    # a: 58 + 4 = 62..72; b: 58 + 20 = 78..94
    assert prompt == (
        'Reply as JSON {"answer": str, "citations": [n]}.\nSources:\n'
        + BLOCK
        + "\nQuestion: What is alpha? {unknown}"
    )
    record = builder.record()
    assert record.prompt == prompt
    assert spans_of(record) == [("a", 62, 72), ("b", 78, 94)]
    assert_offsets_exact(record, {"a": "alpha text", "b": "beta gamma delta"})


def test_variables_before_the_context_shift_offsets():
    builder = built(A)
    prompt = builder.render("Q: {question}\n{context}", question="Why?")
    # "Q: Why?\n" is 8 chars; "[1] " -> 12..22
    assert prompt == "Q: Why?\n[1] alpha text"
    assert spans_of(builder.record()) == [("a", 12, 22)]


def test_variable_values_are_not_expanded_again():
    builder = built(A)
    prompt = builder.render("Q: {question}\n{context}\nA: {answer_hint}", question="{context}", answer_hint="{question}")
    # head "Q: {context}\n" is 13 chars; a at 17..27
    assert prompt == "Q: {context}\n[1] alpha text\nA: {question}"
    assert spans_of(builder.record()) == [("a", 17, 27)]


def test_template_without_context_placeholder_appends_the_block():
    builder = built(A)
    prompt = builder.render("Answer briefly.")
    # "Answer briefly.\n\n" is 17 chars; a at 21..31
    assert prompt == "Answer briefly.\n\n[1] alpha text"
    assert spans_of(builder.record()) == [("a", 21, 31)]


def test_question_variable_without_template_uses_the_default_template():
    builder = built(A)
    prompt = builder.render(question="What is alpha?")
    head = "Answer the question using only the sources below. Cite the sources you use as [n].\n\nSources:\n"
    assert prompt == head + "[1] alpha text\n\nQuestion: What is alpha?\nAnswer:"
    # len(head) = 93; a at 97..107
    assert spans_of(builder.record()) == [("a", 97, 107)]


def test_last_render_wins():
    builder = built(A)
    builder.render("First:\n{context}")
    prompt = builder.render("Second one:\n{context}")
    record = builder.record()
    # "Second one:\n" is 12 chars; a at 16..26
    assert record.prompt == prompt == "Second one:\n[1] alpha text"
    assert spans_of(record) == [("a", 16, 26)]


# --- chat message templates -------------------------------------------------------------------
def test_chat_messages_get_message_index_and_offsets_within_the_message():
    template = [
        {"role": "system", "content": "You answer from sources. Cite as [n]. {style}"},
        {"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}", "name": "alice"},
    ]
    builder = built(A, B)
    messages = builder.render(template, question="What is alpha?", style="Be brief.")
    assert messages == [
        {"role": "system", "content": "You answer from sources. Cite as [n]. Be brief."},
        {"role": "user", "content": "Sources:\n" + BLOCK + "\n\nQuestion: What is alpha?", "name": "alice"},
    ]
    # the template is not mutated
    assert template[1]["content"] == "Sources:\n{context}\n\nQuestion: {question}"
    record = builder.record()
    # "Sources:\n" is 9 chars: a 9 + 4 = 13..23, b 9 + 20 = 29..45, both in message 1
    assert [(p.chunk_id, p.message_index, p.start, p.end) for p in record.placements] == [
        ("a", 1, 13, 23),
        ("b", 1, 29, 45),
    ]
    assert_offsets_exact(record, {"a": "alpha text", "b": "beta gamma delta"})


def test_chat_messages_without_placeholder_get_a_sources_message():
    template = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is alpha?"}]
    builder = built(A)
    messages = builder.render(template)
    assert messages == [*template, {"role": "user", "content": "[1] alpha text"}]
    assert [(p.message_index, p.start, p.end) for p in builder.record().placements] == [(2, 4, 14)]


def test_chat_non_text_content_is_left_alone():
    parts = [{"type": "image_url", "image_url": {"url": "data:,"}}]
    template = [{"role": "user", "content": parts}, {"role": "user", "content": "{context}"}]
    builder = built(A)
    messages = builder.render(template)
    assert messages[0] == {"role": "user", "content": parts}
    assert [(p.message_index, p.start, p.end) for p in builder.record().placements] == [(1, 4, 14)]


# --- token budget -----------------------------------------------------------------------------
A4 = {"id": "a", "content": "alpha beta gamma delta"}  # 4 tokens, 22 chars
B10 = {"id": "b", "content": "one two three four five six seven eight nine ten"}  # 10 tokens
C2 = {"id": "c", "content": "short note"}  # 2 tokens, 10 chars


def test_budget_truncates_then_drops_over_budget():
    builder = ContextBuilder(max_tokens=12)
    assert builder.add(A4) is True  # used 4
    assert builder.add(B10) is True  # 4 + 10 > 12, room 8 >= min(8, 10): cut to 8 tokens, used 12
    assert builder.add(C2) is False  # room 0 < min(8, 2)
    record = builder.record()
    cut = "one two three four five six seven eight"  # 39 chars
    # a: 4..26 (22 chars); "\n\n" -> 28; "[2] " -> 32; b: 32 + 39 = 71
    assert record.prompt == "[1] alpha beta gamma delta\n\n[2] " + cut
    assert record.placements == [
        Placement("a", 1, "1", 4, 26, 4, False, None, content_hash(A4["content"])),
        Placement("b", 2, "2", 32, 71, 8, True, None, content_hash(B10["content"])),
    ]
    assert record.dropped == [Drop("c", "over_budget")]
    assert record.total_tokens == 12  # 4 + 8
    assert record.truncated_count == 1
    assert record.max_tokens == 12
    assert_offsets_exact(record, {"a": A4["content"], "b": cut})


def test_no_truncation_drops_and_later_chunks_take_the_next_position():
    builder = ContextBuilder(max_tokens=12, truncate=False)
    assert [builder.add(x) for x in (A4, B10, C2)] == [True, False, True]  # 4; 14 > 12 dropped; 4 + 2 = 6
    record = builder.record()
    # c is second in prompt order: "[1] alpha beta gamma delta\n\n" is 28 chars, "[2] " -> 32..42
    assert [(p.chunk_id, p.position, p.label, p.start, p.end) for p in record.placements] == [
        ("a", 1, "1", 4, 26),
        ("c", 2, "2", 32, 42),
    ]
    assert record.dropped == [Drop("b", "over_budget")]
    assert record.total_tokens == 6


def test_too_little_room_to_truncate_is_over_budget():
    # 11 tokens: a uses 4; b needs 10, room 7 < min(8, 10) -> dropped; c: 4 + 2 = 6 fits
    builder = built(A4, B10, C2, max_tokens=11)
    record = builder.record()
    assert [p.chunk_id for p in record.placements] == ["a", "c"]
    assert record.dropped == [Drop("b", "over_budget")]
    # 5 tokens: a uses 4; c needs 2, room 1 < min(8, 2) -> dropped (never cut to a fragment)
    record = built(A4, C2, max_tokens=5).record()
    assert [p.chunk_id for p in record.placements] == ["a"]
    assert record.dropped == [Drop("c", "over_budget")]


def test_exact_fit_is_not_truncated():
    record = built(A4, B10, max_tokens=14).record()  # 4 + 10 = 14
    assert [p.truncated for p in record.placements] == [False, False]
    assert record.total_tokens == 14


def test_zero_budget_drops_everything_with_text():
    record = built(A4, C2, max_tokens=0).record()
    assert record.placements == []
    assert record.dropped == [Drop("a", "over_budget"), Drop("c", "over_budget")]
    assert record.prompt == ""


# --- duplicates, drops, unreadable ------------------------------------------------------------
def test_duplicates_by_id_and_by_content_do_not_use_budget():
    builder = ContextBuilder(max_tokens=5)
    assert builder.add(A) is True  # 2 tokens
    assert builder.add({"id": "a", "content": "another text entirely"}) is False  # same id
    assert builder.add({"id": "a2", "content": "alpha text"}) is False  # same content, other id
    assert builder.add(B) is True  # 2 + 3 = 5: fits only because duplicates used nothing
    record = builder.record()
    assert record.prompt == BLOCK
    assert [(p.chunk_id, p.position, p.label) for p in record.placements] == [("a", 1, "1"), ("b", 2, "2")]
    assert record.dropped == [Drop("a", "duplicate"), Drop("a2", "duplicate")]


def test_identical_strings_are_duplicates():
    builder = built("same words", "same words", "other words")
    record = builder.record()
    assert [p.chunk_id for p in record.placements] == [content_hash("same words"), content_hash("other words")]
    assert record.dropped == [Drop(content_hash("same words"), "duplicate")]


def test_drop_with_reasons():
    builder = ContextBuilder()
    builder.add(A)
    builder.drop(B, reason="off_topic")
    builder.drop(C2)
    builder.drop({"id": "e", "content": "e text"}, reason="")
    record = builder.record()
    assert [p.chunk_id for p in record.placements] == ["a"]
    assert record.dropped == [Drop("b", "off_topic"), Drop("c", "filtered"), Drop("e", "filtered")]


def test_unreadable_items_are_counted_not_placed():
    builder = ContextBuilder()
    assert builder.add(None) is False
    assert builder.add(A) is True
    builder.drop(42.0)
    assert builder.unreadable == 2
    record = builder.record()
    assert [p.chunk_id for p in record.placements] == ["a"]
    assert record.dropped == []


def test_record_without_render_renders_the_bare_block():
    builder = built(A, B)
    assert builder.prompt == BLOCK
    assert builder.record().prompt == BLOCK


def test_empty_builder():
    record = ContextBuilder().record()
    assert record.prompt == "" and record.placements == [] and record.total_tokens == 0


# --- locate: chunks in a prompt the user built ------------------------------------------------
def chunk(chunk_id: str, text: str, rank: int = 1) -> Chunk:
    return Chunk(chunk_id, rank, None, text, None, None, content_hash(text))


USER_PROMPT = "Use the sources.\n[1] alpha text here\n[2] beta gamma delta\nQ: what?"
# "Use the sources.\n" is 17 chars; "[1] " -> a 21..36 (15 chars); "\n" 37, "[2] " -> b 41..57


def test_locate_exact():
    record = locate([chunk("b", "beta gamma delta"), chunk("a", "alpha text here")], USER_PROMPT)
    assert record.method == "located"
    assert record.prompt == USER_PROMPT
    # positions follow the prompt, not the input order
    assert record.placements == [
        Placement("a", 1, "1", 21, 36, 3, False, None, content_hash("alpha text here")),
        Placement("b", 2, "2", 41, 57, 3, False, None, content_hash("beta gamma delta")),
    ]
    assert record.dropped == []


def test_locate_whitespace_collapsed_in_the_prompt():
    # the chunk has a line break and runs of spaces; the prompt builder collapsed them
    record = locate([chunk("a", "alpha\n   text  here")], USER_PROMPT)
    assert [(p.chunk_id, p.start, p.end, p.truncated, p.label) for p in record.placements] == [("a", 21, 36, False, "1")]


def test_locate_whitespace_expanded_in_the_prompt():
    prompt = "Intro.\n[1] alpha\n    text here\nend"
    # "Intro.\n" 7, "[1] " -> 11; "alpha\n    text here" is 19 chars -> 11..30
    record = locate([chunk("a", "alpha text here")], prompt)
    assert [(p.start, p.end, p.truncated) for p in record.placements] == [(11, 30, False)]
    assert prompt[11:30] == "alpha\n    text here"
    assert record.placements[0].tokens == 3


def test_locate_truncated_prefix():
    text = "The quick brown fox jumps over the lazy dog near the river bank today."
    prompt = "Sources:\n[1] The quick brown fox jumps over the lazy dog\n\n[2] other\n"
    # "Sources:\n" 9, "[1] " -> 13; "The quick brown fox jumps over the lazy dog" is 43 chars -> 13..56
    record = locate([chunk("a", text)], prompt)
    assert [(p.start, p.end, p.truncated, p.label) for p in record.placements] == [(13, 56, True, "1")]
    assert prompt[13:56] == "The quick brown fox jumps over the lazy dog"
    assert record.placements[0].tokens == 9  # The quick brown fox jumps over the lazy dog


def test_locate_truncated_mid_word():
    text = "Retrieval augmented generation grounds answers in documents."
    prompt = "[1] Retrieval augmented generation grou"
    record = locate([chunk("a", text)], prompt)
    # "[1] " -> 4; "Retrieval augmented generation grou" is 35 chars -> 4..39
    assert [(p.start, p.end, p.truncated) for p in record.placements] == [(4, 39, True)]


def test_locate_not_found():
    record = locate(
        [
            chunk("a", "alpha text here"),
            chunk("x", "completely absent text that is long enough"),
            chunk("s", "alpha text extra"),  # 16 chars: too short to be matched as a prefix
            Chunk("e", 3, None, "", None, None, None),
            Chunk("w", 4, None, "  \n ", None, None, None),
        ],
        USER_PROMPT,
    )
    assert [p.chunk_id for p in record.placements] == ["a"]
    assert record.dropped == [Drop("x", "not_found"), Drop("s", "not_found"), Drop("e", "not_found"), Drop("w", "not_found")]


def test_locate_duplicates():
    record = locate(
        [chunk("a", "alpha text here"), chunk("a", "alpha text here"), chunk("a2", "alpha text here")], USER_PROMPT
    )
    assert [p.chunk_id for p in record.placements] == ["a"]
    assert record.dropped == [Drop("a", "duplicate"), Drop("a2", "duplicate")]


INSTRUCTED = "Answer in one word. Be concise.\n\nSources:\n[1] Be concise.\n[2] Paris is the capital of France.\n"
# "Answer in one word. " 20 + "Be concise." 11 = 31; "\n\n" 33; "Sources:\n" 42; "[1] " 46; 46 + 11 = 57
# "\n" 58; "[2] " 62; "Paris is the capital of France." 31 chars -> 62..93


def test_locate_short_chunk_also_in_the_instructions_is_credited_at_its_label():
    record = locate([chunk("s", "Be concise."), chunk("p", "Paris is the capital of France.")], INSTRUCTED)
    assert INSTRUCTED.find("Be concise.") == 20  # what a substring search would credit
    assert [(p.chunk_id, p.label, p.start, p.end) for p in record.placements] == [("s", "1", 46, 57), ("p", "2", 62, 93)]


@pytest.mark.parametrize(
    ("prompt", "start", "label"),
    [
        # "Be concise. " 12, "Source 2: " -> 22
        ("Be concise. Source 2: Be concise.", 22, "2"),
        # "Be concise.\n" 12, "Document #3) " -> 25
        ("Be concise.\nDocument #3) Be concise.", 25, "3"),
        # "Be concise.\n" 12, "[doc-9]: " -> 21
        ("Be concise.\n[doc-9]: Be concise.", 21, "doc-9"),
    ],
)
def test_locate_label_styles(prompt, start, label):
    record = locate([chunk("s", "Be concise.")], prompt)
    assert [(p.label, p.start, p.end) for p in record.placements] == [(label, start, start + 11)]


def test_locate_in_chat_messages_prefers_the_labelled_occurrence_over_the_system_message():
    messages = [
        {"role": "system", "content": "Answer in one word. Be concise."},
        {"role": "user", "content": "Sources:\n[1] Be concise.\n[2] Paris is the capital of France.\n\nQ: capital?"},
    ]
    record = locate([chunk("s", "Be concise."), chunk("p", "Paris is the capital of France.")], messages)
    # message 1: "Sources:\n" 9, "[1] " -> 13..24; "\n" 25, "[2] " -> 29..60
    assert [(p.chunk_id, p.message_index, p.label, p.start, p.end) for p in record.placements] == [
        ("s", 1, "1", 13, 24),
        ("p", 1, "2", 29, 60),
    ]


def test_locate_chat_message_index_skips_nothing():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "ignored parts"}]},
        {"role": "user", "content": "[1] alpha text here"},
    ]
    record = locate([chunk("a", "alpha text here")], messages)
    assert [(p.message_index, p.start, p.end) for p in record.placements] == [(1, 4, 19)]


def test_locate_unlabelled_prompt_still_finds_text():
    record = locate([chunk("a", "alpha text here")], "Context: alpha text here. Question?")
    # "Context: " is 9 chars -> 9..24; no label before it
    assert [(p.label, p.start, p.end) for p in record.placements] == [("", 9, 24)]


def test_locate_instruction_with_a_mid_line_label_loses_to_the_source_line():
    prompt = "Cite sources as [n]. Be concise.\nSources:\n[1] Be concise.\n"
    # the instruction copy sits right after "[n]. " (a label, but mid-line): a naive "after a
    # label" rule would credit it, with label "n". The source line: "Cite sources as [n]. Be
    # concise.\n" 33 + "Sources:\n" 9 = 42, "[1] " -> 46..57
    record = locate([chunk("s", "Be concise.")], prompt)
    assert [(p.label, p.start, p.end) for p in record.placements] == [("1", 46, 57)]


def test_locate_whitespace_collapsed_match_judges_labels_on_the_original_lines():
    prompt = "Cite sources as [n]. Be concise now.\n[1] Be\n  concise now.\n"
    # exact search finds neither copy of "Be\nconcise now."; collapsed search finds both. The
    # second is the source: "Cite sources as [n]. Be concise now.\n" 37, "[1] " -> 41;
    # "Be\n  concise now." is 17 chars -> 41..58
    record = locate([chunk("s", "Be\nconcise now.")], prompt)
    assert [(p.label, p.start, p.end, p.truncated) for p in record.placements] == [("1", 41, 58, False)]


@pytest.mark.parametrize(
    ("prompt", "start", "label"),
    [
        ("Be concise.\n- [4] Be concise.", 18, "4"),  # "Be concise.\n" 12 + "- [4] " 6
        ("Be concise.\n  > Source 5: Be concise.", 26, "5"),  # 12 + "  > Source 5: " 14
        ("Sources: [1] other text [2] Be concise.", 28, "2"),  # inline sources still labelled
    ],
)
def test_locate_labels_after_bullets_and_inline(prompt, start, label):
    record = locate([chunk("s", "Be concise.")], prompt)
    assert [(p.label, p.start, p.end) for p in record.placements] == [(label, start, start + 11)]


def test_locate_is_fast_on_a_long_single_line_prompt():
    import time

    # 2,000 unlabelled repeats on one line, then the labelled source: every lookup is bounded
    prompt = "Be concise. " * 2000 + "\n[1] Be concise.\n" + " ".join(f"[{i}] filler {i}." for i in range(2, 400))
    chunks = [chunk(f"c{i}", f"filler {i}.") for i in range(2, 400)] + [chunk("s", "Be concise.")]
    began = time.perf_counter()
    record = locate(chunks, prompt)
    assert time.perf_counter() - began < 2.0
    assert len(record.placements) == 399
    found = next(p for p in record.placements if p.chunk_id == "s")
    assert prompt[found.start : found.end] == "Be concise."


def test_chunk_format_using_content_twice_repeats_the_text_and_points_at_the_first():
    record = built(A, chunk_format="{content} ({content})").record()
    # the second {content} must be the text too, never the internal marker; offsets: first copy
    assert record.prompt == "alpha text (alpha text)"
    assert "\x00" not in record.prompt
    assert spans_of(record) == [("a", 0, 10)]


CONTAINED = "[1] Paris is the capital of France.\n[2] Paris is the capital\n"
# "[1] " -> long 4..35 (31 chars); "\n" 36, "[2] " -> short 40..60 (20 chars)


@pytest.mark.parametrize("long_first", [True, False])
def test_locate_chunk_inside_a_longer_chunk_gets_its_own_occurrence(long_first):
    long, short = chunk("long", "Paris is the capital of France."), chunk("short", "Paris is the capital")
    record = locate([long, short] if long_first else [short, long], CONTAINED)
    assert [(p.chunk_id, p.position, p.label, p.start, p.end) for p in record.placements] == [
        ("long", 1, "1", 4, 35),
        ("short", 2, "2", 40, 60),
    ]
    assert record.dropped == []


def test_locate_chunk_only_inside_a_longer_chunk_is_a_duplicate():
    prompt = "[1] Paris is the capital of France.\n"
    record = locate([chunk("short", "Paris is the capital"), chunk("long", "Paris is the capital of France.")], prompt)
    assert [(p.chunk_id, p.start, p.end) for p in record.placements] == [("long", 4, 35)]
    assert record.dropped == [Drop("short", "duplicate")]


def test_locate_same_text_under_two_ids_placed_twice_is_found_twice():
    prompt = "[1] alpha text here\n[2] alpha text here\n"
    # "[1] " -> 4..19; "\n" 20, "[2] " -> 24..39
    record = locate([chunk("a", "alpha text here"), chunk("a-copy", "alpha text here")], prompt)
    assert [(p.chunk_id, p.label, p.start, p.end) for p in record.placements] == [("a", "1", 4, 19), ("a-copy", "2", 24, 39)]


@pytest.mark.parametrize(
    "chunk_format",
    ["[{label}] {content}", "{content}", "<{label}>{content}</{label}> ({label}: {content})", "no placeholders", "{id} {label}{content}{other}"],
)
def test_context_block_is_the_format_filled_per_chunk(chunk_format):
    """The block is each chunk's format filled with its label and text (the format parsed once per
    render, not per chunk), the text after the format when it has no {content}; each recorded span
    is the chunk's text."""
    from ragtrace._internal.core.assembly import fill

    items = [{"id": "a", "content": "alpha {label} text"}, {"id": "b", "content": "beta"}]
    builder = built(*items, chunk_format=chunk_format, separator="\n--\n")
    block, spans = builder.context_block()
    pieces = []
    for n, item in enumerate(items, 1):  # filled per chunk, as before the format was parsed once
        head, _, tail = fill(chunk_format, {"label": str(n), "content": "\x00"}).partition("\x00")
        pieces.append(head + item["content"] + tail.replace("\x00", item["content"]))
    assert block == "\n--\n".join(pieces)
    assert [block[start:end] for start, end in spans] == [item["content"] for item in items]
