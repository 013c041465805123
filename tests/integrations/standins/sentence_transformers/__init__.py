"""A stand-in for the ``sentence_transformers`` package, for ragtrace's tests only: the real one
needs PyTorch (gigabytes) and model weights from a hub. It exposes ``CrossEncoder`` where the real
package does; see ``cross_encoder``."""

from .cross_encoder import CrossEncoder

__all__ = ["CrossEncoder"]
