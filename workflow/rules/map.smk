checkpoint plan_maps:
    input:
        trace_series_jobs,
    output:
        layout.map_plan(),
    log:
        layout.log("plan_maps/{trace}"),
    priority: trace_priority
    params:
        baseline=layout.baseline(),
        spec=spec("map-plan"),
        whole=whole_option,
    shell:
        "{DTR_HOLES} map-plan --trace {wildcards.trace} --spec {params.spec:q} --jobs {input}"
        " --baseline {params.baseline} {params.whole} --results results --out {output}"
        " > {log} 2>&1"


rule map_chunk:
    input:
        plan=ancient(layout.map_plan()),
        baseline=layout.baseline(),
        archive="data/dtr-logs.zip",
    output:
        layout.map_chunk(),
    log:
        layout.log("maps/{trace}/{policy}/{first}-{last}"),
    benchmark:
        layout.benchmark("maps/{trace}/{policy}/{first}-{last}")
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
        layout.merged_map(),
    log:
        layout.log("merge_map/{trace}/{policy}"),
    priority: trace_priority
    params:
        baseline=layout.baseline(),
    shell:
        "{DTR_HOLES} map-merge --trace {wildcards.trace} --policy {wildcards.policy}"
        " --baseline {params.baseline} --maps {input} --out {output} > {log} 2>&1"


rule tabulate_maps:
    input:
        records=layout.records_table(),
        maps=map_outputs(),
    output:
        table=layout.table("maps"),
        holes=layout.table("map-holes"),
        markdown=report(
            layout.table("maps", "md"),
            caption="../report/maps.rst",
            category="Holes",
        ),
    log:
        layout.log("tabulate_maps"),
    shell:
        "{DTR_HOLES} map-table --maps {input.maps} --records {input.records}"
        " --out {output.table} --holes {output.holes} --markdown {output.markdown} > {log} 2>&1"


rule plot_maps:
    input:
        trace_maps,
    output:
        report(
            multiext(layout.figure("maps", "{trace}"), ".png", ".pdf"),
            caption="../report/maps-figure.rst",
            category="Figures",
            subcategory="{trace}",
        ),
    log:
        layout.log("figures/maps-{trace}"),
    shell:
        "{DTR_HOLES} map-figure --trace {wildcards.trace} --maps {input}"
        " --out results/figures/maps-{wildcards.trace} > {log} 2>&1"
