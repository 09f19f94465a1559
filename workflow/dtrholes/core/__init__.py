"""Foundations every other package uses: the results layout (`paths`), atomic file writing
(`files`), jobs that stop with their parent (`processes`), the code and machine behind a result
(`provenance`). May import: the simulator, nothing else of dtrholes."""
