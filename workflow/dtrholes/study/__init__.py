"""Planning and running a study: the protocol and its amendments (`protocol`), its parameters
typed (`parameters`), the run settings (`settings`), the points each stage asks for (`plan`),
execution records (`records`), the guarded runner (`runner`) and unmodified simrd run on the same
points (`simrd`, `simrd_driver`). May import: the simulator, `dtrholes.core` and
`dtrholes.traces`."""
