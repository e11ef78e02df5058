"""torch's drivers: its framework layer (_framework: TORCH; its parts _compile and _settings) and its mechanisms:
loop, scan, associative_scan, while_loop, vendor (torch.nn's layers)."""
