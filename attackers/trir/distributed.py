"""TRIR's training away from the run's process: on one worker of a distributed executor
(:class:`TrainOnWorker`)."""

from __future__ import annotations

from typing import Any

from attackers.trir.encoder import resolve_base
from audit.core.data import Corpus, Release


class TrainOnWorker:
    """TRIR's training as an executor's worker (:mod:`audit.runtime.executor`), for a cluster: the
    one item is the base encoder as the attack names it (resolved on the worker: the embedded
    MiniLM of the worker's own install, or a folder every node sees); the one output is the
    trained attacker's saved files by name (:meth:`TrainedTRIR.to_files`), which the run loads
    and caches. Pickled, it carries the attack's class and parameters, the masking styles chosen from the
    releases, the background and the dev release.

    It trains on the worker's GPU when it has one (the run asks the cluster for one when the
    cluster has any) unless the attack names a device, else on as many torch threads as the
    attack's ``num_threads``, or as the worker has CPUs (``threads``, set by the executor: one
    worker is given a node's CPUs, as a local run has this machine's), so that a CPU worker
    trains the same attacker as a local run with as many threads."""

    def __init__(self, attack_class: type, params: dict[str, Any], mask_styles: tuple[str, ...],
                 background: Corpus, dev: Release | None):
        self.attack_class = attack_class  # TRIRAttack (passed in: this module is imported by it)
        self.params, self.mask_styles, self.background, self.dev = dict(params), tuple(mask_styles), background, dev
        self.threads: int | None = None

    def __call__(self, bases: list[str | None]) -> list[dict[str, bytes]]:
        out = []
        for base in bases:
            attack = self.attack_class(**{**self.params, "base": base, "use_cache": False,
                                      "num_threads": self.params.get("num_threads") or self.threads})
            attack.use_mask_styles(self.mask_styles)
            try:
                trained = attack.train_attacker(self.background, resolve_base(base), self.dev, attack.torch_device())
            finally:
                attack.close()
            trained.info["params"] = dict(self.params)  # the run's, not the worker's copy of them
            out.append(trained.to_files())
        return out
