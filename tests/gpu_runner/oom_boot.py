"""A boot process whose shape prefill=32 runs out of memory (simulated: no device here can be
filled on purpose), otherwise the real `python -m gpu_runner.boot_process`."""

import sys

import torch

from gpu_runner import boot_process, graphs

MESSAGE = "CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 139.80 GiB of which 1.20 GiB is free."
real_build = graphs.BootedModel._build


def build(self, prefill, decode):
    if (prefill, decode) == (32, 0):
        raise torch.OutOfMemoryError(MESSAGE)
    return real_build(self, prefill, decode)


graphs.BootedModel._build = build
sys.exit(boot_process.main())
