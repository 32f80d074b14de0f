"""Data: fetching: one URL to one file with its checksum, safe extraction of archives, `prepare`
for the benchmarks."""
