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


rule rank_storages:
    input:
        archive="data/dtr-logs.zip",
    output:
        "results/centrality/{trace}-{digest}-{seed}.parquet",
    log:
        "results/logs/centrality/{trace}-{digest}-{seed}.log",
    benchmark:
        "results/benchmarks/centrality/{trace}-{digest}-{seed}.tsv"
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
    shell:
        "{DTR_HOLES} rank --trace {wildcards.trace} --seed {wildcards.seed} --data data"
        " --sheet {params.sheet} --results results > {log} 2>&1"
