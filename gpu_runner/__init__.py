"""Real graph captures and real TTFT of a small transformer, measured into scheduler_core catalogs."""
