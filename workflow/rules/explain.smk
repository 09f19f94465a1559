rule explain_regions:
    input:
        jobs=series_jobs,
        repeats="results/repeats/{trace}/{policy}.json",
        ranking=ranking_input,
    output:
        report(
            directory("results/explain/{trace}/{policy}"),
            patterns=["{name}.png"],
            caption="../report/explain.rst",
            category="Explanations",
            subcategory="{trace}",
        ),
    log:
        "results/logs/explain/{trace}/{policy}.log",
    benchmark:
        "results/benchmarks/explain/{trace}/{policy}.tsv"
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        baseline="results/baselines/{trace}.json",
        protocol=config["protocol"],
        spec=explain_spec,
    shell:
        "{DTR_HOLES} explain-regions --jobs {input.jobs} --repeats {input.repeats}"
        " --trace {wildcards.trace} --policy {wildcards.policy} --spec {params.spec:q}"
        " --protocol {params.protocol} --baseline {params.baseline} --data data"
        " --sheet {params.sheet} --results results --out {output} > {log} 2>&1"
