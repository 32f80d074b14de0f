"""Data: the shared parts: the in-memory data set, the data errors, file lists, `locations` (the
one reader of `DMLBOOK_DATA` and `DMLBOOK_CACHE`), atomic writes."""
