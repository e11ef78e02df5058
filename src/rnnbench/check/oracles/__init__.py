"""What a row is judged against, from the model alone: the oracle ladder (oracle), hand oracles kept
on disk (oracle_cache), the forward's truth and rounding bar (forward), every value the chain rule
gives at the step's kinks (kink_range)."""
