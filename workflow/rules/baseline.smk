rule baseline_trace:
    input:
        archive="data/dtr-logs.zip",
    output:
        paths.baseline(),
    log:
        paths.log("baseline/{trace}"),
    benchmark:
        paths.benchmark("baseline/{trace}")
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
        paths.ranking(),
    log:
        paths.log("centrality/{trace}-{digest}-{seed}"),
    benchmark:
        paths.benchmark("centrality/{trace}-{digest}-{seed}")
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
    shell:
        "{DTR_HOLES} rank --trace {wildcards.trace} --seed {wildcards.seed} --data data"
        " --sheet {params.sheet} --results results > {log} 2>&1"
