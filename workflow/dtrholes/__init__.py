"""dtr-holes: the workflow package around the DTR simulator (fetching, sweeps, reports)."""

__version__ = "0.1.0"
