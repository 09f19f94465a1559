rule render_protocol:
    output:
        "results/protocol/{version}.json",
    log:
        "results/logs/render_protocol/{version}.log",
    params:
        cli=DTR_HOLES,
        protocol=config["protocol"],
    shell:
        "{params.cli} protocol render --protocol {params.protocol} --version {wildcards.version}"
        " --out {output} > {log} 2>&1"
