"""File formats in and out (JSONL, CSV, JSON maps and lists, TAB, the TRI layout, span files).
Used by the pipeline and the command line; plugins never read files themselves.
The public functions are in :mod:`audit.io.loaders`."""
