"""The workload of ``bench/bench_peers.py``, with nothing but the standard library and the OTel API.

It runs in every peer's own venv, so it imports no ragtrace: the ragtrace side checks at start-up
that its default template renders exactly the prompt ``assemble`` builds here (same text, same
labels), so every side sends the same prompt.

One pipeline: a root, then embed (16 floats) -> retrieve (the query, 10 chunks of 200 characters)
-> rerank to 5 -> assemble (ragtrace's default template) -> generate (a 300-character answer citing
[1] and [3]). The stage bodies are plain functions; each side wraps them its own way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

QUERY = "How does the reranker decide which passages reach the prompt?"
_TOPICS = (
    "Dense retrieval embeds the query and every passage into one vector space",
    "BM25 scores passages by term frequency and inverse document frequency",
    "A cross-encoder reranker reads the query and a candidate passage together",
    "Chunking splits long documents into passages of a few hundred tokens",
    "The context budget limits how many tokens of passages reach the prompt",
    "Citations in the answer refer to the bracketed labels of the passages",
    "Hybrid search merges lexical and dense results with rank fusion",
    "Metadata filters restrict retrieval to one product or language",
    "Caching embeddings of frequent queries saves a model round trip",
    "Evaluation compares retrieved passages with a golden set per question",
)
CHUNK_CHARS = 200


def _chunk_text(topic: str) -> str:
    """``topic`` and a fixed filler, cut to exactly 200 characters."""
    filler = " Each passage carries enough detail for the model to answer from it alone."
    return (topic + "." + filler * 3)[: CHUNK_CHARS - 1] + "."


DOCS: list[dict[str, Any]] = [
    {"id": f"kb-{i:03d}", "score": round(0.92 - 0.05 * i, 3), "content": _chunk_text(topic)} for i, topic in enumerate(_TOPICS)
]
RERANK_ORDER = ((2, 0.97), (0, 0.88), (5, 0.81), (1, 0.64), (6, 0.52))  # index into DOCS, new score
VECTOR = [0.01 * i for i in range(16)]
_ANSWER_HEAD = (
    "A cross-encoder reranker reads the query and each candidate passage together and scores it [1]; "
    "only the best passages fit the context budget of the prompt, and the answer cites their labels [3]."
)
ANSWER = (
    _ANSWER_HEAD + " The other passages never reach the model, so they cannot be cited, and the figures count"
    " them as retrieved but unused."
)[:300]

# ragtrace's default template and chunk format (bench_peers checks they are still ragtrace's)
TEMPLATE = (
    "Answer the question using only the sources below. Cite the sources you use as [n].\n\n"
    "Sources:\n{context}\n\nQuestion: {question}\nAnswer:"
)
CHUNK_FORMAT = "[{label}] {content}"
SEPARATOR = "\n\n"

MODELS = {
    "embed": ("text-embedding-3-small", "openai"),
    "rerank": ("bge-reranker-v2", "local"),
    "generate": ("gpt-4o-mini", "openai"),
}
DATA_SOURCE, TOP_K, TOP_N, MAX_TOKENS = "product-docs", 10, 5, 3000
SPANS_PER_PIPELINE = 6


# --- the stage bodies (what the application does anyway) ----------------------------------------
def embed(query: str) -> list[float]:
    return VECTOR


def retrieve(query: str, vector: list[float]) -> list[dict[str, Any]]:
    return DOCS


def rerank(query: str, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(docs[i], score=score) for i, score in RERANK_ORDER]


def assemble(query: str, chunks: list[dict[str, Any]]) -> str:
    context = SEPARATOR.join(CHUNK_FORMAT.format(label=n, content=c["content"]) for n, c in enumerate(chunks, 1))
    return TEMPLATE.format(context=context, question=query)


def generate(prompt: str) -> str:
    return ANSWER


Stages = dict[str, Callable[..., Any]]
PLAIN: Stages = {"embed": embed, "retrieve": retrieve, "rerank": rerank, "assemble": assemble, "generate": generate}


def make_pipeline(stages: Stages) -> Callable[[str], str]:
    """The root function over ``stages`` (each possibly decorated); the caller decorates the root."""
    embed_, retrieve_, rerank_, assemble_, generate_ = (stages[k] for k in ("embed", "retrieve", "rerank", "assemble", "generate"))

    def answer_question(query: str) -> str:
        vector = embed_(query)
        docs = retrieve_(query, vector)
        top = rerank_(query, docs)
        prompt = assemble_(query, top)
        return generate_(prompt)

    return answer_question


assert all(len(d["content"]) == CHUNK_CHARS for d in DOCS) and len(ANSWER) == 300
