"""The stage handles and span writing: ``rag_pipeline`` and the embed, retrieve, rerank, assemble and
generate stages, the decorators over them, pass-through of the app's streams, per-request state and
the root's figures. Integrations translate their library's events into these handles."""
