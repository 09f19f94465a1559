"""Holes, edges and maps: the vocabulary of feasibility holes (`feasibility`), holes in sampled
series (`sampled_holes`), exact byte edges (`edges`), exact maps (`maps`) and their tables
(`map_tables`), the cost-noise study's table (`noise`). May import: the simulator,
`dtrholes.core`, `dtrholes.traces` and `dtrholes.study`."""
