"""The pure core: everything that computes without OpenTelemetry.

Chunk normalisation, the context builder and declared placements, the prompt search behind located
and inferred inclusion, citation syntax, parsing and the one resolution rule, the figures, the
tokenizers and keyed digests. The SDK's stages and the offline report (``ragtrace report``) both
call it, so a figure is defined here and nowhere else. Nothing here imports ``opentelemetry``,
``wrapt`` or any ragtrace module outside ``core`` (an import-linter contract in ``make test``).
"""
