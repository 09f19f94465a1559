rule repeat_regions:
    input:
        series_jobs,
    output:
        "results/repeats/{trace}/{policy}.json",
    log:
        "results/logs/repeats/{trace}/{policy}.log",
    benchmark:
        "results/benchmarks/repeats/{trace}/{policy}.tsv"
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        baseline="results/baselines/{trace}.json",
        protocol=config["protocol"],
        spec=repeat_spec,
    shell:
        "{DTR_HOLES} repeat --jobs {input} --trace {wildcards.trace}"
        " --policy {wildcards.policy} --spec {params.spec:q} --protocol {params.protocol}"
        " --baseline {params.baseline} --data data --sheet {params.sheet} --results results"
        " --out {output} > {log} 2>&1"
