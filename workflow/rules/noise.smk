rule tabulate_noise:
    input:
        TARGETS.noise_maps(),
    output:
        table=paths.table("noise"),
        markdown=report(
            paths.table("noise", "md"),
            caption="../report/noise.rst",
            category="Holes",
        ),
        figure=report(
            multiext(paths.figure("noise"), ".png", ".pdf"),
            caption="../report/noise.rst",
            category="Figures",
        ),
    log:
        paths.log("tabulate_noise"),
    params:
        sheet=config["trace_sheet"],
        figure=lambda wildcards, output: os.path.splitext(output.figure[0])[0],
    shell:
        "{DTR_HOLES} noise-table --maps {input} --sheet {params.sheet} --out {output.table}"
        " --markdown {output.markdown} --figure {params.figure} > {log} 2>&1"
