rule find_edges:
    input:
        series="results/series/{trace}/{policy}.json",
        baseline="results/baselines/{trace}.json",
        archive="data/dtr-logs.zip",
    output:
        "results/edges/{trace}/{policy}.json",
    log:
        "results/logs/edges/{trace}/{policy}.log",
    benchmark:
        "results/benchmarks/edges/{trace}/{policy}.tsv"
    params:
        cli=DTR_HOLES,
        sheet=config["trace_sheet"],
        protocol=config["protocol"],
        spec=edge_spec,
    shell:
        "{params.cli} edges --jobs {input.series} --trace {wildcards.trace}"
        " --policy {wildcards.policy} --spec {params.spec:q} --protocol {params.protocol}"
        " --baseline {input.baseline} --data data --sheet {params.sheet} --results results"
        " --out {output} > {log} 2>&1"
