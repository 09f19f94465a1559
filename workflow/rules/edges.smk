rule find_edges:
    input:
        series_jobs,
    output:
        "results/edges/{trace}/{policy}.json",
    log:
        "results/logs/edges/{trace}/{policy}.log",
    benchmark:
        "results/benchmarks/edges/{trace}/{policy}.tsv"
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        baseline="results/baselines/{trace}.json",
        protocol=config["protocol"],
        spec=edge_spec,
    shell:
        "{DTR_HOLES} edges --jobs {input} --trace {wildcards.trace}"
        " --policy {wildcards.policy} --spec {params.spec:q} --protocol {params.protocol}"
        " --baseline {params.baseline} --data data --sheet {params.sheet} --results results"
        " --out {output} > {log} 2>&1"
