"""Every derivative rnnbench computes itself, sharing no engine with any driver: dual numbers over
the numpy step (dual: the number and its rules; dual_base: its float64 or 50-digit base arithmetic;
dual_interval: interval tangents; branch_points: the side taken at each tie; kink_log: the points
without a derivative met; dual_eval: a model's loss on dual numbers, its gradient and H v), finite
differences with their error bars (finite_diff), H v by differences (hvp) and an independent float32
reverse mode (low_precision). Imports nothing else of rnnbench.check."""
