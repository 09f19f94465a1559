# dtr-holes: from DTR's published traces to feasibility holes. Table of contents only; each
# stage lives in workflow/rules/, its logic in the tested `dtrholes` package.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/protocol.smk"
include: "workflow/rules/fetch.smk"
include: "workflow/rules/baseline.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/refine.smk"
include: "workflow/rules/edges.smk"
include: "workflow/rules/repeat.smk"
include: "workflow/rules/explain.smk"
include: "workflow/rules/map.smk"
include: "workflow/rules/noise.smk"
include: "workflow/rules/holes.smk"
include: "workflow/rules/crosscheck.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/audit.smk"


rule all:
    default_target: True
    input:
        TARGETS.all_outputs(),
