"""Data: the image cache: decode each image once into a memory-mapped file, then read batches
from it."""
