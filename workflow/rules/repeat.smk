rule repeat_regions:
    input:
        series_jobs,
    output:
        paths.series(paths.REPEATS),
    log:
        paths.log("repeats/{trace}/{policy}"),
    benchmark:
        paths.benchmark("repeats/{trace}/{policy}")
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        baseline=paths.baseline(),
        protocol=config["protocol"],
        spec=repeat_spec,
    shell:
        "{DTR_HOLES} repeat --jobs {input} --trace {wildcards.trace}"
        " --policy {wildcards.policy} --spec {params.spec:q} --protocol {params.protocol}"
        " --baseline {params.baseline} --data data --sheet {params.sheet} --results results"
        " --out {output} > {log} 2>&1"
