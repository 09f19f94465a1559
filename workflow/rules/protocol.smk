rule render_protocol:
    output:
        "results/protocol/{version}.json",
    log:
        "results/logs/render_protocol/{version}.log",
    params:
        protocol=config["protocol"],
    shell:
        "{DTR_HOLES} protocol render --protocol {params.protocol} --version {wildcards.version}"
        " --out {output} > {log} 2>&1"
