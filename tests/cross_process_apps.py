"""The pipeline the cross-process tests split, and the service that answers it in another process.

Process A retrieves, reranks and assembles (``assemble_part``), then hands the prompt over; the
answering side runs ``answer_part`` inside ``ragtrace.continue_pipeline``. ``one_process`` runs the
very same pipeline in one process, the golden the other side's figures must equal. As a script
this module is service B: an HTTP server on 127.0.0.1 whose spans go to a JSON-lines file
(``serve``), or the worker of a multiprocessing queue (``queue_worker``).
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import ragtrace
from ragtrace.exporters.jsonl import JsonLinesExporter

MARKER = "ZEBRA-7781"  # planted in the query, every chunk's text and every title: never in a redact-mode record
QUESTION = f"How long do refunds take for order {MARKER}?"
# (id or None for an id-less chunk, title, text); the last one repeats the first's text under no id
DOCS = [
    ("kb-refunds", f"Refund timing {MARKER}", f"Refunds reach the card in 5 business days ({MARKER})."),
    ("kb-credit", f"Store credit {MARKER}", f"Store credit is issued at once ({MARKER})."),
    (None, f"Shipping {MARKER}", f"Shipping is free over 50 euros ({MARKER})."),
    ("kb-returns", f"Returns {MARKER}", f"Returns are accepted for 30 days ({MARKER})."),
    ("kb-warranty", f"Warranty {MARKER}", f"The warranty lasts two years ({MARKER})."),
    (None, f"Refund timing copy {MARKER}", f"Refunds reach the card in 5 business days ({MARKER})."),
]


def documents(count: int | None = None) -> list[dict[str, Any]]:
    """The retriever's results, best first (``count`` cycles through made-up ids for big records)."""
    if count is None:
        return [
            {**({"id": doc_id} if doc_id else {}), "title": title, "content": text, "score": round(0.95 - 0.1 * index, 2)}
            for index, (doc_id, title, text) in enumerate(DOCS)
        ]
    return [{"id": f"00000000-0000-4000-8000-{index:012d}", "title": f"T{index}", "content": f"chunk {index} {MARKER}", "score": 0.5} for index in range(count)]


_TITLES = {text: title for _, title, text in reversed(DOCS)}  # the first title of a repeated text


def _title(chunk: Any, position: int) -> str:
    return _TITLES[chunk.content]


LABELLERS: dict[str, Any] = {"index": "index", "title": _title}


def answer_for(prompt: str, labeller: str) -> str:
    """The fake model: cites the first and third sources it was shown, and a source that doesn't exist."""
    if labeller == "title":
        return f"Refunds take 5 business days [Refund timing {MARKER}]. Shipping is free [shipping {MARKER}]. See also [9]."
    return "Refunds take 5 business days [1]. Shipping is free [3]. See also [9]."


def assemble_part(labeller: str = "index", count: int | None = None) -> str:
    """Inside a pipeline: retrieve, rerank, assemble; returns the prompt."""
    docs = documents(count)
    with ragtrace.retrieve(QUESTION, data_source="kb", top_k=len(docs)) as found:
        found.record(docs)
    with ragtrace.rerank("cross-encoder", top_n=len(docs) - 1) as kept:
        kept.record(docs[:-1] if count is None else docs)
    with ragtrace.assemble(max_tokens=4000, labeller=LABELLERS[labeller]) as context:
        for doc in docs[:3] + docs[-1:] if count is None else docs:
            context.add(doc)
        prompt = context.render(question=QUESTION)
    return prompt  # type: ignore[return-value]


def answer_part(prompt: str, labeller: str) -> str:
    with ragtrace.generate("fake-llm", "local", prompt=prompt) as generation:
        answer = answer_for(prompt, labeller)
        generation.record(answer)
    return answer


def one_process(labeller: str, mode: str) -> dict[str, Any]:
    """The golden: the same pipeline with the answer generated where the prompt was built."""
    with ragtrace.rag_pipeline("support-qa", query=QUESTION, version="v3", route="kb", capture_content=mode) as run:
        answer_part(assemble_part(labeller), labeller)
    return run.metrics


def answer_request(carrier: Any, body: dict[str, Any]) -> dict[str, Any]:
    """What B does with one hand-off: answer inside continue_pipeline, and say what it measured."""
    with ragtrace.continue_pipeline(carrier, name="support-qa") as run:
        answer = answer_part(body["prompt"], body["labeller"])
    return {"answer": answer, "metrics": run.metrics, "status": run.status, "trace_id": run.trace_id, "span_id": run.span_id}


def telemetry(spans_path: str | None) -> InMemoryMetricReader:
    """The real SDK: spans to a JSON-lines file, metrics read in memory."""
    provider = TracerProvider()
    if spans_path:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(spans_path)))
    reader = InMemoryMetricReader()
    ragtrace.configure(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]))
    return reader


def figure_points(reader: InMemoryMetricReader) -> list[dict[str, Any]]:
    """Every rag.recall_proxy point: its attributes, count and sum."""
    data = reader.get_metrics_data()
    points = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "rag.recall_proxy":
                    points += [{"attributes": dict(p.attributes), "count": p.count, "sum": p.sum} for p in metric.data.data_points]
    return points


def serve(spans_path: str) -> None:
    """Service B: POST /answer answers inside continue_pipeline(self.headers); GET /metrics."""
    reader = telemetry(spans_path)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

        def _reply(self, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            reply = answer_request(self.headers, body)
            reply["received"] = {"ragtrace-context": self.headers.get("ragtrace-context"), "baggage": self.headers.get("baggage")}
            self._reply(reply)

        def do_GET(self) -> None:  # noqa: N802
            self._reply(figure_points(reader))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)  # the test reads the port from stdout
    server.serve_forever()


def queue_worker(inbox: Any, outbox: Any, spans_path: str) -> None:
    """The generating side of a queue hand-off: the record travels in the message."""
    reader = telemetry(spans_path)
    for message in iter(inbox.get, None):
        reply = answer_request(message["attributes"], message["body"])
        reply["points"] = figure_points(reader)
        outbox.put(reply)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", required=True)
    serve(parser.parse_args(argv).spans)


if __name__ == "__main__":
    main(sys.argv[1:])
