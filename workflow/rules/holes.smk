rule tabulate_holes:
    input:
        records="results/records.parquet",
        edges=series_outputs("edges"),
        repeats=series_outputs("repeats"),
        protocol=protocol_render(),
    output:
        table="results/tables/holes.parquet",
        markdown=report(
            "results/tables/holes.md",
            caption="../report/holes.rst",
            category="Holes",
        ),
    log:
        "results/logs/tabulate_holes.log",
    shell:
        "{DTR_HOLES} holes --records {input.records} --edges {input.edges}"
        " --repeats {input.repeats} --protocol {input.protocol} --out {output.table}"
        " --markdown {output.markdown} > {log} 2>&1"


rule compare_policies:
    input:
        records="results/records.parquet",
        protocol=protocol_render(),
    output:
        table="results/tables/comparison.parquet",
        markdown=report(
            "results/tables/comparison.md",
            caption="../report/comparison.rst",
            category="Policies",
        ),
    log:
        "results/logs/compare_policies.log",
    shell:
        "{DTR_HOLES} compare --records {input.records} --protocol {input.protocol}"
        " --out {output.table} --markdown {output.markdown} > {log} 2>&1"


rule compare_paper:
    input:
        records="results/records.parquet",
        crosscheck="results/tables/crosscheck.parquet",
        published=str(PUBLISHED),
        tables=published_files(),
    output:
        table="results/tables/paper.parquet",
        markdown=report(
            "results/tables/paper.md",
            caption="../report/paper.rst",
            category="Holes",
        ),
    log:
        "results/logs/compare_paper.log",
    shell:
        "{DTR_HOLES} paper --records {input.records} --crosscheck {input.crosscheck}"
        " --published {input.published}"
        " --out {output.table} --markdown {output.markdown} > {log} 2>&1"
