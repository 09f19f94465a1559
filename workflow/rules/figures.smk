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
            multiext("results/figures/zoom-{trace}", ".png", ".pdf"),
            caption="../report/zoom.rst",
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
