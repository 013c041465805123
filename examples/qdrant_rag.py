"""RAG over a bare Qdrant client, offline: the real ``qdrant-client`` in its local mode
(``QdrantClient(":memory:")``), vectors from a toy bag-of-words embedding (no model to download),
and the OpenAI SDK answering through an httpx ``MockTransport`` that replies as the chat
completions API does.

The app queries the collection, shows the two best passages to the model as [1], [2], and prints
the answer. ``ragtrace.instrument()`` is the one line it needs (the lines ending in
``# ragtrace``): the query and the answer are one pipeline (``invoke_workflow qdrant``) with the
points' ids and scores, the assembly located in the prompt, and the answer's [1] resolved to the
point it cites. Needs ``pip install 'ragtrace[qdrant,openai]' qdrant-client openai``.

    python examples/qdrant_rag.py [console|jsonl:PATH]
"""

from __future__ import annotations

import json
import re
import sys

import httpx
import openai
from qdrant_client import QdrantClient, models

import ragtrace  # ragtrace

WORDS = ["refund", "card", "days", "credit", "store", "shipping", "free"]
PASSAGES = {
    1: "Refunds reach the original card within 5 business days.",
    2: "Store credit is issued immediately instead of a refund.",
    3: "Shipping is free for orders over 50 euros.",
}


def embed(text: str) -> list[float]:
    """A toy embedding: how often each of a few words occurs (a real app calls its model here)."""
    found = re.findall(r"[a-z]+", text.lower())
    return [float(sum(word.startswith(w) for word in found)) for w in WORDS]


def chat_api(request: httpx.Request) -> httpx.Response:
    """The fake: a chat completion that cites the first numbered source it was shown."""
    prompt = json.loads(request.content)["messages"][-1]["content"]
    cited = re.search(r"\[(\d+)\]", prompt)
    text = f"Refunds take 5 business days [{cited.group(1)}]." if cited else "I don't know."
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 60, "completion_tokens": 9, "total_tokens": 69},
        },
    )


def answer(db: QdrantClient, llm: openai.OpenAI, question: str) -> str:
    points = db.query_points("kb", query=embed(question), limit=3).points
    sources = "\n".join(f"[{n}] {p.payload['text']}" for n, p in enumerate(points[:2], 1))
    messages = [
        {"role": "system", "content": "Answer from the numbered sources only and cite them as [1], [2]."},
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"},
    ]
    return llm.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content


if __name__ == "__main__":
    ragtrace.configure(service_name="qdrant-rag", exporter=(sys.argv[1:] or ["console"])[0])  # ragtrace
    ragtrace.instrument()  # ragtrace
    db = QdrantClient(":memory:")
    db.create_collection("kb", vectors_config=models.VectorParams(size=len(WORDS), distance=models.Distance.COSINE))
    db.upsert("kb", points=[models.PointStruct(id=i, vector=embed(text), payload={"text": text}) for i, text in PASSAGES.items()])
    llm = openai.OpenAI(api_key="offline", base_url="https://api.openai.invalid/v1", http_client=httpx.Client(transport=httpx.MockTransport(chat_api)))
    print("A:", answer(db, llm, "How many days does a refund to my card take?"))
