"""Facts about the machine a row runs on and the ceilings it allows: CPUs (choose, pin, load), the
accelerator, the machine-speed reference kernel, the GEMM peaks (roofline, device_peak), compile
caches, and the Python environments (environments.toml, interpreters, locks)."""
