"""The demo: its synthetic population (:mod:`anonaudit.demo.population`, beside the pipeline: the Python
API's ``sample_data`` uses it) and the demo audit (:mod:`anonaudit.demo.demo_audit`, a user of the Python API)."""
