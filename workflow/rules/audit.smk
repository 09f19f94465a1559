# The audit reads every job output and record (they all come before the records table), the
# merged maps (before the maps table) and the explanations.
rule audit_results:
    input:
        records=layout.records_table(),
        tables=expand(
            layout.table("{name}", "{ext}"), name=layout.TABLES, ext=("md", "parquet")
        ),
        protocol=protocol_render(),
        maps=map_targets(),
        explanations=series_outputs(layout.EXPLANATIONS),
        archive="data/dtr-logs.zip",
    output:
        markdown=report(
            layout.audit_report("md"), caption="../report/audit.rst", category="Audit"
        ),
        json=layout.audit_report("json"),
        evidence=layout.evidence_table(),
    log:
        layout.log("audit_results"),
    benchmark:
        layout.benchmark("audit_results")
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
