"""`rnnbench compare`: two sides' records paired row by row (pairs), each side's timed runs as evidence (evidence),
the bootstrap interval (stats), the formats (format), the inputs read (inputs) and two sides' profiles lined up
(profile_diff)."""
