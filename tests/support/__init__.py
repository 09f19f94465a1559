"""Helpers the tests share: the trace archive, generated and hand-written traces, a naive
reference simulator, records for the workflow's tests, and the tiny pipeline scenario."""
