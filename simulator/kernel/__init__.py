"""The compiled replay: simrd's RuntimeV2EagerOptimized decisions, step for step, on arrays.

State is a handful of dense arrays: scalars in `g`, per-storage fields as rows of `sv`, region
bitsets as planes of `bits` (one row of words per storage). Regions (evicted neighbourhoods)
are absorbed exactly where simrd absorbs them and rebuilt to the same values it rebuilds, so
the region compute values, and with them every score, equal simrd's (see `regions.owe` for the
rebuilds done later than simrd's, `refresh` for those done without a search). Functions take
the few arrays they need, and `replay` hands them on as views without a reference count
(`loop._borrow`): each counted array passed costs two atomic updates, which dominated earlier
versions.

Modules, each importing only the ones listed before it (and `simulator.layout`,
`simulator.scoring`): `state` (the arrays, the vocabulary of their indices, the `Setting` a
replay runs under), `pool`, `bitsets`, `regions`, `refresh`, `classes`, `candidates` (scores
and the scan), `choice` (the policy's rule), `operations` (evict, compute), `recording`
(events), `loop` (`replay`, the only function cached on disk). A decision goes one way down:
loop, choice, candidates, then the policy's generated score (`simulator.scoring`). Callers use
`replay`, `Setting`, `new_state`, `new_work` and the vocabulary of `state`, all of it here.
"""

from simulator.kernel import state
from simulator.kernel.loop import replay
from simulator.kernel.regions import rebuild
from simulator.kernel.state import *  # noqa: F403  (the vocabulary: see state.__all__)

__all__ = ["rebuild", "replay", *state.__all__]
