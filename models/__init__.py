"""Model definitions (installed as the package `rnnbench_models`).

One module per model family. Each module exposes `MODELS: tuple[Model, ...]`; the registry in
`rnnbench.registry` finds every module here, so adding a model is adding a file.
"""
