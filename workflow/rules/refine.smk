checkpoint plan_refinement:
    input:
        jobs=unrefined_outputs,
        study=TARGETS.study_tables(),
    output:
        paths.refinement_plan(),
    log:
        paths.log("plan_refinement/{trace}"),
    priority: trace_priority
    params:
        spec=TARGETS.spec("refine"),
        study=targets.option("--study", TARGETS.study_tables()),
    shell:
        "{DTR_HOLES} refine --trace {wildcards.trace} --spec {params.spec:q} --jobs {input.jobs}"
        " {params.study} --results results --out {output} > {log} 2>&1"
