rule sweep_stage:
    input:
        refine=refine_input,
        ranking=ranking_input,
        baseline=paths.baseline(),
        archive="data/dtr-logs.zip",
    output:
        paths.sweep_job(),
    log:
        paths.log("stage_{stage}/{trace}/{policy}/job{job}"),
    benchmark:
        paths.benchmark("stage_{stage}/{trace}/{policy}/job{job}")
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        protocol=config["protocol"],
        spec=sweep_spec,
        points=sweep_points,
    shell:
        "{DTR_HOLES} sweep --stage {wildcards.stage} --points {params.points}"
        " --trace {wildcards.trace}"
        " --policy {wildcards.policy} --spec {params.spec:q} --protocol {params.protocol}"
        " --baseline {input.baseline} --data data --sheet {params.sheet} --results results"
        " --out {output} > {log} 2>&1"


rule gather_records:
    input:
        all_sampled_outputs,
        TARGETS.series_outputs(paths.EDGES),
        TARGETS.series_outputs(paths.REPEATS),
    output:
        paths.records_table(),
    log:
        paths.log("gather_records"),
    shell:
        "{DTR_HOLES} gather --jobs {input} --results results --out {output} > {log} 2>&1"
