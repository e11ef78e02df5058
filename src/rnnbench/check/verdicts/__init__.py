"""A driver's output against the oracle: the one judge (judge), each example's verdict
(per_example), the second-order check (second_order), and where a wrong gradient goes wrong
(localize)."""
