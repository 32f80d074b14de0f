"""The tiny engine run shared by the engine and CLI tests.

A narrow ResNet-18 (width 8) on 32 px ``synthetic`` images, 8 train / 8 test classes of 6 images,
on one CPU thread: a few seconds per run, deterministic, so interrupted and resumed runs can be
compared bit for bit.
"""

from __future__ import annotations

from pathlib import Path


def tiny_config(out_dir: Path, **sections: dict) -> dict:
    """A complete config writing to ``out_dir``; ``sections`` update its top-level sections."""
    cfg = {
        "name": "tiny",
        "data": {
            "dataset": "synthetic",
            "options": {"num_classes": 16, "images_per_class": 6, "cache": False},
            "resize": 32,
            "crop": 32,
        },
        "model": {
            "backbone": "resnet18",
            "backbone_options": {"width": 8},
            "pretrained": None,
            "dim": 16,
            "freeze_bn": False,
        },
        "loss": {"name": "multi_similarity"},
        "optim": {"name": "adam", "lr": 1e-3, "milestones": [0.5]},
        "train": {
            "iterations": 12,
            "epoch_iters": 4,
            "batch_size": 16,
            "k": 4,
            "ks": [1, 2, 4],
            "device": "cpu",
            "bf16": False,
            "channels_last": False,
            "out_dir": str(out_dir),
            "log_every": 2,
            "tensorboard": False,
        },
    }
    for key, values in sections.items():
        cfg[key].update(values)
    return cfg
