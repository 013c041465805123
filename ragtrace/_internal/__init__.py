"""ragtrace's private implementation. Nothing here is public API: import from ``ragtrace``."""
