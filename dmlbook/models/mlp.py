"""A multilayer perceptron that embeds flat feature vectors (the 8x8 digits: 64 features)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..core.validation import is_integer
from .embedding import L2Normalize, check_positive_int

__all__ = ["EmbeddingMLP"]


class EmbeddingMLP(nn.Module):
    """``Linear -> ReLU`` blocks, then ``Linear`` to ``dim`` and an optional L2 normalisation.

    Parameters
    ----------
    in_features : int
        Length of each input vector (64 for the 8x8 digits).
    hidden : sequence of int
        Widths of the hidden layers; ``()`` gives a linear embedding ``f(x) = W x + b``.
    dim : int
        Embedding dimension ``d``.
    normalize : bool
        End with :class:`~dmlbook.models.embedding.L2Normalize`, so that every embedding lies on
        the unit sphere and ``<f_i, f_j>`` is the cosine similarity ``S_ij``. ``False`` returns
        the raw features.

    Examples
    --------
    >>> model = EmbeddingMLP(in_features=64, hidden=(128,), dim=32)
    >>> model(torch.zeros(5, 64)).shape
    torch.Size([5, 32])
    """

    def __init__(
        self,
        in_features: int = 64,
        hidden: Sequence[int] = (128,),
        dim: int = 32,
        normalize: bool = True,
    ) -> None:
        super().__init__()
        self.in_features = check_positive_int(in_features, "in_features")
        self.dim = check_positive_int(dim, "dim")
        if is_integer(hidden):
            hidden = (hidden,)
        widths = [check_positive_int(h, f"hidden[{i}]") for i, h in enumerate(hidden)]
        self.hidden = tuple(widths)
        self.normalize = bool(normalize)
        layers: list[nn.Module] = []
        width = self.in_features
        for h in widths:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, self.dim)
        self.norm = L2Normalize() if self.normalize else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map inputs of shape (N, in_features) to embeddings of shape (N, dim)."""
        if x.ndim != 2 or x.shape[1] != self.in_features:
            raise ValueError(
                f"EmbeddingMLP expects inputs of shape (N, {self.in_features}), got "
                f"{tuple(x.shape)}. Flatten each sample into one row (x.flatten(1)) or build the "
                "model with the matching in_features."
            )
        return self.norm(self.head(self.body(x)))
