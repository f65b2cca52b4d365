"""``anonaudit harden``: attack a release, repair exactly what the attacks used, attack again.

Each round:

1. the spec's attacks and metrics run on the release of the last round (with the
   :class:`~audit.pipeline.runner.Audit` runner, into the spec's ``results.json``: every round is
   a release of its own, ``NAME``, ``NAME.harden1``, ``NAME.harden2``..., so the report shows
   each round's risk and utility side by side, and a re-run reuses every finished pair);
2. the spec's gate is judged on that release; the loop stops when it passes (or is
   inconclusive: an attacker that failed its own check cannot be satisfied by repairs), when
   ``max_rounds`` repairs were made, when no attack found anything to repair, or when a repair
   changed nothing;
3. the evidence of every finding that succeeded (:func:`audit.core.evidence.targets_from_results`:
   its highlights) becomes repair targets: a recorded replacement an attack saw through
   (``"span"``) goes to the span repairer (INTACT by default: one level more general, or the
   label), visible words an attack used (``"text"``: rare phrases, claims, a classifier's
   deciding window) to the text repairer (the delinker by default: reworded, nothing else
   touched). Both are sanitizers found through the registry that declare the kind in
   :attr:`~audit.core.interfaces.Sanitizer.repairs`. A span target the span repairer leaves as
   it was (already at its label) becomes a text target on the words of its sentence
   (:func:`audit.core.evidence.context_targets`): its context gave it away;
4. the repaired release is written to ``OUT/harden/`` and becomes the next round's release.

Every round and the reason the loop stopped are kept in ``OUT/harden/NAME.json``; a round whose
file is there, unchanged, and made from the same input is reused, and every LLM call goes
through the answer cache, so an interrupted run resumes.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError
from audit.core.files import atomic_write_json, sha256_file
from audit.core.registry import Registry, given_registry, normalise
from audit.core.evidence import (SPAN, TEXT, RepairTarget, context_targets, shift_position, targets_from_results,
                               unchanged_spans)
from audit.core.results import ResultsFile
from audit.models.resources import LLM_STATS, Resources
from audit.pipeline.gate import EXIT_FAIL, EXIT_INCONCLUSIVE, Threshold, evaluate, exit_code
from audit.pipeline.provenance import canonical
from audit.pipeline.releases import read_release_jsonl, safe_name, write_release_jsonl, release_file_name
from audit.pipeline.calls import component_params, seed_keyword
from audit.pipeline.runner import Audit, AuditSpec, ComponentSpec, ReleaseSpec

#: Default repairers per kind of evidence (sanitizer names, looked up in the registry).
DEFAULT_REPAIRERS = {TEXT: "delinker", SPAN: "intact"}
#: Why the loop stopped.
STOPS = ("passed", "inconclusive", "max_rounds", "nothing_to_repair", "unchanged")


def _echo(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def round_name(release: str, k: int) -> str:
    """The name of round ``k``'s release (``NAME`` for the input, ``NAME.hardenK`` after)."""
    return release if k == 0 else f"{release}.harden{k}"


@dataclass(frozen=True)
class HardenRound:
    """One round: the release attacked, the gate's verdict on it, and what was repaired in it
    to make the next one (empty on the last)."""

    number: int
    release: str
    gate: str  # "pass" | "fail" | "inconclusive" | "none" (the spec has no gate)
    documents: int
    exposed: int  # documents with evidence to repair
    targets: Mapping[str, int] = field(default_factory=dict)  # per kind
    by_attack: Mapping[str, int] = field(default_factory=dict)
    risks: Mapping[str, float] = field(default_factory=dict)
    utility: Mapping[str, float] = field(default_factory=dict)
    repair: Mapping[str, Any] = field(default_factory=dict)  # what the repairers said (counts, LLM use)
    #: LLM tokens the attacks of this round spent (0 for pairs reused from an earlier run, and
    #: for models an attack loaded outside the run's resources)
    attack_tokens: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return canonical(dataclasses.asdict(self))


@dataclass
class HardenOutcome:
    rounds: list[HardenRound]
    final: Release
    stopped: str
    results: ResultsFile
    path: Path
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        """0 when the gate passed on the final release (or the spec has none), 1 when it fails,
        3 when it is inconclusive."""
        last = self.rounds[-1].gate
        return EXIT_FAIL if last == "fail" else EXIT_INCONCLUSIVE if last == "inconclusive" else 0


class Harden:
    """Hardens the release ``release`` of an audit spec (see the module doc).

    ``repairers``: sanitizer name per kind of evidence (default :data:`DEFAULT_REPAIRERS`);
    ``repair_params``: their parameters by sanitizer name (the spec's seed and models fill the
    rest, as for any component). ``attacks``: repair only the evidence of these attacks
    (default: every attack of the spec). ``metrics``: utility metrics measured on every round
    besides the spec's own (the price of each round). ``detector``: the registered detector that
    labels the replacements of a release file that records none (default: the run's spaCy
    pipeline's entities)."""

    def __init__(self, spec: AuditSpec, release: str, *, max_rounds: int = 3, registry: Registry | None = None,
                 repairers: Mapping[str, str] | None = None,
                 repair_params: Mapping[str, Mapping[str, Any]] | None = None,
                 attacks: list[str] | None = None, metrics: list[str] | None = None, progress: bool = True,
                 echo: Callable[[str], None] | None = _echo, detector: str | None = None, replace: bool = False):
        have = {normalise(m.name) for m in spec.metrics}
        extra = [ComponentSpec("metric", m) for m in dict.fromkeys(metrics or ()) if normalise(m) not in have]
        if extra:  # the utility each round keeps, besides the spec's own metrics
            spec = dataclasses.replace(spec, metrics=spec.metrics + tuple(extra))
        self.spec = spec
        self.release = release
        self.max_rounds = max_rounds
        self.registry = given_registry(registry)
        self.repairers = {**DEFAULT_REPAIRERS, **(repairers or {})}
        self.repair_params = {normalise(k): dict(v) for k, v in (repair_params or {}).items()}
        self.attacks = attacks
        self.progress = progress
        self.echo = echo or (lambda msg: None)
        self.detector = detector
        self.replace = replace  # OUT/results.json is a file of another kind, to be replaced (--force)
        self._check()

    # ------------------------------------------------------------------ checks

    def _check(self) -> None:
        spec, problems = self.spec, []
        names = [rs.name for rs in spec.releases]
        if self.release not in names:
            problems.append(f"the spec has no release named {self.release!r} (its releases: "
                            f"{', '.join(repr(n) for n in names) or 'none'})")
        if ".harden" in self.release:
            problems.append(f"{self.release!r} looks like a hardened round already; harden its input release")
        if not isinstance(self.max_rounds, int) or not 1 <= self.max_rounds <= 20:
            problems.append(f"--max-rounds must be between 1 and 20, got {self.max_rounds!r}")
        if spec.originals is None:
            problems.append("the spec names no originals: repairs need to know what each release hides")
        if not spec.attacks:
            problems.append("the spec names no attack: there is no evidence to repair")
        known = {normalise(c.name) for c in spec.attacks}
        for a in self.attacks or ():
            if normalise(a) not in known:
                problems.append(f"--attack {a!r} is not an attack of the spec (it runs: {', '.join(sorted(known))})")
        for m in spec.metrics:
            try:
                self.registry.get("metric", m.name)
            except AnonauditError as exc:
                problems.append(f"metric {m.name!r}: {exc}")
        if not spec.metrics:
            self.echo("harden: warning: no utility metric in the spec: the rounds will show no price "
                      "(add metrics: [tps, tpi, similarity], or --metric NAME)")
        for kind, name in self.repairers.items():
            if kind not in (TEXT, SPAN):
                problems.append(f"unknown kind of evidence {kind!r} (use text or span)")
                continue
            try:
                cls = self.registry.get("sanitizer", name)
            except AnonauditError as exc:
                problems.append(f"{kind} repairer: {exc}")
                continue
            if kind not in getattr(cls, "repairs", frozenset()):
                able = [n for n in self.registry.names("sanitizer") if kind in self._repairs_of(n)]
                problems.append(f"sanitizer {name!r} cannot repair {kind} evidence (those that can: "
                                f"{', '.join(able) or 'none installed'})")
        if self.detector is not None:
            try:
                self.registry.get("detector", self.detector)
            except AnonauditError as exc:
                problems.append(f"--detector: {exc}")
        for name in self.repair_params:
            if name not in {normalise(n) for n in self.repairers.values()}:
                problems.append(f"parameters given for {name!r}, which is not a repairer of this run")
        if problems:
            raise AnonauditError(f"{spec.source}: cannot harden: " + "; ".join(problems))

    def _repairs_of(self, name: str) -> frozenset[str]:
        try:
            return getattr(self.registry.get("sanitizer", name), "repairs", frozenset())
        except AnonauditError:
            return frozenset()

    # ------------------------------------------------------------------ files

    @property
    def folder(self) -> Path:
        return self.spec.out / "harden"

    @property
    def manifest_path(self) -> Path:
        return self.folder / f"{safe_name(self.release)}.json"

    def _load_manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    # ------------------------------------------------------------------ the loop

    def run(self) -> HardenOutcome:
        t0 = time.time()
        spec = self.spec
        base = next(rs for rs in spec.releases if rs.name == self.release)
        thresholds = [Threshold(k, "max", v) for k, v in spec.gate.max.items()] + \
                     [Threshold(k, "min", v) for k, v in spec.gate.min.items()]
        old = self._load_manifest()
        made: dict[str, Any] = {r["release"]: r for r in old.get("made", []) if isinstance(r, dict)}
        specs: list[ReleaseSpec] = [base]
        rounds: list[HardenRound] = []
        manifest: dict[str, Any] = {"release": self.release, "max_rounds": self.max_rounds,
                                    "repairers": dict(self.repairers), "rounds": [], "made": []}
        self.folder.mkdir(parents=True, exist_ok=True)
        with Resources(seed=spec.seed, progress=self.progress) as resources:
            repairers: dict[str, Any] = {}
            try:
                for k in range(self.max_rounds + 1):
                    name = round_name(self.release, k)
                    self.echo(f"harden: round {k}: attacking {name}")
                    audit = Audit(dataclasses.replace(spec, releases=tuple(specs)), registry=self.registry,
                                  progress=self.progress, echo=self.echo, command="harden",
                                  replace=self.replace and k == 0)
                    spent = resources.llm_usage(*self._given_llms())
                    outcome = audit.run(resources)
                    spent = {k: v - spent[k] for k, v in resources.llm_usage(*self._given_llms()).items()}
                    rf, rel = outcome.results, outcome.releases[name]
                    if k == 0:
                        rel = self._recorded(rel, resources)
                    info, targets, kinds = self._judge(k, rel, rf, thresholds, spent)
                    gate = info["gate"]
                    stop = ("passed" if gate == "pass" else "inconclusive" if gate == "inconclusive"
                            else "max_rounds" if k == self.max_rounds else "nothing_to_repair" if not targets else None)
                    self.echo(f"harden: round {k}: gate {gate}; {sum(kinds.values())} target(s) in {len(targets)} of "
                              f"{len(rel)} document(s)" + (f" ({', '.join(f'{v} {n}' for n, v in kinds.items())})"
                                                            if kinds else ""))
                    if stop is None:
                        nxt = round_name(self.release, k + 1)
                        new, repair_info = self._next(rel, targets, nxt, k + 1, made.get(nxt), resources, repairers)
                        if all(a.text == b.text and a.spans == b.spans for a, b in zip(rel, new)):
                            stop = "unchanged"
                        else:
                            path = self.folder / release_file_name(nxt)
                            if not repair_info.get("reused"):
                                write_release_jsonl(new, path)
                            manifest["made"].append({"release": nxt, "path": str(path), "sha256": sha256_file(path),
                                                     "input": rel.corpus.fingerprint(),
                                                     "targets": _target_key(targets), **repair_info})
                            specs.append(ReleaseSpec(nxt, path=path, format="jsonl"))
                        info["repair"] = repair_info
                    rounds.append(HardenRound(**info))
                    manifest["rounds"] = [r.to_dict() for r in rounds]
                    manifest["stopped"] = stop
                    atomic_write_json(self.manifest_path, manifest)
                    if stop is not None:
                        break
            finally:
                _close_all(repairers.values())
        self.echo(f"harden: stopped after round {rounds[-1].number} ({stop}); final release {rel.name}")
        return HardenOutcome(rounds=rounds, final=rel, stopped=stop, results=rf, path=outcome.path,
                             seconds=time.time() - t0)

    def _judge(self, k: int, rel: Release, rf: ResultsFile, thresholds: list[Threshold],
               spent: dict[str, int]) -> tuple[dict[str, Any], dict[str, list[RepairTarget]], Counter[str]]:
        """Round ``k`` on release ``rel``: the gate on its results, the repair targets its attacks'
        evidence gives, and the round's record (``info``), with the targets counted by kind."""
        mine = [r for r in rf.results if r.release == rel.name]
        if thresholds:
            checks = evaluate(rf, thresholds, releases=[rel.name], on_point=self.spec.gate.on_point)
            code = exit_code(checks)
            gate = "fail" if code == EXIT_FAIL else "inconclusive" if code == EXIT_INCONCLUSIVE else "pass"
        else:
            gate = "none"
        targets = targets_from_results({d.id: d for d in rel}, mine, attacks=self.attacks)
        kinds = Counter(t.kind for ts in targets.values() for t in ts)
        by_attack = Counter(a for ts in targets.values() for t in ts for a in t.attacks)
        info = dict(number=k, release=rel.name, gate=gate, documents=len(rel), exposed=len(targets),
                    targets=dict(kinds), by_attack=dict(sorted(by_attack.items())),
                    risks={r.name: r.value for r in mine if r.kind == "attack"},
                    utility={r.name: r.value for r in mine if r.kind == "utility"},
                    attack_tokens=spent)
        return info, targets, kinds

    # ------------------------------------------------------------------ one repair

    def _recorded(self, rel: Release, resources: Resources) -> Release:
        """``rel`` with its replacements recorded: a release file that holds only sanitized text
        gets the spans the attacks align themselves (:func:`audit.core.align.replaced_spans`,
        labelled by spaCy NER), so a recovered one is known as a replacement, not as words."""
        if not rel.aligned or any(s.original is not None for d in rel for s in d.spans):
            return rel
        from audit.core.align import replaced_spans
        from audit.io.loaders import load_corpus

        assert self.spec.originals is not None
        originals = load_corpus(str(self.spec.originals.path), format=self.spec.originals.format, name="originals")
        if self.detector is None:
            nlp, detect = resources.spacy(), None
        else:
            det = self.registry.create("detector", self.detector).use(resources)
            nlp, detect = None, (lambda text: det.detect([text])[0])
        docs = [d.with_spans(replaced_spans(originals[d.id], d, nlp=nlp, detect=detect)) if d.id in originals else d
                for d in rel]
        self.echo(f"harden: {rel.name} records no replacements; aligned with the originals")
        return dataclasses.replace(rel, corpus=Corpus(docs, name=rel.name, source=rel.source))


    def _given_llms(self) -> list[Any]:
        """LLM objects given as repairer parameters (not loaded by the run's resources)."""
        from audit.models.llm import LLM

        return [v for params in self.repair_params.values() for v in params.values() if isinstance(v, LLM)]

    def _repairer(self, kind: str, resources: Resources, cache: dict[str, Any]):
        name = self.repairers[kind]
        if name not in cache:
            cls = self.registry.get("sanitizer", name)
            params = component_params(self.spec, cls.param_names(), self.repair_params.get(normalise(name), {}),
                                      progress=self.progress, sampling=False)
            seed = seed_keyword(self.spec.seed, cls.param_names())
            try:
                cache[name] = self.registry.create("sanitizer", name, **seed, **params).use(resources)
            except AnonauditError:
                raise
            except (TypeError, ValueError) as exc:
                raise AnonauditError(f"{kind} repairer {name!r}: bad parameters: {exc}") from None
        return cache[name]

    def _next(self, rel: Release, targets: Mapping[str, list[RepairTarget]], name: str, rnd: int,
              before: Mapping[str, Any] | None, resources: Resources,
              repairers: dict[str, Any]) -> tuple[Release, dict[str, Any]]:
        """Round ``rnd``'s release ``name``: ``rel`` with ``targets`` repaired (or the file an
        earlier run made from the same input and targets)."""
        path = self.folder / release_file_name(name)
        if (before and path.exists() and before.get("input") == rel.corpus.fingerprint()
                and before.get("targets") == _target_key(targets) and before.get("sha256") == sha256_file(path)):
            self.echo(f"harden: {name}: reused {path.name}")
            info = {k: v for k, v in before.items() if k not in ("release", "path", "sha256", "input", "targets")}
            return read_release_jsonl(path, name, sanitizer="harden"), {**info, "reused": True}
        info: dict[str, Any] = {}
        llm_before = resources.llm_stats()
        tokens_before = resources.llm_usage(*self._given_llms())
        current = rel
        spans = {d: [t for t in ts if t.kind == SPAN] for d, ts in targets.items()}
        spans = {d: ts for d, ts in spans.items() if ts}
        texts = {d: [t for t in ts if t.kind == TEXT] for d, ts in targets.items()}
        texts = {d: ts for d, ts in texts.items() if ts}
        for kind in (SPAN, TEXT):  # span repairs first: the text targets then move with them
            todo = spans if kind == SPAN else texts
            if not todo:
                continue
            repairer = self._repairer(kind, resources, repairers)
            self.echo(f"harden: {name}: {sum(map(len, todo.values()))} {kind} target(s) in {len(todo)} document(s) "
                      f"to {self.repairers[kind]}")
            repaired = repairer.repair(current, todo, name=name, round=rnd)
            if [d.id for d in repaired] != [d.id for d in current]:
                raise AnonauditError(f"{kind} repairer {self.repairers[kind]!r} returned other documents than it got")
            if kind == SPAN and texts:  # the text targets' offsets, in the text with new replacements
                texts = {d: [dataclasses.replace(t, start=shift_position(current.corpus[d], repaired.corpus[d], t.start),
                                                 end=shift_position(current.corpus[d], repaired.corpus[d], t.end))
                             for t in ts] for d, ts in texts.items()}
            context = 0
            if kind == SPAN:  # a replacement that could not say less: reword its sentence instead
                for d, ts in todo.items():
                    left = unchanged_spans(current.corpus[d], repaired.corpus[d], ts)
                    extra = context_targets(repaired.corpus[d], left) if left else []
                    if extra:
                        texts[d] = sorted([*texts.get(d, []), *extra], key=lambda t: (t.start, t.end))
                        context += len(left)
            current = repaired
            info[kind] = {"repairer": self.repairers[kind],
                          **canonical(_own_stats(repairer.stats(), name))}
            if context:
                info[kind]["to_context"] = context
                self.echo(f"harden: {name}: {context} span target(s) left as they were (at their label): their "
                          f"sentences go to {self.repairers[TEXT]}")
        used = {k: resources.llm_stats()[k] - llm_before[k] for k in LLM_STATS}
        info["llm_cache"] = used
        tokens = resources.llm_usage(*self._given_llms())
        info["llm_tokens"] = {k: tokens[k] - tokens_before[k] for k in tokens}
        docs = []
        for d in current:
            ts = targets.get(d.id)
            if ts:
                d = dataclasses.replace(d, meta={**dict(d.meta), "harden": {
                    "round": rnd, "targets": [t.to_dict() for t in ts]}})
            docs.append(d)
        return Release(name=name, corpus=Corpus(docs, name=name), aligned=rel.aligned, sanitizer="harden"), info


def _close_all(objs: Any) -> None:
    """Close each of ``objs``; releasing is best effort."""
    for obj in objs:
        try:
            obj.close()
        except Exception:  # noqa: BLE001 - releasing is best effort
            pass


def _target_key(targets: Mapping[str, list[RepairTarget]]) -> list:
    return sorted([d, [t.to_dict() for t in ts]] for d, ts in targets.items())


def _own_stats(stats: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The part of a repairer's stats about release ``name`` (its counts and timings)."""
    out: dict[str, Any] = {}
    for key, value in stats.items():
        if isinstance(value, Mapping) and name in value:
            out[key] = value[name]
    return out
