"""Explanations of a hole: the explanation's frozen types and JSON form (`types`) and how one is
built from two replays (`build`). May import: the simulator and `dtrholes.core`."""
