"""Eviction policies written the way a user writes one: copy this file and change a score.

    dtr-holes simulate --trace resnet32 --ratio 0.1 --policy examples/policies.py:stale_squared

Each policy is a function of one eviction candidate `c` (its features: `c.estar`, `c.size`,
`c.staleness`, ... see docs/policies.md) and its parameters; the candidate of least score is
evicted. The kernel compiles the function into its scan on first use and caches it on disk.
"""

import math

from simulator import policy


@policy("my-nbhd-penalty", {"b": 0.25})
def nbhd_penalty_again(c, b):
    """nbhd-penalty's score written in a file: h_DTR * (1 + b * |e*|)"""
    h_dtr = c.estar / (c.size * c.staleness) if c.size > 0 and c.staleness > 0 else math.inf
    return h_dtr * (1 + b * c.nbhd)


@policy("stale-squared", monotone=True)
def stale_squared(c):
    """e* / (size * staleness^2): an old storage goes first even when it is small"""
    if c.size == 0 or c.staleness == 0:
        return math.inf
    return c.estar / (c.size * float(c.staleness) ** 2)
