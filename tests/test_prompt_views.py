"""The search views of a prompt: folding over whole grapheme runs, offsets back to the prompt (issue 36)."""

from __future__ import annotations

import json
import unicodedata

import pytest

from ragtrace._internal.core.prompt_views import View, fold

TEXTS = [
    "Le café crème est servi à la réception après l'été.",  # Latin, one mark per letter
    "Hoàn tiền được xử lý trong vòng năm ngày làm việc.",  # Vietnamese: two marks on one letter
    "환불은 영업일 기준 오일 이내에 처리됩니다.",  # Hangul: syllables decompose into jamo
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_text_folds_the_same_in_either_normal_form(text):
    nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
    assert nfc != nfd
    assert fold(nfc) == fold(nfd)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("prompt_form, needle_form", [("NFD", "NFC"), ("NFC", "NFD")])
def test_a_needle_in_the_other_form_maps_back_to_the_prompts_own_characters(text, prompt_form, needle_form):
    shown = unicodedata.normalize(prompt_form, text)
    prompt = "[1] " + shown + "\n\nQuestion: q"
    view = View(prompt, folded=True)
    needle = fold(unicodedata.normalize(needle_form, text))
    at = view.text.find(needle)
    assert at >= 0
    start, end = view.span(at, at + len(needle))
    assert prompt[start:end] == shown  # every combining mark of the last run included


def test_a_word_ending_in_a_combining_mark_ends_after_the_mark():
    prompt = unicodedata.normalize("NFD", "Voir le résumé. Puis la suite.")
    view = View(prompt, folded=True)
    needle = fold("résumé")
    at = view.text.find(needle)
    start, end = view.span(at, at + len(needle))
    assert prompt[start:end] == unicodedata.normalize("NFD", "résumé")
    assert unicodedata.combining(prompt[end - 1])  # the accent of the last é is inside the span


@pytest.mark.parametrize("stored", ["NFC", "NFD"])
def test_a_json_request_body_is_read_through_its_string_escapes(stored):
    """A request body sent as one string escapes non-ASCII (``\\u00e9``, a surrogate pair for 😀),
    quotes, backslashes and newlines: the folded view reads the characters, and maps back to the
    whole escapes."""
    chunk = unicodedata.normalize(stored, 'Le café "crème" à C:\\temp\nest prêt 😀.')
    body = json.dumps({"messages": [{"role": "user", "content": "Sources:\n[1] " + unicodedata.normalize("NFC", chunk) + "\n\nQ: q"}]})
    assert "\\u00e9" in body and "\\ud83d\\ude00" in body and '\\"' in body
    view = View(body, folded=True)
    needle = fold(chunk)
    at = view.text.find(needle)
    assert at >= 0
    start, end = view.span(at, at + len(needle))
    assert json.loads('"' + body[start:end] + '"') == unicodedata.normalize("NFC", chunk)


def test_backslashes_outside_a_json_document_are_text():
    view = View('Run C:\\new\\tmp "now"', folded=True)
    assert view.text == 'run c:\\new\\tmp "now"'
