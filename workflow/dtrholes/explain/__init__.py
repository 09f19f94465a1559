"""Explanations of a hole: the explanation's frozen types and JSON form (`types`), how one is built
from two replays (`build`: the runs, their divergence, the cascade, the retention experiment), the
decisions behind it and the probe of candidates (`decisions`), its mechanism in numbers and
sentences (`mechanism`) and its Markdown reading (`markdown`). May import: the simulator and
`dtrholes.core`."""
