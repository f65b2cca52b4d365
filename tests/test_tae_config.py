"""A TAE evaluation run here (issue 58): ``anonaudit data convert config.json spec.yaml`` and
``anonaudit run --tae-config config.json`` on TAE-style configs pointing at the shared TAB files.
What cannot run offline is listed as not run with its reason, never as a zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from anonaudit.cli import main

ROOT = Path(__file__).resolve().parents[1]
TAB = ROOT.parent / "shared" / "data" / "tab"
needs_tab = pytest.mark.skipif(not TAB.is_dir(), reason=f"needs the shared TAB data in {TAB}")

ANON = {"St.NER3": "anonymizations/TAB_test_St.NER3_Entity.json",
        "Manual_Supression": "anonymizations/TAB_test_Manual_Supression.json",
        "Word2Vec_t=0.5": "anonymizations/TAB_test_spaCy_Entity.json"}


def _config(tmp_path: Path, corpus: str, metrics: dict) -> Path:
    """A TAE config as TAE's users write one: paths relative to its folder (here, the TAB folder
    reached through a link beside it)."""
    (tmp_path / "data").symlink_to(TAB, target_is_directory=True)
    config = {"corpus_file_path": corpus, "anonymizations": {k: f"data/{v}" for k, v in ANON.items()},
              "results_file_path": "outputs/results.csv", "metrics": metrics}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config, indent=1))
    return path


TAE_METRICS = {
    "Precision": {"token_level": True, "weighting_model_name": None},
    "_Recall": {},
    "PrecisionWeighted": {},
    "RecallPerEntityType": {"include_quasi": True},
    "TPS_TA=4": {"term_alterning": 4},
    "NMI": {"embedding_model_name": "all-MiniLM-L6-v2", "n_clusterings": 3},
    "NMI_mpnet": {"embedding_model_name": "all-mpnet-base-v2"},
    "TRIR": {"output_folder_path": "outputs/tri", "background_knowledge_file_path": "data/bks/TAB_test_BK=Public.json",
             "use_document_curation": True, "anonymize_background_knowledge": True, "finetuning_epochs": 15,
             "finetuning_sliding_window": "100-25", "base_model_name": "distilbert-base-uncased"},
    "Readability": {},
}


@needs_tab
def test_data_convert_maps_every_key_and_says_what_is_not_run(tmp_path):
    config = _config(tmp_path, "data/corpora/TAB_test_Corpus_textonly.json", TAE_METRICS)
    res = CliRunner().invoke(main, ["data", "convert", str(config), str(tmp_path / "spec.yaml")])
    assert res.exit_code == 0, res.output
    spec = yaml.safe_load((tmp_path / "spec.yaml").read_text())
    assert spec["originals"] == str((tmp_path / "data/corpora/TAB_test_Corpus_textonly.json").resolve())
    assert spec["background"] == str((TAB / "bks" / "TAB_test_BK=Public.json").resolve())
    assert [r["name"] for r in spec["releases"]] == ["St.NER3", "Manual_Supression", "Word2Vec_t-0.5"]
    assert spec["out"] == str(tmp_path / "outputs")
    assert spec["metrics"] == [{"name": "tae_precision", "params": {"token_level": True}},
                               {"name": "tae_recall", "params": {"token_level": True, "include_quasi": True}},
                               {"name": "tae_tps", "params": {"mask_every": 4}},
                               {"name": "tae_nmi", "params": {"n_clusterings": 3}}]
    assert spec["attacks"] == [{"name": "trir", "params": {"curate": True, "augment_ner": True, "epochs": 15,
                                                           "window": 100, "overlap": 25}}]
    notes = "\n".join(spec["report"]["notes"])
    for said in ("_Recall: not run, switched off", "PrecisionWeighted: not run (Precision_IC)",
                 "NMI_mpnet: not run, NMI already runs tae_nmi", "Readability: not run, not a TAE metric",
                 "TPS_TA=4: TAE scores information content with google-bert/bert-base-uncased",
                 "'Word2Vec_t=0.5' is named 'Word2Vec_t-0.5'", "TRIR: our TRIR attacker"):
        assert said in notes, said
    assert "not run (Precision_IC)" in res.output  # said on the terminal too
    again = CliRunner().invoke(main, ["data", "convert", str(config), str(tmp_path / "spec.yaml")])
    assert again.exit_code == 0  # its own earlier output is replaced


@needs_tab
def test_a_bad_tae_config_names_the_file_and_key(tmp_path):
    config = _config(tmp_path, "data/corpora/TAB_test_Corpus_textonly.json", {"Precision": {}})
    data = json.loads(config.read_text())
    data["anonymizations"] = {"x": 3}
    config.write_text(json.dumps(data))
    res = CliRunner().invoke(main, ["data", "convert", str(config), str(tmp_path / "spec.yaml")])
    assert res.exit_code == 2 and "config.json: 'anonymizations'" in res.output
    data["anonymizations"] = {"x": "data/anonymizations/missing.json"}
    config.write_text(json.dumps(data))
    res = CliRunner().invoke(main, ["data", "convert", str(config), str(tmp_path / "spec.yaml")])
    assert res.exit_code == 2 and "missing.json" in res.output and not (tmp_path / "spec.yaml").exists()
    res = CliRunner().invoke(main, ["run", "--tae-config", str(config), str(tmp_path / "spec.yaml")])
    assert res.exit_code == 2 and "not both or neither" in res.output


def _annotated_tab(tmp_path: Path) -> str:
    """TAE's annotated corpus layout over the shared texts, with the Manual_Entity mentions as one
    annotator's QUASI mentions (the TAB gold itself is not among the shared files)."""
    texts = json.loads((TAB / "bks" / "TAB_test_BK=Original.json").read_text())
    mentions = json.loads((TAB / "anonymizations" / "TAB_test_Manual_Entity.json").read_text())
    corpus = [{"doc_id": k, "text": t, "annotations": {"annotator1": {"entity_mentions": [
        {"entity_id": f"{k}_e{n}", "entity_type": lab, "identifier_type": "QUASI", "start_offset": s,
         "end_offset": e} for n, (s, e, lab) in enumerate(mentions[k])]}}} for k, t in texts.items()]
    path = tmp_path / "TAB_test_Corpus_proxy.json"
    path.write_text(json.dumps(corpus))
    return path.name


@needs_tab
@pytest.mark.slow
def test_run_tae_config_on_the_shared_tab_files(tmp_path):
    """Precision and RecallPerEntityType on all 127 judgments (spaCy's parse: a minute or two)."""
    corpus = _annotated_tab(tmp_path)
    (tmp_path / corpus).rename(tmp_path / "proxy.json")
    config = _config(tmp_path, "proxy.json", {"Precision": {}, "RecallPerEntityType": {},
                                              "PrecisionWeighted": {}})
    res = CliRunner().invoke(main, ["run", "--tae-config", str(config), "--no-report"])
    assert res.exit_code == 0, res.output
    assert "PrecisionWeighted: not run (Precision_IC)" in res.output
    results = json.loads((tmp_path / "outputs" / "results.json").read_text())
    got = {(r["release"], r["name"]): r for r in results["results"]}
    assert {n for _, n in got} == {"tae_precision", "tae_recall"}  # nothing reported for PrecisionWeighted
    manual = got[("Manual_Supression", "tae_recall")]
    assert manual["value"] == 1.0 and set(manual["details"]["per_entity_type"]) == {
        "CODE", "DATETIME", "DEM", "LOC", "MISC", "ORG", "PERSON", "QUANTITY"}
    assert 0.3 < got[("St.NER3", "tae_recall")]["value"] < got[("Word2Vec_t-0.5", "tae_recall")]["value"] < 1


def test_a_metric_that_cannot_run_offline_is_reported_not_run_never_a_zero(tmp_path):
    """Cheap (one two-sentence document): PrecisionWeighted needs bert-base-uncased, not packaged."""
    text = "Mr John Smith lives in Oslo. He works there."
    (tmp_path / "corpus.json").write_text(json.dumps([{"doc_id": "d1", "text": text, "annotations": {"a1": {
        "entity_mentions": [{"entity_type": "PERSON", "start_offset": 3, "end_offset": 13, "identifier_type": "DIRECT",
                             "entity_id": "e1"}]}}}]))
    (tmp_path / "spans.json").write_text(json.dumps({"d1": [[3, 13, "PERSON"]]}))
    (tmp_path / "config.json").write_text(json.dumps({
        "corpus": "corpus.json", "anonymizations": {"names": "spans.json"}, "results_file_path": "out/results.csv",
        "metrics": {"Precision": {}, "PrecisionWeighted": {}}}))
    res = CliRunner().invoke(main, ["run", "--tae-config", str(tmp_path / "config.json"), "--no-report"])
    assert res.exit_code == 0, res.output
    assert "PrecisionWeighted: not run (Precision_IC): TAE scores information content with google-bert" in res.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(r["name"], r["value"]) for r in results["results"]] == [("tae_precision", 1.0)]
