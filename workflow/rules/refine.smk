checkpoint plan_refinement:
    input:
        unrefined_outputs,
    output:
        "results/stage_b/{trace}/plan.json",
    log:
        "results/logs/plan_refinement/{trace}.log",
    priority: trace_priority
    params:
        spec=spec("refine"),
    shell:
        "{DTR_HOLES} refine --trace {wildcards.trace} --spec {params.spec:q} --jobs {input}"
        " --results results --out {output} > {log} 2>&1"
