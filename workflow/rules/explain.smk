rule explain_regions:
    input:
        jobs=series_jobs,
        repeats=layout.series(layout.REPEATS),
        ranking=ranking_input,
    output:
        report(
            directory(layout.series(layout.EXPLANATIONS)),
            patterns=["{name}.png"],
            caption="../report/explain.rst",
            category="Explanations",
            subcategory="{trace}",
        ),
    log:
        layout.log("explain/{trace}/{policy}"),
    benchmark:
        layout.benchmark("explain/{trace}/{policy}")
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        baseline=layout.baseline(),
        protocol=config["protocol"],
        spec=explain_spec,
    shell:
        "{DTR_HOLES} explain-regions --jobs {input.jobs} --repeats {input.repeats}"
        " --trace {wildcards.trace} --policy {wildcards.policy} --spec {params.spec:q}"
        " --protocol {params.protocol} --baseline {params.baseline} --data data"
        " --sheet {params.sheet} --results results --out {output} > {log} 2>&1"
