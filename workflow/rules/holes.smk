rule tabulate_holes:
    input:
        "results/records.parquet",
    output:
        table="results/holes/holes.parquet",
        markdown=report(
            "results/holes/holes.md",
            caption="../report/holes.rst",
            category="Holes",
        ),
    log:
        "results/logs/tabulate_holes.log",
    params:
        cli=DTR_HOLES,
    shell:
        "{params.cli} holes --records {input} --out {output.table}"
        " --markdown {output.markdown} > {log} 2>&1"
