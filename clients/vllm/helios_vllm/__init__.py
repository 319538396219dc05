"""vLLM plugin for Helios: a `Scheduler` subclass (`helios_vllm.scheduler.HeliosScheduler`) that
chunks each solo prefill as the recipe's active policy plans it with `scheduler_core`, measures its
own catalog at start and reports what it launched. Everything but `scheduler.py` imports without
vLLM (the unit tests run in the product's virtualenv)."""
