"""The audit spec, the runner that drives every component over every release, the gate, and
the provenance of a run (built here and nowhere else)."""
