rule sweep_stage:
    input:
        refine=refine_input,
        baseline="results/baselines/{trace}.json",
        archive="data/dtr-logs.zip",
    output:
        "results/stage_{stage}/{trace}/{policy}/job{job}.json",
    log:
        "results/logs/stage_{stage}/{trace}/{policy}/job{job}.log",
    benchmark:
        "results/benchmarks/stage_{stage}/{trace}/{policy}/job{job}.tsv"
    params:
        cli=DTR_HOLES,
        sheet=config["trace_sheet"],
        protocol=config["protocol"],
        per_job=config["points_per_job"],
        spec=sweep_spec,
        refine=refine_option,
    shell:
        "{params.cli} sweep --stage {wildcards.stage} --job {wildcards.job}"
        " --points-per-job {params.per_job} {params.refine} --trace {wildcards.trace}"
        " --policy {wildcards.policy} --spec {params.spec:q} --protocol {params.protocol}"
        " --baseline {input.baseline} --data data --sheet {params.sheet} --results results"
        " --out {output} > {log} 2>&1"


rule collect_series:
    input:
        sampled_outputs,
    output:
        "results/series/{trace}/{policy}.json",
    log:
        "results/logs/series/{trace}/{policy}.log",
    params:
        cli=DTR_HOLES,
    shell:
        "{params.cli} collect --jobs {input} --out {output} > {log} 2>&1"


rule gather_records:
    input:
        series_outputs("series"),
        series_outputs("edges"),
        series_outputs("repeats"),
    output:
        "results/records.parquet",
    log:
        "results/logs/gather_records.log",
    params:
        cli=DTR_HOLES,
    shell:
        "{params.cli} gather --jobs {input} --results results --out {output} > {log} 2>&1"
