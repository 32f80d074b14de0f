"""``PKSampler``: batches of P classes with K images each.

Pair-based losses learn only from the positive pairs in a batch. A batch of ``B`` images drawn
uniformly from a data set with many classes holds almost none, so deep metric learning builds
batches of ``P`` classes times ``K`` images per class (``B = P K``; Hermans et al. 2017,
"In Defense of the Triplet Loss", Sec. 3), which gives every anchor ``K - 1`` positives and
``(P - 1) K`` negatives.

``DistributedPKSampler`` splits the same global batches over the processes of a multi-process
run: each process takes ``P / N`` whole classes, so the loss, which gathers every process's
embeddings (:func:`dmlbook.engine.distributed.gather_batch`), sees the very batch one process
would. Tests: ``tests/data/batches/test_sampler.py``.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import Sampler

from ...core.validation import as_labels

__all__ = ["DistributedPKSampler", "PKSampler"]


def _is_int(x: object) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


def _listed(values: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(v) for v in values[:limit].tolist())
    return shown + (f" and {values.size - limit} more" if values.size > limit else "")


def _checked_sizes(
    batch_size: int, k: int, seed: int, batches_per_epoch: int | None
) -> tuple[int, int]:
    """The argument checks of :class:`PKSampler`: ``(batch_size, k)`` as ints."""
    if not _is_int(k):
        raise TypeError(f"k must be an int, got {k!r}.")
    if not _is_int(batch_size):
        raise TypeError(f"batch_size must be an int, got {batch_size!r}.")
    k, batch_size = int(k), int(batch_size)
    if k < 2:
        raise ValueError(
            f"k={k} is too small: each class needs at least k=2 images in a batch to form a "
            "positive pair; use k >= 2."
        )
    if batch_size < k:
        raise ValueError(
            f"batch_size={batch_size} is smaller than k={k}; use batch_size = P * k for a "
            f"number of classes per batch P >= 1, e.g. {2 * k}."
        )
    if batch_size % k:
        lower = batch_size // k * k
        upper = lower + k
        raise ValueError(
            f"batch_size={batch_size} is not a multiple of k={k}; use e.g. {lower} or {upper}."
        )
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}.")
    if batches_per_epoch is not None and (not _is_int(batches_per_epoch) or batches_per_epoch < 1):
        raise ValueError(
            f"batches_per_epoch must be a positive int or None, got {batches_per_epoch!r}."
        )
    return batch_size, k


def _usable_classes(
    classes: np.ndarray, counts: np.ndarray, batch_size: int, k: int, drop_singletons: bool
) -> np.ndarray:
    """Which ``classes`` (with ``counts`` images) a :class:`PKSampler` draws from: a mask.

    Singleton classes are an error (or, with ``drop_singletons``, left out with a warning);
    too few usable classes for ``P = batch_size // k`` is an error; classes with fewer than
    ``k`` images get a warning (they are sampled with replacement).
    """
    singletons = classes[counts == 1]
    if singletons.size:
        if not drop_singletons:
            first = singletons[0]
            others = (
                f" ({singletons.size} such classes: {_listed(singletons)})"
                if singletons.size > 1
                else ""
            )
            raise ValueError(
                f"class {first} has a single image, so it cannot form a positive pair{others}; "
                "drop singleton classes (e.g. dataset filtering, dataset.subset(...)) or pass "
                "drop_singletons=True to leave them out of the batches."
            )
        warnings.warn(
            f"PKSampler leaves out {singletons.size} class(es) with a single image "
            f"(classes {_listed(singletons)}); they cannot form a positive pair.",
            stacklevel=3,  # the caller of PKSampler(...)
        )
    keep = counts >= 2
    p = batch_size // k
    if p > int(keep.sum()):
        raise ValueError(
            f"batch_size={batch_size} with k={k} needs P={p} distinct classes per batch, but "
            f"the labels have only {int(keep.sum())} usable classes (with 2+ images); "
            f"lower batch_size to at most {int(keep.sum()) * k} or use a larger k."
        )
    few = classes[keep & (counts < k)]
    if few.size:
        warnings.warn(
            f"{few.size} class(es) have fewer than k={k} images (classes {_listed(few)}); "
            f"they are sampled with replacement, so a batch repeats some of their images.",
            stacklevel=3,  # the caller of PKSampler(...)
        )
    return keep


class PKSampler(Sampler[torch.Tensor]):
    """Yield index batches of ``P = batch_size // k`` distinct classes with ``k`` indices each.

    Use it as a batch sampler: ``DataLoader(dataset, batch_sampler=PKSampler(labels, 32, 4))``.

    Parameters
    ----------
    labels : Tensor, ndarray or list of shape (N,)
        Class id of every sample of the data set.
    batch_size : int
        Images per batch, a multiple of ``k``.
    k : int
        Images per class in a batch, at least 2 (a positive pair needs two images).
    seed : int
        Seed of the sampling order. Each epoch's batches are a deterministic function of
        ``(seed, epoch)``; see :meth:`set_epoch`.
    batches_per_epoch : int, optional
        Length of an epoch. Default ``max(1, N // batch_size)``: an epoch shows about ``N``
        images (some of them twice, some not at all, because classes are visited evenly while
        their sizes differ).
    drop_singletons : bool
        Leave out classes with a single image (with one warning) instead of raising.

    Attributes
    ----------
    batch_size, k, p : int
        Batch size, images per class and classes per batch (``p = batch_size // k``).
    seed, epoch : int
        The seed and the epoch the next iteration yields (see :meth:`set_epoch`).
    num_samples : int
        Number of samples the sampler draws from (singletons dropped).
    classes : Tensor
        Sorted class ids it draws from.

    Notes
    -----
    *Classes* are visited in the order of a shuffled class list; when it runs out a new shuffled
    list follows, so within an epoch the numbers of visits of any two classes differ by at most
    one. *Within a class*, indices come from a shuffled queue without replacement that is refilled
    (reshuffled) when exhausted, so an epoch covers the images of a class evenly and no index
    repeats inside one batch. A class with ``2 <= n < k`` images is sampled with replacement: each
    visit takes all its ``n`` images plus ``k - n`` repeats (reported once by a warning).

    Every batch is a ``torch.LongTensor`` of shape ``(batch_size,)``, the ``k`` indices of each
    class consecutive.

    Raises
    ------
    ValueError
        If ``labels`` is not 1-D, ``k < 2``, ``batch_size`` is not a positive multiple of ``k``,
        there are fewer than ``P`` usable classes, or a class has a single image (unless
        ``drop_singletons``).
    """

    def __init__(
        self,
        labels: torch.Tensor | np.ndarray | list[int],
        batch_size: int,
        k: int,
        *,
        seed: int = 0,
        batches_per_epoch: int | None = None,
        drop_singletons: bool = False,
    ) -> None:
        labels_t = as_labels(labels)
        batch_size, k = _checked_sizes(batch_size, k, seed, batches_per_epoch)
        if labels_t.numel() == 0:
            raise ValueError("labels is empty; a PKSampler needs at least P classes of 2+ images.")

        y = labels_t.cpu().numpy()
        classes, counts = np.unique(y, return_counts=True)
        keep = _usable_classes(classes, counts, batch_size, k, drop_singletons)
        p = batch_size // k

        order = np.argsort(y, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(counts)])
        members = [order[bounds[i] : bounds[i + 1]] for i in range(classes.size)]
        self._class_ids = classes[keep]
        self._members: list[np.ndarray] = [m for m, kp in zip(members, keep, strict=True) if kp]
        self.batch_size = batch_size
        self.k = k
        self.p = p
        self.seed = int(seed)
        self.num_samples = int(counts[keep].sum())
        self._batches_per_epoch = batches_per_epoch
        self.epoch = 0

    @property
    def classes(self) -> torch.Tensor:
        """Sorted class ids that the sampler draws from (singletons dropped)."""
        return torch.from_numpy(self._class_ids.copy())

    def __len__(self) -> int:
        """Batches per epoch."""
        if self._batches_per_epoch is not None:
            return self._batches_per_epoch
        return max(1, self.num_samples // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose batches the next iteration yields.

        The batches of epoch ``e`` depend only on ``(seed, e)``, so training resumed at epoch
        ``e`` sees the same batches as an uninterrupted run. Without a call, every iteration
        repeats the current epoch (0 at first).
        """
        if not _is_int(epoch) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative int, got {epoch!r}.")
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[torch.Tensor]:
        rng = np.random.default_rng([self.seed, self.epoch])
        class_queue: deque[int] = deque()
        member_queues: dict[int, deque[int]] = {}
        for _ in range(len(self)):
            chosen = self._take_distinct(
                class_queue, self.p, lambda: rng.permutation(len(self._members))
            )
            parts = [self._draw(c, member_queues, rng) for c in chosen]
            yield torch.from_numpy(np.concatenate(parts).astype(np.int64))

    @staticmethod
    def _take_distinct(queue: deque[int], count: int, refill) -> list[int]:
        """Pop ``count`` distinct items from ``queue``, appending ``refill()`` when it runs dry.

        Items skipped because they were already taken go back to the front of the queue, so
        they are taken next time and every item is taken once per refill.
        """
        out: list[int] = []
        seen: set[int] = set()
        skipped: list[int] = []
        while len(out) < count:
            if not queue:
                queue.extend(int(i) for i in refill())
            item = queue.popleft()
            if item in seen:
                skipped.append(item)
            else:
                out.append(item)
                seen.add(item)
        queue.extendleft(reversed(skipped))
        return out

    def _draw(self, c: int, queues: dict[int, deque[int]], rng: np.random.Generator) -> np.ndarray:
        members = self._members[c]
        if members.size < self.k:  # with replacement: every image once, plus random repeats
            extra = rng.choice(members, size=self.k - members.size, replace=True)
            return np.concatenate([rng.permutation(members), extra])
        queue = queues.setdefault(c, deque())
        return np.asarray(self._take_distinct(queue, self.k, lambda: rng.permutation(members)))


class DistributedPKSampler(PKSampler):
    """One process's share of :class:`PKSampler`'s global batches: ``P / world_size`` classes.

    Every process builds the same global sequence of ``P x K`` batches (the same labels, seed
    and epoch) and takes the ``rank``-th contiguous slice of ``batch_size / world_size``
    indices; because the ``k`` indices of a class are consecutive, the slices hold whole,
    distinct classes. Concatenated in rank order, the slices are exactly the batch of a
    one-process :class:`PKSampler`, whatever the number of processes: a run may resume on another
    number of processes and see the same batches.

    Parameters
    ----------
    labels, batch_size, k, seed, batches_per_epoch, drop_singletons
        As :class:`PKSampler`; ``batch_size`` is the *global* batch ``P x K``.
    rank : int
        This process, ``0 <= rank < world_size``.
    world_size : int
        Number of processes; must divide ``P = batch_size // k``.

    Attributes
    ----------
    local_batch_size : int
        Indices per process and batch, ``batch_size // world_size``.

    Raises
    ------
    ValueError
        As :class:`PKSampler`, and if ``world_size`` does not divide ``P`` or ``rank`` is out of
        range.
    """

    def __init__(
        self,
        labels: torch.Tensor | np.ndarray | list[int],
        batch_size: int,
        k: int,
        *,
        rank: int,
        world_size: int,
        seed: int = 0,
        batches_per_epoch: int | None = None,
        drop_singletons: bool = False,
    ) -> None:
        super().__init__(
            labels,
            batch_size,
            k,
            seed=seed,
            batches_per_epoch=batches_per_epoch,
            drop_singletons=drop_singletons,
        )
        if not _is_int(world_size) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}.")
        if not _is_int(rank) or not 0 <= rank < world_size:
            raise ValueError(f"rank must be an int in [0, {world_size}), got {rank!r}.")
        if self.p % world_size:
            lower = max(self.p // world_size, 1) * world_size
            raise ValueError(
                f"batch_size={self.batch_size} with k={self.k} has P={self.p} classes per batch, "
                f"which do not split evenly over {world_size} processes; use P a multiple of "
                f"{world_size}, e.g. batch_size={lower * self.k} or "
                f"{(lower + world_size) * self.k}."
            )
        self.rank, self.world_size = int(rank), int(world_size)
        self.local_batch_size = self.batch_size // self.world_size

    def __iter__(self) -> Iterator[torch.Tensor]:
        start = self.rank * self.local_batch_size
        for batch in super().__iter__():
            yield batch[start : start + self.local_batch_size]
