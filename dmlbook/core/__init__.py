"""Pair algebra and the basics: `similarity` (`S`, distances, `D^2 = 2 - 2S`), `pairs` (pair
masks, masked log-sum-exp and means, the one `reduce`), `pair_lists`, `validation` (input checks
that name the fix), `gpw` (General Pair Weighting: `w_ij = dL/dS_ij` by autograd),
`reproducibility` (seeding) and `progress` (when to show a bar)."""
