"""TAE's published TAB figures (``../shared/data/reference/TAE_Results_TAB.csv``, 12 sanitizations)
recomputed by TAE's definitions (issue 58), with ``benchmarks/tae_tab.py``'s mapping of columns to
span files.

Precision and Recall need TAE's annotated corpus (``corpora/TAB_test_Corpus.json``: the TAB gold
with identifier types); the shared data does not hold it, so the exact check says so and is
skipped. What the shared files allow is checked on the closest gold there is (annotator 1's
mentions from ``TAB_test_Manual_Entity.json``, NO_MASK ones included): the counting ranks the 12
sanitizations as TAE's published Recall does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import tae_tab  # noqa: E402  (the benchmark's mapping and loaders)

TAB = tae_tab.TAB
needs_tab = pytest.mark.skipif(not (TAB.is_dir() and tae_tab.REFERENCE.exists()),
                               reason=f"needs the shared TAB data in {TAB} and {tae_tab.REFERENCE}")


@needs_tab
def test_the_published_figures_and_their_files_are_all_there():
    pub = tae_tab.published()
    assert set(pub["Precision"]) == set(tae_tab.FILES) == set(pub["Recall"])
    for stem in tae_tab.FILES.values():
        assert (TAB / "anonymizations" / f"TAB_test_{stem}.json").exists(), stem


@needs_tab
@pytest.mark.skipif(not tae_tab.GOLD.exists(), reason=f"TAE's annotated TAB corpus {tae_tab.GOLD} (the TAB gold "
                                                      "with identifier types) is not among the shared files")
def test_precision_and_recall_match_the_published_figures():
    out = tae_tab.evaluate(["tae_precision", "tae_recall"])
    pub = tae_tab.published()
    assert out["exact_gold"]
    for method, row in out["table"].items():
        assert row["tae_precision"] == pytest.approx(pub["Precision"][method], abs=0.005), method
        assert row["tae_recall"] == pytest.approx(pub["Recall"][method], abs=0.005), method


@needs_tab
def test_on_the_closest_gold_recall_ranks_the_sanitizations_as_tae_published():
    out = tae_tab.evaluate(["tae_recall", "tae_precision"], docs=10)
    pub = tae_tab.published()
    table = out["table"]
    assert not out["exact_gold"]
    ours = [table[m]["tae_recall"] for m in tae_tab.FILES]
    theirs = [pub["Recall"][m] for m in tae_tab.FILES]
    assert tae_tab.spearman(ours, theirs) >= 0.9
    manual = [m for m in tae_tab.FILES if m.startswith("Manual")]
    assert all(table[m]["tae_recall"] == 1.0 == pub["Recall"][m] for m in manual)
    # the proxy gold counts NO_MASK mentions as gold, so precision is higher than published everywhere
    assert all(table[m]["tae_precision"] > pub["Precision"][m] for m in tae_tab.FILES)
