"""Which chunk each labelled piece of a prompt was cut from: the one mapping the searches and the
LlamaIndex integration share (issue 36). Truths by construction: the pieces are cut by hand."""

from __future__ import annotations

from ragtrace._internal.integrations._packing import derived_sources
from ragtrace._internal.core.pieces import holding, labelled_pieces
from ragtrace._internal.core.prompt_views import collapse

GUIDE = "Refunds reach the original card within five business days. Store credit is issued immediately instead of a refund."
SHIPPING = "Shipping is free for orders over fifty euros, and returns are free within thirty days."
CUT = GUIDE.index(" Store")


def test_holding_is_whitespace_insensitive_and_prefers_the_given_order():
    contents = [collapse(SHIPPING), collapse(GUIDE), collapse(GUIDE + " More.")]
    assert holding("Store credit is\n issued  immediately", contents) == 1
    assert holding("Store credit is issued immediately", contents, preferred=[2]) == 2
    assert holding("Nothing of the kind.", contents) is None
    assert holding("   ", contents) is None


def test_halves_under_two_labels_are_each_a_piece_of_their_chunk():
    prompt = f"Sources:\n[1] {SHIPPING}\n[2] {GUIDE[:CUT]}\n[3] {GUIDE[CUT + 1:]}\n\nQuestion: q"
    contents = [collapse(GUIDE)]
    pieces = list(labelled_pieces(prompt, 0, contents, skip=set(), found=set()))
    assert [(p.label, prompt[p.start : p.end], p.holder) for p in pieces] == [("2", GUIDE[:CUT], 0), ("3", GUIDE[CUT + 1 :], 0)]


def test_resolved_labels_and_text_before_the_offset_are_not_read():
    prompt = f"Example:\n[1] {GUIDE[:CUT]}\n\nSources:\n[1] {GUIDE[:CUT]}\n[2] {GUIDE[CUT + 1:]}"
    offset = prompt.index("Sources:")
    pieces = list(labelled_pieces(prompt, offset, [collapse(GUIDE)], skip={"1"}, found=set()))
    assert [(p.label, p.start > offset) for p in pieces] == [("2", True)]


def test_a_short_last_piece_counts_only_for_a_chunk_already_found():
    prompt = f"[2] {GUIDE[:CUT]}\n[3] is issued\n"  # not where [2] ends: only a chunk already found takes it
    contents = [collapse(GUIDE)]
    assert [p.label for p in labelled_pieces(prompt, 0, contents, skip=set(), found=set())] == ["2"]
    assert [p.label for p in labelled_pieces(prompt, 0, contents, skip=set(), found={0})] == ["2", "3"]


def test_a_piece_cut_mid_word_ends_at_the_last_whole_word():
    prompt = f"[2] {GUIDE[:CUT]} Store creditable words follow here.\n"
    (piece,) = labelled_pieces(prompt, 0, [collapse(GUIDE)], skip=set(), found=set())
    assert prompt[piece.start : piece.end] == GUIDE[:CUT] + " Store"


def test_the_llama_index_mapping_is_the_same_one():
    retrieved = [("kb-ship", SHIPPING), ("kb-guide", GUIDE), ("kb-none", None)]
    texts = [f"Source 4:\n{GUIDE[CUT + 1:]}", f"Source 5:\n{SHIPPING[:30]}", "Source 6:\nSomething else entirely.", None]
    assert derived_sources(texts, retrieved) == [("kb-guide", "4", GUIDE[CUT + 1 :]), ("kb-ship", "5", SHIPPING[:30]), None, None]


def test_a_piece_of_one_word_between_two_of_its_chunk_is_its_next_piece():
    words = GUIDE.split(" ")
    first, middle, last = " ".join(words[:6]), words[6], " ".join(words[7:])
    prompt = f"(1) {SHIPPING}\n\n(2) {first}\n\n(3) {middle}\n\n(4) {last}\n"
    contents = [collapse(GUIDE)]
    reach = {0: len(first)}  # the search found the chunk cut at (2)
    pieces = list(labelled_pieces(prompt, 0, contents, skip={"1", "2"}, found={0}, reach=reach))
    assert [(p.label, prompt[p.start : p.end]) for p in pieces] == [("3", middle), ("4", last)]
    assert reach == {0: len(GUIDE)}
    # the same word under a label that does not continue the chunk there is no piece of it
    elsewhere = f"(2) {first}\n\n(3) {words[2]}\n"
    assert list(labelled_pieces(elsewhere, 0, contents, skip={"2"}, found={0}, reach={0: len(first)})) == []


def test_a_piece_whose_text_opens_with_a_label_keyword_is_read_under_its_own_label():
    """"Source 3:\\nDocument management is ..." — the second line is text, not a label "management"."""
    text = "Document management is done by the records team. " + GUIDE
    cut = text.index(" Refunds")
    prompt = f"Source 2:\n{SHIPPING}\n\nSource 3:\n{text[:cut]}\n\nSource 4:\n{text[cut + 1:]}\n"
    pieces = list(labelled_pieces(prompt, 0, [collapse(text)], skip={"2"}, found=set()))
    assert [(p.label, prompt[p.start : p.end]) for p in pieces] == [("3", text[:cut]), ("4", text[cut + 1 :])]
