"""The LangChain integration's cost: added time per chain call, side by side in one run.

One LCEL RAG chain (InMemoryVectorStore with DeterministicFakeEmbedding over 8 documents,
retriever | format_docs | chat prompt | FakeListChatModel | parser), called ``CALLS`` times per
round in five modes, interleaved over ``REPEATS`` rounds: ``plain`` (uninstrumented),
``empty-handler`` (a callback handler that does nothing, registered the way ragtrace's is: the
floor any callback-based instrumentor pays LangChain for dispatching its events),
``ragtrace`` (``ragtrace.instrument("langchain")``), ``openinference`` (OpenInference's
``LangChainInstrumentor``) and ``both``. Every mode exports to the same SDK TracerProvider with a
processor that drops the spans, so the figures are the instrumentation's own work plus span
creation. Figures: medians of per-round wall time per call (the chain runs its parallel step in
a thread pool, so CPU time of one thread would miss work), and ratios of the round medians
(the rotation and the table: ``bench/interleaved.py``).
No target: figures to report (docs/integrations.md).

    python bench/bench_langchain.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from contextvars import ContextVar  # noqa: E402

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.language_models import FakeListChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from openinference.instrumentation.langchain import LangChainInstrumentor as OpenInferenceInstrumentor  # noqa: E402
from langchain_core.tracers.context import register_configure_hook  # noqa: E402
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider  # noqa: E402

import ragtrace  # noqa: E402
from interleaved import medians, table  # noqa: E402

# OpenInference trips LangChain's ".text() as a method" deprecation warning on every call, inside
# LangChain's own always-show filter: not shown here, so the table stays readable
warnings.showwarning = lambda *args, **kwargs: None

CALLS = 40  # chain calls per mode per round
REPEATS = 9
WARMUP = 20
MODES = ("plain", "empty-handler", "ragtrace", "openinference", "both")
QUESTION = "How long does a refund take?"


class Drop(SpanProcessor):
    """Ends spans and keeps nothing: the exporter's cost is not the instrumentation's."""


class Empty(BaseCallbackHandler):
    """Receives every event and does nothing with it."""

    run_inline = True


EMPTY = Empty()
empty_on = {"on": False}
register_configure_hook(type("Switch", (), {"get": lambda self: EMPTY if empty_on["on"] else None})(), True)  # type: ignore[arg-type]


def chain():
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(page_content=f"Policy {i}: refunds take {i} business days.", id=f"p{i}") for i in range(8)])
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from the sources, citing [n].\n\n{context}"), ("human", "{question}")])
    format_docs = lambda docs: "\n\n".join(f"[{i}] {d.page_content}" for i, d in enumerate(docs, 1))  # noqa: E731
    llm = FakeListChatModel(responses=["Refunds take 3 business days [1]."])
    return {"context": store.as_retriever(search_kwargs={"k": 4}) | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()


def switch(mode: str, provider: TracerProvider) -> None:
    ragtrace.uninstrument("langchain")
    empty_on["on"] = mode == "empty-handler"
    OpenInferenceInstrumentor().uninstrument() if OpenInferenceInstrumentor().is_instrumented_by_opentelemetry else None
    if mode in ("ragtrace", "both"):
        ragtrace.instrument("langchain")
    if mode in ("openinference", "both"):
        OpenInferenceInstrumentor().instrument(tracer_provider=provider)


def main() -> int:
    provider = TracerProvider()
    provider.add_span_processor(Drop())
    ragtrace.configure(tracer_provider=provider)
    app = chain()
    median = medians(MODES, lambda mode: switch(mode, provider), lambda: app.invoke(QUESTION), calls=CALLS, repeats=REPEATS, warmup=WARMUP)
    table(f"LangChain LCEL RAG chain, {CALLS} calls x {REPEATS} rounds per mode (median wall time per call)", median)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
