rule crosscheck_simrd:
    input:
        records=paths.records_table(),
        repeats=TARGETS.series_outputs(paths.REPEATS),
        baselines=expand(paths.baseline(), trace=TARGETS.traces),
        protocol=TARGETS.protocol_render(),
        archive="data/dtr-logs.zip",
    output:
        table=paths.table("crosscheck"),
        markdown=report(
            paths.table("crosscheck", "md"),
            caption="../report/crosscheck.rst",
            category="Cross-check",
        ),
    log:
        paths.log("crosscheck_simrd"),
    benchmark:
        paths.benchmark("crosscheck_simrd")
    params:
        sheet=config["trace_sheet"],
        simrd=targets.option("--simrd", [SIMRD]),
    shell:
        "{DTR_HOLES} crosscheck --records {input.records} --repeats {input.repeats}"
        " --baselines {input.baselines} --protocol {input.protocol} {params.simrd} --data data"
        " --sheet {params.sheet} --results results --out {output.table}"
        " --markdown {output.markdown} > {log} 2>&1"
