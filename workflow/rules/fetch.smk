rule fetch_traces:
    output:
        archive="data/dtr-logs.zip",
    log:
        paths.log("fetch_traces"),
    params:
        sheet=config["trace_sheet"],
        archive=f"--archive {config['archive']}" if config["archive"] else "",
    shell:
        "{DTR_HOLES} fetch --data data --sheet {params.sheet} {params.archive} > {log} 2>&1"
