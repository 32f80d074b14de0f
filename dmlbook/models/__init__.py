"""Embedding networks: each maps a batch of inputs to a batch of (unit-norm) embeddings."""

from .embedding import L2Normalize, embed
from .mlp import EmbeddingMLP
from .small_cnn import SmallCNN

__all__ = ["EmbeddingMLP", "SmallCNN", "L2Normalize", "embed"]
