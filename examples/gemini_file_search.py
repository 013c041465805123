"""RAG with Gemini's File Search tool (google-genai): the model searches the app's File Search store
itself, inside ``generate_content``, and the response's grounding metadata says which chunks it
was given and which of them each sentence of the answer rests on.

``ragtrace.instrument()`` is the one line the app needs: the call becomes one pipeline, a retrieve
span of the grounding chunks, an assembly the API states (``inclusion_method = "provider"``) and a
generate span whose citations are the grounding supports, with their segments converted from the
API's UTF-8 byte offsets to characters. The lines ending in ``# ragtrace`` are the only ones the
uninstrumented app lacks. With no ``GEMINI_API_KEY`` it runs offline against a stand-in for the
Gemini API (an httpx MockTransport handed to the SDK); with one, against Google and the store named
by ``GEMINI_FILE_SEARCH_STORE``. Needs ``pip install 'ragtrace[google-genai]' google-genai``.

    python examples/gemini_file_search.py [--stream] [console|jsonl:PATH]
"""

from __future__ import annotations

import json
import os
import re
import sys

import httpx
from google import genai
from google.genai import types

import ragtrace  # ragtrace

MODEL = os.environ.get("GEMINI_MODEL", "gemini-2.5-flash")
STORE = os.environ.get("GEMINI_FILE_SEARCH_STORE", "fileSearchStores/support-kb")
DOCUMENTS = {  # the stand-in's store: document name -> its one chunk
    f"{STORE}/documents/refunds": "A refund takes 5 business days to reach the original card (Rückerstattung).",
    f"{STORE}/documents/store-credit": "Store credit is issued immediately instead of a refund.",
    f"{STORE}/documents/shipping": "Shipping is free for orders over 50 euros.",
}


def stand_in(request: httpx.Request) -> httpx.Response:
    """Google's side, offline: search the store by shared words, answer from the best chunk, and
    ground the answer's first sentence on it (byte offsets, as the API counts them)."""
    question = json.loads(request.content)["contents"][-1]["parts"][0]["text"]
    words = set(re.findall(r"\w+", question.lower()))
    ranked = sorted(DOCUMENTS, key=lambda name: -len(words & set(re.findall(r"\w+", DOCUMENTS[name].lower()))))
    sentence = "Refunds (Rückerstattungen) reach your card within 5 business days."
    answer = sentence + " Anything else?"
    chunks = [{"retrievedContext": {"documentName": name, "title": name.rsplit("/", 1)[1], "text": DOCUMENTS[name]}} for name in ranked]
    supports = [{"segment": {"endIndex": len(sentence.encode()), "text": sentence}, "groundingChunkIndices": [0]}]
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": answer}]}, "finishReason": "STOP", "groundingMetadata": {"groundingChunks": chunks, "groundingSupports": supports}}],
        "usageMetadata": {"promptTokenCount": 95, "candidatesTokenCount": 16},
        "modelVersion": MODEL,
    }
    if ":streamGenerateContent" in request.url.path:  # the text first, the grounding on the last chunk
        first = {"candidates": [{"content": {"role": "model", "parts": [{"text": sentence}]}}]}
        body["candidates"][0]["content"]["parts"] = [{"text": answer[len(sentence) :]}]
        sse = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in (first, body))
        return httpx.Response(200, content=sse.encode(), headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json=body)


def client() -> genai.Client:
    if os.environ.get("GEMINI_API_KEY"):
        return genai.Client(api_key=os.environ["GEMINI_API_KEY"])
    offline = types.HttpOptions(httpx_client=httpx.Client(transport=httpx.MockTransport(stand_in)))
    return genai.Client(api_key="offline", http_options=offline)


def answer(question: str, stream: bool) -> tuple[str, list[str]]:
    config = types.GenerateContentConfig(tools=[types.Tool(file_search=types.FileSearch(file_search_store_names=[STORE]))])
    models = client().models
    if stream:
        chunks = list(models.generate_content_stream(model=MODEL, contents=question, config=config))
        text, grounding = "".join(c.text or "" for c in chunks), chunks[-1].candidates[0].grounding_metadata
    else:
        reply = models.generate_content(model=MODEL, contents=question, config=config)
        text, grounding = reply.text, reply.candidates[0].grounding_metadata
    names = [c.retrieved_context.title for c in grounding.grounding_chunks if c.retrieved_context]
    cited = [names[i] for s in grounding.grounding_supports or () for i in s.grounding_chunk_indices or ()]
    return text, list(dict.fromkeys(cited))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--stream"]
    ragtrace.configure(service_name="gemini-file-search", exporter=(args or ["console"])[0])  # ragtrace
    ragtrace.instrument()  # ragtrace
    text, cited = answer("How long does a refund take to reach my card?", "--stream" in sys.argv)
    print("A:", text)
    print("Cited:", ", ".join(cited))
