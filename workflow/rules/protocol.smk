rule render_protocol:
    output:
        paths.protocol_render(),
    log:
        paths.log("render_protocol/{version}"),
    params:
        protocol=config["protocol"],
    shell:
        "{DTR_HOLES} protocol render --protocol {params.protocol} --version {wildcards.version}"
        " --out {output} > {log} 2>&1"
