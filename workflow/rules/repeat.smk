rule repeat_regions:
    input:
        series="results/series/{trace}/{policy}.json",
        baseline="results/baselines/{trace}.json",
        archive="data/dtr-logs.zip",
    output:
        "results/repeats/{trace}/{policy}.json",
    log:
        "results/logs/repeats/{trace}/{policy}.log",
    benchmark:
        "results/benchmarks/repeats/{trace}/{policy}.tsv"
    params:
        cli=DTR_HOLES,
        sheet=config["trace_sheet"],
        protocol=config["protocol"],
        spec=repeat_spec,
    shell:
        "{params.cli} repeat --jobs {input.series} --trace {wildcards.trace}"
        " --policy {wildcards.policy} --spec {params.spec:q} --protocol {params.protocol}"
        " --baseline {input.baseline} --data data --sheet {params.sheet} --results results"
        " --out {output} > {log} 2>&1"
