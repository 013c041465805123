"""Framework integrations: one module per library, each a ``BaseInstrumentor`` translating the
framework's own events into ragtrace's stage handles."""
