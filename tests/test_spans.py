"""spans.py's JSON helpers: the hand-built documents list is the encoder's output, byte for byte."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragtrace._internal.stages.spans import compact_json, id_score_json, messages_json, messages_text

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


@given(st.lists(st.tuples(IDS, IDS), max_size=4), st.one_of(st.none(), IDS, st.lists(IDS, max_size=2)))
def test_messages_text_is_what_the_encoder_writes(messages, finish_reason):
    shaped = messages_json(messages, 10**6)
    assert messages_text(shaped) == compact_json(shaped)
    if shaped:  # the output message's shape: a finish reason after the parts, of any type
        shaped[0]["finish_reason"] = finish_reason
        assert messages_text(shaped) == compact_json(shaped)


def test_messages_text_of_other_shapes_is_the_encoders():
    part = {"type": "text", "content": "x"}
    for shaped in (
        [{"role": "user", "parts": [part, part]}],  # two parts
        [{"role": "user", "parts": [{"type": "image", "content": "x"}]}],
        [{"role": "user", "parts": [{"content": "x", "type": "text"}]}],  # another key order
        [{"parts": [part], "role": "user"}],
        [{"role": "user", "parts": [part], "name": "n"}],
        [{"role": 3, "parts": [part]}],
        [{"role": "user", "parts": [{"type": "text", "content": 1.5}]}],
        [{"role": "user", "parts": (part,)}],
    ):
        assert messages_text(shaped) == compact_json(shaped)
    message = {"role": "assistant", "parts": [{"type": "text", "content": 'a"\\\n\u2028\ud800'}], "finish_reason": "stop"}
    assert messages_text([message]) == '[{"role":"assistant","parts":[{"type":"text","content":"a\\"\\\\\\n\u2028\ud800"}],"finish_reason":"stop"}]'


def test_id_score_json_refuses_what_the_encoder_refuses():
    """A score with no JSON form raises as the encoder does (the caller's guard reports it)."""
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError):
            id_score_json([("a", bad)])
