checkpoint plan_refinement:
    input:
        jobs=unrefined_outputs,
        study=study_input(),
    output:
        paths.refinement_plan(),
    log:
        paths.log("plan_refinement/{trace}"),
    priority: trace_priority
    params:
        spec=spec("refine"),
        study=study_option(),
    shell:
        "{DTR_HOLES} refine --trace {wildcards.trace} --spec {params.spec:q} --jobs {input.jobs}"
        " {params.study} --results results --out {output} > {log} 2>&1"
