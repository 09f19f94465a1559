rule sweep_stage:
    input:
        refine=refine_input,
        ranking=ranking_input,
        baseline=layout.baseline(),
        archive="data/dtr-logs.zip",
    output:
        layout.sweep_job(),
    log:
        layout.log("stage_{stage}/{trace}/{policy}/job{job}"),
    benchmark:
        layout.benchmark("stage_{stage}/{trace}/{policy}/job{job}")
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
        series_outputs(layout.EDGES),
        series_outputs(layout.REPEATS),
    output:
        layout.records_table(),
    log:
        layout.log("gather_records"),
    shell:
        "{DTR_HOLES} gather --jobs {input} --results results --out {output} > {log} 2>&1"
