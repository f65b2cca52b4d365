"""The synthetic population and the audit spec of ``anonaudit demo``."""
