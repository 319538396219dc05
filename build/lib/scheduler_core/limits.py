"""The bounds every value from outside is held to, declared once for every module that reads one.

A prompt length or a token count larger than `MAX_TOKENS` is a typo or an attack, never a model:
the largest context any engine serves is well under it. A duration over `MAX_DURATION_MS` (1,000 s
for one step or one request) is a unit mistake (seconds sent as microseconds). Both are refused
where the value enters (catalogs, requests, analysis parameters, execution models), naming it.
"""

from __future__ import annotations

MAX_TOKENS = 1 << 20  # 1,048,576: a prompt, a graph's capacity, any token count
MAX_DURATION_MS = 1e6  # a step's or a request's duration in ms, finite
