rule plot_trace:
    input:
        records=paths.records_table(),
        holes=paths.table("holes"),
        baseline=paths.baseline(),
    output:
        report(
            multiext(paths.figure("cliffs", "{trace}"), ".png", ".pdf"),
            caption="../report/cliffs.rst",
            category="Figures",
            subcategory="{trace}",
        ),
        report(
            multiext(paths.figure("overhead", "{trace}"), ".png", ".pdf"),
            caption="../report/overhead.rst",
            category="Figures",
            subcategory="{trace}",
        ),
    log:
        paths.log("figures/{trace}"),
    params:
        out=figures_dir,
    shell:
        "{DTR_HOLES} figures --trace {wildcards.trace} --records {input.records}"
        " --holes {input.holes} --baseline {input.baseline} --out {params.out} > {log} 2>&1"


rule plot_zoom:
    input:
        records=paths.records_table(),
        holes=paths.table("holes"),
        baseline=paths.baseline(),
    output:
        report(
            multiext(paths.figure("zoom", "{trace}", "{policy}"), ".png", ".pdf"),
            caption="../report/zoom.rst",
            category="Figures",
            subcategory="{trace}",
        ),
        table=paths.figure("zoom", "{trace}", "{policy}") + ".md",
    log:
        paths.log("figures/zoom-{trace}-{policy}"),
    params:
        out=figures_dir,
    shell:
        "{DTR_HOLES} zoom --trace {wildcards.trace} --policy {wildcards.policy}"
        " --records {input.records} --holes {input.holes} --baseline {input.baseline}"
        " --out {params.out} > {log} 2>&1"


rule plot_figure1:
    input:
        records=paths.records_table(),
        holes=paths.table("holes"),
        baselines=TARGETS.figure1_baselines(),
    output:
        report(
            multiext(TARGETS.figure1_path(), ".png", ".pdf"),
            caption="../report/figure1.rst",
            category="Figures",
        ),
    log:
        paths.log("figures/figure1-dtr"),
    params:
        baselines=targets.option("--baseline", TARGETS.figure1_baselines()),
        out=figures_dir,
    shell:
        "{DTR_HOLES} figure1 --records {input.records} --holes {input.holes} {params.baselines}"
        " --out {params.out} > {log} 2>&1"
