"""What the report template shows, built from a results file as plain data (strings still
unescaped: the template escapes them).

The page answers "may I publish this?" first: one verdict line per release (the gate's
decision, or without a gate a risk level), the attacks that decide it, how many documents
they expose and the fix that would help most. Then a release × attack matrix of headline
risks, the privacy–utility (Pareto) chart, one section per attack (its further measures
inside it), utility with what each metric means, the per-document drill-down and provenance.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from audit import __version__
from audit.core.checks import Check
from audit.core.details import About
from audit.core.results import Result, ResultsFile, grouped_warnings
from audit.core.stats import is_tiny
from reports.charts import forest_chart, pareto_chart
from reports.drilldown import drilldown
from reports.formatting import anchor, num, pct, short, title_of, visible
from reports.shareable import not_run_categories
from reports.shareable import pseudonyms, release_pseudonyms
from reports.shareable import shareable as make_shareable

PALETTE = ("#1f5f8b", "#b5542d", "#3a7d44", "#7a4f9a", "#8a6d1d", "#4a5560", "#2b8a8a", "#a23b62")
#: Highlight colours of the drill-down, one per attack in the order of the results (the same
#: in the internal and the shareable edition: they depend on the attack, never on a mark's kind).
MARKS = (("#fde2a8", "#e0a526"), ("#cfe3f5", "#4a8cc4"), ("#f8d4cc", "#cc6b55"), ("#d8eed3", "#5fa050"),
         ("#e6dcf3", "#8a63c0"), ("#f3e0ec", "#b75d93"), ("#d5efee", "#3a9c99"), ("#ecebd2", "#9a9540"))
PREFERRED_UTILITY = ("tpi", "tps")
LEVEL_ORDER = {"high": 3, "elevated": 2, "low": 1, "none": 0}
#: What each utility metric means, where a privacy officer reads it (the description the run
#: recorded for the metric follows).
GLOSSARY = {
    "tpi": "Text preserved information: the share of the originals' information content (how "
           "surprising each word is to a language model) that the release keeps. 1 = nothing removed.",
    "tps": "Text preserved similarity: like TPI, but a replaced word keeps the part of its information "
           "that its replacement still carries (a generalisation keeps more than a mask).",
    "nmi": "Normalised mutual information between a clustering of the originals and of the release: "
           "1 = documents still group by topic exactly as before (TAE's NMI is tae_nmi).",
    "rouge": "ROUGE-L: longest common word sequence between each original and its sanitized version.",
    "similarity": "Cosine similarity of sentence embeddings of each original and its sanitized version.",
    "precision": "Of the words the release replaced, the share that gold annotations mark as identifying.",
    "recall": "Of the identifying entities in gold annotations, the share the release replaced everywhere "
              "(entity level; TAE's token-level Recall is tae_recall).",
    "tae_precision": "TAE's Precision: of the words inside the release's masked spans, the share the annotators "
                     "marked DIRECT or QUASI, averaged over annotators.",
    "tae_recall": "TAE's Recall: of the words of the entities the annotators marked DIRECT or QUASI, the share "
                  "the release masked (token level, all annotators).",
    "tae_tps": "TAE's TPS: like TPS, but a replaced term is compared with the replacement alone (\"PERSON\", "
               "not \"Mr PERSON\"); a suppression keeps nothing of the terms it touches.",
    "tae_nmi": "TAE's NMI: the same comparison of clusterings, by TAE's definition: the release's mask marks "
               "(PERSON, SENSITIVE) removed first, k of 2 to 32 chosen by silhouette on the originals.",
}


def _risk_level(r: Result) -> tuple[str, str]:
    """(css class, words) for an attack result."""
    if r.n == 0:
        return "none", "no trials"
    if r.beats_baseline is False:
        return "none", "not shown"
    v = r.value
    if r.beats_baseline is None and r.baseline is None:
        level = "high" if v >= 0.5 else "elevated" if v >= 0.2 else "low"
        return level, level
    if v >= 0.5:
        return "high", "high"
    if v >= 0.2:
        return "elevated", "elevated"
    return "low", "low but real"


def _warning(r: Result) -> str:
    return r.info.warning


def _trials(r: Result) -> str:
    """"580 n-grams in 40 documents" for a clustered result, else "40 documents"."""
    info = r.info
    unit = info.unit or "trials"
    if info.trials is not None and info.trial_unit and info.trial_unit != unit:
        return f"{num(info.trials)} {info.trial_unit} in {r.n} {unit}"
    return f"{r.n} {unit}"


def _sentence(r: Result) -> str:
    ci = f" (95% CI {pct(r.ci[0])}–{pct(r.ci[1])})" if r.ci else ""
    if r.info.rate:  # a success rate (Result.from_risk)
        s = f"{title_of(r.name)} succeeded on {pct(r.value)} of {_trials(r)} in release “{visible(r.release)}”{ci}"
    else:  # a score averaged over documents (leakage, similarity): not a count of successes
        s = f"{title_of(r.name)} averaged {pct(r.value)} over {_trials(r)} in release “{visible(r.release)}”{ci}"
    if r.baseline is not None:
        s += f", against {pct(r.baseline, 2)} by chance" if r.beats_baseline else \
             f": not distinguishable from chance ({pct(r.baseline, 2)})"
    samp = r.info.sampled
    if samp is not None and samp.of:
        s += f" — {samp.sentence()}"
    return s + "."


def _descriptions(names: list[str], rf: ResultsFile, kind: str = "attack") -> dict[str, str]:
    """What each component does, as the run recorded it in the file (its provenance; else a
    result's own ``details.description``): never from the plugins installed where the report
    is rendered."""
    out: dict[str, str] = {}
    for name in names:
        out[name] = rf.about(kind, name).description or next(
            (r.info.description for r in rf.results if r.name == name and r.info.description), "")
    return out


def _is_headline(name: str) -> bool:
    """An attack's headline result is named after the attack; its further measures are
    ``attack.measure`` (see ``Attack.evaluate``: the headline comes first)."""
    return "." not in name


def _counted_measure(r: Result) -> bool:
    """A further measure (not a headline) that counts in the verdict: one that says so
    (``details["in_verdict"]``, set by a component only when the measure passed its own check,
    e.g. the claim linker's leakage when its judge passed its control) and carries no warning.
    A measure whose check failed carries a warning instead, and only makes a verdict that
    nothing else decides INCONCLUSIVE."""
    return not _is_headline(r.name) and r.info.in_verdict and not _warning(r)


def _base(name: str) -> str:
    return name.split(".", 1)[0]


def _attack_groups(attacks: list[Result]) -> list[str]:
    """Attack names (the part before any dot) in first-seen order."""
    seen: dict[str, None] = {}
    for r in attacks:
        seen.setdefault(_base(r.name), None)
    return list(seen)


#: Where the report's "explained" links point by default: the guide's site built beside it.
GUIDE = "docs/"


def guide_page(guide: str) -> str:
    """The guide's page that explains the report (``GUIDE`` + ``report.html``), for ``guide`` a
    folder or URL of the built site (with or without its final ``/``)."""
    return f"{guide.rstrip('/')}/report.html" if guide else "report.html"


def build_context(rf: ResultsFile, *, shareable: bool = False, checks: Sequence[Check] | None = None,
                  texts: Mapping[str, Mapping[str, str]] | None = None, max_documents: int = 50,
                  title: str | None = None, notes: Sequence[str] = (), csv_name: str | None = None,
                  keep_ids: bool = False, guide: str = GUIDE) -> dict[str, Any]:
    """Everything the template shows, as plain data (strings still unescaped), from ``rf``
    alone: descriptions, remedies and the gate's checks are those the run recorded in it
    (``checks`` given here replace the recorded ones). ``shareable``: from
    :func:`reports.shareable.shareable`'s copy, document ids pseudonymised unless ``keep_ids``.
    ``guide``: the built user guide each part's "explained" link points into (:func:`guide_page`)."""
    if checks is None:
        checks = rf.checks() or None
    raw = rf  # what the run recorded about its components is the components' text, never the data's
    raw_prov = rf.provenance
    if shareable:
        ids = {} if keep_ids else pseudonyms(rf)
        hidden = {} if keep_ids else release_pseudonyms(rf)  # releases named after their file
        texts = {hidden.get(rel, rel): {ids.get(i, i): t for i, t in by_id.items()}
                 for rel, by_id in (texts or {}).items()}
        checks = [dataclasses.replace(c, release=hidden.get(c.release, c.release)) for c in checks] \
            if checks else checks
        rf = make_shareable(rf, keep_ids=keep_ids)
    prov = rf.provenance
    attacks = [r for r in rf.results if r.kind == "attack"]
    utility = [r for r in rf.results if r.kind == "utility"]
    releases = rf.releases
    names = _attack_groups(attacks)
    heads = [r for r in attacks if _is_headline(r.name)]
    colors = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    util_names = sorted({r.name for r in utility}, key=lambda n: (n not in PREFERRED_UTILITY,
                                                                  PREFERRED_UTILITY.index(n) if n in PREFERRED_UTILITY else 0, n))
    metric = util_names[0] if util_names else None
    descriptions = _descriptions(names, raw)
    remedies = {n: raw.about("attack", n) for n in names}

    drill = _drill(rf, releases, texts or {}, max_documents, names)
    warnings, skipped, reasons = _notices(rf, raw_prov, shareable)
    recorded = [n for n in raw_prov.get("notes") or () if isinstance(n, str)]  # the spec's report notes
    sampled_any = any(r.info.sampled is not None for r in rf.results)
    pareto = _pareto_views(heads, utility, util_names, names, releases)
    return {
        "title": visible(title or str(prov.get("title") or "Privacy audit")),
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "version": __version__, "shareable": shareable,
        "n_releases": len(releases), "n_attacks": len(names), "n_metrics": len(util_names),
        "releases": [visible(r) for r in releases],
        "verdicts": _verdicts(releases, [*heads, *[r for r in attacks if _counted_measure(r)]], checks, remedies, rf),
        "gate": gate_view(checks) if checks else None,
        "n_attack_results": len(attacks),
        "matrix": _matrix(releases, names, heads, utility, metric),
        "pareto": pareto, "forest": forest_chart(heads, releases, {n: colors[n] for n in names}),
        "metric": metric,
        "sections": _attack_sections(names, attacks, descriptions, colors),
        "util_rows": _util_matrix(releases, util_names, utility),
        "glossary": [{"name": _util_title(n), "text": GLOSSARY.get(n, ""),
                      "description": visible(d)} for n, d in _descriptions(util_names, raw, "utility").items()],
        "drill": drill, "max_documents": max_documents,
        "drill_attacks": [{"i": i, "name": title_of(n), "bg": MARKS[i % len(MARKS)][0], "line": MARKS[i % len(MARKS)][1]}
                          for i, n in enumerate(names)],
        "csv_name": csv_name, "guide": guide_page(guide),
        "skipped": [{"component": visible(str(s.get("component", ""))), "category": str(s.get("category", "")),
                     "count": s.get("count", 1)} for s in skipped if isinstance(s, Mapping)],
        "reasons": reasons,
        "sampled_any": sampled_any, "notes": [visible(n) for n in dict.fromkeys([*recorded, *notes, *warnings])],
        "prov": _provenance_view(prov),
    }


def _drill(rf: ResultsFile, releases: list[str], texts: Mapping[str, Mapping[str, str]], max_documents: int,
           names: list[str]) -> list[dict[str, Any]]:
    """The per-document drill-down of each release that has documents, the first one opened."""
    drill = [drilldown(rf, rel, texts.get(rel, {}), max_documents, names) for rel in releases]
    drill = [d for d in drill if d["rows"]]
    if drill:
        drill[0]["rows"][0]["open"] = True  # the most exposed document, opened
    return drill


def _notices(rf: ResultsFile, raw_prov: Mapping[str, Any], shareable: bool) -> tuple[list[str], list, list]:
    """(warnings beside the verdict, components not run, their reasons: internal edition only)."""
    prov = rf.provenance
    # A component that doubts its own figure says so in ``details["warning"]``; the reader
    # sees it beside the verdict, not only in results.json.
    warnings = [f"{title_of(name)} on {', '.join(rels)}: {text}" for name, text, rels in grouped_warnings(rf.results)]
    # A sanitizer that found its own release degenerate says so in the release's provenance
    # (``self_check``): a comparison against that release says little, so the reader sees it here.
    warnings += [f"Release {k}: {w}" for k, v in (prov.get("releases") or {}).items() if isinstance(v, Mapping)
                 for w in (v.get("self_check") or []) if isinstance(w, str)]
    skipped = (prov.get("skipped") or []) + (prov.get("errors") or []) if shareable else \
        not_run_categories(raw_prov.get("skipped"), "skipped") + not_run_categories(raw_prov.get("errors"), "error")
    reasons = [] if shareable else [
        {"component": visible(str(s.get("component", ""))), "reason": visible(str(s.get("reason", "")))}
        for s in [*(raw_prov.get("skipped") or []), *(raw_prov.get("errors") or [])] if isinstance(s, Mapping)]
    return warnings, skipped, reasons


def _util_matrix(releases: list[str], util_names: list[str], utility: list[Result]) -> dict[str, Any] | None:
    """Utility as a release × metric table (value, and its interval below)."""
    if not utility:
        return None
    by = {(u.name, u.release): u for u in utility}
    rows = []
    for rel in releases:
        cells = []
        for m in util_names:
            u = by.get((m, rel))
            cells.append(None if u is None else {"value": num(u.value), "n": u.n,
                                                 "ci": f"{num(u.ci[0])}–{num(u.ci[1])}" if u.ci else ""})
        if any(cells):
            rows.append({"release": visible(rel), "cells": cells})
    return {"cols": [_util_title(m) for m in util_names], "rows": rows}


def _util_title(name: str) -> str:
    return name.upper() if len(name) <= 4 else title_of(name)


# --------------------------------------------------------------------------- verdict


def _exposure(heads: list[Result]) -> tuple[set[str], set[str]]:
    """(documents some attack succeeded on, documents some attack scored)."""
    exposed = {d.id for r in heads for d in r.documents if d.success}
    scored = {d.id for r in heads for d in r.documents if d.success is not None}
    return exposed, scored


def _verdicts(releases: list[str], heads: list[Result], checks: Sequence[Check] | None,
              remedies: Mapping[str, About], rf: ResultsFile) -> list[dict[str, Any]]:
    """One line per release: the decision, the attacks that decide it, the documents they
    expose, and the fix that would help most."""
    out = []
    for rel in releases:
        rs = [r for r in heads if r.release == rel]
        rel_checks = [c for c in checks or () if c.release == rel]
        exposed, scored = _exposure(rs)
        weak = [r for r in rf.results if r.kind == "attack" and r.release == rel and _warning(r)]
        risky = sorted([r for r in rs if r.beats_baseline or (r.baseline is None and r.value > 0 and r.n)],
                       key=lambda r: (-r.value, r.name))
        if rel_checks:
            status = ("fail" if any(c.status == "fail" for c in rel_checks) else
                      "inconclusive" if any(c.status == "inconclusive" for c in rel_checks) else "pass")
            word = {"fail": "FAIL", "inconclusive": "INCONCLUSIVE", "pass": "PASS"}[status]
            deciding_checks = [c for c in rel_checks if c.status == status] if status != "pass" else []
            deciding = [visible(c.message) for c in deciding_checks]
            decisive = [c.result for c in deciding_checks if c.result and c.result.kind == "attack"]
        else:
            level = max((_risk_level(r)[0] for r in risky), key=LEVEL_ORDER.__getitem__, default="none")
            status = level
            word = {"high": "HIGH RISK", "elevated": "ELEVATED RISK", "low": "LOW RISK",
                    "none": "NO RISK SHOWN"}[level]
            decisive = risky[:3]
            deciding = [_short_finding(r) for r in decisive]
            not_run = _not_run(rel, rf)
            if level == "none" and (weak or not_run):
                # nothing shown, but by an attacker that failed its own check, or by attacks that
                # did not run on this release at all: that proves nothing
                status, word = "inconclusive", "INCONCLUSIVE"
                deciding += [visible(f"not run on this release: {', '.join(not_run)}")] if not_run else []
        headline_of = {r.name: r for r in rs}
        fix = ""
        for r in decisive or risky:
            head = headline_of.get(_base(r.name), r)
            remedy = remedies.get(_base(r.name))
            hits = sum(1 for d in head.documents if d.success)
            total = sum(1 for d in head.documents if d.success is not None)
            if remedy is not None and remedy.remedy:
                fix = remedy.fix(hits, total)
                break
        out.append({
            "release": visible(rel), "status": status, "word": word, "deciding": deciding,
            "more": max(0, len(risky) - len(decisive)) if not rel_checks else 0,
            "exposed": len(exposed), "scored": len(scored), "fix": _code_spans(visible(fix)),
            "weak": [visible(title_of(r.name)) for r in weak],
            "gated": bool(rel_checks),
        })
    return out


def _not_run(release: str, rf: ResultsFile) -> list[str]:
    """The attacks of the results file with no result on ``release`` (all of them, or "any
    attack", when none ran on it): a release they never reached is not shown safe by them."""
    attacks = {_base(r.name): None for r in rf.results if r.kind == "attack"}
    here = {_base(r.name) for r in rf.results if r.kind == "attack" and r.release == release}
    return [title_of(a) for a in attacks if a not in here] if here or attacks else ["any attack"]


def _code_spans(text: str) -> list[tuple[str, bool]]:
    """``"run `x` now"`` -> ``[("run ", False), ("x", True), (" now", False)]`` (the template
    writes the second kind in <code>; every part is still escaped)."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: plain text
        return [(text, False)] if text else []
    return [(p, i % 2 == 1) for i, p in enumerate(parts) if p]


def _short_finding(r: Result) -> str:
    hits = sum(1 for d in r.documents if d.success)
    scored = sum(1 for d in r.documents if d.success is not None)
    ci = f" (95% CI {pct(r.ci[0])}–{pct(r.ci[1])})" if r.ci else ""
    exp = f": {hits} of {scored} documents" if scored else ""
    chance = f", chance {pct(r.baseline, 1)}" if r.baseline is not None else ""
    return f"{title_of(r.name)} {pct(r.value)}{ci}{chance}{exp}"


# --------------------------------------------------------------------------- matrix and sections


def _cell(r: Result) -> dict[str, Any]:
    level, words = _risk_level(r)
    warn = _warning(r)
    return {"value": pct(r.value), "raw": f"{r.value:.6f}", "ci": f"{pct(r.ci[0], 0)}–{pct(r.ci[1], 0)}" if r.ci else "",
            "baseline": pct(r.baseline, 1) if r.baseline is not None else "", "level": level, "words": words,
            "n": r.n, "tiny": is_tiny(r.n) and r.n > 0, "weak": bool(warn),
            "title": visible(_sentence(r) + (f" Inconclusive: {warn}" if warn else ""))}


def _matrix(releases: list[str], names: list[str], heads: list[Result], utility: list[Result],
            metric: str | None) -> dict[str, Any]:
    by = {(r.name, r.release): r for r in heads}
    util = {r.release: r for r in utility if r.name == metric}
    cols = [n for n in names if any(r.name == n for r in heads)]
    rows = []
    for rel in releases:
        cells = [_cell(by[(n, rel)]) if (n, rel) in by else None for n in cols]
        u = util.get(rel)
        rows.append({"release": visible(rel), "cells": cells, "utility_raw": f"{u.value:.6f}" if u else "",
                     "utility": num(u.value) if u else "", "utility_ci": f"{num(u.ci[0])}–{num(u.ci[1])}"
                     if u and u.ci else ""})
    return {"cols": [{"name": title_of(n), "anchor": "attack-" + anchor(n)} for n in cols], "rows": rows,
            "metric": _util_title(metric) if metric else None,
            "metric_help": GLOSSARY.get(metric or "", "utility: see the Utility section")}


def _attack_sections(names: list[str], attacks: list[Result], descriptions: Mapping[str, str],
                     colors: Mapping[str, str]) -> list[dict[str, Any]]:
    """One section per attack: its headline per release, then its further measures."""
    sections = []
    for n in names:
        rows = [_attack_row(r) for r in attacks if r.name == n]
        subs: dict[str, list[dict[str, Any]]] = {}
        for r in attacks:
            if _base(r.name) == n and r.name != n:
                subs.setdefault(r.name, []).append(_attack_row(r))
        sections.append({"name": visible(n), "title": title_of(n), "description": visible(descriptions.get(n, "")),
                         "color": colors[n], "rows": rows, "anchor": "attack-" + anchor(n),
                         "measures": [{"name": visible(k), "title": title_of(k), "rows": v} for k, v in subs.items()]})
    return sections


def _attack_row(r: Result) -> dict[str, Any]:
    level, words = _risk_level(r)
    info = r.info
    samp = info.sampled
    return {"release": visible(r.release), "value": pct(r.value), "raw": r.value,
            "ci": f"{pct(r.ci[0])} – {pct(r.ci[1])}" if r.ci else "–",
            "baseline": pct(r.baseline, 2) if r.baseline is not None else "–", "n": r.n,
            "units": visible(_trials(r)), "tiny": is_tiny(r.n) and r.n > 0, "weak": visible(_warning(r)),
            "beats": r.beats_baseline, "level": level, "words": words,
            "residual": pct(info.residual_risk) if info.residual_risk is not None else "–",
            "setup": visible(info.attacker),
            "sampled": visible(samp.sentence()) if samp is not None and samp.of else ""}


def _pareto_views(heads: list[Result], utility: list[Result], util_names: list[str], names: list[str],
                  releases: list[str]) -> dict[str, Any] | None:
    """One chart per (utility metric, risk): the reader picks both; the first is shown."""
    if not util_names or not heads:
        return None
    risks = [None, *[n for n in names if any(r.name == n for r in heads)]]
    charts = []
    for m in util_names:
        for a in risks:
            c = pareto_chart(heads, utility, m, a, releases)
            if c is not None:
                charts.append({"id": f"pareto-{anchor(m)}-{anchor(a or 'any')}", "metric": m, "risk": a or "any",
                               "chart": c, "help": f"{_util_title(m)}: {GLOSSARY[m]}" if m in GLOSSARY else ""})
    if not charts:
        return None
    return {"charts": charts, "metrics": [(m, _util_title(m)) for m in util_names if any(c["metric"] == m for c in charts)],
            "risks": [(a or "any", "Highest risk of any attack" if a is None else title_of(a)) for a in risks],
            "first": charts[0]["id"]}


def gate_view(checks: Sequence[Check]) -> dict[str, Any]:
    """The gate's threshold checks as a verdict and a table."""
    failed = [c for c in checks if c.status == "fail"]
    unsure = [c for c in checks if c.status == "inconclusive"]
    return {"passed": not failed and not unsure, "failed": len(failed), "inconclusive": len(unsure),
            "total": len(checks),
            "rows": [{"title": visible(c.title), "release": visible(c.release), "bound": c.bound,
                      "compared": num(c.compared, 4), "status": c.status, "reason": visible(c.reason)}
                     for c in checks]}


def _provenance_view(prov: Mapping[str, Any]) -> dict[str, Any]:
    """Provenance as tables (runner layout) plus the full JSON for anything else."""
    facts = [(k, visible(num(prov.get(k)))) for k in ("tool", "version", "command", "started", "seconds", "seed",
                                                        "python", "platform") if prov.get(k) is not None]
    models = prov.get("models") if isinstance(prov.get("models"), Mapping) else {}
    facts += [(f"model: {k}", visible(str(v))) for k, v in models.items() if v]
    inputs = [{"role": visible(str(k)), "path": visible(str(v.get("path", ""))), "sha": short(v.get("sha256")),
               "documents": num(v.get("documents"))}
              for k, v in (prov.get("inputs") or {}).items() if isinstance(v, Mapping)]
    releases = [{"name": visible(str(k)), "source": visible(str(v.get("sanitizer") or v.get("source") or "")),
                 "documents": num(v.get("documents")), "sha": short(v.get("sha256")),
                 "warnings": [visible(str(w)) for w in (v.get("self_check") or [])]}
                for k, v in (prov.get("releases") or {}).items() if isinstance(v, Mapping)]
    comps = [{"label": visible(str(k)), "params": visible(json.dumps(v.get("params", {}), sort_keys=True)[:400]),
              "fit": num(v.get("fit_seconds")),
              "stats": visible(json.dumps(v.get("stats"), sort_keys=True)[:300]) if v.get("stats") else "",
              "info": visible(json.dumps(v.get("provenance"), sort_keys=True)[:300]) if v.get("provenance") else ""}
             for k, v in (prov.get("components") or {}).items() if isinstance(v, Mapping)]
    pairs = [{"component": visible(str(v.get("component", ""))), "release": visible(str(v.get("release", ""))),
              "seconds": num(v.get("seconds")), "documents": num(v.get("documents"))}
             for v in (prov.get("pairs") or {}).values() if isinstance(v, Mapping)]
    return {"facts": facts, "inputs": inputs, "releases": releases, "components": comps, "pairs": pairs,
            "json": visible(json.dumps(prov, indent=1, ensure_ascii=False, default=str)[:200_000])}
