rule plot_trace:
    input:
        records=layout.records_table(),
        holes=layout.table("holes"),
        baseline=layout.baseline(),
    output:
        report(
            multiext(layout.figure("cliffs", "{trace}"), ".png", ".pdf"),
            caption="../report/cliffs.rst",
            category="Figures",
            subcategory="{trace}",
        ),
        report(
            multiext(layout.figure("overhead", "{trace}"), ".png", ".pdf"),
            caption="../report/overhead.rst",
            category="Figures",
            subcategory="{trace}",
        ),
    log:
        layout.log("figures/{trace}"),
    shell:
        "{DTR_HOLES} figures --trace {wildcards.trace} --records {input.records}"
        " --holes {input.holes} --baseline {input.baseline} --out results/figures > {log} 2>&1"


rule plot_zoom:
    input:
        records=layout.records_table(),
        holes=layout.table("holes"),
        baseline=layout.baseline(),
    output:
        report(
            multiext(layout.figure("zoom", "{trace}", "{policy}"), ".png", ".pdf"),
            caption="../report/zoom.rst",
            category="Figures",
            subcategory="{trace}",
        ),
        table=layout.figure("zoom", "{trace}", "{policy}") + ".md",
    log:
        layout.log("figures/zoom-{trace}-{policy}"),
    shell:
        "{DTR_HOLES} zoom --trace {wildcards.trace} --policy {wildcards.policy}"
        " --records {input.records} --holes {input.holes} --baseline {input.baseline}"
        " --out results/figures > {log} 2>&1"


rule plot_figure1:
    input:
        records=layout.records_table(),
        holes=layout.table("holes"),
        baselines=figure1_baselines(),
    output:
        report(
            multiext(figure1(), ".png", ".pdf"),
            caption="../report/figure1.rst",
            category="Figures",
        ),
    log:
        layout.log("figures/figure1-dtr"),
    params:
        baselines=figure1_option(),
    shell:
        "{DTR_HOLES} figure1 --records {input.records} --holes {input.holes} {params.baselines}"
        " --out results/figures > {log} 2>&1"
