checkpoint plan_maps:
    input:
        trace_series_jobs,
    output:
        "results/maps/{trace}/plan.json",
    log:
        "results/logs/plan_maps/{trace}.log",
    priority: trace_priority
    params:
        baseline="results/baselines/{trace}.json",
        spec=spec("map-plan"),
        whole=whole_option,
    shell:
        "{DTR_HOLES} map-plan --trace {wildcards.trace} --spec {params.spec:q} --jobs {input}"
        " --baseline {params.baseline} {params.whole} --results results --out {output}"
        " > {log} 2>&1"


rule map_chunk:
    input:
        plan=ancient("results/maps/{trace}/plan.json"),
        baseline="results/baselines/{trace}.json",
        archive="data/dtr-logs.zip",
    output:
        "results/maps/{trace}/{policy}/{first}-{last}.parquet",
    log:
        "results/logs/maps/{trace}/{policy}/{first}-{last}.log",
    benchmark:
        "results/benchmarks/maps/{trace}/{policy}/{first}-{last}.tsv"
    priority: trace_priority
    params:
        sheet=config["trace_sheet"],
        protocol=config["protocol"],
        spec=map_spec,
        chunk=map_chunk_index,
    shell:
        "{DTR_HOLES} map-chunk --first {wildcards.first} --last {wildcards.last}"
        " --chunk {params.chunk} --trace {wildcards.trace} --policy {wildcards.policy}"
        " --spec {params.spec:q} --protocol {params.protocol} --baseline {input.baseline}"
        " --data data --sheet {params.sheet} --results results --out {output} > {log} 2>&1"


rule merge_map:
    input:
        map_chunks,
    output:
        "results/maps/{trace}/{policy}.parquet",
    log:
        "results/logs/merge_map/{trace}/{policy}.log",
    priority: trace_priority
    params:
        baseline="results/baselines/{trace}.json",
    shell:
        "{DTR_HOLES} map-merge --trace {wildcards.trace} --policy {wildcards.policy}"
        " --baseline {params.baseline} --maps {input} --out {output} > {log} 2>&1"


rule tabulate_maps:
    input:
        records="results/records.parquet",
        maps=map_outputs(),
    output:
        table="results/tables/maps.parquet",
        holes="results/tables/map-holes.parquet",
        markdown=report(
            "results/tables/maps.md",
            caption="../report/maps.rst",
            category="Holes",
        ),
    log:
        "results/logs/tabulate_maps.log",
    shell:
        "{DTR_HOLES} map-table --maps {input.maps} --records {input.records}"
        " --out {output.table} --holes {output.holes} --markdown {output.markdown} > {log} 2>&1"


rule plot_maps:
    input:
        trace_maps,
    output:
        report(
            multiext("results/figures/maps-{trace}", ".png", ".pdf"),
            caption="../report/maps-figure.rst",
            category="Figures",
            subcategory="{trace}",
        ),
    log:
        "results/logs/figures/maps-{trace}.log",
    shell:
        "{DTR_HOLES} map-figure --trace {wildcards.trace} --maps {input}"
        " --out results/figures/maps-{wildcards.trace} > {log} 2>&1"
