"""Download, verify and extract the benchmark archives.

``prepare("cub", data_dir)`` fetches the archives of a data set into ``<data_dir>/downloads/``,
checks their md5, and extracts them where the loaders look (``<data_dir>/CUB_200_2011`` ...).
The pieces are usable alone:

:func:`download`
    One URL to one file, resumable and md5-checked (:mod:`dmlbook.data.fetch.transfer`).
:func:`extract`
    Safe, all-or-nothing extraction of tar and zip archives (:mod:`dmlbook.data.fetch.archive`).
:func:`file_md5`
    The md5 of a file, read in chunks.

Only CUB-200-2011 has a stable direct URL today. The original Cars-196 URLs at
``ai.stanford.edu/~jkrause`` are offline, SOP is served from Google Drive, and DeepFashion
In-Shop requires a manual download from its Google Drive folder. A file placed by hand in
``<data_dir>/downloads/`` under the expected name is verified and used by :func:`prepare`
without downloading, and a copy already extracted under ``data_dir`` (by hand, by a course, on a
cluster without internet) is left as it is (:func:`find_copy`). Offline, a failed download raises
:class:`~dmlbook.data.base.errors.DownloadError` with one line saying where to put the file instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import urllib.error
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import DownloadError, prepare_call
from ..base.locations import datasets_folder
from ..benchmarks import cars, cub, inshop, sop
from ..benchmarks.benchmark import Layout
from .archive import extract
from .transfer import ChecksumError, download, file_md5

__all__ = [
    "ChecksumError",
    "DownloadError",
    "RESOURCES",
    "Resource",
    "download",
    "extract",
    "file_md5",
    "find_copy",
    "prepare",
]


@dataclass(frozen=True)
class Resource:
    """One file of a data set release.

    Attributes
    ----------
    url : str
        Where to fetch it.
    md5 : str or None
        Expected md5 (hex); ``None`` skips the check.
    filename : str
        Name under ``<data_dir>/downloads/``.
    subdir : str
        Folder under ``data_dir`` to extract (or copy) it into; ``""`` for ``data_dir`` itself.
    extract : bool
        Extract it (an archive) or copy it as is (e.g. ``cars_annos.mat``).
    """

    url: str
    md5: str | None
    filename: str
    subdir: str = ""
    extract: bool = True


#: Release files per data set (see the module notes for their availability).
RESOURCES: dict[str, tuple[Resource, ...]] = {
    "cub": (
        Resource(
            "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz",
            "97eceeb196236b17998738112f37df78",
            "CUB_200_2011.tgz",
        ),
    ),
    "cars": (
        Resource(
            "http://ai.stanford.edu/~jkrause/car196/car_ims.tgz",
            "d5c8f0aa497503f355e17dc7886c3f14",
            "car_ims.tgz",
            subdir="cars196",
        ),
        Resource(
            "http://ai.stanford.edu/~jkrause/car196/cars_annos.mat",
            "b407c6086d669747186bd1d764ff9dbc",
            "cars_annos.mat",
            subdir="cars196",
            extract=False,
        ),
    ),
    "sop": (
        Resource(
            "https://drive.usercontent.google.com/download?id=1TclrpQOF_ullUP99wk_gjGN8pKvtErG8"
            "&export=download&confirm=t",
            "7f73d41a2f44250d4779881525aea32e",
            "Stanford_Online_Products.zip",
        ),
    ),
    "inshop": (),
}

_MANUAL = {
    "inshop": (
        "DeepFashion In-Shop has no direct download: request it from "
        "https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html (Google Drive), "
        "then put 'Eval/list_eval_partition.txt' and the extracted 'Img/img/...' under "
        "<data_dir>/InShop/."
    ),
}


#: How each benchmark's extracted copy is recognised (its loader's layout).
LAYOUTS: dict[str, Layout] = {m.LAYOUT.dataset: m.LAYOUT for m in (cub, cars, sop, inshop)}


def find_copy(name: str, data_dir: str | os.PathLike[str]) -> Path | None:
    """The folder of an extracted copy of benchmark ``name`` under ``data_dir``, or None.

    A copy is a folder (``data_dir`` itself, or ``data_dir/<folder>`` or an alias, e.g.
    ``CUB_200_2011``) holding the layout's list file (e.g. ``images.txt``): one extracted by hand,
    by a course or on a cluster counts as much as one :func:`prepare` extracted. Whether it is
    complete is for the loader to check.
    """
    key = str(name).strip().lower()
    if key not in LAYOUTS:
        raise ValueError(f"Unknown data set {name!r}; known: {', '.join(sorted(LAYOUTS))}.")
    return LAYOUTS[key].find(Path(data_dir).expanduser())


def _one_line(err: BaseException) -> str:
    """The cause of a failed transfer on one line (``HTTP error 404: Not Found``)."""
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP error {err.code}: {err.reason}"
    reason = getattr(err, "reason", None) or err
    return " ".join(str(reason).split())


def prepare(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    keep_archives: bool = True,
    progress: bool | None = None,
) -> Path:
    """Download (or find in ``<data_dir>/downloads/``), verify and extract a benchmark.

    Each archive is extracted once: a marker file ``downloads/<archive>.extracted`` records it.

    Parameters
    ----------
    name : {"cub", "cars", "sop", "inshop"}
    data_dir : path, optional
        Folder of all data sets; default ``$DMLBOOK_DATA``.
    keep_archives : bool
        Keep the verified archives after extraction (default) or delete them.
    progress : bool, optional
        Progress bars; default on unless ``TQDM_DISABLE`` is set.

    Nothing is downloaded for a data set already extracted under ``data_dir`` (by hand, by a
    course, on a cluster without internet: see :func:`find_copy`); the loaders check it.

    Returns
    -------
    Path
        ``data_dir``.

    Raises
    ------
    ValueError
        For an unknown name, a data set without a direct download and no copy (In-Shop: the
        message says what to do), or no ``data_dir``.
    FileNotFoundError
        If ``data_dir`` is not an existing folder (a typo must not start a download).
    DownloadError
        If a file cannot be fetched (offline, a moved URL): one line saying where to put the
        file or the extracted copy instead.
    """
    key = str(name).strip().lower()
    if key not in RESOURCES:
        raise ValueError(
            f"Unknown data set {name!r}; prepare() knows {', '.join(sorted(RESOURCES))}."
        )
    if data_dir is None:
        data_dir = datasets_folder()
        if data_dir is None:
            raise ValueError("Pass data_dir or set DMLBOOK_DATA to the folder for the data sets.")
    root = Path(data_dir).expanduser()
    if not root.is_dir():  # a typo must not start a download of gigabytes into a new folder
        raise FileNotFoundError(
            f"data_dir {str(data_dir)!r} is not a folder. Check the spelling; to download "
            f"{key} into a new folder, create it first (os.makedirs)."
        )
    if find_copy(key, root) is not None:
        return root  # already extracted: never download what is there
    if not RESOURCES[key]:
        raise ValueError(_MANUAL[key])
    downloads = root / "downloads"
    for res in RESOURCES[key]:
        archive = downloads / res.filename
        marker = downloads / f"{res.filename}.extracted"
        target = root / res.subdir if res.subdir else root
        if marker.is_file():
            continue
        try:
            download(res.url, archive, md5=res.md5, progress=progress)
        except (OSError, urllib.error.URLError) as err:
            raise DownloadError(
                f"Could not download {res.url} ({_one_line(err)}). Offline? Download "
                f"{res.filename} by hand (md5 {res.md5}) into {downloads}, or extract the data set "
                f"into {root / LAYOUTS[key].folder}, then call {prepare_call(key)} again."
            ) from err
        if res.extract:
            extract(archive, target, progress=progress)
        else:
            target.mkdir(parents=True, exist_ok=True)
            if not (target / res.filename).exists():
                shutil.copy2(archive, target / res.filename)
        marker.write_text(f"{res.md5}\n", encoding="utf-8")
        if not keep_archives:
            with contextlib.suppress(OSError):
                archive.unlink()
    return root
