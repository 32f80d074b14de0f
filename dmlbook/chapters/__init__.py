"""The chapters' helpers: `setup()` and `show_source` (`notebook`), the profile, OpenMP's
policy, figures (`plots`, `palette`, `curves`), the weight explorer."""
