"""``provided``: a model API's own sources and citations as placements and an ``Answer``, pure.
Every expected value is worked by hand from the inputs written out in each test."""

from __future__ import annotations

from ragtrace._internal.core import figures
from ragtrace._internal import names
from ragtrace._internal.core.chunks import Chunk
from ragtrace._internal.core.provided import Provided, Source, by_file, by_index, context_record, scored
from ragtrace._internal.core.tokens import SimpleTokenizer

A, B, C = Source("a", "Alpha beta.", 0), Source("b", "Gamma.", 0), Source("c", None, 2)
SOURCES = {"search_result_index": [A, B], "document_index": [C]}


def test_context_record_places_each_source_once_in_block_order_labelled_by_its_id():
    record = context_record([A, B, A, C], SimpleTokenizer())
    assert record.method == names.INCLUSION_PROVIDER
    assert [(p.chunk_id, p.position, p.label, p.start, p.end, p.message_index) for p in record.placements] == [
        ("a", 1, "a", -1, -1, 0),
        ("b", 2, "b", -1, -1, 0),
        ("c", 3, "c", -1, -1, 2),
    ]
    assert [p.tokens for p in record.placements] == [3, 2, 0]  # "Alpha beta." is 2 words and a stop; C has no text
    assert record.label_map() == {"a": "a", "b": "b", "c": "c"}


def test_by_index_resolves_each_kind_apart_first_cited_first_and_names_bad_indexes_without_text():
    provided = by_index([("document_index", 0), ("search_result_index", 1), ("search_result_index", 1), ("search_result_index", 2), ("search_result_index", True), ("document_index", None)], SOURCES)
    assert provided.cited_ids == ("c", "b")
    assert provided.invalid == ("search_result_index=2", "search_result_index=True", "document_index=None")
    assert provided.granularity == names.CITATION_GRANULARITY_CHUNK and provided.unmeasured is None


def test_by_file_resolves_a_file_to_its_results_and_flags_a_file_with_several():
    owners = [("f1#x", "f1"), ("f1#y", "f1"), ("f2#z", "f2")]
    exact = by_file(["f2", "f2"], owners)
    assert (exact.cited_ids, exact.files, exact.ambiguous, exact.granularity) == (("f2#z",), ("f2",), False, names.CITATION_GRANULARITY_FILE)
    several = by_file(["f1", "f9"], owners)
    assert (several.cited_ids, several.invalid, several.ambiguous) == (("f1#x", "f1#y"), ("file_id=f9",), True)


def test_by_file_without_the_results_keeps_the_cited_files_and_says_why():
    provided = by_file(["f1", 7, "f2"], None)
    assert (provided.files, provided.cited_ids, provided.unmeasured) == (("f1", "f2"), (), figures.STATUS_RESULTS_NOT_INCLUDED)


def test_scored_goes_through_the_one_resolution_rule():
    """Context a, b, c; the retrieval also holds d, not placed. Cited a and c, one citation naming
    no block: |K| = 2, one invalid, unknown (it names nothing retrieved), none out of context."""
    context = context_record([A, B, C], SimpleTokenizer())
    result = scored(Provided(("a", "c"), ("search_result_index=9",)), context, {"a", "b", "c", "d"})
    assert result.citations.format == names.CITATION_FORMAT_PROVIDER and result.citations.conformant
    answer = result.answer
    assert (tuple(answer.cited_ids), answer.invalid_citations, answer.out_of_context_citations, answer.unmeasured) == (("a", "c"), 1, 0, None)
    got = figures.compute([[_chunk("a", 1), _chunk("b", 2), _chunk("c", 3), _chunk("d", 4)]], [answer])
    assert got.values[names.METRIC_CITED] == 2 and got.values[names.METRIC_RECALL_PROXY] == 0.5
    assert got.values[names.METRIC_CITED_POSITIONS] == [1, 3] and got.values[names.METRIC_CONTEXT_PRECISION] == 0.75


def test_scored_is_not_measurable_where_the_provider_leaves_it_open():
    context = context_record([A, B], SimpleTokenizer())
    file_level = scored(Provided(("a", "b"), granularity=names.CITATION_GRANULARITY_FILE, files=("f",), ambiguous=True), context, {"a", "b"})
    assert file_level.answer.unmeasured == figures.STATUS_CITATIONS_FILE_LEVEL
    got = figures.compute([[_chunk("a", 1), _chunk("b", 2)]], [file_level.answer])
    assert names.METRIC_RECALL_PROXY not in got.values and got.values[names.METRIC_IN_CONTEXT] == 2
    assert figures.STATUS_CITATIONS_FILE_LEVEL in got.status
    nothing = scored(Provided(), context, {"a", "b"})
    assert not nothing.citations.conformant and nothing.answer.unmeasured is None  # a measured answer that cites nothing


def _chunk(chunk_id: str, rank: int) -> Chunk:
    return Chunk(chunk_id, rank)
