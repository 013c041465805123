"""The opening of a script that a test runs in a fresh interpreter (``python -c``): ragtrace
configured to keep its finished spans in memory, in ``exporter``."""

RAGTRACE_IN_MEMORY = (
    "import sys\n"
    "from opentelemetry.sdk.trace import TracerProvider\n"
    "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
    "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
    "import ragtrace\n"
    "exporter = InMemorySpanExporter(); provider = TracerProvider(); provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
    "ragtrace.configure(tracer_provider=provider)\n"
)
