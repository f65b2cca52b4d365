"""spaCy pipelines load without importing every package that registers a spaCy factory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from audit.models import nlp


class _Plugins:
    entry_points = True


def test_a_pipeline_that_names_a_plugin_component_is_loaded_again_the_usual_way(monkeypatch):
    import spacy
    from spacy import util

    plugins = _Plugins()
    monkeypatch.setattr(util.registry, "_entry_point_factories", plugins, raising=False)
    seen = []

    def load(model, disable):
        seen.append(plugins.entry_points)
        if not plugins.entry_points:
            raise ValueError("[E002] Can't find factory for 'transformer' for language English (en).")
        return "pipeline"

    monkeypatch.setattr(spacy, "load", load)
    assert nlp.load_pipeline("some_model", []) == "pipeline"
    assert seen == [False, True] and plugins.entry_points  # tried without the plugins, then with them


def test_any_other_error_is_raised_and_the_plugins_are_switched_back_on(monkeypatch):
    import spacy
    from spacy import util

    plugins = _Plugins()
    monkeypatch.setattr(util.registry, "_entry_point_factories", plugins, raising=False)
    monkeypatch.setattr(spacy, "load", lambda model, disable: (_ for _ in ()).throw(OSError("no such model")))
    with pytest.raises(OSError, match="no such model"):
        nlp.load_pipeline("missing", [])
    assert plugins.entry_points


@pytest.mark.slow
def test_the_embedded_pipeline_loads_without_presidio_or_transformers():
    """In a fresh process (Presidio installed, as the test extras install it): the pipeline finds
    entities, and neither Presidio nor transformers was imported to load it."""
    code = ("import sys; from audit.models.nlp import Spacy; s = Spacy();"
            "print([e.label_ for e in s('Ann Smith lives in Oslo.').ents]);"
            "print(sorted(m for m in ('presidio_analyzer', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    ents, imported = out.strip().splitlines()
    assert "GPE" in ents and imported == "[]"
