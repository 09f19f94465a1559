"""A pure-function replay of DTR training traces that makes exactly simrd's eviction decisions."""

from simulator.api import (
    Options,
    Recording,
    Replayer,
    budget_for,
    peak_memory,
    prepare,
    simulate,
    simulate_events,
)
from simulator.errors import PolicyError, TraceError, UserError
from simulator.events import Events
from simulator.policies import POLICIES, Param, Policy, get_policy, policy
from simulator.result import Failure, Result
from simulator.trace import Trace, parse_trace, read_archive_member, read_trace

__all__ = [
    "POLICIES",
    "Failure",
    "Events",
    "Options",
    "Param",
    "Policy",
    "PolicyError",
    "Recording",
    "Replayer",
    "Result",
    "Trace",
    "TraceError",
    "UserError",
    "budget_for",
    "get_policy",
    "parse_trace",
    "peak_memory",
    "policy",
    "prepare",
    "read_archive_member",
    "read_trace",
    "simulate",
    "simulate_events",
]
