"""A LlamaIndex RAG app, built the way LlamaIndex's docs build it, traced with one line.

``VectorStoreIndex(...).as_query_engine()`` over LlamaIndex's ``MockEmbedding`` (no network, no
downloads; it gives every node the same score, so which nodes come back is up to the vector store)
and a tiny ``CustomLLM`` standing in for a real model: it quotes the first source it is shown and
cites it. ``ragtrace.instrument("llama_index")`` turns ragtrace on: each query becomes a pipeline
with embed, retrieve, assemble and generate spans, and its figures; the streamed query's pipeline
ends when the app has read the stream. The lines ending in ``# ragtrace`` are the only ones the
uninstrumented app lacks (tests/test_examples.py runs it without them too). Needs
``pip install 'ragtrace[llama-index]' llama-index-core``.
Run: ``python examples/llamaindex_rag.py [console|jsonl:PATH]``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import TextNode

import ragtrace  # ragtrace

POLICIES = {
    "refunds": "Refunds reach the original card within 5 business days.",
    "credit": "Store credit is issued immediately instead of a refund.",
    "shipping": "Shipping is free for orders over 50 euros.",
    "returns": "Returns are accepted for 30 days after delivery.",
}
QUESTION = "How long does a refund take?"


class QuotingLLM(CustomLLM):
    """Stands in for a real model: quotes the first source of its prompt and cites it as [source]."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="quoting-llm")

    def answer(self, prompt: str) -> str:
        found = re.search(r"source: (\S+)\n\n(.+)", prompt)
        return f"{found.group(2)} [{found.group(1)}]" if found else "I don't know."

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.answer(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        def words(text: str) -> Any:
            so_far = ""
            for word in re.findall(r"\S+\s*", text):
                so_far += word
                yield CompletionResponse(text=so_far, delta=word)

        return words(self.answer(prompt))


def main() -> int:
    ragtrace.configure(service_name="llamaindex-rag", exporter=sys.argv[1] if len(sys.argv) > 1 else "console")  # ragtrace
    ragtrace.instrument("llama_index")  # ragtrace

    nodes = [TextNode(id_=key, text=text, metadata={"source": key}) for key, text in POLICIES.items()]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))

    engine = index.as_query_engine(llm=QuotingLLM(), similarity_top_k=3)
    print(f"Q: {QUESTION}\nA: {engine.query(QUESTION)}\n")

    streaming = index.as_query_engine(llm=QuotingLLM(), similarity_top_k=3, streaming=True)
    response = streaming.query(QUESTION)
    print("A (streamed): ", end="")
    for token in response.response_gen:
        print(token, end="", flush=True)
    print("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
