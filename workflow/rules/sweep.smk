rule sweep_stage:
    input:
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
    shell:
        "{params.cli} sweep --protocol {params.protocol} --stage {wildcards.stage} --trace {wildcards.trace}"
        " --policy {wildcards.policy} --job {wildcards.job} --points-per-job {params.per_job}"
        " --baseline {input.baseline} --data data --sheet {params.sheet} --records results/records"
        " --out {output}"
        " > {log} 2>&1"


rule gather_records:
    input:
        sweep_outputs(),
    output:
        "results/records.parquet",
    log:
        "results/logs/gather_records.log",
    params:
        cli=DTR_HOLES,
    shell:
        "{params.cli} gather --records results/records --out {output} > {log} 2>&1"
