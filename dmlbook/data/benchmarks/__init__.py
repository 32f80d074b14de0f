"""Data: benchmarks: CUB, Cars, SOP and In-Shop in their official layouts, on one loader
skeleton."""
