rule tabulate_holes:
    input:
        records=layout.records_table(),
        edges=series_outputs(layout.EDGES),
        repeats=series_outputs(layout.REPEATS),
        protocol=protocol_render(),
    output:
        table=layout.table("holes"),
        markdown=report(
            layout.table("holes", "md"),
            caption="../report/holes.rst",
            category="Holes",
        ),
    log:
        layout.log("tabulate_holes"),
    shell:
        "{DTR_HOLES} holes --records {input.records} --edges {input.edges}"
        " --repeats {input.repeats} --protocol {input.protocol} --out {output.table}"
        " --markdown {output.markdown} > {log} 2>&1"


rule compare_policies:
    input:
        records=layout.records_table(),
        protocol=protocol_render(),
    output:
        table=layout.table("comparison"),
        markdown=report(
            layout.table("comparison", "md"),
            caption="../report/comparison.rst",
            category="Policies",
        ),
    log:
        layout.log("compare_policies"),
    shell:
        "{DTR_HOLES} compare --records {input.records} --protocol {input.protocol}"
        " --out {output.table} --markdown {output.markdown} > {log} 2>&1"


rule compare_paper:
    input:
        records=layout.records_table(),
        crosscheck=layout.table("crosscheck"),
        published=str(PUBLISHED),
        tables=published_files(),
    output:
        table=layout.table("paper"),
        markdown=report(
            layout.table("paper", "md"),
            caption="../report/paper.rst",
            category="Holes",
        ),
    log:
        layout.log("compare_paper"),
    shell:
        "{DTR_HOLES} paper --records {input.records} --crosscheck {input.crosscheck}"
        " --published {input.published}"
        " --out {output.table} --markdown {output.markdown} > {log} 2>&1"
