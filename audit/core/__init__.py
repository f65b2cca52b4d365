"""The data model every other layer uses: spans, documents, corpora, releases and scenarios,
results and their typed findings, the repair targets read from them, statistics, the component
interfaces and their registry, parameter checks and errors, and the persistence the data model
itself needs (atomic files and hashes, checked input trees, where the toolkit keeps its files).
It imports nothing from the rest of anonaudit; how a run runs is :mod:`audit.runtime`.

The contract check a plugin author runs on a component class is public as
:mod:`anonaudit.testing` (``from anonaudit.testing import check_component``); its code is
:mod:`audit.core.contract`."""
