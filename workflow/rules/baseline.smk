rule baseline_trace:
    input:
        archive="data/dtr-logs.zip",
    output:
        "results/baselines/{trace}.json",
    log:
        "results/logs/baseline/{trace}.log",
    benchmark:
        "results/benchmarks/baseline/{trace}.tsv"
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
    shell:
        "{DTR_HOLES} baseline --trace {wildcards.trace} --data data --sheet {params.sheet}"
        " --out {output} > {log} 2>&1"
