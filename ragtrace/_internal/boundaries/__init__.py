"""Request boundaries: which span is a request's root (automatic roots, ``ragtrace.boundary``), and
pipelines that cross processes (``inject`` / ``continue_pipeline`` carriers)."""
