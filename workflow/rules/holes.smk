rule tabulate_holes:
    input:
        records=paths.records_table(),
        edges=TARGETS.series_outputs(paths.EDGES),
        repeats=TARGETS.series_outputs(paths.REPEATS),
        protocol=TARGETS.protocol_render(),
    output:
        table=paths.table("holes"),
        markdown=report(
            paths.table("holes", "md"),
            caption="../report/holes.rst",
            category="Holes",
        ),
    log:
        paths.log("tabulate_holes"),
    shell:
        "{DTR_HOLES} holes --records {input.records} --edges {input.edges}"
        " --repeats {input.repeats} --protocol {input.protocol} --out {output.table}"
        " --markdown {output.markdown} > {log} 2>&1"


rule compare_policies:
    input:
        records=paths.records_table(),
        protocol=TARGETS.protocol_render(),
    output:
        table=paths.table("comparison"),
        markdown=report(
            paths.table("comparison", "md"),
            caption="../report/comparison.rst",
            category="Policies",
        ),
    log:
        paths.log("compare_policies"),
    shell:
        "{DTR_HOLES} compare --records {input.records} --protocol {input.protocol}"
        " --out {output.table} --markdown {output.markdown} > {log} 2>&1"


rule compare_paper:
    input:
        records=paths.records_table(),
        crosscheck=paths.table("crosscheck"),
        published=str(PUBLISHED),
        tables=targets.published_files(PUBLISHED),
    output:
        table=paths.table("paper"),
        markdown=report(
            paths.table("paper", "md"),
            caption="../report/paper.rst",
            category="Holes",
        ),
    log:
        paths.log("compare_paper"),
    shell:
        "{DTR_HOLES} paper --records {input.records} --crosscheck {input.crosscheck}"
        " --published {input.published}"
        " --out {output.table} --markdown {output.markdown} > {log} 2>&1"
