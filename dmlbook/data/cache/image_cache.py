"""Decode each image once into a memory-mapped ``uint8`` array on disk, then read batches from it.

Training a deep metric learning model at benchmark scale is bound by JPEG decoding on the CPU, not
by the GPU: CUB-200-2011 for 60 epochs is about 350k images, a few minutes of ResNet-50 compute.
The pipelines of MS (Wang et al. 2019) and DRO first resize every image so that its *short side*
is 256 px and then take a random resized crop (training) or a center crop (test) of 224-227 px.
This module does the first step once for a whole split and keeps the result:

* every image is decoded (PIL), converted to RGB and resized so that its short side is ``size``
  (``transforms.Resize(size)`` semantics: the long side is ``int(size * long / short)``, bilinear
  with antialiasing), then
* **center-cropped** to a ``size x size`` square (``fit="crop"``, the default) so that all images
  fit one array ``(N, size, size, 3)``. A 500x375 CUB image becomes 341x256 and loses 42 px on
  each side of its long axis. The test transform (resize 256 -> center crop 227) is unchanged by
  this; a training random resized crop can no longer reach those outer strips.
  ``fit="pad"`` instead resizes the *long* side to ``size`` and pads the short one (zeros),
  keeping the whole image at a lower resolution; each image's valid region is recorded, and the
  transforms of :mod:`dmlbook.data.batches.augment` crop only inside it.

The array lives in a ``.npy`` file opened with ``numpy.load(mmap_mode="r")``, next to a JSON
manifest (format version, options, the image paths with their byte sizes, original image sizes).
A cache is found again by a digest of the options and the file list, so a changed list (an image
added, removed or replaced by one of another size) builds a new cache.

Building is interrupt-safe: the array is written to ``<name>.partial.npy`` with a progress file,
renamed to its final name when complete, and the manifest is written last; a cache without its
manifest is never used. An interrupted build (Ctrl-C, a killed job) resumes where it stopped.
Images that cannot be decoded are listed by path in one error at the end; with ``skip_bad=True``
their cells stay black and the manifest lists them, so that the data set leaves them out. The
cache files get the mode a plain ``open`` gives (the umask decides whether a group sharing the
folder can read them), and the build lock file is removed afterwards (:mod:`dmlbook.data.base.atomic`).
No cache file is written through a symbolic link: in a shared folder a link planted under a
cache file's name is replaced (new files are made under random names and renamed into place) or
refused (the lock file), never followed.
Decoding one image is :mod:`dmlbook.data.cache.image_decode`; the data set that reads the cache is
:mod:`dmlbook.data.cache.cached_dataset`; the handle of a built cache and opening it are
:mod:`dmlbook.data.cache.image_cache_file` (this module re-exports its public names).

``draft=True`` lets PIL decode JPEGs at a reduced DCT scale (1/2, 1/4 or 1/8, never below the
target size) before the resize, 2-4x faster for large photos and visually equivalent.

Cache size: ``N x size x size x 3`` bytes, 196,608 per image at 256 px: CUB 2.3 GB, Cars-196
3.2 GB, SOP 23.6 GB, In-Shop 10.4 GB. Files are under ``$DMLBOOK_CACHE/images`` (default
``~/.cache/dmlbook/images``); stale caches of a changed file list are not deleted automatically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ...core.progress import progress_disabled
from ...core.validation import is_integer
from ..base.atomic import atomic_write, exclusive_lock, new_memmap, open_memmap
from ..base.errors import listed
from .cached_dataset import Batch, CachedImageDataset
from .image_cache_file import (
    CACHE_VERSION,
    ImageCache,
    _checked,
    _decode_error,
    _try_open,
    default_cache_dir,
    open_image_cache,
)
from .image_decode import FITS, decode_resized, resized_geometry

__all__ = [
    "CACHE_VERSION",
    "FITS",
    "Batch",
    "CachedImageDataset",
    "ImageCache",
    "build_image_cache",
    "decode_resized",
    "default_cache_dir",
    "open_image_cache",
    "resized_geometry",
]


def _write_json(path: Path, payload: dict) -> None:
    atomic_write(path, lambda f: json.dump(payload, f), text=True)


def _decode_or_error(args: tuple[str, int, str, bool]) -> tuple[np.ndarray, tuple[int, int]] | str:
    path, size, fit, draft = args
    try:
        return decode_resized(path, size, fit, draft)
    except Exception as err:  # reported by path at the end of the build
        return f"{type(err).__name__}: {err}"


def _default_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        n = os.cpu_count() or 1
    return max(1, min(n, 16))


def build_image_cache(
    files: Sequence[str | os.PathLike[str]],
    *,
    size: int = 256,
    fit: str = "crop",
    cache_dir: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    draft: bool = True,
    progress: bool | None = None,
    name: str = "images",
    root: str | os.PathLike[str] | None = None,
    skip_bad: bool = False,
) -> ImageCache:
    """Decode ``files`` once into a memory-mapped ``(N, size, size, 3)`` ``uint8`` cache.

    Returns the existing cache when one was built from the same file list (paths relative to
    ``root`` and byte sizes) with the same options; otherwise builds it (resuming an interrupted
    build), with a progress bar.

    Parameters
    ----------
    files : sequence of paths
        The images, in the order of the data set.
    size : int
        Side of the square cells (256: the resize of the MS and DRO pipelines).
    fit : {"crop", "pad"}
        Short side to ``size`` then center crop, or long side to ``size`` then pad (module notes).
    cache_dir : path, optional
        Folder of the cache files. Default :func:`default_cache_dir`.
    workers : int, optional
        Decoding threads (PIL releases the GIL while decoding). Default: the usable CPU cores,
        at most 16.
    draft : bool
        Reduced-scale JPEG decoding before the resize (module notes).
    progress : bool, optional
        Show a progress bar; default on unless ``TQDM_DISABLE`` is set.
    name : str
        Readable prefix of the file names (e.g. ``"cub-train"``).
    root : path, optional
        Folder the manifest stores paths relative to, so that a moved data folder reuses its
        cache. Default: absolute paths.
    skip_bad : bool
        Build the cache even if some images cannot be decoded: their cells stay black and the
        manifest lists them under ``"bad"`` (:attr:`ImageCache.bad`), so that a data set can leave
        them out. Default False: any undecodable image is an error.

    Returns
    -------
    ImageCache

    Raises
    ------
    FileNotFoundError
        If some files do not exist (the message names them).
    ValueError
        If some images cannot be decoded (without ``skip_bad``): the message lists each path with
        PIL's error; no cache is left behind. Also for invalid options.
    """
    size, paths = _checked_options(files, size, fit, workers, name)
    stored, byte_sizes, root_path = _file_list(paths, root)
    digest = _digest(stored, byte_sizes, size, fit, draft)
    final = _cache_path(cache_dir, f"{name}-s{size}-{fit}-{digest}.npy")

    existing = _try_open(final, digest)
    if existing is not None:
        return _checked(existing, skip_bad)
    with exclusive_lock(final.parent / f"{final.stem}.lock"):
        existing = _try_open(final, digest)  # built meanwhile by another process
        if existing is not None:
            return _checked(existing, skip_bad)
        workers = workers or _default_workers()
        errors = _build(paths, final, digest, size, fit, draft, workers, progress, name, skip_bad)
        if errors and not skip_bad:
            raise _decode_error(errors, len(paths), built=False)
        options = {"size": size, "fit": fit, "draft": bool(draft)}
        manifest = _manifest(final, digest, options, root_path, stored, byte_sizes, errors)
        _write_json(final.with_suffix(".json"), manifest)
        _sizes_path(final).unlink()
    return open_image_cache(final)


def _cache_path(cache_dir: str | os.PathLike[str] | None, filename: str) -> Path:
    """``filename`` in ``cache_dir`` (default :func:`default_cache_dir`), created if missing."""
    folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / filename


def _manifest(
    final: Path,
    digest: str,
    options: dict,
    root: str | None,
    stored: list[str],
    byte_sizes: list[int],
    errors: list[tuple[int, str, str]],
) -> dict:
    """The JSON manifest of a complete build (read back by :func:`open_image_cache`)."""
    return {
        "version": CACHE_VERSION,
        "digest": digest,
        "size": options["size"],
        "fit": options["fit"],
        "draft": options["draft"],
        "count": len(stored),
        "root": root,
        "paths": stored,
        "file_sizes": byte_sizes,
        "image_sizes": np.load(_sizes_path(final)).tolist(),
        "bad": [[i, p, e] for i, p, e in errors],
    }


def _checked_options(
    files: Sequence[str | os.PathLike[str]], size: int, fit: str, workers: int | None, name: str
) -> tuple[int, list[Path]]:
    """The argument checks of :func:`build_image_cache`: ``(size as int, files as paths)``."""
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 8:
        raise ValueError(f"size must be an int >= 8 (the cell side in pixels), got {size!r}.")
    size = int(size)
    if fit not in FITS:
        raise ValueError(f"fit must be one of {', '.join(FITS)}, got {fit!r}.")
    if workers is not None and (not is_integer(workers) or workers < 1):
        raise ValueError(f"workers must be a positive int or None, got {workers!r}.")
    paths = [Path(f) for f in files]
    if not paths:
        raise ValueError("files is empty; an image cache needs at least one image.")
    if not isinstance(name, str) or not name or any(c in name for c in "/\\"):
        raise ValueError(
            f"name must be a non-empty file-name prefix without slashes, got {name!r}."
        )
    return size, paths


def _digest(stored: list[str], byte_sizes: list[int], size: int, fit: str, draft: bool) -> str:
    """The cache's name tag: a hash of the format version, the options and the file list."""
    key = {
        "version": CACHE_VERSION,
        "size": size,
        "fit": fit,
        "draft": bool(draft),
        "files": [[s, b] for s, b in zip(stored, byte_sizes, strict=True)],
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _file_list(
    paths: Sequence[Path], root: str | os.PathLike[str] | None
) -> tuple[list[str], list[int], str | None]:
    """``(stored paths, byte sizes, root)``: what the manifest and the cache digest record.

    Paths are stored relative to ``root`` (absolute without it), so that a moved data folder
    finds its cache again. ``FileNotFoundError`` names the files that do not exist.
    """
    byte_sizes: list[int] = []
    missing: list[str] = []
    for p in paths:
        try:
            byte_sizes.append(p.stat().st_size)
        except OSError:
            missing.append(str(p))
    if missing:
        raise FileNotFoundError(
            f"{len(missing):,} images to cache do not exist: {listed(missing)}."
        )
    root_path = os.path.abspath(Path(root).expanduser()) if root is not None else None
    stored = [  # abspath, not resolve(): no system call per path (100k+ files)
        os.path.relpath(os.path.abspath(p), root_path) if root_path else os.path.abspath(p)
        for p in paths
    ]
    return [s.replace(os.sep, "/") for s in stored], byte_sizes, root_path


def _partial_paths(final: Path) -> tuple[Path, Path]:
    return final.with_name(final.stem + ".partial.npy"), final.with_name(
        final.stem + ".partial.json"
    )


def _sizes_path(final: Path) -> Path:
    return final.with_name(final.stem + ".sizes.npy")


def _open_partial(
    final: Path, digest: str, n: int, size: int
) -> tuple[np.ndarray, np.ndarray, int, list[tuple[int, str, str]]]:
    """The partial arrays of a build and its progress ``(images, sizes, done, errors)``.

    Resumes an interrupted build of the same file list and options (same ``digest`` and
    shapes); otherwise starts new, empty memory maps.
    """
    partial, state_path = _partial_paths(final)
    sizes_path = _sizes_path(final)
    done, errors = 0, []
    images = sizes = None
    if state_path.is_file() and partial.is_file() and sizes_path.is_file():
        try:  # resume an interrupted build of the same file list and options
            state = json.loads(state_path.read_text(encoding="utf-8"))
            images, sizes = open_memmap(partial), open_memmap(sizes_path)  # never via a link
            if (
                state.get("digest") != digest
                or images.shape != (n, size, size, 3)
                or sizes.shape != (n, 2)
            ):
                raise ValueError("another build")
            done, errors = int(state["done"]), [tuple(e) for e in state["errors"]]
            if any(len(e) != 3 for e in errors):
                raise ValueError("an older progress file")
        except (ValueError, OSError, KeyError, TypeError):
            images = sizes = None
            done, errors = 0, []
    if images is None or sizes is None:
        # made under random names and renamed into place: a planted link is replaced, not followed
        images = new_memmap(partial, np.uint8, (n, size, size, 3))
        sizes = new_memmap(sizes_path, np.int64, (n, 2))
    return images, sizes, done, errors


def _build(
    paths: list[Path],
    final: Path,
    digest: str,
    size: int,
    fit: str,
    draft: bool,
    workers: int,
    progress: bool | None,
    name: str,
    skip_bad: bool,
) -> list[tuple[int, str, str]]:
    """Fill ``<final>.partial.npy`` (resuming it if its progress file matches).

    Returns the images that could not be decoded, ``(index, path, error)``. Without any, or when
    the caller keeps them out (``skip_bad``), the array is renamed to ``final``; a caller that
    refuses them (no ``skip_bad``) finds the partial files deleted.
    """
    n = len(paths)
    partial, state_path = _partial_paths(final)
    sizes_path = _sizes_path(final)
    images, sizes, done, errors = _open_partial(final, digest, n, size)
    chunk = max(64, 16 * workers)
    bar = tqdm(
        total=n,
        initial=done,
        desc=f"caching {name} at {size}px",
        unit="img",
        disable=progress_disabled(progress),
    )

    def save_state(arrays: tuple[np.ndarray, np.ndarray], done: int) -> None:
        for a in arrays:
            a.flush()
        _write_json(state_path, {"digest": digest, "done": done, "errors": errors})

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            while done < n:
                stop = min(n, done + chunk)
                jobs = [(str(paths[i]), size, fit, draft) for i in range(done, stop)]
                for i, result in enumerate(pool.map(_decode_or_error, jobs), start=done):
                    if isinstance(result, str):
                        errors.append((i, str(paths[i]), result))
                    else:
                        images[i], sizes[i] = result[0], result[1]
                bar.update(stop - done)
                done = stop
                save_state((images, sizes), done)
    except BaseException:
        bar.close()
        with contextlib.suppress(Exception):
            save_state((images, sizes), done)  # keep what was done: the next call resumes from here
        raise
    bar.close()
    images.flush()
    sizes.flush()
    images = sizes = None  # close the memory maps before the rename
    if errors and not skip_bad:
        for p in (partial, state_path, sizes_path):
            with contextlib.suppress(OSError):
                p.unlink()
        return errors
    os.replace(partial, final)
    state_path.unlink()
    return errors
