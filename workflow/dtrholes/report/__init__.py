"""The findings as tables and figures: each policy against DTR (`hypotheses`), the study's
published results beside ours (`paper`), the figures (`figures`). May import: the simulator,
`dtrholes.core`, `traces`, `study`, `holes` and `explain`."""
