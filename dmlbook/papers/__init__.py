"""The papers: the seed papers' results tables as data (`paper_results`) and their errata."""
