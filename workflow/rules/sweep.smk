rule sweep_stage:
    input:
        refine=refine_input,
        ranking=ranking_input,
        baseline="results/baselines/{trace}.json",
        archive="data/dtr-logs.zip",
    output:
        "results/stage_{stage}/{trace}/{policy}/job{job}.json",
    log:
        "results/logs/stage_{stage}/{trace}/{policy}/job{job}.log",
    benchmark:
        "results/benchmarks/stage_{stage}/{trace}/{policy}/job{job}.tsv"
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
        series_outputs("edges"),
        series_outputs("repeats"),
    output:
        "results/records.parquet",
    log:
        "results/logs/gather_records.log",
    shell:
        "{DTR_HOLES} gather --jobs {input} --results results --out {output} > {log} 2>&1"
