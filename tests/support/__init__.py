"""Helpers the tests share: the trace archive, generated and hand-written traces, records for
the workflow's tests, and the tiny pipeline scenario."""
