rule plot_trace:
    input:
        records="results/records.parquet",
        holes="results/tables/holes.parquet",
        baseline="results/baselines/{trace}.json",
    output:
        report(
            multiext("results/figures/cliffs-{trace}", ".png", ".pdf"),
            caption="../report/cliffs.rst",
            category="Figures",
            subcategory="{trace}",
        ),
        report(
            multiext("results/figures/overhead-{trace}", ".png", ".pdf"),
            caption="../report/overhead.rst",
            category="Figures",
            subcategory="{trace}",
        ),
    log:
        "results/logs/figures/{trace}.log",
    shell:
        "{DTR_HOLES} figures --trace {wildcards.trace} --records {input.records}"
        " --holes {input.holes} --baseline {input.baseline} --out results/figures > {log} 2>&1"


rule plot_zoom:
    input:
        records="results/records.parquet",
        holes="results/tables/holes.parquet",
        baseline="results/baselines/{trace}.json",
    output:
        report(
            multiext("results/figures/zoom-{trace}-{policy}", ".png", ".pdf"),
            caption="../report/zoom.rst",
            category="Figures",
            subcategory="{trace}",
        ),
        table="results/figures/zoom-{trace}-{policy}.md",
    log:
        "results/logs/figures/zoom-{trace}-{policy}.log",
    shell:
        "{DTR_HOLES} zoom --trace {wildcards.trace} --policy {wildcards.policy}"
        " --records {input.records} --holes {input.holes} --baseline {input.baseline}"
        " --out results/figures > {log} 2>&1"


rule plot_figure1:
    input:
        records="results/records.parquet",
        holes="results/tables/holes.parquet",
        baselines=figure1_baselines(),
    output:
        report(
            multiext("results/figures/figure1-dtr", ".png", ".pdf"),
            caption="../report/figure1.rst",
            category="Figures",
        ),
    log:
        "results/logs/figures/figure1-dtr.log",
    params:
        baselines=figure1_option(),
    shell:
        "{DTR_HOLES} figure1 --records {input.records} --holes {input.holes} {params.baselines}"
        " --out results/figures > {log} 2>&1"
