"""Rebuild ``dmlbook/data/omniglot28.npz`` from the three public Omniglot zip files.

Usage::

    python tools/build_omniglot.py DIR [--out dmlbook/data/omniglot28.npz]

``DIR`` holds ``images_background_small1.zip`` (the train classes), ``images_background_small2.zip``
(the test classes) and ``all_runs.zip`` (the 20 one-shot runs), from the repository
``brendenlake/omniglot`` (MIT licence; ``python/`` folder). The output is the same byte for byte
on every run (:func:`dmlbook.data.handwritten.omniglot_layout.write_npz`); the script prints its sha256,
which must equal ``dmlbook.data.handwritten.omniglot.SHA256`` for the shipped copy (a test checks the shipped
file against that value). The recorded copy was built with Pillow 13.0, NumPy 2.4 and zlib
1.2.13 (CPython 3.11): a Pillow release that changed its box filter would change the arrays, a
zlib that deflates differently (zlib-ng, for one) only the bytes; either way the script says
that the checksum differs and exits with status 1.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from dmlbook.data.handwritten.omniglot import SHA256
from dmlbook.data.handwritten.omniglot_layout import build_compact

SOURCES = ("images_background_small1.zip", "images_background_small2.zip", "all_runs.zip")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source_dir", type=Path, help="folder holding the three zip files")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "dmlbook" / "data" / "omniglot28.npz",
        help="the .npz to write (default: the copy shipped in the package)",
    )
    args = parser.parse_args(argv)
    paths = [args.source_dir / name for name in SOURCES]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"missing {', '.join(missing)}; download them from brendenlake/omniglot.")
    out = build_compact(*paths, args.out)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"{out}: {out.stat().st_size:,} bytes, sha256 {digest}")
    if digest != SHA256:
        print(f"differs from the recorded dmlbook.data.handwritten.omniglot.SHA256 {SHA256}")
        return 1
    print("identical to the shipped copy (dmlbook.data.handwritten.omniglot.SHA256)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
