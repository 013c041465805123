"""The citation parser: formats, exclusions, invalid vs ignored labels, JSON, patterns, hostile input.

Timing is not asserted here (shared machines are noisy): ``bench/bench_citations.py`` holds the
100 ms bar. The hostile inputs below assert that the parse is *right* on them.
"""

from __future__ import annotations

import json
import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtrace._internal import names
from ragtrace._internal.core.citations import CitationResult, parse_citations

INLINE = names.CITATION_FORMAT_INLINE
JSON = names.CITATION_FORMAT_JSON
NONE = names.CITATION_FORMAT_NONE

# What assembly builds: prompt labels [1]..[5] plus every chunk id mapping to itself.
IDS = ("doc-a", "doc-b", "doc-c", "doc-d", "doc-e")
LABELS = {str(i): chunk for i, chunk in enumerate(IDS, 1)} | {chunk: chunk for chunk in IDS}
A, B, C, D, E = IDS


def parse(text: object, labels: object = None, **kwargs: object) -> CitationResult:
    return parse_citations(text, LABELS if labels is None else labels, **kwargs)  # type: ignore[arg-type]


def cited(text: str, **kwargs: object) -> tuple[str, ...]:
    return parse(text, **kwargs).cited_ids


def invalid(text: str, **kwargs: object) -> tuple[str, ...]:
    return parse(text, **kwargs).invalid_labels


NOTHING = CitationResult(NONE, (), (), False)


# --- the result type ---------------------------------------------------------------------------
def test_result_counts_and_immutability() -> None:
    result = parse("Paris [1][3], Lyon [9].")
    assert result == CitationResult(INLINE, (A, C), ("9",), True)
    assert (result.valid_count, result.invalid_count) == (2, 1)
    with pytest.raises(AttributeError):
        result.format = JSON  # type: ignore[misc]


@pytest.mark.parametrize("text", [None, "", 42, b"[1]", ["[1]"]])
def test_no_text_is_an_empty_non_conformant_result(text: object) -> None:
    assert parse(text) == NOTHING


@pytest.mark.parametrize("labels", [{}, None, "not a mapping"])
def test_without_labels_every_numeric_citation_is_invalid(labels: object) -> None:
    assert parse_citations("Paris [1] and [2].", labels) == CitationResult(INLINE, (), ("1", "2"), True)  # type: ignore[arg-type]


def test_pattern_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        parse_citations("[1]", LABELS, r"\[(\d)\]")  # type: ignore[misc]


def test_prose_without_citations_is_not_conformant() -> None:
    assert parse("Paris is the capital of France. See the appendix (page 3).") == NOTHING


def test_only_invalid_citations_are_still_conformant() -> None:
    assert parse("Paris [7], Lyon [doc-z].") == CitationResult(INLINE, (), ("7", "doc-z"), True)


# --- inline numeric forms -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris [1].", (A,)),
        ("Paris [1, 3].", (A, C)),
        ("Paris [1,3].", (A, C)),
        ("Paris [ 3 ,1 ].", (C, A)),
        ("Paris [1; 2].", (A, B)),
        ("Paris [1, 2 and 4].", (A, B, D)),
        ("Paris [1][2].", (A, B)),
        ("Paris [1]-[3].", (A, C)),
        ("Paris [1-3].", (A, B, C)),
        ("Paris [2–4].", (B, C, D)),  # en dash
        ("Paris [2—3].", (B, C)),  # em dash
        ("Paris [1 - 2].", (A, B)),
        ("Paris [1-3, 5].", (A, B, C, E)),
        ("Paris [^2].", (B,)),
        ("Paris [^2, ^4].", (B, D)),
        ("Paris 【1†source】.", (A,)),
        ("Paris 【3:0†source】.", (C,)),
        ("Paris 【4:2†report.pdf】 and 【5】.", (D, E)),
        ("Paris [#2].", (B,)),
        ("Paris\u00a0[2]\u3002", (B,)),
    ],
)
def test_inline_numeric(text: str, expected: tuple[str, ...]) -> None:
    result = parse(text)
    assert (result.format, result.cited_ids, result.invalid_labels, result.conformant) == (INLINE, expected, (), True)


def test_marker_glued_to_a_word_still_counts() -> None:
    # Models write "BM25[1]"; outside code there is no array indexing to confuse it with.
    assert cited("BM25[1] beats TF-IDF[2].") == (A, B)


def test_link_style_marker_wrapped_in_brackets_counts() -> None:
    # Perplexity-style "[[1]](url)": the inner [1] is a citation, the outer link is not.
    assert parse("Paris [[1]](https://example.com/paris).") == CitationResult(INLINE, (A,), (), True)


def test_bracket_followed_by_a_non_link_parenthesis_counts() -> None:
    assert cited("Paris [1](p. 5) and [2] (Smith 2020).") == (A, B)


def test_range_within_the_cap_expands_and_reports_missing_numbers() -> None:
    result = parse("All of them [1-100].")
    assert result.cited_ids == IDS
    assert result.invalid_labels == tuple(str(n) for n in range(6, 101))


@pytest.mark.parametrize(("text", "label"), [("[1-101]", "1-101"), ("[3-1]", "3-1"), ("[1–999999999]", "1–999999999")])
def test_absurd_ranges_are_one_invalid_label(text: str, label: str) -> None:
    assert parse(text) == CitationResult(INLINE, (), (label,), True)


def test_unknown_number_is_invalid() -> None:
    assert parse("Paris [9], [2], 【9:0†source】, [^7].") == CitationResult(INLINE, (B,), ("9", "7"), True)


def test_openai_marker_falls_back_to_the_source_name() -> None:
    assert cited("Paris 【8:0†doc-c】.") == (C,)
    assert parse("Paris 【8†source】.").invalid_labels == ("8",)


# --- id labels, invalid vs ignored ----------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris [doc-a].", (A,)),
        ("Paris [doc-a, doc-c].", (A, C)),
        ("Paris [source: doc-b].", (B,)),
        ("Paris [Source: 2].", (B,)),
        ("Paris [Source 2].", (B,)),
        ("Paris [Sources 1, 3].", (A, C)),
        ("Paris [Source 1, Source 3].", (A, C)),
        ("Paris [see 4].", (D,)),
        ("Paris [doc #5].", (E,)),
        ("Paris [^doc-e].", (E,)),
        ("Paris 【doc-d†source】.", (D,)),
    ],
)
def test_id_labels_that_map(text: str, expected: tuple[str, ...]) -> None:
    assert parse(text) == CitationResult(INLINE, expected, (), True)


def test_id_labels_with_dots_slashes_and_hashes() -> None:
    labels = {"abc.md": "abc.md", "kb/faq#3": "faq-3", "1": "one"}
    assert parse_citations("See [abc.md] and [kb/faq#3].", labels) == CitationResult(INLINE, ("abc.md", "faq-3"), (), True)


@pytest.mark.parametrize(
    ("text", "expected_invalid"),
    [
        ("Paris [doc-7].", ("doc-7",)),
        ("Paris [chunk_3].", ("chunk_3",)),
        ("Paris [abc.md].", ("abc.md",)),
        ("Paris [kb/faq].", ("kb/faq",)),
        ("Paris [x86].", ("x86",)),
        ("Paris [Source 9].", ("9",)),
        ("Paris [source: abc].", ("abc",)),  # "source:" says it is meant as a citation
        ("Paris [Source: Wikipedia].", ("Wikipedia",)),
        ("Paris [^note].", ("note",)),  # footnote syntax is a citation
        ("Paris [doc-7, doc-a].", ("doc-7",)),
    ],
)
def test_id_like_labels_that_map_to_nothing_are_invalid(text: str, expected_invalid: tuple[str, ...]) -> None:
    assert parse(text).invalid_labels == expected_invalid
    assert parse(text).conformant


@pytest.mark.parametrize(
    "text",
    [
        "He said [sic] that.",
        "A claim [citation needed].",
        "See [note] below.",
        "- [x] done\n- [ ] todo",
        "Quote [...] ends.",
        "For example [e.g.] and [etc.] here.",
        "Math \\[ E = mc^2 \\] is fine.",
        "A [Document Summary] heading.",
        "Read [see above] first.",
        "> [!NOTE]\n> careful",
        "Emphasis [emphasis added].",
        "【注意】 careful",
        "[The whole sentence in brackets, with a number 3 in it.]",
    ],
)
def test_prose_brackets_are_not_citations(text: str) -> None:
    assert parse(text) == NOTHING


def test_ignored_words_next_to_real_citations_change_nothing() -> None:
    assert parse("Paris [sic] [1] [note], [foo, 2].") == CitationResult(INLINE, (A, B), (), True)


def test_invalid_labels_never_carry_prose() -> None:
    text = '{"citations": ["an entire quoted sentence from the source", "doc-z", 2]}'
    assert parse(text) == CitationResult(JSON, (B,), ("doc-z",), True)


def test_overlong_bracket_is_not_a_label() -> None:
    assert parse("[" + "a1" * 40 + "]") == NOTHING


# --- key matching -----------------------------------------------------------------------------
def test_exact_key_wins_over_the_case_insensitive_fallback() -> None:
    labels = {"Doc-A": "upper", "doc-a": "lower"}
    assert parse_citations("[Doc-A] [DOC-A]", labels).cited_ids == ("upper",)
    assert parse_citations("[doc-a]", labels).cited_ids == ("lower",)


@pytest.mark.parametrize("text", ["[DOC-B]", "[Doc-b]", "[ doc-b ]", "[source:  DOC-B ]", '{"citations": [" Doc-B "]}'])
def test_case_and_whitespace_fallback(text: str) -> None:
    assert cited(text) == (B,)


def test_label_keys_with_inner_whitespace_match_loosely() -> None:
    labels = {"Source  One": "s1"}
    assert parse_citations("[source one]", labels).cited_ids == ("s1",)


def test_labels_that_are_not_strings_are_tolerated() -> None:
    labels = {"1": "doc-a", 2: "doc-b", "3": None, "4": 44}  # type: ignore[dict-item]
    result = parse_citations("[1] [2] [3] [4]", labels)  # type: ignore[arg-type]
    assert result == CitationResult(INLINE, ("doc-a", "44"), ("2", "3"), True)


# --- ordering and uniqueness ----------------------------------------------------------------
def test_unique_in_first_appearance_order() -> None:
    result = parse("B [2]. A [1]. B [2, doc-b]. Bad [9]. C [3]. Bad [9][8]. A [doc-a].")
    assert result == CitationResult(INLINE, (B, A, C), ("9", "8"), True)


def test_two_labels_for_one_chunk_count_once() -> None:
    assert parse("[1] and [doc-a] and [^1] and 【1†source】").cited_ids == (A,)


# --- exclusions -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "See [the docs](https://example.com/a).",
        "See [1](https://example.com/1).",
        "See [doc-a](#doc-a) and [2]().",
        'See [3](https://example.com "Title").',
        "See [4](<https://example.com/a b>).",
        "Logo ![1](logo.png).",
        "Link [5](https://example.com/x/[1]) whose URL holds brackets.",
        "Definition:\n\n[1]: https://example.com/one\n[2]: <https://example.com/two>",
        "[3]: www.example.com\n[4]: mailto:a@b.c\n[5]: /local/path",
        "Inline `x[1]` code.",
        "Inline ``a[2]`b`` code.",
        "Inline ```y[3]``` code.",
        "```\n[1]\n```",
        "```python\nprint(scores[1])\n```",
        "~~~\n[1]\n~~~",
        "````\n```\n[1]\n```\n````",
        "1. Step:\n\n    ```\n    a[4]\n    ```",
        "> quoted\n> ```\n> b[5]\n> ```",
        "Intro\n```\n[1] and everything after an unclosed fence is code [2]",
    ],
)
def test_never_citations(text: str) -> None:
    assert parse(text) == NOTHING


def test_text_after_a_closed_fence_is_prose_again() -> None:
    assert parse("```js\nx[1]\n```\nAnswer [2].\n~~~\n[3]\n~~~\nand [4]") == CitationResult(INLINE, (B, D), (), True)


def test_code_span_does_not_cross_a_blank_line() -> None:
    # An unmatched backtick is literal (CommonMark): a stray one doesn't hide the rest.
    assert cited("Use `x here [1].\n\nNext paragraph ` [2].") == (A, B)


def test_unmatched_backtick_run_is_literal() -> None:
    assert cited("Run ``x` then [3].") == (C,)


def test_reference_definition_without_url_is_a_source_list() -> None:
    assert cited("Paris.\n\n[1]: doc-a, the Paris article") == (A,)


def test_reference_style_uses_count() -> None:
    assert cited("See [the docs][2].\n\n[2]: https://example.com") == (B,)


def test_one_line_triple_backticks_are_inline_code_not_a_fence() -> None:
    assert cited("Use ```a[1]``` then [2].\nMore [3].") == (B, C)


# --- JSON -----------------------------------------------------------------------------------
def test_json_whole_answer_with_ints_and_ids() -> None:
    text = json.dumps({"answer": "Paris.", "citations": [1, "doc-b"]})
    assert parse(text) == CitationResult(JSON, (A, B), (), True)


def test_json_unknown_entries_are_invalid() -> None:
    text = json.dumps({"answer": "Paris.", "citations": [7, "doc-z", "wikipedia", 3]})
    assert parse(text) == CitationResult(JSON, (C,), ("7", "doc-z", "wikipedia"), True)


def test_json_entry_shapes() -> None:
    text = json.dumps(
        {"citations": [2.0, "[3]", "Source 4", {"id": "doc-e"}, {"chunk_id": 1}, "1-2", True, None, [5], 2.5, {}]}
    )
    assert parse(text) == CitationResult(JSON, (B, C, D, E, A), (), True)


def test_json_single_value_and_null() -> None:
    assert parse('{"citations": 2}') == CitationResult(JSON, (B,), (), True)
    assert parse('{"citations": "doc-c, 1"}') == CitationResult(JSON, (C, A), (), True)
    assert parse('{"citations": null}') == CitationResult(JSON, (), (), True)


def test_json_empty_citations_is_conformant() -> None:
    # The model answered in the required format and cited nothing: that is conformant.
    assert parse('{"answer": "I don\'t know.", "citations": []}') == CitationResult(JSON, (), (), True)


def test_json_embedded_in_prose() -> None:
    text = 'Here is my answer.\n{"answer": "Paris", "citations": [3, 1]}\nHope that helps.'
    assert parse(text) == CitationResult(JSON, (C, A), (), True)


def test_json_in_a_json_fence() -> None:
    text = 'Answer:\n```json\n{\n  "answer": "Paris",\n  "citations": ["doc-d", 2]\n}\n```\n'
    assert parse(text) == CitationResult(JSON, (D, B), (), True)


def test_json_in_an_unlabelled_fence_when_the_block_is_the_object() -> None:
    assert parse('```\n{"citations": [5]}\n```') == CitationResult(JSON, (E,), (), True)
    assert parse('~~~text\n  {"citations": [5]}  \n~~~') == CitationResult(JSON, (E,), (), True)


def test_json_inside_a_code_block_of_another_language_is_code() -> None:
    assert parse('```python\nresponse = {"citations": [5]}\nprint(response)\n```') == NOTHING


def test_json_inside_inline_code_is_code() -> None:
    assert parse('Return `{"citations": [5]}` from the tool.') == NOTHING


def test_json_nested_citation_objects() -> None:
    text = json.dumps({"sections": [{"text": "a", "citations": [2]}, {"text": "b", "citations": ["doc-a"]}]})
    assert parse(text) == CitationResult(JSON, (B, A), (), True)


def test_json_capitalised_key() -> None:
    assert parse('{"Answer": "x", "Citations": [4]}') == CitationResult(JSON, (D,), (), True)


def test_json_and_inline_markers_are_a_union_and_format_stays_json() -> None:
    text = 'Paris [2] is large [9].\n\n{"citations": [1, "doc-z"]}\nAlso [doc-e].'
    assert parse(text) == CitationResult(JSON, (B, A, E), ("9", "doc-z"), True)


def test_markers_inside_json_strings_count_in_document_order() -> None:
    text = json.dumps({"answer": "Paris [3] and `x[4]` code", "citations": [1]})
    assert parse(text) == CitationResult(JSON, (C, A), (), True)


def test_json_answer_string_with_code_spans_still_decodes() -> None:
    text = json.dumps({"answer": "Call `search()` and read [2].", "citations": [1]})
    assert parse(text) == CitationResult(JSON, (B, A), (), True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Malformed JSON is "not found": the bracket in it then reads as an inline citation...
        ('{"answer": "Paris", "citations": [1, 2,]}', CitationResult(INLINE, (A, B), (), True)),
        ("{'answer': 'Paris', 'citations': [3]}", CitationResult(INLINE, (C,), (), True)),
        # ...unless it holds nothing citation-like outside the JSON syntax.
        ('{"answer": "Paris", "citations": ["doc-a",]}', NOTHING),
        ('{"citations": ["doc-a"', NOTHING),
        ('{"citations": [1, 2', NOTHING),
        ('{"citations": ' + "[" * 5000, NOTHING),
        ('{"citations": [1e999999, 123' + "4" * 5000 + "]}", NOTHING),
        ('{"citations": }', NOTHING),
    ],
)
def test_malformed_json_never_raises(text: str, expected: CitationResult) -> None:
    assert parse(text) == expected


def test_json_without_a_citations_key_is_just_text() -> None:
    assert parse('{"answer": "Paris [2]", "sources": [1]}') == CitationResult(INLINE, (B, A), (), True)


def test_json_huge_integer_is_tolerated() -> None:
    assert parse('{"citations": [1, 12345678901234567890]}') == CitationResult(JSON, (A,), ("12345678901234567890",), True)


# --- user patterns ----------------------------------------------------------------------------
def test_regex_string_group_one_is_the_key() -> None:
    text = "Paris <cite>2</cite>, Lyon <cite>9</cite>, also [1]."
    assert parse(text, pattern=r"<cite>(\d+)</cite>") == CitationResult(INLINE, (B,), ("9",), True)


def test_compiled_regex_without_groups_uses_the_whole_match() -> None:
    assert parse("Paris DOC-A and doc-c and doc-q", pattern=re.compile(r"doc-\w", re.I)) == CitationResult(
        INLINE, (A, C), ("doc-q",), True
    )


def test_regex_optional_group_that_did_not_take_part_falls_back_to_the_whole_match() -> None:
    assert cited("see doc-b", pattern=r"doc-b|(zzz)") == (B,)


def test_regex_pattern_skips_code_and_keeps_json() -> None:
    text = 'Paris {{2}} and `{{3}}`.\n```\n{{4}}\n```\n{"citations": [1]}'
    assert parse(text, pattern=r"\{\{(\d)\}\}") == CitationResult(JSON, (B, A), (), True)


def test_regex_pattern_that_finds_nothing_is_not_conformant() -> None:
    assert parse("Paris [1].", pattern=r"<cite>(\d+)</cite>") == NOTHING


def test_callable_pattern_gets_the_whole_text() -> None:
    seen: list[str] = []

    def keys(text: str) -> list[object]:
        seen.append(text)
        return ["2", 1, "nope", "", None, True, " doc-c "]

    result = parse("Paris.\n```\n[5]\n```", pattern=keys)
    assert result == CitationResult(INLINE, (B, A, C), ("nope",), True)
    assert seen == ["Paris.\n```\n[5]\n```"]


def test_callable_pattern_replaces_inline_rules_and_keeps_json() -> None:
    text = 'Paris [3].\n{"citations": [1]}'
    assert parse(text, pattern=lambda t: ["4"]) == CitationResult(JSON, (A, D), (), True)
    assert parse("Paris [3].", pattern=lambda t: iter(())) == NOTHING


def test_callable_errors_propagate() -> None:
    def broken(text: str) -> list[str]:
        raise ValueError("user bug")

    with pytest.raises(ValueError, match="user bug"):
        parse("Paris [1].", pattern=broken)


def test_bad_regex_and_bad_pattern_type_raise() -> None:
    with pytest.raises(re.error):
        parse("Paris [1].", pattern="(")
    with pytest.raises(TypeError):
        parse("Paris [1].", pattern=42)


# --- hostile input (correctness here; timing in bench/bench_citations.py) ---------------------
MB = 1_000_000


def test_a_million_repeats_of_one_marker() -> None:
    assert parse("[1]" * MB) == CitationResult(INLINE, (A,), (), True)


def test_many_repeats_then_new_markers_are_still_seen() -> None:
    text = "x [1] " * 5000 + "[2] " + "[1](http://l) " * 100 + "[3]" * 50 + " [doc-z] [1]"
    assert parse(text) == CitationResult(INLINE, (A, B, C), ("doc-z",), True)


def test_masking_repeats_never_joins_neighbours_into_a_label() -> None:
    # After [1] repeats, its copies are masked out of the rest: "[doc" + "-7]" must not fuse.
    text = "[1]" * 40 + " [doc" + "[1]" * 40 + "-7] and [note" + "[1]" * 3 + "]"
    assert parse(text) == CitationResult(INLINE, (A,), (), True)


def test_masking_repeats_keeps_links_intact() -> None:
    # A masked copy used as link text, or inside another link's URL, leaves that link a link.
    text = "[1]" * 40 + " [1](http://x.io/[2]) [a](http://x.io/[1]) [doc-7](<http://x.io/[1] y>)"
    assert parse(text) == CitationResult(INLINE, (A,), (), True)


def test_cycling_markers() -> None:
    assert cited("".join(f"[{i}]" for i in (1, 2, 3, 4, 5)) * 100_000) == IDS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * MB, NOTHING),
        ("[[[[1" * (MB // 5), NOTHING),
        ("[" + "a" * MB, NOTHING),
        ("[" * (MB // 2) + "1" + "]" * (MB // 2), CitationResult(INLINE, (A,), (), True)),
        ("([[2]] )" * (MB // 8), CitationResult(INLINE, (B,), (), True)),
        ("]" * MB + "[3]", CitationResult(INLINE, (C,), (), True)),
        ("intro [1]\n```\n" + "answer [2] " * (MB // 11), CitationResult(INLINE, (A,), (), True)),
        ("{" * MB, NOTHING),
        ('{"citations"' * (MB // 10), NOTHING),
        ('{"citations": [' + "1," * (MB // 2), NOTHING),
        ('{"citations": ' + "[" * MB, NOTHING),
        ('"citations"' + '{"a\\"' * (MB // 5), NOTHING),
        ("a " + "`" * MB + " [4]", CitationResult(INLINE, (D,), (), True)),
        ("`" * MB + " [4]", NOTHING),  # a fence line: "[4]" is its info string, the rest is code
        ("` `` ``` " + "text [5]\n" * (MB // 9), CitationResult(INLINE, (E,), (), True)),
        ("```\n[1]\n```\n" * (MB // 12) + "[2]", CitationResult(INLINE, (B,), (), True)),
        ("\n" * MB + "[3]", CitationResult(INLINE, (C,), (), True)),
        ("【" * MB, NOTHING),
        ("[a](http://x.io/p) " * (MB // 19), NOTHING),
    ],
    ids=lambda value: repr(value)[:30] if isinstance(value, str) else "",
)
def test_hostile_input_is_parsed_correctly(text: str, expected: CitationResult) -> None:
    assert parse(text) == expected


def test_many_json_objects_each_count() -> None:
    text = " ".join(json.dumps({"citations": [i % 5 + 1]}) for i in range(2000))
    assert parse(text) == CitationResult(JSON, IDS, (), True)


# --- properties -------------------------------------------------------------------------------
SYNTAX = "[]{}()`~^【】†:;,.-–#/_!\"'\\ \n\t" + string.digits + "abcdoS"
texts = st.one_of(st.text(), st.text(alphabet=SYNTAX, max_size=300))
keys = st.one_of(st.text(max_size=8), st.integers(0, 20).map(str), st.sampled_from(["doc-a", "Doc-A", " 1 ", "S 2"]))
label_maps = st.dictionaries(keys, st.text(max_size=8), max_size=8)


def check_invariants(result: CitationResult, labels: dict[str, str]) -> None:
    values = set(labels.values())
    assert set(result.cited_ids) <= values
    assert len(set(result.cited_ids)) == len(result.cited_ids) == result.valid_count
    assert len(set(result.invalid_labels)) == len(result.invalid_labels) == result.invalid_count
    for label in result.invalid_labels:
        assert label and parse_citations(f"[{label}]", labels).cited_ids == ()
        assert label not in labels
    assert result.format in (JSON, INLINE, NONE)
    assert result.conformant == (result.format != NONE)
    if not result.conformant:
        assert result == NOTHING


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, labels=label_maps)
def test_never_raises_and_keeps_its_invariants(text: str, labels: dict[str, str]) -> None:
    check_invariants(parse_citations(text, labels), labels)


@settings(max_examples=200, deadline=None)
@given(
    document=st.recursive(
        st.none() | st.booleans() | st.integers(-5, 30) | st.floats(allow_nan=False) | st.text(alphabet=SYNTAX, max_size=20),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.sampled_from(["citations", "answer", "x"]), children, max_size=3),
        max_leaves=12,
    ),
    before=st.text(alphabet=SYNTAX, max_size=40),
    fence=st.sampled_from(["", "```json\n", "```\n"]),
)
def test_arbitrary_json_documents_never_raise(document: object, before: str, fence: str) -> None:
    text = before + "\n" + fence + json.dumps(document) + ("\n```\n" if fence else "")
    check_invariants(parse_citations(text, LABELS), LABELS)


PIECES = ["[1]", "[2]", "[doc", "-7]", "[", "]", "(x)", "[a](u)", "]: http://", "\n", " ", "【1†s】", "`", "(", ")",
          "[1](", "7", ",", "[1,2]", "【", "】", "([1])", "[1]: http://x", "<", ">", '"', "[x](<", "[x](h ", "\x00"]


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=150), threshold=st.integers(2, 4))
def test_masking_frequent_tokens_changes_no_result(pieces: list[str], threshold: int) -> None:
    from ragtrace._internal.core import citation_scan

    text = "".join(pieces)
    labels = {"1": "a", "2": "b", "doc-7": "d7", "x": "x"}
    saved = citation_scan.HEAVY_REPEATS
    try:
        citation_scan.HEAVY_REPEATS = threshold
        masked = parse_citations(text, labels)
        citation_scan.HEAVY_REPEATS = 10**9
        plain = parse_citations(text, labels)
    finally:
        citation_scan.HEAVY_REPEATS = saved
    assert masked == plain


@settings(max_examples=200, deadline=None)
@given(numbers=st.lists(st.integers(0, 12), min_size=1, max_size=20), words=st.sampled_from(["", "Paris ", "BM25"]))
def test_bare_numbers_resolve_like_a_reference_model(numbers: list[int], words: str) -> None:
    text = " ".join(f"{words}[{n}]." for n in numbers)
    expected_cited = tuple(dict.fromkeys(LABELS[str(n)] for n in numbers if str(n) in LABELS))
    expected_invalid = tuple(dict.fromkeys(str(n) for n in numbers if str(n) not in LABELS))
    assert parse(text) == CitationResult(INLINE, expected_cited, expected_invalid, True)


@settings(max_examples=150, deadline=None)
@given(numbers=st.lists(st.integers(1, 5), min_size=1, max_size=8), prose=st.text(alphabet=SYNTAX, max_size=60))
def test_json_citations_resolve_whatever_prose_surrounds_them(numbers: list[int], prose: str) -> None:
    # Prose with no braces or quotes can't swallow the object; its own markers only add.
    prose = re.sub(r"[{}\"`~]", " ", prose)
    result = parse(prose + "\n" + json.dumps({"citations": numbers}))
    assert result.format == JSON
    assert set(LABELS[str(n)] for n in numbers) <= set(result.cited_ids)
