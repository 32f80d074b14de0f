"""Data: synthetic: the procedurally rendered fine-grained data set that needs no download."""
