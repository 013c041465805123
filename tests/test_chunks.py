"""Every retriever result shape ``chunks.normalize`` / ``to_chunk`` accepts, with known answers.

Expected hashes are keyed BLAKE2b digests under the suite's hash key (``ids.keyed_digest``,
computed with hashlib, outside the code under test): the ids of id-less chunks travel on spans and
are joined offline, so under one key they must never change between processes or releases.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from ids import keyed_digest
from ragtrace import Chunk
from ragtrace._internal.core.chunks import NO_ACCESSORS, Accessors, content_hash, make_accessors, normalize, to_chunk

PARIS = "Paris is the capital of France."
PARIS_HASH = keyed_digest(PARIS)
ALPHA_HASH = keyed_digest("alpha text")
UNICODE_HASH = keyed_digest("héllo wörld")


# --- LangChain / LlamaIndex look-alikes: plain classes of the same shape ----------------------
class Document:
    """langchain_core.documents.Document: page_content, metadata, optional id."""

    def __init__(self, page_content: str, metadata: dict | None = None, id: str | None = None) -> None:
        self.page_content = page_content
        self.metadata = metadata if metadata is not None else {}
        self.id = id


class TextNode:
    """llama_index TextNode: id_, text, metadata, and get_content()."""

    def __init__(self, text: str, id_: str | None = None, metadata: dict | None = None) -> None:
        self.id_ = id_
        self.text = text
        self.metadata = metadata if metadata is not None else {}

    def get_content(self) -> str:
        return self.text


class ContentOnlyNode:
    """A node that exposes its text only through get_content() (like LlamaIndex ImageNode etc.)."""

    def __init__(self, node_id: str, body: str) -> None:
        self.node_id = node_id
        self._body = body

    def get_content(self) -> str:
        return self._body


class NodeWithScore:
    """llama_index NodeWithScore: node, score."""

    def __init__(self, node: object, score: float | None = None) -> None:
        self.node = node
        self.score = score


# --- dicts ------------------------------------------------------------------------------------
def test_dict_with_id_score_content():
    chunk = to_chunk({"id": "d1", "score": 0.91, "content": PARIS}, 1)
    assert chunk == Chunk(id="d1", rank=1, score=0.91, content=PARIS, metadata=None, tokens=None, content_hash=PARIS_HASH)


@pytest.mark.parametrize("key", ["text", "page_content", "document", "chunk", "body"])
def test_dict_content_aliases(key):
    chunk = to_chunk({"id": "d1", key: PARIS}, 3)
    assert chunk is not None
    assert (chunk.id, chunk.rank, chunk.content, chunk.content_hash) == ("d1", 3, PARIS, PARIS_HASH)


@pytest.mark.parametrize("key", ["chunk_id", "doc_id", "document_id", "node_id", "id_", "_id", "uuid"])
def test_dict_id_aliases(key):
    assert to_chunk({key: "x-9", "content": PARIS}, 1).id == "x-9"


def test_first_present_id_key_wins_and_none_is_skipped():
    # "id" is None, so the next key in order ("chunk_id") is used
    assert to_chunk({"id": None, "chunk_id": "c7", "content": PARIS}, 1).id == "c7"


def test_id_from_metadata():
    chunk = to_chunk({"text": PARIS, "metadata": {"doc_id": "m-1", "source": "wiki"}}, 2)
    assert chunk.id == "m-1"
    assert chunk.metadata == {"doc_id": "m-1", "source": "wiki"}
    assert chunk.content_hash == PARIS_HASH


def test_top_level_id_beats_metadata_id():
    assert to_chunk({"id": "top", "text": PARIS, "metadata": {"id": "meta"}}, 1).id == "top"


def test_non_string_ids_become_strings():
    assert to_chunk({"id": 7, "content": PARIS}, 1).id == "7"
    assert to_chunk({"id": b"raw", "content": PARIS}, 1).id == "raw"


def test_distance_is_used_when_there_is_no_score():
    assert to_chunk({"id": "a", "distance": 0.12, "content": PARIS}, 1).score == 0.12
    assert to_chunk({"id": "a", "_distance": 0.34, "content": PARIS}, 1).score == 0.34
    # a score wins over a distance
    assert to_chunk({"id": "a", "score": 0.8, "distance": 0.12, "content": PARIS}, 1).score == 0.8


@pytest.mark.parametrize("key", ["relevance_score", "similarity", "_score"])
def test_score_aliases(key):
    assert to_chunk({"id": "a", key: 0.25}, 1).score == 0.25


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("0.4", 0.4), (Decimal("0.5"), 0.5), (float("nan"), None), (float("inf"), None), ("high", None), (None, None), (3, 3.0)],
)
def test_scores_are_finite_floats_or_none(raw, expected):
    chunk = to_chunk({"id": "a", "score": raw, "content": PARIS}, 1)
    assert chunk.score == expected
    assert chunk.score is None or isinstance(chunk.score, float)


def test_token_counts_from_the_item():
    assert to_chunk({"id": "a", "content": PARIS, "tokens": 7}, 1).tokens == 7
    assert to_chunk({"id": "a", "content": PARIS, "token_count": 9}, 1).tokens == 9
    # negative, bool and non-int token counts are not counts
    assert to_chunk({"id": "a", "content": PARIS, "tokens": -1}, 1).tokens is None
    assert to_chunk({"id": "a", "content": PARIS, "tokens": True}, 1).tokens is None
    assert to_chunk({"id": "a", "content": PARIS, "tokens": 7.5}, 1).tokens is None


def test_id_without_text_is_readable_without_hash():
    chunk = to_chunk({"id": "only-id"}, 1)
    assert (chunk.id, chunk.content, chunk.content_hash) == ("only-id", None, None)


def test_bytes_content_is_decoded():
    chunk = to_chunk({"id": "a", "content": "héllo wörld".encode()}, 1)
    assert chunk.content == "héllo wörld"
    assert chunk.content_hash == UNICODE_HASH


# --- (doc, score) tuples ------------------------------------------------------------------------
def test_doc_score_tuple():
    chunk = to_chunk(({"id": "d1", "content": PARIS}, 0.77), 1)
    assert (chunk.id, chunk.score, chunk.content) == ("d1", 0.77, PARIS)


def test_tuple_score_overrides_the_dict_score():
    # the pair's score is what the vector store returned for this query
    assert to_chunk(({"id": "d1", "score": 0.1, "content": PARIS}, 0.9), 1).score == 0.9


def test_langchain_similarity_search_with_score_pair():
    doc = Document(PARIS, metadata={"source": "wiki"}, id="lc-1")
    chunk = to_chunk((doc, 0.42), 4)
    assert (chunk.id, chunk.rank, chunk.score, chunk.content) == ("lc-1", 4, 0.42, PARIS)
    assert chunk.metadata == {"source": "wiki"}


def test_string_score_tuple():
    chunk = to_chunk((PARIS, 0.3), 1)
    assert (chunk.id, chunk.score, chunk.content) == (PARIS_HASH, 0.3, PARIS)


def test_tuple_whose_second_item_is_not_a_number_is_unreadable():
    # ("a", "b") is not a (doc, score) pair, and a tuple is not a document
    result = normalize([("a", "b")])
    assert result.chunks == [] and result.unreadable == 1


# --- LangChain Document -------------------------------------------------------------------------
def test_langchain_document_with_id():
    chunk = to_chunk(Document(PARIS, {"source": "a.md"}, id="lc-7"), 1)
    assert chunk == Chunk("lc-7", 1, None, PARIS, {"source": "a.md"}, None, PARIS_HASH)


def test_langchain_document_id_in_metadata():
    assert to_chunk(Document(PARIS, {"id": "meta-3"}), 1).id == "meta-3"


def test_langchain_document_without_any_id_uses_content_hash():
    chunk = to_chunk(Document(PARIS, {"source": "a.md"}), 1)
    assert chunk.id == PARIS_HASH == chunk.content_hash


# --- LlamaIndex NodeWithScore -------------------------------------------------------------------
def test_llamaindex_node_with_score():
    chunk = to_chunk(NodeWithScore(TextNode(PARIS, id_="node-1", metadata={"page": 3}), score=0.66), 2)
    assert chunk == Chunk("node-1", 2, 0.66, PARIS, {"page": 3}, None, PARIS_HASH)


def test_llamaindex_node_with_no_score():
    chunk = to_chunk(NodeWithScore(TextNode(PARIS, id_="node-1")), 1)
    assert (chunk.id, chunk.score) == ("node-1", None)


def test_llamaindex_content_only_through_get_content():
    chunk = to_chunk(NodeWithScore(ContentOnlyNode("n-2", PARIS), 0.5), 1)
    assert (chunk.id, chunk.score, chunk.content, chunk.content_hash) == ("n-2", 0.5, PARIS, PARIS_HASH)


# --- plain strings: stable content-hash ids -----------------------------------------------------
def test_plain_strings_get_stable_content_hash_ids():
    result = normalize([PARIS, "alpha text", PARIS])
    assert [c.id for c in result.chunks] == [PARIS_HASH, ALPHA_HASH, PARIS_HASH]
    assert [c.rank for c in result.chunks] == [1, 2, 3]
    assert [c.content for c in result.chunks] == [PARIS, "alpha text", PARIS]
    assert all(c.score is None for c in result.chunks)


def test_empty_id_falls_back_to_content_hash():
    assert to_chunk({"id": "", "content": PARIS}, 1).id == PARIS_HASH


def test_whitespace_matters_to_the_hash():
    # the hash is of the exact text: reformatted text is a different chunk as far as ids go
    assert to_chunk("alpha  text", 1).id != ALPHA_HASH
    assert to_chunk("alpha text", 1).id == ALPHA_HASH


# --- user accessors -----------------------------------------------------------------------------
class Hit:
    def __init__(self, key: str, body: str, relevance: float) -> None:
        self.key, self.body, self.relevance = key, body, relevance


def test_accessors_read_unknown_shapes():
    accessors = Accessors(id_of=lambda h: h.key, content_of=lambda h: h.body, score_of=lambda h: h.relevance)
    result = normalize([Hit("k1", PARIS, 0.9), Hit("k2", "alpha text", 0.4)], accessors)
    assert [(c.id, c.rank, c.score, c.content) for c in result.chunks] == [
        ("k1", 1, 0.9, PARIS),
        ("k2", 2, 0.4, "alpha text"),
    ]
    assert result.unreadable == 0


def test_accessors_override_the_known_keys():
    item = {"id": "builtin", "content": "builtin text", "score": 0.1, "meta_id": "mine", "raw": PARIS, "s": 0.7}
    accessors = Accessors(id_of=lambda d: d["meta_id"], content_of=lambda d: d["raw"], score_of=lambda d: d["s"])
    chunk = to_chunk(item, 1, accessors)
    assert (chunk.id, chunk.content, chunk.score, chunk.content_hash) == ("mine", PARIS, 0.7, PARIS_HASH)


def test_accessor_on_tuple_sees_the_document_and_keeps_the_pair_score():
    accessors = Accessors(id_of=lambda h: h.key, content_of=lambda h: h.body)
    chunk = to_chunk((Hit("k1", PARIS, 0.0), 0.55), 1, accessors)
    assert (chunk.id, chunk.score, chunk.content) == ("k1", 0.55, PARIS)


def test_content_accessor_alone_gives_hash_ids():
    chunk = to_chunk(Hit("ignored", PARIS, 0.2), 1, Accessors(content_of=lambda h: h.body))
    assert chunk.id == PARIS_HASH


# --- unreadable items are counted, never raised on ---------------------------------------------
def test_unreadable_items_are_counted_and_ranks_stay_dense():
    items = [
        None,
        {"id": "a", "content": "alpha text"},
        42.0,  # a bare number is not a document
        {"score": 0.3},  # neither id nor text
        {"content": ["not", "text"]},  # a structure is not text, and there is no id
        object(),
        {"id": "b", "text": PARIS},
    ]
    result = normalize(items)
    assert [c.id for c in result.chunks] == ["a", "b"]
    # ranks number the readable chunks in order (R can only hold readable chunks)
    assert [c.rank for c in result.chunks] == [1, 2]
    assert result.unreadable == 5


def test_normalize_edge_inputs():
    assert normalize(None).chunks == [] and normalize(None).unreadable == 0
    assert normalize([]).chunks == []
    # a single dict or string is one item, not an iterable of keys / characters
    assert [c.id for c in normalize({"id": "solo", "content": PARIS}).chunks] == ["solo"]
    assert [c.id for c in normalize(PARIS).chunks] == [PARIS_HASH]
    # a non-iterable non-document counts as one unreadable item
    assert normalize(5).unreadable == 1
    # generators are consumed once, in order
    assert [c.id for c in normalize({"id": f"g{i}"} for i in range(3)).chunks] == ["g0", "g1", "g2"]


def test_start_rank_offsets_ranks():
    result = normalize([{"id": "a"}, {"id": "b"}], start_rank=5)
    assert [c.rank for c in result.chunks] == [5, 6]


def test_chunk_records_pass_through_unchanged():
    chunk = Chunk("x", 3, 0.5, PARIS, None, 4, PARIS_HASH)
    assert to_chunk(chunk, 1) is chunk


def test_mixed_shapes_in_one_batch():
    items = [
        {"id": "d1", "score": 0.9, "content": PARIS},
        (Document("alpha text", id="lc"), 0.8),
        NodeWithScore(TextNode("beta text", id_="li"), 0.7),
        "gamma text",
    ]
    result = normalize(items)
    assert [(c.id, c.rank, c.score) for c in result.chunks] == [
        ("d1", 1, 0.9),
        ("lc", 2, 0.8),
        ("li", 3, 0.7),
        (to_chunk("gamma text", 1).content_hash, 4, None),
    ]
    assert result.chunks[3].id == result.chunks[3].content_hash
    assert result.unreadable == 0


# --- the plain-dict fast path -------------------------------------------------------------------
@pytest.mark.parametrize(
    "item",
    [
        {"id": "a", "content": PARIS, "score": 0.5, "metadata": {"page": 2}, "tokens": 7},
        {"id": "a", "content": PARIS, "relevance_score": "0.25", "meta": {"x": 1}, "n_tokens": True},
        {"id": "a", "content": PARIS, "distance": 1.5, "metadata": "not a mapping", "token_count": -1},
        {"id": "a", "content": PARIS, "score": float("nan")},
    ],
)
def test_plain_dicts_read_the_same_on_the_fast_path(item):
    fast = to_chunk(item, 3)  # no accessors: the fast path
    general = to_chunk(item, 3, Accessors(id_of=lambda d: d["id"]))  # an accessor forces the general path
    assert fast == general
    assert fast.content_hash == PARIS_HASH


def test_no_accessors_means_the_shared_empty_instance():
    """The fast path is guarded by identity with NO_ACCESSORS: the public API must pass that one."""
    import ragtrace

    assert make_accessors() is NO_ACCESSORS
    assert make_accessors(id_of=str) is not NO_ACCESSORS
    assert ragtrace.retrieve("q").accessors is NO_ACCESSORS
    assert ragtrace.rerank("m").accessors is NO_ACCESSORS
    assert ragtrace.assemble().builder.accessors is NO_ACCESSORS


def test_an_iterable_that_fails_midway_keeps_what_it_gave(caplog):
    def results():
        yield {"id": "a", "content": PARIS}
        yield {"id": "b", "content": "alpha text"}
        raise ConnectionError("vector store went away")

    with caplog.at_level("WARNING", logger="ragtrace"):
        normalized = normalize(results())
        again = normalize(results())
    assert [c.id for c in normalized.chunks] == ["a", "b"] and normalized.unreadable == 1
    assert [c.id for c in again.chunks] == ["a", "b"] and again.unreadable == 1
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["ragtrace: a result iterable raised ConnectionError midway; kept the items read before it"]  # once


# --- the user's callbacks fail per item -----------------------------------------------------------
def test_a_raising_id_of_keeps_that_item_in_the_retrieved_set_and_leaves_the_rest_right(spans, caplog):
    """Issue 14 finding 3: two retrievals of 2 + 3 chunks, the user's id_of raises on one: retrieved
    is 5 and one cited chunk is recall 0.2 (it was 4 and 0.25 while the item was left out of R)."""
    import logging

    import ragtrace

    def doc_id(doc):
        if doc["key"] == "bad":
            raise KeyError("no id")  # the user's bug, on one item
        return doc["key"]

    first = [{"key": "a", "text": "alpha"}, {"key": "b", "text": "beta"}]
    second = [{"key": "c", "text": "gamma"}, {"key": "bad", "text": "delta"}, {"key": "e", "text": "epsilon"}]
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        with ragtrace.rag_pipeline("callbacks") as run:
            for results in (first, second):
                with ragtrace.retrieve("q", id_of=doc_id, content_of=lambda d: d["text"]) as r:
                    r.record(results)
            with ragtrace.assemble(id_of=doc_id, content_of=lambda d: d["text"]) as ctx:
                for doc in first + second:
                    ctx.add(doc)
                ctx.render()
            with ragtrace.generate(model="m") as g:
                g.record("[1]")
    assert run.metrics["retrieved"] == 5  # the unreadable item still counts in R ...
    assert run.metrics["recall_proxy"] == 0.2
    assert run.metrics["in_context"] == 5  # ... and in C: the model was shown its text
    retrieve = spans.by_stage("retrieve")[1].attributes
    ids = list(retrieve["rag.retrieval.chunk_ids"])
    assert ids[0] == "c" and ids[2] == "e" and ids[1] not in ("a", "b", "c", "e", "bad")  # a stand-in id
    assert retrieve["rag.unreadable_items"] == 1
    context = spans.by_stage("assemble")[0].attributes
    assert list(context["rag.context.chunk_ids"]) == ["a", "b", "c", ids[1], "e"]  # matched by its text
    messages = [r.getMessage() for r in caplog.records]
    assert any("your id_of callback" in m and "doc_id" in m and "KeyError" in m for m in messages), messages
    assert not any("internal error" in m for m in messages)
    assert sum("doc_id" in m for m in messages) == 1  # once per callable


def test_an_item_whose_id_of_and_content_of_both_raise_counts_under_a_positional_id_per_retrieval(spans):
    import ragtrace

    def broken(doc):
        if doc == "bad":
            raise ValueError("boom")
        return doc

    with ragtrace.rag_pipeline("callbacks") as run:
        for results in (["x", "bad"], ["bad", "y", "z"]):
            with ragtrace.retrieve("q", id_of=broken, content_of=broken) as r:
                r.record(results)
        with ragtrace.assemble() as ctx:
            ctx.add({"id": "x", "content": "x"})
            ctx.render()
        with ragtrace.generate(model="m") as g:
            g.record("[1]")
    assert run.metrics["retrieved"] == 5  # two stand-ins, one per retrieval, never merged
    assert run.metrics["recall_proxy"] == 0.2
    first, second = (list(s.attributes["rag.retrieval.chunk_ids"]) for s in spans.by_stage("retrieve"))
    assert first[0] == "x" and second[1:] == ["y", "z"] and first[1] != second[0]


@pytest.mark.parametrize("role", ["content_of", "score_of"])
def test_a_raising_content_of_or_score_of_is_per_item_too(role):
    def failing(hit):
        if hit.key == "x":
            raise ValueError("boom")
        return hit.body if role == "content_of" else hit.relevance

    accessors = Accessors(id_of=lambda hit: hit.key, **{role: failing})
    failed: list[str] = []
    chunk = to_chunk(Hit("x", "text", 0.5), 1, accessors, failed)
    assert chunk is not None and chunk.id == "x" and failed == [role]  # the id is known: it stays a chunk
    assert chunk.content is None if role == "content_of" else (chunk.content, chunk.score) == ("text", None)
    fine = Chunk("y", 1, 0.5 if role == "score_of" else None, "text", None, None, content_hash("text"))
    assert to_chunk(Hit("y", "text", 0.5), 1, Accessors(id_of=lambda hit: hit.key, **{role: failing})) == fine


def test_a_chunk_whose_content_of_raised_is_not_placed_in_the_prompt(spans):
    import ragtrace

    def content(doc):
        if doc["key"] == "bad":
            raise KeyError("text")
        return doc["text"]

    docs = [{"key": "a", "text": "alpha"}, {"key": "bad", "text": "beta"}]
    with ragtrace.rag_pipeline("callbacks") as run:
        with ragtrace.retrieve("q", id_of=lambda d: d["key"], content_of=content) as r:
            r.record(docs)
        with ragtrace.assemble(id_of=lambda d: d["key"], content_of=content) as ctx:
            for doc in docs:
                ctx.add(doc)
            prompt = ctx.render()
        with ragtrace.generate(model="m") as g:
            g.record("[1]")
    assert prompt == "[1] alpha"  # nothing rendered for the item ragtrace could not read
    assert run.metrics["retrieved"] == 2 and run.metrics["in_context"] == 1


def test_callbacks_receive_the_document_of_a_node_with_score_and_its_score_is_kept():
    class NodeWithScore:  # LlamaIndex's shape: the node and its score
        def __init__(self, node, score):
            self.node, self.score = node, score

    class Node:
        def __init__(self, key, text):
            self.key, self.text = key, text

    seen = []
    chunk = to_chunk(NodeWithScore(Node("n1", "alpha"), 0.7), 1, Accessors(id_of=lambda doc: seen.append(doc) or doc.key))
    assert isinstance(seen[0], Node)  # the document, as for a (doc, score) pair
    assert (chunk.id, chunk.content, chunk.score) == ("n1", "alpha", 0.7)
