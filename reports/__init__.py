"""Rendering of results: the HTML audit report (templates in reports/templates/)."""
