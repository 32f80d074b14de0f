"""The hand-worked batch the reference-loop tests share: four unit embeddings of two classes,
``y = (0, 0, 1, 1)``, given by their similarities. Every anchor has one positive and two
negatives: anchor ``i``'s positive similarity | negative ones are (0) 0.8 | 0.5, 0.3;
(1) 0.8 | 0.6, -0.2; (2) 0.1 | 0.5, 0.6; (3) 0.1 | 0.3, -0.2."""

from __future__ import annotations

FOUR = [
    [1.0, 0.8, 0.5, 0.3],
    [0.8, 1.0, 0.6, -0.2],
    [0.5, 0.6, 1.0, 0.1],
    [0.3, -0.2, 0.1, 1.0],
]
FOUR_LABELS = [0, 0, 1, 1]
