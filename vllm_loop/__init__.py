"""A real vLLM in the loop, seen from outside: its cached virtualenv, its model directory, its
server process, the traffic that drives it and the measurement of the simulator against it.

The standard library, `scheduler_core` and `helios_vllm.models` (the model shapes the plugin's
examples share) only, and never imports vLLM: the product runs these modules in its own
virtualenv and reaches vLLM through a subprocess (`vllm serve`, or a script run by the vLLM
virtualenv's Python) and HTTP. The plugin that runs inside vLLM is `clients/vllm` (`helios_vllm`).
"""
