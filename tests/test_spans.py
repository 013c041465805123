"""spans.py's JSON helpers: the hand-built documents list is the encoder's output, byte for byte."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragtrace._internal.stages.spans import compact_json, id_score_json

IDS = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12)  # escapes, non-ASCII, lone surrogates
SCORES = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 5))


@given(st.lists(st.tuples(IDS, SCORES), max_size=12))
def test_id_score_json_is_what_the_encoder_writes(pairs):
    assert id_score_json(pairs) == compact_json([{"id": i, "score": s} for i, s in pairs])


def test_id_score_json_of_hand_picked_values():
    pairs = [('a"b\\\n\u2028é\x00\ud800', 0.5), ("x", None), ("y", 1e-300), ("z", 1.0), ("w", 123456789.123456789), ("n", 3)]
    assert id_score_json(pairs) == (
        '[{"id":"a\\"b\\\\\\n\u2028é\\u0000\ud800","score":0.5},{"id":"x","score":null},{"id":"y","score":1e-300},'
        '{"id":"z","score":1.0},{"id":"w","score":123456789.12345679},{"id":"n","score":3}]'
    )
    assert id_score_json([]) == "[]"


def test_id_score_json_refuses_what_the_encoder_refuses():
    """A score with no JSON form raises as the encoder does (the caller's guard reports it)."""
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            id_score_json([("a", bad)])
