"""``RandomBatchSampler``: batches drawn uniformly from all samples, whatever their class.

Liu et al. ("The General Pair-based Weighting Loss for Deep Metric Learning", Sec. III-C,
"Mini-batch construction") name two ways to build a mini-batch: the *random sampler*, where "all
samples and classes are randomly sampled", and the *PK sampler* (:class:`~dmlbook.data.PKSampler`,
P classes times K images). Their Table II trains the same pair-based baseline with each and
reports Recall@1 52.0 % (random) against 65.5 % (PK) on CUB-200-2011. This sampler is the first
of the two, so that the comparison can be rerun: ``fit(..., sampler="random")``.

An epoch is one pass over a random permutation of the samples, cut into batches of
``batch_size`` (a last, shorter batch is dropped); with ``batches_per_epoch`` set, the next
permutation continues where one runs out. A batch may hold several images of one class or none;
with many classes most anchors have no positive in their batch (Omniglot's 136 training
characters, 20 drawings each, batch 80: about 0.55 other drawings of an anchor's character per
batch on average), which is what the PK sampler is for.

``bench/omniglot_compare.py`` (its ``sampler`` phase) and Chapter 15 rerun Table II with it on
Omniglot. Tests: ``tests/data/batches/test_random_sampler.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import Sampler

from ...core.validation import as_labels

__all__ = ["RandomBatchSampler"]


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


class RandomBatchSampler(Sampler[torch.Tensor]):
    """Yield index batches of ``batch_size`` samples drawn without regard to their class.

    Parameters
    ----------
    labels : Tensor, ndarray or list of shape (N,)
        Class id of every sample (only their number is used; kept for the same call as
        :class:`~dmlbook.data.PKSampler`).
    batch_size : int
        Samples per batch, at most ``N``.
    seed : int
        Each epoch's batches are a deterministic function of ``(seed, epoch)``.
    batches_per_epoch : int, optional
        Length of an epoch; default ``N // batch_size`` (one pass over the data).

    Attributes
    ----------
    batch_size, seed, epoch, num_samples : int

    Examples
    --------
    >>> sampler = RandomBatchSampler([0, 0, 1, 1, 2, 2], batch_size=3, seed=0)
    >>> [len(b) for b in sampler]
    [3, 3]
    """

    def __init__(
        self,
        labels: torch.Tensor | np.ndarray | list[int],
        batch_size: int,
        *,
        seed: int = 0,
        batches_per_epoch: int | None = None,
    ) -> None:
        n = int(as_labels(labels).numel())
        self.batch_size = _positive_int(batch_size, "batch_size")
        if n < self.batch_size:
            raise ValueError(
                f"batch_size={batch_size} is larger than the {n} samples; lower it to at most {n}."
            )
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}.")
        if batches_per_epoch is not None:
            batches_per_epoch = _positive_int(batches_per_epoch, "batches_per_epoch")
        self.num_samples = n
        self.seed = int(seed)
        self._batches_per_epoch = batches_per_epoch
        self.epoch = 0

    def __len__(self) -> int:
        """Batches per epoch."""
        if self._batches_per_epoch is not None:
            return self._batches_per_epoch
        return self.num_samples // self.batch_size

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose batches the next iteration yields (as ``PKSampler``)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int | np.integer) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative int, got {epoch!r}.")
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[torch.Tensor]:
        rng = np.random.default_rng([self.seed, self.epoch])
        order = np.empty(0, dtype=np.int64)
        for _ in range(len(self)):
            if order.size < self.batch_size:  # the rest of a pass is dropped, a new one begins
                order = rng.permutation(self.num_samples)
            batch, order = order[: self.batch_size], order[self.batch_size :]
            yield torch.from_numpy(batch.astype(np.int64))
