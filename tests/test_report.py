import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from anonaudit.demo.population import write as write_demo
from audit.core.results import Finding, Highlight, Result, ResultsFile
from audit.pipeline.runner import Audit, load_spec
from audit.core.stats import risk
from reports.render import load_release_texts, render, segments, write_report
from reports.shareable import shareable
from tests.test_runner import make_spec, toy_registry

HOSTILE = ("<script>alert(1)</script> {{ 7*7 }} {% for x in y %} \u202eevil\u202c "
           "<img src=x onerror=alert(2)> &amp; " + "W" * 30_000)


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict]]:
    p = _Tags()
    p.feed(html)
    return p.tags


def hostile_results() -> ResultsFile:
    docs = [Finding(id="<b>doc</b>\u202e1", success=True, summary="<script>alert(5)</script> {{ 6*6 }}",
                    facts={"linked": True, "confidence": 0.8, "predicted": "<i>Mr X</i>", "text": HOSTILE},
                    highlights=[Highlight(0, 8, "<script>", "</mark><script>alert(3)</script>"),
                                Highlight(5, 20, "n-gram", "{{ config }}"), Highlight(10**9, 10**9 + 5, "bad"),
                                Highlight("x", 3, "")],  # type: ignore[arg-type]  # a malformed offset is skipped
                    private={"predicted", "text"})]
    rf = ResultsFile(provenance={"title": "<script>t()</script>", "argv": ["{{ 1+1 }}"]})
    rf.add(Result.from_risk("<svg onload=alert(4)>", "rel\u202e<x>", risk(3, 4, 0.1), documents=docs,
                            details={"description": "<script>d()</script>"}))
    rf.add(Result("utility", "tpi", "rel\u202e<x>", 0.7, (0.6, 0.8), 4))
    return rf


def test_hostile_text_renders_inert():
    html = render(hostile_results())
    scripts = [t for t, _ in tags_of(html) if t == "script"]
    assert len(scripts) == 1  # only the report's own sorting script
    assert not any(t in ("img", "svg") and ("onerror" in a or "onload" in a) for t, a in tags_of(html))
    plain = re.sub(r"</?mark[^>]*>", "", html)  # highlights split the text; read it without them
    assert "&lt;script&gt;alert(1)&lt;/script&gt; {{ 7*7 }}" in plain
    assert "{{ 7*7 }}" in html and "{% for x in y %}" in html  # shown literally, never evaluated
    assert "\u202e" not in html and "[U+202E]evil[U+202C]" in html  # bidi overrides made visible
    assert "Shown: the first 20,000 of" in html  # a 30,000-character line is cut, not rendered whole
    assert "&lt;/mark&gt;&lt;script&gt;alert(3)" in html
    assert "&lt;script&gt;alert(5)&lt;/script&gt; {{ 6*6 }}" in html  # the summary, escaped
    # highlights are real <mark> elements around the right text, bad offsets ignored
    assert re.search(r'<mark class="a0" title="[^"]*">&lt;scri</mark>', html)
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html)
    assert "<link" not in html and "@import" not in html


def test_segments_flatten_overlaps_and_clip():
    kinds = {}
    segs = segments("abcdefghij", [{"start": 2, "end": 6, "kind": "a"}, {"start": 4, "end": 8, "kind": "b"},
                                   {"start": 9, "end": 99, "kind": "c"}, {"start": 5, "end": 5, "kind": "d"}], kinds)
    assert "".join(s.text for s in segs) == "abcdefghij"
    assert [(s.text, s.cls) for s in segs] == [("ab", ""), ("cd", "hl0"), ("ef", "hl0"), ("gh", "hl1"),
                                               ("i", ""), ("j", "hl2")]
    assert segs[2].title == "a; b"


@pytest.fixture
def audited(tmp_path):
    write_demo(tmp_path / "data", n=8, seed=2)
    reg = toy_registry()
    spec = load_spec(make_spec(tmp_path), registry=reg)
    outcome = Audit(spec, registry=reg, progress=False, echo=None).run()
    return tmp_path, outcome


def _private_strings(root: Path) -> tuple[list[str], list[str]]:
    """(original texts and replaced original spans, subject ids) of the demo data."""
    originals = [json.loads(line) for line in (root / "data/originals.jsonl").read_text().splitlines()]
    released = " ".join(json.loads(line)["text"] for p in (root / "out/releases").glob("*.jsonl")
                        for line in p.read_text().splitlines())
    private = [d["text"] for d in originals]
    private += [d["text"][s["start"]:s["end"]] for d in originals for s in d.get("spans", [])
                if len(d["text"][s["start"]:s["end"]]) >= 4 and d["text"][s["start"]:s["end"]] not in released]
    return private, sorted({d["subject"] for d in originals})


def test_shareable_report_contains_no_original_text(audited):
    root, outcome = audited
    rf = ResultsFile.load(outcome.path)
    texts = load_release_texts(outcome.path, rf)
    private, subjects = _private_strings(root)
    assert len(private) > 20
    internal = render(rf, texts=texts)
    # The internal edition does show originals (so this test can fail) ...
    assert any(s in internal for s in subjects)
    assert any(p.replace('"', "&#34;") in internal or p in internal for p in private[8:])
    # ... the shareable edition shows none of them, nor the predicted subjects.
    html = render(rf, texts=texts, shareable=True)
    html = re.sub(r"[0-9a-f]{12,64}", "#", html)  # hashes in the provenance can contain "1997"
    leaked = [p for p in private if p in html or p.replace('"', "&#34;") in html]
    assert leaked == []
    assert not any(s in html for s in subjects)
    assert "shareable edition" in html
    # Evidence is still shown inside the sanitized text.
    assert "<mark" in html and "Documents" in html


def test_shareable_pass_keeps_numbers_and_drops_strings():
    rf = ResultsFile()
    rf.add(Result.from_risk("a", "r", risk(1, 2, 0.1), details={
        "per_type": {"PERSON": 0.5, "Galip Yalman": 1.0}, "examples": ["Galip Yalman"], "unit": "spans",
        "orig_text": "x"}, documents=[Finding(
            id="d1", success=True, summary="Recovered the name",
            facts={"original": "Galip", "orig_start": 3, "guess": "Galip", "claims": ["Galip lives in Ankara"],
                   "correct": True, "rank": 2, "sanitized_text": "[PERSON] lives", "label": "PERSON"},
            private={"original", "orig_start", "guess", "claims"},
            highlights=[Highlight(0, 8, "span", "Galip"), Highlight(9, 14, "Galip Yalman", "x")])]))
    out = shareable(rf).results[0]
    assert out.details["per_type"] == {"PERSON": 0.5} and out.details["unit"] == "spans"
    assert "examples" not in out.details and "orig_text" not in out.details
    assert out.documents == (Finding(id="D01", success=True, summary="Recovered the name",  # ids: pseudonyms
                                     facts={"correct": True, "rank": 2, "sanitized_text": "[PERSON] lives",
                                            "label": "PERSON"},
                                     private={"original", "orig_start", "guess", "claims"},
                                     highlights=[Highlight(0, 8, "span"), Highlight(9, 14, "finding")]),)


def _verdict_of(html: str) -> str:
    return html[html.index('id="verdict"'):html.index("</section>", html.index('id="verdict"'))]


def test_verdict_first_one_line_per_release_with_what_decides_it_and_no_cap():
    """Issue 18: one line per release (never capped at 8 and announced as a total), a risk level
    without a gate, the attacks that decide it, the documents exposed and the fix."""
    from audit.core.registry import registry

    # the fix is the remedy the run recorded for the attack (the runner writes it into the provenance)
    rf = ResultsFile(provenance={"components": {"attack:trir": {
        "kind": "attack", "name": "trir", "remedy": registry.get("attack", "trir").remedy}}})
    for i in range(10):
        docs = [Finding(f"d{j}", j < 30 - i) for j in range(40)]
        rf.add(Result.from_risk("trir", f"rel{i:02d}", risk(30 - i, 40, 0.025), documents=docs))
    rf.add(Result.from_risk("span_guess", "rel00", risk(1, 40, 0.05)))
    html = render(rf)
    verdict = _verdict_of(html)
    assert html.index('id="verdict"') < html.index('id="matrix"') < html.index('id="picture"')
    assert verdict.count('class="vline') == 10  # every release, not the first eight
    assert "HIGH RISK" in verdict and "rel09" in verdict
    assert "30 of 40 documents exposed" in verdict and "21 of 40 documents exposed" in verdict
    assert "TRIR 75.0% (95% CI" in verdict and "chance 2.5%: 30 of 40 documents" in verdict
    # the fix comes from the attack's own remedy sentence, filled with its counts
    assert "Fix first:" in verdict and "names the person in 30 of 40 documents" in verdict
    # A score averaged over documents is not phrased as a count of successes.
    rf.add(Result("attack", "style_probe", "rel00", 0.62, (0.5, 0.74), 3))
    assert "Style probe averaged 62.0% over 3 trials in release “rel00”" in render(rf)
    # An attack's further measures stay out of the verdict and the matrix (they are in its section).
    rf.add(Result.from_risk("trir.top5", "rel00", risk(38, 40, 0.1)))
    with_more = render(rf)
    verdict = _verdict_of(with_more)
    matrix = with_more[with_more.index('id="matrix"'):with_more.index('id="picture"')]
    assert "top-5" not in verdict and "95.0%" not in verdict and "top-5" not in matrix
    attacks = with_more[with_more.index('id="attack-trir"'):]
    assert "TRIR: top-5" in attacks[:attacks.index('id="attack-', 10)]
    assert "No utility metric is in these results" in html and 'id="chart-risk"' in html
    # below chance: no risk shown
    quiet = ResultsFile()
    quiet.add(Result.from_risk("trir", "r", risk(1, 40, 0.025)))
    assert "NO RISK SHOWN" in _verdict_of(render(quiet))
    # ... unless the attacker that showed nothing failed its own check
    weak = ResultsFile()
    weak.add(Result.from_risk("span_guess", "r", risk(0, 8, 0.25), details={"warning": "weaker than its baseline"}))
    verdict = _verdict_of(render(weak))
    assert "NO RISK SHOWN" not in verdict and '<span class="vword inconclusive">INCONCLUSIVE</span>' in verdict


def test_a_checked_further_measure_counts_in_the_verdict_and_a_failed_one_makes_it_inconclusive():
    """One rule for the semantic attacks (issue 44): a further measure counts in the verdict when
    it says it passed its own check (``in_verdict``); one whose check failed carries a warning,
    never counts, and makes a verdict that nothing else decides INCONCLUSIVE."""
    def results(**leak):
        rf = ResultsFile()
        rf.add(Result.from_risk("claim_linker", "r", risk(1, 40, 0.025)))  # linking shows nothing
        rf.add(Result("attack", "claim_linker.leakage", "r", 0.62, (0.55, 0.7), 10,
                      baseline=leak.pop("baseline", 0.05), **leak))
        return rf

    checked = _verdict_of(render(results(beats_baseline=True, details={"in_verdict": True})))
    assert "HIGH RISK" in checked and "62.0%" in checked
    assert "HIGH RISK" in _verdict_of(render(results(beats_baseline=True, details={"in_verdict": True}),
                                             shareable=True))
    # not declared: a further measure stays out, as before
    assert "NO RISK SHOWN" in _verdict_of(render(results(beats_baseline=True)))
    # not above its baseline: counted, but shows no risk
    assert "NO RISK SHOWN" in _verdict_of(render(results(beats_baseline=False, baseline=0.6,
                                                         details={"in_verdict": True})))
    failed = _verdict_of(render(results(details={"in_verdict": False, "warning": "the judge failed its control"})))
    assert "INCONCLUSIVE" in failed and "62.0%" not in failed


def test_a_components_warning_about_its_own_figure_is_shown_in_both_editions():
    rf = ResultsFile()
    rf.add(Result("attack", "claim_linker.leakage", "labels", 0.9, None, 3,
                  details={"warning": "the judge <b>failed</b> its control", "note": "private <i>detail</i>"}))
    for html in (render(rf), render(rf, shareable=True)):
        assert "Claim linker: leakage on labels" in html and "the judge &lt;b&gt;failed&lt;/b&gt; its control" in html
    assert "private" not in render(rf, shareable=True)
    # The same warning on several releases is shown once, naming them all.
    rf.add(Result("attack", "claim_linker.leakage", "masked", 0.8, None, 3,
                  details={"warning": "the judge <b>failed</b> its control"}))
    html = render(rf)
    assert _verdict_of(html).count("its control") == 1 and "Claim linker: leakage on labels, masked" in html


def test_tradeoff_chart_with_utility_and_gate_in_report(audited):
    root, outcome = audited
    res = CliRunner().invoke(main, ["report", str(outcome.path), "--out", str(root / "r.html"),
                                    "--max", "toy_leak=0.99", "--min", "toy_keep=0.95"])
    assert res.exit_code == 0, res.output
    html = (root / "r.html").read_text()
    assert 'class="chart pareto"' in html and 'id="gate-table"' in html
    assert 'class="vword fail">FAIL' in html
    assert html.count("<circle") >= 4
    # the CSV of every per-document finding is written beside the report and linked from it
    assert (root / "r.csv").is_file() and 'href="r.csv"' in html
    # A report with a bad threshold is refused with a clear message.
    res = CliRunner().invoke(main, ["report", str(outcome.path), "--max", "toy_leak"])
    assert res.exit_code == 2 and "expected NAME=VALUE" in res.output


def test_report_of_results_without_runner_provenance(tmp_path):
    rf = ResultsFile(provenance={"tool": "anonaudit", "runs": [{"command": "attack trir"}]})
    rf.add(Result.from_risk("trir", "r1", risk(5, 10, 0.1), documents=[Finding("a", True, facts={"correct": True})]))
    path = write_report(tmp_path / "x.html", rf)
    html = path.read_text()
    assert "Documents" in html and "attack trir" in html and "TRIR" in html


def test_highlights_are_drawn_on_the_document_they_point_into():
    from reports.render import render

    rf = ResultsFile()
    texts = {"r": {"a": "alpha text here", "b": "bravo words there"}}
    # Document a was (wrongly) linked to b: its evidence lies in b's text.
    rf.add(Result.from_risk("claim_linker", "r", risk(0, 1, 0.5), documents=[
        Finding("a", False, highlights_in="b", highlights=[Highlight(0, 5, "claim", "a claim of the original")],
                facts={"correct": False})]))
    for shareable_edition in (False, True):  # the shareable filter keeps where the evidence lies
        html = render(rf, texts=texts, shareable=shareable_edition)
        assert ">bravo</mark>" in html and ">alpha</mark>" not in html


def test_private_facts_of_a_finding_never_reach_the_shareable_report():
    rf = ResultsFile()
    finding = Finding("d1", True, "Guessed PRIVSUMMARY for the span", private={"guess", "orig_note", "summary"},
                      highlights=[Highlight(0, 5, "span", "PRIVNOTE: guessed PRIVGUESS")],
                      facts={"guess": "PRIVGUESS", "orig_note": "PRIVORIGINAL", "rank": 7, "label": "PUBLABEL",
                             "verdict": "PUBVERDICT"})
    rf.add(Result.from_risk("span_guess", "r", risk(1, 1, 0.1), documents=[finding]))
    texts = {"r": {"d1": "Hello there"}}
    internal = render(rf, texts=texts)
    for s in ("PRIVSUMMARY", "PRIVNOTE", "PRIVGUESS"):
        assert s in internal  # the internal edition shows them (so the test can fail)
    html = render(rf, texts=texts, shareable=True)
    assert not any(s in html for s in ("PRIVSUMMARY", "PRIVNOTE", "PRIVGUESS", "PRIVORIGINAL"))
    assert ">Hello</mark>" in html and "chip hit" in html  # the evidence and the verdict stay
    out = shareable(rf).results[0].documents[0]
    assert dict(out.facts) == {"rank": 7, "label": "PUBLABEL", "verdict": "PUBVERDICT"}
    assert out.summary == "" and out.highlights == (Highlight(0, 5, "span"),) and out.success is True
    # the CSV export keeps the same guarantee
    from reports.export import findings_csv

    assert "PRIVSUMMARY" in findings_csv(rf)
    assert "PRIVSUMMARY" not in findings_csv(shareable(rf)) and ",D01,hit," in findings_csv(shareable(rf))


def test_facts_named_like_originals_stay_out_even_when_not_marked_private():
    """A new attack that forgets to mark its ``original`` or ``guesses`` private still does not
    leak them into a shared report: key names like those of originals are a safety net."""
    rf = ResultsFile()
    finding = Finding("d1", False, facts={"original": "PRIVORIG", "guesses": ["PRIVGUESS"], "rank": 2})
    rf.add(Result.from_risk("new_attack", "r", risk(0, 1, 0.1), documents=[finding]))
    assert dict(shareable(rf).results[0].documents[0].facts) == {"rank": 2}
    html = render(rf, texts={"r": {"d1": "Hello there"}}, shareable=True)
    assert "PRIVORIG" not in html and "PRIVGUESS" not in html


def _four_attack_results(tmp_path, monkeypatch) -> ResultsFile:
    """Each of the four attacks run for real on a small scenario, with scripted models."""
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    from attackers.span_guess import SpanGuessAttack
    from attackers.trir import TRIRAttack
    from audit.core.data import Corpus, Document, Release, Scenario, sanitize_corpus
    from audit.models.nlp import Spacy
    from tests import test_claim_linker as cl, test_phrase_search as ps, test_span_guess as sg
    from tests.test_trir import fake_trained

    rf = ResultsFile()
    orig = ps.visit_collection()
    head, _, _ = ps.run(orig, sanitize_corpus(orig, {}, name="phrases"))
    rf.add(head)
    scenario, release = sg._scenario()
    rf.extend(SpanGuessAttack(llm=sg._scripted(), guesses=1, frequent_lemmas=0, progress=False)
              .fit(scenario).evaluate(scenario, release))
    attack = cl._attack(Spacy(disable=("ner",)))
    scenario = Scenario(originals=cl._originals(), releases=(cl._masked(),))
    rf.extend(attack.fit(scenario).evaluate(scenario, cl._masked()))
    docs = [Document(f"d{i}", f"text about p{i}", subject=f"p{i}") for i in range(3)]
    rel = Release("people", Corpus(docs, name="people"))
    rf.extend(fake_trained(TRIRAttack(progress=False), ["p0", "p1", "p2"], [0, 2, 2])
              .evaluate(Scenario(background=rel.corpus, releases=(rel,)), rel))
    return rf


def test_drilldown_shows_hit_or_miss_for_each_of_the_four_attacks(tmp_path, monkeypatch):
    from reports.render import build_context

    rf = _four_attack_results(tmp_path, monkeypatch)
    ctx = build_context(rf)
    seen = {}
    for table in ctx["drill"]:
        for row in table["rows"]:
            for cell in row["cells"]:
                if cell["state"] != "na":
                    seen.setdefault(cell["name"], set()).add(cell["word"])
    for name in ("Phrase search", "Span guess", "Claim linker", "TRIR"):
        assert seen[name] and seen[name] <= {"hit", "miss"}, (name, seen.get(name))
    assert seen["TRIR"] == {"hit", "miss"} and "hit" in seen["Phrase search"] and "miss" in seen["Phrase search"]
    html = render(rf)
    assert "Linked to its source by 1 rare phrase" in html and "replaced spans recovered by the guesses" in html
    assert "Predicted subject is the true person (rank 1 of 3)" in html
    assert "Linked to the right record by 3 of 3 known claims" in html


def _two_release_results() -> tuple[ResultsFile, dict]:
    rf = ResultsFile(provenance={"skipped": [{"component": "presidio", "reason": "secret doc-0007 said PRIVREASON"}],
                                 "errors": [{"component": "span_guess", "reason": "ValueError: PRIVERROR"},
                                            {"component": "span_guess", "reason": "ValueError: PRIVERROR2"}]})
    texts = {"r": {"a": "alpha text here and more", "b": "bravo words there and more"}}
    rf.add(Result.from_risk("phrase_search", "r", risk(1, 2, 0.01), documents=[
        Finding("a", True, "Linked to its source by 1 rare phrase", highlights=[Highlight(0, 5, "ngram", "n1")]),
        Finding("b", False, "No phrase is found in fewer than 2 documents")]))
    rf.add(Result.from_risk("claim_linker", "r", risk(0, 2, 0.5), documents=[
        Finding("a", False, "Linked to the wrong record (b) by 2 of 3 known claims", highlights_in="b",
                highlights=[Highlight(6, 11, "claim", "PRIVCLAIM of a's original")]),
        Finding("b", True, "Linked to the right record", highlights=[Highlight(12, 17, "claim", "c")])]))
    return rf, texts


def test_shareable_edition_reduces_provenance_reasons_to_a_category_and_a_count():
    """Issue 17.4: skipped/errors reasons (exception texts, model answers, document ids) are free
    text; the shareable edition shows the component, a category and a count only."""
    rf, texts = _two_release_results()
    internal = render(rf, texts=texts)
    assert "PRIVREASON" in internal and "PRIVERROR" in internal  # so the test can fail
    html = render(rf, texts=texts, shareable=True)
    assert "PRIVREASON" not in html and "PRIVERROR" not in html and "doc-0007" not in html
    assert "Not run: <span class=\"iso\">span_guess</span></strong> (error, 2 times)" in html
    assert shareable(rf).provenance["errors"] == [{"component": "span_guess", "category": "error", "count": 2}]


def test_drilldown_marks_one_attack_at_a_time_in_the_same_colours_in_both_editions():
    rf, texts = _two_release_results()
    editions = [render(rf, texts=texts), render(rf, texts=texts, shareable=True)]
    for html in editions:
        # each attack's marks carry its own class; the page colours only the shown attack's
        assert '<mark class="a0"' in html and 'class="x1"' in html and 'class="a1"' in html
        assert '.doc[data-show="a0"] mark.a0 { background: #fde2a8' in html
        assert '.doc[data-show="a1"] mark.a1 { background: #cfe3f5' in html
        assert 'data-show="a0"' in html and "<button" in html
    style = [h[h.index("<style>"):h.index("</style>")] for h in editions]
    assert style[0] == style[1]  # highlight colours identical in the internal and shareable editions
    # marks that come from attacking another document say so, in the document that holds them
    from reports.shareable import pseudonyms

    ids = pseudonyms(rf)  # the shareable edition names documents by pseudonym
    doc_b = editions[1][editions[1].index(f"<code class=\"iso\">{ids['b']}</code>"):]
    assert f"come from attacking another document: <span class=\"iso\">{ids['a']}</span>" in doc_b
    assert "another person&#39;s facts" in doc_b or "another person's facts" in doc_b
    assert "PRIVCLAIM" in editions[0] and "PRIVCLAIM" not in editions[1]
    # one sentence per attack, no key/value dumps
    assert "Linked to its source by 1 rare phrase" in editions[1] and "outcome:" not in editions[1]


def test_tied_releases_are_spread_and_named_and_labels_do_not_overlap():
    from reports.charts import label_box, pareto_chart

    heads, util = [], []
    for rel, tpi, rate in (("suppressed", 0.559, 36), ("labels", 0.559, 36), ("spacy_ner", 0.574, 40),
                           ("presidio", 0.604, 40), ("intact", 0.60, 40), ("delinked", 0.58, 2)):
        heads.append(Result.from_risk("phrase_search", rel, risk(rate, 40, 0.025)))
        util.append(Result("utility", "tpi", rel, tpi, (tpi - 0.02, tpi + 0.02), 40))
    c = pareto_chart(heads, util, "tpi", None, [r.release for r in heads])
    texts = [lab["text"] for lab in c.labels]
    assert "suppressed, labels (tied)" in texts and len(c.items) == 6
    tied = [it for it in c.items if it["release"] in ("suppressed", "labels")]
    assert abs(tied[0]["cx"] - tied[1]["cx"]) >= 10  # spread side by side, not stacked
    boxes = [label_box(lab["x"], lab["y"], lab["text"], lab["anchor"]) for lab in c.labels]
    assert not any(a.overlaps(b, 0) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    # the Pareto front: delinked (safest) and presidio (most useful) are on it, the tie is not
    front = {it["release"] for it in c.items if it["front"]}
    assert front == {"delinked", "presidio"}


def test_clustered_results_say_their_trials_and_documents_in_both_editions():
    from audit.core.stats import cluster_bootstrap, clustered_details, clustered_risk

    units = [(k % 4, 14) for k in range(40)]
    rf = ResultsFile()
    rf.add(Result.from_risk("phrase_search.ngram_residual", "r", clustered_risk(units, None),
                            details=clustered_details(cluster_bootstrap(units), "n-grams")))
    for html in (render(rf), render(rf, shareable=True)):
        assert "560 n-grams in 40 documents" in html


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised():
    from reports.export import findings_csv

    rf = ResultsFile()
    rf.add(Result.from_risk("phrase_search", "=HYPERLINK(1)", risk(1, 1, 0.1),
                            documents=[Finding("+cmd|' /C calc'!A0", True, "-2+3")]))
    lines = findings_csv(rf).splitlines()
    assert lines[0] == "release,result,kind,document,success,summary,marks,marks_in"
    assert lines[1].startswith("'=HYPERLINK(1),phrase_search,attack,'+cmd|") and ",hit,'-2+3," in lines[1]


def test_gate_decision_heads_the_verdict_and_inconclusive_is_not_a_pass():
    from audit.pipeline.gate import Threshold, evaluate

    rf = ResultsFile()
    rf.add(Result.from_risk("trir", "ok", risk(0, 200, 0.001)))
    rf.add(Result.from_risk("trir", "weak", risk(0, 200, 0.001), details={"warning": "under-trained attacker"}))
    rf.add(Result.from_risk("trir", "bad", risk(30, 40, 0.001)))
    html = render(rf, checks=evaluate(rf, [Threshold("trir", "max", 0.1)]))
    verdict = _verdict_of(html)
    lines = re.findall(r'<li class="vline (\w+)">\s*<span class="vword \w+">(\w+)</span>', verdict)
    assert lines == [("pass", "PASS"), ("inconclusive", "INCONCLUSIVE"), ("fail", "FAIL")]
    assert "is INCONCLUSIVE for &lt;= 0.1" in verdict and "under-trained attacker" in verdict
    assert '<span class="lvl inconclusive">inconclusive</span>' in html


def test_utility_metrics_are_explained_where_they_are_shown():
    rf = ResultsFile()
    rf.add(Result.from_risk("trir", "r", risk(3, 40, 0.01)))
    for m in ("tpi", "tps", "nmi"):
        rf.add(Result("utility", m, "r", 0.6, (0.5, 0.7), 40))
    html = render(rf)
    utility = html[html.index('id="utility"'):]
    assert "Text preserved information" in utility and "Text preserved similarity" in utility
    assert "Normalised mutual information" in utility
    assert "@media print" in html  # prints to a clean PDF


def test_a_sanitizer_self_check_warning_is_shown_beside_its_release(tmp_path):
    """Issue 49: a release its sanitizer found degenerate says so in the report, by the release
    (provenance) and among the notes at the top, in both editions."""
    from reports.render import render

    warning = "degenerate release: 2 of 3 document(s) have most of their words masked"
    rf = ResultsFile(provenance={"releases": {"p": {"sanitizer": "prompt", "documents": 3,
                                                    "self_check": [warning]}}})
    rf.add(Result.from_risk("trir", "p", risk(1, 3, 0.3), documents=[Finding("a", True, facts={"correct": True})]))
    for shareable_edition in (False, True):
        html = render(rf, shareable=shareable_edition)
        assert html.count(warning) >= 2 and "self-check</span> " + warning in html and f"Release p: {warning}" in html


def test_the_report_and_the_leaderboard_extend_one_page():
    """The page both write (the offline-only content policy, the stylesheet, the banner) is one
    template that each extends, and the privacy-utility chart both draw one macro, not copies (a
    notebook cell, ``notebook.html``, draws the same macro)."""
    from reports.render import TEMPLATES, environment

    def holding(text):
        return [p.name for p in sorted(Path(TEMPLATES).glob("*.html")) if text in p.read_text(encoding="utf-8")]

    assert holding("Content-Security-Policy") == ["base.html"]
    assert holding('aria-label="Risk against utility per release"') == ["pareto.html"]  # the chart both draw
    assert holding('{% from "pareto.html" import pareto_svg %}') == ["leaderboard.html", "notebook.html", "report.html"]
    for name in ("report.html", "leaderboard.html"):
        assert (Path(TEMPLATES) / name).read_text(encoding="utf-8").startswith('{% extends "base.html" %}')
    base = environment().get_template("base.html")
    assert {"csp", "kind", "brand", "style", "badge", "main", "after"} <= set(base.blocks)
