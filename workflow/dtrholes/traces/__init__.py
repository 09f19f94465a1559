"""Traces: fetching DTR's archive, the trace sheet and compiled traces (`fetch`), cost
perturbations (`recost`), the per-trace cache of storage betweenness (`betweenness`) and one
PyTorch training step recorded as a trace (`pytorch`). May import: the simulator and
`dtrholes.core`; `recost` and `pytorch` import the simulator alone."""
