checkpoint plan_maps:
    input:
        trace_series_jobs,
    output:
        paths.map_plan(),
    log:
        paths.log("plan_maps/{trace}"),
    priority: trace_priority
    params:
        baseline=paths.baseline(),
        spec=TARGETS.spec("map-plan"),
        whole=whole_option,
    shell:
        "{DTR_HOLES} map-plan --trace {wildcards.trace} --spec {params.spec:q} --jobs {input}"
        " --baseline {params.baseline} {params.whole} --results results --out {output}"
        " > {log} 2>&1"


rule map_chunk:
    input:
        plan=ancient(paths.map_plan()),
        baseline=paths.baseline(),
        archive="data/dtr-logs.zip",
    output:
        paths.map_chunk(),
    log:
        paths.log("maps/{trace}/{policy}/{first}-{last}"),
    benchmark:
        paths.benchmark("maps/{trace}/{policy}/{first}-{last}")
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
        paths.merged_map(),
    log:
        paths.log("merge_map/{trace}/{policy}"),
    priority: trace_priority
    params:
        baseline=paths.baseline(),
    shell:
        "{DTR_HOLES} map-merge --trace {wildcards.trace} --policy {wildcards.policy}"
        " --baseline {params.baseline} --maps {input} --out {output} > {log} 2>&1"


rule tabulate_maps:
    input:
        records=paths.records_table(),
        maps=TARGETS.map_outputs(),
    output:
        table=paths.table("maps"),
        holes=paths.table("map-holes"),
        markdown=report(
            paths.table("maps", "md"),
            caption="../report/maps.rst",
            category="Holes",
        ),
    log:
        paths.log("tabulate_maps"),
    shell:
        "{DTR_HOLES} map-table --maps {input.maps} --records {input.records}"
        " --out {output.table} --holes {output.holes} --markdown {output.markdown} > {log} 2>&1"


rule plot_maps:
    input:
        trace_maps,
    output:
        report(
            multiext(paths.figure("maps", "{trace}"), ".png", ".pdf"),
            caption="../report/maps-figure.rst",
            category="Figures",
            subcategory="{trace}",
        ),
    log:
        paths.log("figures/maps-{trace}"),
    params:
        out=figure_stem,
    shell:
        "{DTR_HOLES} map-figure --trace {wildcards.trace} --maps {input}"
        " --out {params.out} > {log} 2>&1"
