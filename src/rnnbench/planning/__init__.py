"""What a run selects, before any row runs: RunSettings (settings), the job matrix (plan), the GPU
suite's stages, `compare --commits` (two commits' runs), and `versions`' probe rows."""
