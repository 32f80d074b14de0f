"""``CachedImageDataset``: a split read from the decoded-image cache, one batch at a time.

:meth:`dmlbook.data.ImageListDataset.cached` builds the cache (:mod:`dmlbook.data.cache.image_cache`)
and returns this data set: ``ds[i]`` is ``(image, label)``, and :meth:`CachedImageDataset.batches`
reads whole batches (one memory-map gather each, pinned and prefetched for a GPU), the input of
the batched transforms of :mod:`dmlbook.data.batches.augment`. Tested in
``tests/data/cache/test_cached_dataset.py``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset

from ...core.validation import as_labels, is_integer
from ..base.dataset import ClassStats

if TYPE_CHECKING:  # pragma: no cover
    from .image_cache_file import ImageCache

__all__ = ["Batch", "CachedImageDataset"]


class Batch(NamedTuple):
    """One batch read from a :class:`CachedImageDataset`.

    Attributes
    ----------
    images : Tensor of shape (B, 3, size, size), uint8
        RGB, in channels-last memory layout (a permuted view of ``(B, size, size, 3)``).
    labels : Tensor of shape (B,), int64
    regions : Tensor of shape (B, 4), int64, on the CPU
        ``(top, left, height, width)`` of the image pixels in each cell; pass them to the
        transforms of :mod:`dmlbook.data.batches.augment` (they matter for ``fit="pad"``).
    indices : Tensor of shape (B,), int64, on the CPU
        Positions of the images in the data set.
    """

    images: torch.Tensor
    labels: torch.Tensor
    regions: torch.Tensor
    indices: torch.Tensor


_END = object()


@dataclass(eq=False, repr=False)
class CachedImageDataset(ClassStats, Dataset):
    """A data split backed by an :class:`ImageCache`: fixed-size ``uint8`` images and labels.

    Built by :meth:`dmlbook.data.ImageListDataset.cached`. ``ds[i]`` is ``(image, label)`` with a
    ``uint8`` ``(3, size, size)`` image; :meth:`batch` and :meth:`batches` read whole batches
    (one memory-map gather each), ready for :mod:`dmlbook.data.batches.augment`.

    Parameters
    ----------
    cache : ImageCache
    labels : Tensor of shape (N,), int64
    name, split : str
    class_names : list of str, optional
    metadata : dict of str to Tensor
        Per-image values with N rows.
    rows : Tensor of shape (N,), optional
        Row of the cache of each image (default ``arange(len(cache))``); :meth:`subset` uses it.
    """

    cache: ImageCache
    labels: torch.Tensor
    name: str
    split: str
    class_names: list[str] | None = None
    metadata: dict[str, torch.Tensor] = field(default_factory=dict)
    rows: torch.Tensor | None = None

    def __post_init__(self) -> None:
        self.labels = as_labels(self.labels)
        if self.rows is None:
            self.rows = torch.arange(len(self.cache))
        self.rows = torch.as_tensor(self.rows).long()
        if self.rows.shape != self.labels.shape:
            raise ValueError(
                f"{self.labels.shape[0]} labels for {self.rows.shape[0]} cached images; pass one "
                "label per image, in the order of the cache."
            )
        self._rows_np = self.rows.numpy()
        self._regions = torch.from_numpy(self.cache.regions)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def image_size(self) -> int:
        """Side of the cached images in pixels."""
        return self.cache.size

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(3, size, size)``."""
        return (3, self.cache.size, self.cache.size)

    @property
    def regions(self) -> torch.Tensor:
        """``(N, 4)`` ``(top, left, height, width)`` of the image pixels in each cell."""
        return self._regions[self.rows]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(image, label)``: a ``uint8`` ``(3, size, size)`` tensor and the class id."""
        row = int(self._rows_np[int(index)])
        img = torch.from_numpy(np.array(self.cache.images[row]))
        return img.permute(2, 0, 1), self.labels[index]

    def batch(
        self,
        indices: torch.Tensor | Sequence[int] | np.ndarray,
        device: torch.device | str | None = None,
    ) -> Batch:
        """Read the images at ``indices`` (one gather from the memory map) as a :class:`Batch`.

        With a CUDA ``device`` the images and labels are pinned and transferred without blocking;
        ``regions`` and ``indices`` stay on the CPU.
        """
        idx = torch.as_tensor(
            np.asarray(indices) if not isinstance(indices, torch.Tensor) else indices
        )
        idx = idx.long().flatten().cpu()
        host = self._read(idx)
        return self._to_device(host, device)

    def _read(self, idx: torch.Tensor) -> Batch:
        rows = self._rows_np[idx.numpy()]
        images = torch.from_numpy(self.cache.images[rows]).permute(0, 3, 1, 2)
        return Batch(images, self.labels[idx], self._regions[rows], idx)

    @staticmethod
    def _to_device(batch: Batch, device: torch.device | str | None) -> Batch:
        """Move images and labels to ``device``; regions and indices stay on the CPU.

        The transforms compute crop windows on the CPU, so regions on the device would have to
        be read back, a device sync per batch.
        """
        if device is None:
            return batch
        device = torch.device(device)
        if device.type == "cpu":
            return batch
        pin = device.type == "cuda"
        images, labels = (
            (t.pin_memory() if pin else t).to(device, non_blocking=pin)
            for t in (batch.images, batch.labels)
        )
        return Batch(images, labels, batch.regions, batch.indices)

    def batches(
        self,
        sampler: Iterable[torch.Tensor | Sequence[int]] | int,
        *,
        device: torch.device | str | None = None,
        prefetch: int = 2,
    ) -> Iterator[Batch]:
        """Iterate over batches, reading the next ``prefetch`` ones in a background thread.

        Parameters
        ----------
        sampler : iterable of index batches, or int
            A batch sampler (e.g. :class:`dmlbook.data.PKSampler`), or a batch size for the
            images in order (evaluation; the last batch may be smaller).
        device : device, optional
            Where the batches go (``"cuda"``: pinned, non-blocking copies).
        prefetch : int
            Batches read ahead; 0 reads in the calling thread.
        """
        if isinstance(sampler, bool | np.bool_) or (is_integer(sampler) and sampler < 1):
            raise ValueError(f"a batch size must be a positive int, got {sampler!r}.")
        if is_integer(sampler):
            n, bs = len(self), int(sampler)
            index_batches: Iterable = (torch.arange(i, min(i + bs, n)) for i in range(0, n, bs))
        else:
            index_batches = sampler
        if not is_integer(prefetch) or prefetch < 0:
            raise ValueError(f"prefetch must be a non-negative int, got {prefetch!r}.")
        if prefetch == 0:
            for idx in index_batches:
                yield self.batch(idx, device)
            return
        yield from self._prefetched(index_batches, device, prefetch)

    def _prefetched(self, index_batches: Iterable, device, prefetch: int) -> Iterator[Batch]:
        q: queue.Queue = queue.Queue(maxsize=prefetch)
        stop = threading.Event()

        def put(item: object) -> None:
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return
                except queue.Full:
                    continue

        def work() -> None:
            try:
                for idx in index_batches:
                    if stop.is_set():
                        return
                    t = torch.as_tensor(
                        np.asarray(idx) if not isinstance(idx, torch.Tensor) else idx
                    )
                    put(self._read(t.long().flatten().cpu()))
                put(_END)
            except BaseException as err:  # handed to the consumer
                put(err)

        thread = threading.Thread(target=work, name="dmlbook-batches", daemon=True)
        thread.start()
        try:
            while True:
                item = q.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield self._to_device(item, device)
        finally:
            stop.set()
            thread.join(timeout=5)

    def subset(self, indices: torch.Tensor | Sequence[int] | np.ndarray) -> CachedImageDataset:
        """A view of the images at ``indices`` (LongTensor, index list or bool mask); no copy."""
        idx = self._subset_index(indices)
        return CachedImageDataset(
            cache=self.cache,
            labels=self.labels[idx],
            name=self.name,
            split=self.split,
            class_names=self.class_names,
            metadata={k: v[idx] for k, v in self.metadata.items()},
            rows=self.rows[idx],
        )

    def describe(self) -> str:
        """One-line summary, e.g. ``cub/train: 5,864 images, 100 classes, 41-60 per class, cached 256x256 (crop)``."""
        n = len(self)
        if n == 0:
            return f"{self.name}/{self.split}: 0 images"
        counts = self.class_counts()
        s = self.cache.size
        return (
            f"{self.name}/{self.split}: {n:,} images, {self.num_classes:,} classes, "
            f"{int(counts.min())}-{int(counts.max())} per class, cached {s}x{s} ({self.cache.fit})"
        )

    def __repr__(self) -> str:
        return f"CachedImageDataset({self.describe()})"
