"""The study's published results beside this project's: the published data and the study's own
names and rules as data (`published`), its rules computing its tables (`rules`), the comparison
point by point and cell by cell (`comparison`) and its Markdown and Parquet forms (`output`).
May import what `dtrholes.report` may, and `report.hypotheses`."""
