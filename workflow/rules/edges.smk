rule find_edges:
    input:
        series_jobs,
    output:
        paths.series(paths.EDGES),
    log:
        paths.log("edges/{trace}/{policy}"),
    benchmark:
        paths.benchmark("edges/{trace}/{policy}")
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        baseline=paths.baseline(),
        protocol=config["protocol"],
        spec=edge_spec,
    shell:
        "{DTR_HOLES} edges --jobs {input} --trace {wildcards.trace}"
        " --policy {wildcards.policy} --spec {params.spec:q} --protocol {params.protocol}"
        " --baseline {params.baseline} --data data --sheet {params.sheet} --results results"
        " --out {output} > {log} 2>&1"
