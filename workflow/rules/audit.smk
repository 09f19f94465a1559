# The audit reads every job output and record (they all come before the records table), the
# merged maps (before the maps table) and the explanations.
rule audit_results:
    input:
        records="results/records.parquet",
        tables=expand("results/tables/{name}.{ext}", name=TABLES, ext=("md", "parquet")),
        protocol=protocol_render(),
        maps=map_targets(),
        explanations=series_outputs("explain", suffix=""),
        archive="data/dtr-logs.zip",
    output:
        markdown=report(
            "results/audit/audit.md", caption="../report/audit.rst", category="Audit"
        ),
        json="results/audit/audit.json",
        evidence="results/evidence.csv",
    log:
        "results/logs/audit_results.log",
    benchmark:
        "results/benchmarks/audit_results.tsv"
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
