rule crosscheck_simrd:
    input:
        records="results/records.parquet",
        repeats=series_outputs("repeats"),
        baselines=expand("results/baselines/{trace}.json", trace=TRACES),
        protocol=protocol_render(),
        archive="data/dtr-logs.zip",
    output:
        table="results/tables/crosscheck.parquet",
        markdown=report(
            "results/tables/crosscheck.md",
            caption="../report/crosscheck.rst",
            category="Cross-check",
        ),
    log:
        "results/logs/crosscheck_simrd.log",
    benchmark:
        "results/benchmarks/crosscheck_simrd.tsv"
    params:
        sheet=config["trace_sheet"],
        simrd=simrd_option(),
    shell:
        "{DTR_HOLES} crosscheck --records {input.records} --repeats {input.repeats}"
        " --baselines {input.baselines} --protocol {input.protocol} {params.simrd} --data data"
        " --sheet {params.sheet} --results results --out {output.table}"
        " --markdown {output.markdown} > {log} 2>&1"
