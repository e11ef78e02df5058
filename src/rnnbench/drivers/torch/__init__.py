"""The torch framework layer (_framework: TORCH; its parts _compile and _settings) and torch's mechanisms: loop,
scan, associative_scan, while_loop, vendor (torch.nn's layers)."""
