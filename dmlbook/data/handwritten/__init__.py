"""Data: handwriting: Omniglot (shipped and the full release) and scikit-learn's digits."""
