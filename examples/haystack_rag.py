"""RAG with a Haystack pipeline: an in-memory BM25 retriever, a ``PromptBuilder`` that numbers the
documents, and a generator, connected the way Haystack's docs teach.

``ragtrace.instrument()`` is the one line the app needs: each ``pipeline.run`` becomes one
pipeline with a retrieve span, an assembly whose placements ragtrace recorded by rendering the
builder's template itself (``inclusion_method = "recorded"``) and a generate span whose citations
are scored against it. The lines ending in ``# ragtrace`` are the only ones the uninstrumented app
lacks. With no ``OPENAI_API_KEY`` the generator is a stand-in ``@component`` that answers from the
first document and cites it; with one, Haystack's ``OpenAIGenerator``. Needs
``pip install 'ragtrace[haystack]' haystack-ai``.

    python examples/haystack_rag.py [console|jsonl:PATH]
"""

from __future__ import annotations

import os
import sys

from haystack import Document, Pipeline, component
from haystack.components.builders import PromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

import ragtrace  # ragtrace

TEMPLATE = """Answer from the numbered sources only, and cite them as [n].
{% for doc in documents %}[{{ loop.index }}] {{ doc.content }}
{% endfor %}Question: {{ question }}
Answer:"""


@component
class StandIn:
    """An offline generator: the first sentence of source [1], cited."""

    @component.output_types(replies=list[str], meta=list[dict])
    def run(self, prompt: str) -> dict:
        first = prompt.split("[1] ", 1)[1].split(".", 1)[0]
        return {"replies": [f"{first} [1]."], "meta": [{"model": "stand-in", "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(first.split()) + 1}}]}


def generator() -> object:
    if not os.environ.get("OPENAI_API_KEY"):
        return StandIn()
    from haystack.components.generators import OpenAIGenerator

    return OpenAIGenerator(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))


def pipeline() -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents([
        Document(content="A refund takes 5 business days to reach the original card."),
        Document(content="Store credit is issued at once, instead of a refund."),
        Document(content="Shipping is free for orders over 50 euros."),
    ])
    rag = Pipeline()
    rag.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=3))
    rag.add_component("prompt_builder", PromptBuilder(template=TEMPLATE, required_variables=["question", "documents"]))
    rag.add_component("llm", generator())
    rag.connect("retriever.documents", "prompt_builder.documents")
    rag.connect("prompt_builder.prompt", "llm.prompt")
    return rag


if __name__ == "__main__":
    ragtrace.configure(service_name="haystack-rag", exporter=(sys.argv[1:] or ["console"])[0])  # ragtrace
    ragtrace.instrument()  # ragtrace
    question = "How long does a refund take to reach my card?"
    out = pipeline().run({"retriever": {"query": question}, "prompt_builder": {"question": question}})
    print("A:", out["llm"]["replies"][0])
