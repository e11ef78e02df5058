"""The registry of known upstream bugs: src/rnnbench/known_issues.json and the rule that applies it
(known_issues), and the case predicates its entries are scoped by (conditions)."""
