"""ragtrace: drop-in OpenTelemetry instrumentation for RAG pipelines."""

__all__: list[str] = []
