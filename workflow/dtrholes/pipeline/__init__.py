"""What the Snakemake rules run: the simulation stages (`stages`: sweeps, refinement plans, exact
edges, repeats, explanations). May import: the simulator and every package of dtrholes but
`report`, `audit` and `cli`."""
