"""The demo: its synthetic population (:mod:`anonaudit.demo.data`, beside the pipeline: the Python
API's ``sample_data`` uses it) and the demo audit (:mod:`anonaudit.demo.run`, a user of the Python API)."""
