"""What the report template shows, built from a results file as plain data (strings still
unescaped: the template escapes them)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from audit import __version__
from audit.core.registry import Registry, normalise
from audit.core.registry import registry as default_registry
from audit.core.results import Result, ResultsFile, grouped_warnings
from reports.charts import forest_chart, scatter_chart
from reports.drilldown import drilldown
from reports.formatting import anchor, num, pct, short, title_of, visible
from reports.shareable import shareable as make_shareable

PALETTE = ("#1f5f8b", "#b5542d", "#3a7d44", "#7a4f9a", "#8a6d1d", "#4a5560", "#2b8a8a", "#a23b62")
PREFERRED_UTILITY = ("tpi", "tps")


def _risk_level(r: Result) -> tuple[str, str]:
    """(css class, words) for an attack result."""
    if r.n == 0:
        return "none", "no trials"
    if r.beats_baseline is False:
        return "none", "not shown"
    v = r.value
    if r.beats_baseline is None and r.baseline is None:
        level = "high" if v >= 0.5 else "elevated" if v >= 0.2 else "low"
        return level, {"high": "high", "elevated": "elevated", "low": "low"}[level]
    if v >= 0.5:
        return "high", "high"
    if v >= 0.2:
        return "elevated", "elevated"
    return "low", "low but real"


def _sentence(r: Result) -> str:
    ci = f" (95% CI {pct(r.ci[0])}–{pct(r.ci[1])})" if r.ci else ""
    if "successes" in r.details:  # a success rate (Result.from_risk)
        unit = str(r.details.get("unit") or "trials")
        s = f"{title_of(r.name)} succeeded on {pct(r.value)} of {r.n} {unit} in release “{visible(r.release)}”{ci}"
    else:  # a score averaged over documents (leakage, similarity): not a count of successes
        unit = str(r.details.get("unit") or "documents")
        s = f"{title_of(r.name)} averaged {pct(r.value)} over {r.n} {unit} in release “{visible(r.release)}”{ci}"
    if r.baseline is not None:
        s += f", against {pct(r.baseline, 2)} by chance" if r.beats_baseline else \
             f": not distinguishable from chance ({pct(r.baseline, 2)})"
    samp = r.details.get("sampled")
    if isinstance(samp, Mapping) and samp.get("of"):
        s += f" — measured on a sample of {samp.get('documents')} of {samp.get('of')} documents"
    return s + "."


def _descriptions(names: list[str], rf: ResultsFile, registry: Registry) -> dict[str, str]:
    comps = rf.provenance.get("components") if isinstance(rf.provenance.get("components"), Mapping) else {}
    out: dict[str, str] = {}
    for name in names:
        desc = ""
        try:
            desc = getattr(registry.get("attack", name), "description", "") or ""
        except Exception:  # not installed or broken: fall back to what the results say
            desc = ""
        if not desc:
            for c in comps.values():
                if isinstance(c, Mapping) and normalise(str(c.get("name", ""))) == normalise(name):
                    desc = str(c.get("description") or "")
        if not desc:
            desc = next((str(r.details["description"]) for r in rf.results
                         if r.name == name and isinstance(r.details.get("description"), str)), "")
        out[name] = desc
    return out


def _is_headline(name: str) -> bool:
    """An attack's headline result is named after the attack; its further measures are
    ``attack.measure`` (see ``Attack.evaluate``: the headline comes first)."""
    return "." not in name


def _attack_groups(attacks: list[Result]) -> list[str]:
    """Result names in first-seen order (each attack's headline result comes first)."""
    seen: dict[str, None] = {}
    for r in attacks:
        seen.setdefault(r.name, None)
    return list(seen)


def build_context(rf: ResultsFile, *, shareable: bool = False, checks: Sequence[Any] | None = None,
                  texts: Mapping[str, Mapping[str, str]] | None = None, max_documents: int = 50,
                  title: str | None = None, registry: Registry | None = None,
                  notes: Sequence[str] = ()) -> dict[str, Any]:
    """Everything the template shows, as plain data (strings still unescaped)."""
    registry = registry or default_registry
    if shareable:
        rf = make_shareable(rf)
    prov = rf.provenance
    attacks = [r for r in rf.results if r.kind == "attack"]
    utility = [r for r in rf.results if r.kind == "utility"]
    releases = rf.releases
    names = _attack_groups(attacks)
    colors = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    # Headline of each attack = its results, one per release.
    util_names = sorted({r.name for r in utility}, key=lambda n: (n not in PREFERRED_UTILITY,
                                                                  PREFERRED_UTILITY.index(n) if n in PREFERRED_UTILITY else 0, n))
    metric = util_names[0] if util_names else None
    scatter = scatter_chart(attacks, utility, metric, colors) if metric else None
    forest = forest_chart(attacks, releases, colors)
    sections = _attack_sections(names, attacks, _descriptions(names, rf, registry), colors)

    util_rows = [{"name": visible(u.name), "release": visible(u.release), "value": num(u.value),
                  "ci": f"{num(u.ci[0])} – {num(u.ci[1])}" if u.ci else "–", "n": u.n} for u in utility]

    findings, quiet, secondary = _verdict(attacks, names)
    gate = _gate_view(checks) if checks else None

    kinds: dict[str, str] = {}
    release_texts = texts or {}
    drill = [drilldown(rf, rel, release_texts.get(rel, {}), max_documents, shareable, kinds) for rel in releases]
    drill = [d for d in drill if d["rows"]]

    # A component that doubts its own figure says so in ``details["warning"]``; the reader
    # sees it beside the verdict, not only in results.json.
    warnings = [f"{title_of(name)} on {', '.join(rels)}: {text}" for name, text, rels in grouped_warnings(rf.results)]
    skipped = [*(prov.get("skipped") or []), *(prov.get("errors") or [])]
    sampled_any = any(isinstance(r.details.get("sampled"), Mapping) for r in rf.results)
    return {
        "title": visible(title or str(prov.get("title") or "Privacy audit")),
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "version": __version__, "shareable": shareable,
        "n_releases": len(releases), "n_attacks": len(names), "n_metrics": len(util_names),
        "releases": [visible(r) for r in releases],
        "gate": gate, "findings": findings, "n_quiet": len(quiet), "n_attack_results": len(attacks),
        "secondary": secondary, "reid": _reidentification(attacks),
        "scatter": scatter, "forest": forest, "metric": metric, "sections": sections, "util_rows": util_rows,
        "drill": drill, "max_documents": max_documents,
        "kinds": [{"kind": visible(k), "cls": c} for k, c in kinds.items()],
        "skipped": [{"component": visible(str(s.get("component", ""))), "reason": visible(str(s.get("reason", "")))}
                    for s in skipped if isinstance(s, Mapping)],
        "sampled_any": sampled_any, "notes": [visible(n) for n in [*notes, *warnings]],
        "prov": _provenance_view(prov),
    }


def _attack_sections(names: list[str], attacks: list[Result], descriptions: Mapping[str, str],
                     colors: Mapping[str, str]) -> list[dict[str, Any]]:
    """One section per attack result name: its results, one row per release."""
    sections = []
    for n in names:
        rows = [_attack_row(r) for r in attacks if r.name == n]
        sections.append({"name": visible(n), "title": title_of(n), "description": visible(descriptions.get(n, "")),
                         "color": colors[n], "rows": rows, "anchor": "attack-" + anchor(n)})
    return sections


def _attack_row(r: Result) -> dict[str, Any]:
    level, words = _risk_level(r)
    samp = r.details.get("sampled")
    return {"release": visible(r.release), "value": pct(r.value), "raw": r.value,
            "ci": f"{pct(r.ci[0])} – {pct(r.ci[1])}" if r.ci else "–",
            "baseline": pct(r.baseline, 2) if r.baseline is not None else "–", "n": r.n,
            "beats": r.beats_baseline, "level": level, "words": words,
            "residual": pct(r.details.get("residual_risk")) if isinstance(
                r.details.get("residual_risk"), (int, float)) else "–",
            "setup": visible(r.details["attacker"]) if isinstance(r.details.get("attacker"), str) else "",
            "sampled": f"{samp.get('documents')} of {samp.get('of')}"
            if isinstance(samp, Mapping) and samp.get("of") else "",
            "extra": [(k.replace("_", " "), num(v)) for k, v in r.details.items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool)
                      and k not in ("residual_risk", "successes")][:6]}


def _verdict(attacks: list[Result], names: list[str]) -> tuple[list[dict[str, str]], list[Result], list[str]]:
    """``(findings, quiet, secondary)``: the headline risks above chance (highest first, at most 8),
    the headline results that did not beat chance, and the titles of the further measures."""
    # The verdict speaks of each attack's headline risk; the measures an attack adds beside it
    # (``trir.top5``, ``claim_linker.leakage``, ``phrase_search.ngram_residual``) stay in its section.
    headline = [r for r in attacks if _is_headline(r.name)]
    risky = sorted([r for r in headline if r.beats_baseline or (r.baseline is None and r.value > 0)],
                   key=lambda r: (-r.value, r.name, r.release))
    findings = [{"level": _risk_level(r)[0], "words": _risk_level(r)[1], "sentence": _sentence(r)} for r in risky[:8]]
    quiet = [r for r in headline if r.beats_baseline is False]
    secondary = [visible(title_of(n)) for n in names if not _is_headline(n)]
    return findings, quiet, secondary


#: Headline results that estimate the same risk, re-identification of a document's subject by
#: an adversary holding public background documents: the verdict takes the stronger per release.
REIDENTIFICATION = ("trir", "phrase_search_reid")


def _reidentification(attacks: list[Result]) -> list[dict[str, str]]:
    """Per release with more than one re-identification attacker: the highest of their risks."""
    by_release: dict[str, list[Result]] = {}
    for r in attacks:
        if r.name in REIDENTIFICATION:
            by_release.setdefault(r.release, []).append(r)
    out = []
    for rel, results in by_release.items():
        if len(results) < 2:
            continue
        best = max(results, key=lambda r: (r.value, r.name))
        others = ", ".join(f"{title_of(r.name)} {pct(r.value)}" for r in results if r is not best)
        out.append({"release": visible(rel), "value": pct(best.value), "attacker": title_of(best.name),
                    "others": others})
    return out


def _gate_view(checks: Sequence[Any]) -> dict[str, Any]:
    """The gate's threshold checks as a verdict and a table."""
    failed = [c for c in checks if not c.passed]
    return {"passed": not failed, "failed": len(failed), "total": len(checks),
            "rows": [{"title": visible(c.title), "release": visible(c.release), "bound": c.bound,
                      "compared": num(c.compared, 4), "passed": c.passed} for c in checks]}


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
                 "documents": num(v.get("documents")), "sha": short(v.get("sha256"))}
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
