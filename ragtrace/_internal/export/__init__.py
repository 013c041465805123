"""What the exporters in ``ragtrace.exporters`` build on: OTLP/JSON encoding of spans (no protobuf),
and Phoenix annotations read from finished spans."""
