"""The package's layers, declared once: every folder of ``dmlbook/`` is one layer, bottom up.

A module belongs to the layer of the deepest folder that holds it (``dmlbook/data/cache/image_cache.py``
to ``dmlbook.data.cache``; ``dmlbook/data/__init__.py``, the face of the data folders, to
``dmlbook.data``). A module may import from its own layer and from the layers before it, never
from one after it: ``tests/test_import_graph.py`` checks every import of the package against this
list (at module level, under ``TYPE_CHECKING``, inside functions, at the end of a package face).
CONTRIBUTING.md's layer list and MAP.md's layer table are generated from it by ``make map``
(``tools/map_tables.py``). Standard library only: the tools read it without an install.
"""

from __future__ import annotations

from typing import NamedTuple


class Layer(NamedTuple):
    package: str  #: the folder, dotted (``dmlbook.data.cache``)
    title: str  #: a few words: what the layer is
    contents: str  #: one sentence for CONTRIBUTING.md and MAP.md (names in backticks)


#: Bottom up: each layer may import the ones before it.
LAYERS: tuple[Layer, ...] = (
    Layer(
        "dmlbook.core",
        "pair algebra and the basics",
        "`similarity` (`S`, distances, `D^2 = 2 - 2S`), `pairs` (pair masks, masked log-sum-exp "
        "and means, the one `reduce`), `pair_lists`, `validation` (input checks that name the "
        "fix, the declared ranges), `declaration` (`@declared`: hyper-parameters and the loss "
        "frame declared once in a signature), `gpw` (General Pair Weighting: `w_ij = dL/dS_ij` by autograd), `reproducibility` "
        "(seeding) and `progress` (when to show a bar)",
    ),
    Layer(
        "dmlbook.mining",
        "mining",
        "every miner, each rule written once, returning boolean pair masks that the losses take",
    ),
    Layer(
        "dmlbook.surgery",
        "gradient surgery's parts",
        "Xuan & Pless's designed gradient on embeddings: directions, pair and triplet weights, the "
        "`torch.autograd.Function`; no loss (the trainable module is `losses.gradient_surgery`)",
    ),
    Layer(
        "dmlbook.losses",
        "losses",
        "one module per loss family: the equation as readable PyTorch, the paper's printed weights "
        "beside it, a thin `nn.Module`, `get_loss` by name (`registry`)",
    ),
    Layer(
        "dmlbook.reference",
        "reference loops",
        "the paper-literal per-pair and per-anchor loops the losses are tested against",
    ),
    Layer(
        "dmlbook.symbolic",
        "symbolic",
        "SymPy derivations, exact proofs with their conditions, counterexamples, autograd against "
        "the symbolic weights",
    ),
    Layer(
        "dmlbook.data.base",
        "data: the shared parts",
        "the in-memory data set, the data errors, file lists, `locations` (the one reader of "
        "`DMLBOOK_DATA` and `DMLBOOK_CACHE`), atomic writes",
    ),
    Layer(
        "dmlbook.data.batches",
        "data: batches",
        "the P x K and random batch samplers, batched augmentation and normalisation, Koch et "
        "al.'s affine distortions",
    ),
    Layer(
        "dmlbook.data.cache",
        "data: the image cache",
        "decode each image once into a memory-mapped file, then read batches from it",
    ),
    Layer(
        "dmlbook.data.benchmarks",
        "data: benchmarks",
        "CUB, Cars, SOP and In-Shop in their official layouts, on one loader skeleton",
    ),
    Layer(
        "dmlbook.data.fetch",
        "data: fetching",
        "one URL to one file with its checksum, safe extraction of archives, `prepare` for the "
        "benchmarks",
    ),
    Layer(
        "dmlbook.data.handwritten",
        "data: handwriting",
        "Omniglot (shipped and the full release) and scikit-learn's digits",
    ),
    Layer(
        "dmlbook.data.generated",
        "data: synthetic",
        "the procedurally rendered fine-grained data set that needs no download",
    ),
    Layer(
        "dmlbook.data",
        "data: the face",
        "`load_dataset` by name (`registry`) and the names the other layers import; the shipped "
        "files (Omniglot, the papers' tables)",
    ),
    Layer(
        "dmlbook.models",
        "models",
        "small CPU networks, the embedding heads, ResNet and BN-Inception, weight files",
    ),
    Layer(
        "dmlbook.evaluate",
        "evaluation",
        "Recall@K, precision@1, MAP@R, R-precision in one chunked pass; Lake et al.'s one-shot "
        "protocol (`oneshot`)",
    ),
    Layer(
        "dmlbook.training",
        "training",
        "the one loop (`Trainer`), the optimiser factory, checkpoints, `fit` on in-memory data",
    ),
    Layer(
        "dmlbook.engine",
        "engine",
        "config-driven runs on the training loop: checked configs, run folders that resume, "
        "several GPUs, the dry run",
    ),
    Layer(
        "dmlbook.papers",
        "the papers",
        "the seed papers' results tables as data (`paper_results`) and their errata",
    ),
    Layer(
        "dmlbook.studies",
        "studies",
        "every comparison of losses: loss x seed grids, benchmark plans, Wang's Table 1 and 2, the "
        "fair comparison on Omniglot",
    ),
    Layer(
        "dmlbook.chapters",
        "the chapters' helpers",
        "`setup()` and `show_source` (`notebook`), the profile, OpenMP's policy, figures "
        "(`plots`, `palette`, `curves`, `pair_figures`), the weight explorer",
    ),
    Layer(
        "dmlbook.exercises",
        "exercises",
        "the self-checks of the chapters' exercises and the rules an assignment states",
    ),
    Layer(
        "dmlbook",
        "the face and the command",
        "`import dmlbook; dmlbook.setup()` and the `dmlbook` command (`cli`, `python -m dmlbook`)",
    ),
)

PACKAGES: tuple[str, ...] = tuple(layer.package for layer in LAYERS)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the deepest layer folder that holds ``module`` (dotted)."""
    best = -1
    for index, package in enumerate(PACKAGES):
        if module == package or module.startswith(package + "."):
            if best < 0 or len(package) > len(PACKAGES[best]):
                best = index
    if best < 0:
        raise ValueError(f"{module} is in no layer of tools/layers.py")
    return best


def folder_of(package: str) -> str:
    """``dmlbook/data/cache`` for ``dmlbook.data.cache``."""
    return package.replace(".", "/")
