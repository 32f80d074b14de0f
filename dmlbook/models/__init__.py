"""Embedding networks: each maps a batch of inputs to a batch of (unit-norm) embeddings."""

from .bn_inception import BN_INCEPTION_URL, BNInception, bn_inception
from .embedding import L2Normalize, embed
from .head import EmbeddingModel, GlobalPool, available_backbones, build_backbone
from .mlp import EmbeddingMLP
from .pretrained import InputSpec, fetch_state_dict, load_pretrained
from .resnet import RESNET50_V1_URL, ResNet, resnet18, resnet50
from .small_cnn import SmallCNN

__all__ = [
    "EmbeddingMLP",
    "SmallCNN",
    "L2Normalize",
    "embed",
    "ResNet",
    "resnet18",
    "resnet50",
    "RESNET50_V1_URL",
    "BNInception",
    "bn_inception",
    "BN_INCEPTION_URL",
    "EmbeddingModel",
    "GlobalPool",
    "build_backbone",
    "available_backbones",
    "InputSpec",
    "fetch_state_dict",
    "load_pretrained",
]
