"""The LlamaIndex integration's cost: added time per query, side by side in one run.

One ``VectorStoreIndex(...).as_query_engine()`` over 8 nodes (``MockEmbedding``, top 4) answered by
a small ``CustomLLM`` that cites its first source, queried ``CALLS`` times per round in four
modes, interleaved over ``REPEATS`` rounds (``bench/interleaved.py``): ``plain`` (uninstrumented),
``ragtrace`` (``ragtrace.instrument("llama_index")``), ``openinference`` (OpenInference's
``LlamaIndexInstrumentor``, installed in the project venv by the test extra) and ``both``. Every
mode exports to the same SDK TracerProvider with a processor that drops the spans. The modes are
switched on and off before every round, so a leak across instrument/uninstrument cycles would
show as a growing cost (tests/integrations/test_llama_index.py counts it). Figures: medians of
per-round wall time per query and their ratios. No target: figures to report (docs/integrations.md).

    python bench/bench_llamaindex.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import re  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor as OpenInferenceInstrumentor  # noqa: E402
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider  # noqa: E402

import ragtrace  # noqa: E402
from interleaved import medians, table  # noqa: E402

warnings.simplefilter("ignore")  # OpenInference's pydantic deprecation warning on every LLM call
CALLS, REPEATS, WARMUP = 20, 9, 10
MODES = ("plain", "ragtrace", "openinference", "both")
QUESTION = "How long does a refund take?"


class Drop(SpanProcessor):
    """Ends spans and keeps nothing: the exporter's cost is not the instrumentation's."""


class CitingLLM(CustomLLM):
    """Answers by citing the first ``source:`` line of its prompt."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="citing-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        found = re.search(r"source: (\S+)", prompt)
        return CompletionResponse(text=f"It takes 5 business days [{found.group(1) if found else '?'}].")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def main() -> int:
    provider = TracerProvider()
    provider.add_span_processor(Drop())
    ragtrace.configure(tracer_provider=provider, hash_key="bench")
    nodes = [TextNode(id_=f"p{i}", text=f"Policy {i}: refunds take {i} business days.", metadata={"source": f"p{i}"}) for i in range(8)]
    engine = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8)).as_query_engine(llm=CitingLLM(), similarity_top_k=4)

    def switch(mode: str) -> None:
        ragtrace.uninstrument("llama_index")
        if OpenInferenceInstrumentor().is_instrumented_by_opentelemetry:
            OpenInferenceInstrumentor().uninstrument()
        if mode in ("ragtrace", "both"):
            ragtrace.instrument("llama_index")
        if mode in ("openinference", "both"):
            OpenInferenceInstrumentor().instrument(tracer_provider=provider)

    median = medians(MODES, switch, lambda: engine.query(QUESTION), calls=CALLS, repeats=REPEATS, warmup=WARMUP)
    table(f"LlamaIndex query engine, {CALLS} queries x {REPEATS} rounds per mode (median wall time per query)", median)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
