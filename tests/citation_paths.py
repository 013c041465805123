"""One RAG request measured on every path that can read it: the same documents, the same prompt
the app built and the same answer, as *declared* (``ctx.place``), *located* (``ctx.observe``) and
*inferred* (no ragtrace in the app: OpenInference-shaped spans exported to OTLP/JSON and read back
by ``ragtrace report``'s reader). The citation-resolution rule is one, so the figures must agree.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragtrace
from ragtrace._internal import names
from ragtrace.cli.diagnostics import Diagnostics
from ragtrace.cli.foreign import infer
from ragtrace.cli.reader import TraceReader
from ragtrace.exporters import JsonLinesExporter

Fragment = tuple[dict[str, Any], str, str]  # (document, the text the prompt shows for it, its label)


def measured(
    method: str, docs: Sequence[dict[str, Any]], prompt: Any, answer: str, fragments: Sequence[Fragment] = (), shown: Sequence[dict[str, Any]] | None = None
) -> tuple[dict[str, Any], str | None]:
    """(figures, status) of one request measured by ``method``: declared needs ``fragments``;
    located searches ``shown`` (default: ``docs``) in the prompt."""
    if method == "inferred":
        return _inferred(docs, prompt, answer)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with ragtrace.rag_pipeline("paths", query="q", tracer_provider=provider) as run:
        with ragtrace.retrieve("q", tracer_provider=provider) as r:
            r.record(list(docs))
        with ragtrace.assemble(tracer_provider=provider) as ctx:
            if method == "declared":
                for doc, text, label in fragments:
                    ctx.place(doc, text, label=label)
                ctx.set_prompt(prompt)
            else:
                ctx.observe(list(docs if shown is None else shown), prompt)
        with ragtrace.generate(model="m", prompt=prompt, tracer_provider=provider) as g:
            g.record(answer)
    provider.shutdown()
    return dict(run.metrics), run.status


def _inferred(docs: Sequence[dict[str, Any]], prompt: Any, answer: str) -> tuple[dict[str, Any], str | None]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "oi.jsonl"
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
        tracer = provider.get_tracer("openinference.instrumentation.langchain")
        with tracer.start_as_current_span("RetrievalQA") as root:
            root.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_CHAIN)
            root.set_attribute(names.OI_INPUT_VALUE, "q")
            with tracer.start_as_current_span("VectorStoreRetriever") as retriever:
                retriever.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_RETRIEVER)
                for index, doc in enumerate(docs):
                    retriever.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_ID), doc["id"])
                    retriever.set_attribute(names.indexed(names.OI_RETRIEVAL_DOCUMENTS, index, names.OI_DOCUMENT_CONTENT), doc["content"])
            with tracer.start_as_current_span("ChatModel") as llm:
                llm.set_attribute(names.OI_SPAN_KIND, names.OI_KIND_LLM)
                if isinstance(prompt, str):
                    llm.set_attribute(names.OI_INPUT_VALUE, prompt)
                else:
                    for index, message in enumerate(prompt):
                        llm.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, index, names.OI_MESSAGE_ROLE), message["role"])
                        llm.set_attribute(names.indexed(names.OI_LLM_INPUT_MESSAGES, index, names.OI_MESSAGE_CONTENT), message["content"])
                llm.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_ROLE), "assistant")
                llm.set_attribute(names.indexed(names.OI_LLM_OUTPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT), answer)
        provider.shutdown()
        (trace,) = list(TraceReader([path], Diagnostics(io.StringIO())))
        inference = infer(trace)
        assert inference is not None
        row = inference.row
        return dict(row.figures), ",".join(row.status) or None
