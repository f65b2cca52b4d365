"""The demo: its synthetic population (:mod:`audit.demo.data`, beside the pipeline: the Python
API's ``sample_data`` uses it) and the demo audit (:mod:`audit.demo.run`, a user of the Python API)."""
