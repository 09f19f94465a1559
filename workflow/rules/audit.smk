# The audit reads every job output and record (they all come before the records table), the
# merged maps (before the maps table) and the explanations.
rule audit_results:
    input:
        records=paths.records_table(),
        tables=expand(
            paths.table("{name}", "{ext}"), name=paths.TABLES, ext=("md", "parquet")
        ),
        protocol=TARGETS.protocol_render(),
        maps=TARGETS.map_targets(),
        explanations=TARGETS.series_outputs(paths.EXPLANATIONS),
        archive="data/dtr-logs.zip",
    output:
        markdown=report(
            paths.audit_report("md"), caption="../report/audit.rst", category="Audit"
        ),
        json=paths.audit_report("json"),
        evidence=paths.evidence_table(),
    log:
        paths.log("audit_results"),
    benchmark:
        paths.benchmark("audit_results")
    threads: config["audit_workers"]
    params:
        sheet=config["trace_sheet"],
        sample=config["audit_sample"],
        seed=config["audit_seed"],
    shell:
        "{DTR_HOLES} audit results --protocol {input.protocol} --data data --sheet {params.sheet}"
        " --sample {params.sample} --seed {params.seed} --workers {threads}"
        " --markdown {output.markdown}"
        " --json {output.json} --evidence {output.evidence} > {log} 2>&1"
