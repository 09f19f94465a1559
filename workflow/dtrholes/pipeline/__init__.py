"""What the Snakemake rules run and make: the simulation stages (`stages`: sweeps, refinement
plans, exact edges, repeats, explanations) and the rules' target lists (`targets`). May import:
the simulator and every package of dtrholes but `report`, `audit` and `cli`."""
