rule explain_regions:
    input:
        jobs=series_jobs,
        repeats=paths.series(paths.REPEATS),
        ranking=ranking_input,
    output:
        report(
            directory(paths.series(paths.EXPLANATIONS)),
            patterns=["{name}.png"],
            caption="../report/explain.rst",
            category="Explanations",
            subcategory="{trace}",
        ),
    log:
        paths.log("explain/{trace}/{policy}"),
    benchmark:
        paths.benchmark("explain/{trace}/{policy}")
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        baseline=paths.baseline(),
        protocol=config["protocol"],
        spec=explain_spec,
    shell:
        "{DTR_HOLES} explain-regions --jobs {input.jobs} --repeats {input.repeats}"
        " --trace {wildcards.trace} --policy {wildcards.policy} --spec {params.spec:q}"
        " --protocol {params.protocol} --baseline {params.baseline} --data data"
        " --sheet {params.sheet} --results results --out {output} > {log} 2>&1"
