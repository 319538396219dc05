"""`scripts/gpu-check`: the CUDA path end to end as one report (`check`), its step budget
(`budget`) and the benchmark targets it and `bench/gpu_bench.py` hold a GPU to (`targets`)."""
