"""Data: batches: the P x K and random batch samplers, batched augmentation and normalisation,
Koch et al.'s affine distortions."""
