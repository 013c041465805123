"""A LlamaIndex app for the integration tests, built as its docs build one:
``VectorStoreIndex`` over ``MockEmbedding``, answered by ``MockLLM`` or by a small ``CustomLLM``
that cites the first source it is shown, and the checks one query's trace must pass.

``MockEmbedding`` gives every node the same score, so which nodes are retrieved (and in which
order) is arbitrary: every expected figure is computed from what the query actually retrieved.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import MetadataMode, TextNode

QUESTION = "How long does a refund take?"
TEXTS = {
    "kb-refunds": "Refunds reach the original card within 5 business days.",
    "kb-credit": "Store credit is issued immediately instead of a refund.",
    "kb-shipping": "Shipping is free for orders over 50 euros.",
    "kb-returns": "Returns are accepted within 30 days of delivery.",
}


class CitingLLM(CustomLLM):
    """Answers by citing the first ``source:`` line of its prompt, as ``[id]``; streams word by word."""

    context_window: int = 3900
    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="citing-llm", context_window=self.context_window, num_output=20)

    def answer(self, prompt: str) -> str:
        self.prompts.append(prompt)
        sources = re.findall(r"source: (\S+)", prompt)
        return f"It takes 5 business days [{sources[0]}]." if sources else "I don't know."

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.answer(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        text = self.answer(prompt)

        def pieces() -> Any:
            so_far = ""
            for piece in re.findall(r"\S+\s*", text):
                so_far += piece
                yield CompletionResponse(text=so_far, delta=piece)

        return pieces()


class BreakingLLM(CitingLLM):
    """Streams one word, then the connection breaks."""

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        def pieces() -> Any:
            yield CompletionResponse(text="It ", delta="It ")
            raise ConnectionError("the stream broke")

        return pieces()


def index(scale: int = 1) -> VectorStoreIndex:
    nodes = [TextNode(id_=key, text=(text + " ") * scale, metadata={"source": key}) for key, text in TEXTS.items()]
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))


def metrics(span) -> dict[str, Any]:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def check_one_call(spans, response, llm: CitingLLM, *, root_name: str = "invoke_workflow RetrieverQueryEngine", nested: bool = True) -> None:
    """The default path: one LLM call whose context is the stuffed nodes, declared exactly;
    ``nested``: the stages are the root's children and the embedding the retrieval's (not so
    beside an instrumentor whose spans are current in between)."""
    retrieved = [n.node_id for n in response.source_nodes]
    root = spans.one("pipeline")
    assert root.name == root_name
    by_id = {s.context.span_id: s for s in spans.all()}
    for stage in ("retrieve", "assemble", "generate") if nested else ():
        assert spans.one(stage).parent.span_id == root.context.span_id, stage
    if nested:
        assert by_id[spans.one("embed").parent.span_id] is spans.one("retrieve")

    retrieval = spans.one("retrieve").attributes
    assert list(retrieval["rag.retrieval.chunk_ids"]) == retrieved
    assert "rag.retrieval.ranks" not in retrieval  # 1..2
    documents = json.loads(retrieval["gen_ai.retrieval.documents"])
    assert len(documents) == 2 and all(math.isclose(d["score"], n.score) for d, n in zip(documents, response.source_nodes))

    (prompt,) = llm.prompts
    assembled = spans.one("assemble").attributes
    assert assembled["rag.context.inclusion_method"] == "declared"
    assert list(assembled["rag.context.chunk_ids"]) == retrieved
    renderings = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in response.source_nodes]
    starts = [prompt.index(text) for text in renderings]  # the test's own oracle: each rendering is in the prompt once
    assert list(assembled["rag.context.char_starts"]) == starts
    assert list(assembled["rag.context.char_ends"]) == [s + len(t) for s, t in zip(starts, renderings)]

    generated = spans.one("generate")
    assert generated.name == "chat citing-llm"
    assert generated.attributes["rag.generation.role"] == "answer"
    assert list(generated.attributes["rag.citation.ids"]) == [retrieved[0]]  # the first source it was shown
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)
    assert (got["recall_proxy"], got["context_precision"], got["context_utilization"]) == (0.5, 1.0, 0.5)
    assert list(got["cited_positions"]) == [1]
