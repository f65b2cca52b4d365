"""The executors a run can use: local (default) or Ray (``pip install anonaudit[ray]``).

:class:`RayExecutor` runs the groups of :meth:`audit.runtime.executor.Executor.map` as a Ray Data
dataset, one row per group, through ``map_batches`` over a pool of actors: each actor builds
the worker once (its ``setup()`` loads the model) and then takes group after group. A worker
marked ``light_setup`` (its ``setup()`` loads nothing) runs as Ray tasks instead, set up for
each group: Ray keeps a task's process for later tasks, where each stage's actors start
processes of their own. Rows carry the group's position, so outputs come back in order
whatever finished first. Items and outputs travel pickled (a Ray Data column of bytes), so a
worker may take and return any picklable object (documents, findings, numpy arrays); the
large arrays of an output travel beside the pickle, out of band (pickle protocol 5), as a Ray
Data tensor column that the driver reads without unpickling or copying it (:func:`_pack`).

Addresses: ``local`` starts a Ray on this machine for the run (and stops it at the end),
``auto`` joins the cluster this machine belongs to (``ray start --head`` / ``ray start
--address=HEAD``), ``HOST:PORT`` a cluster's head, ``ray://HOST:PORT`` a cluster through Ray
Client. An address that cannot be reached is an :class:`~audit.core.errors.AnonauditError`
(exit 2) within seconds, naming it; a worker that dies mid-stage is one too, and the run
resumes from its finished (component, release) pairs when started again.

This module imports Ray only when a Ray executor starts: the local executor needs none.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from audit.core.errors import AnonauditError
from audit.runtime.executor import Executor, LocalExecutor, Worker

KINDS = ("local", "ray")
#: How often a stage's dead worker is restarted and its group tried again before the run stops.
MAX_RETRIES = 2
#: Arrays of an output at least this large (bytes) travel out of band (see :func:`_pack`).
OUT_OF_BAND_BYTES = 1 << 16


def _pack(outputs: list[Any]) -> tuple[bytes, Any]:
    """A group's outputs for the way back: ``(pickle, raw)``, where the pickle (protocol 5) leaves
    out the buffers of its arrays of at least :data:`OUT_OF_BAND_BYTES`, which follow one after
    the other in ``raw`` (uint8; no copy when there is one). Pickled, such an array is copied
    into the pickle, the pickle into a Ray Data block, and back out on the driver; as a tensor
    column it is copied once into the block and read in place."""
    import numpy as np

    big: list[pickle.PickleBuffer] = []

    def aside(buf: pickle.PickleBuffer) -> bool:  # False: out of band
        if buf.raw().nbytes >= OUT_OF_BAND_BYTES:
            big.append(buf)
            return False
        return True

    payload = pickle.dumps(outputs, protocol=5, buffer_callback=aside)
    views = [np.frombuffer(b.raw(), dtype=np.uint8) for b in big]
    raw = views[0] if len(views) == 1 else np.concatenate(views) if views else np.zeros(0, dtype=np.uint8)
    return pickle.dumps((payload, [len(v) for v in views]), protocol=5), raw


def _unpack(packed: bytes, raw: Any, copy: bool) -> list[Any]:
    """The outputs :func:`_pack` sent, their large arrays views of ``raw`` (read-only when ``raw``
    is the cluster's memory) or, with ``copy``, arrays of their own."""
    import numpy as np

    payload, sizes = pickle.loads(packed)
    raw = np.asarray(raw)
    if copy and len(sizes) and not raw.flags.writeable:
        raw = raw.copy()
    cuts = np.cumsum([0, *sizes])
    return pickle.loads(payload, buffers=[raw[a:b] for a, b in zip(cuts[:-1], cuts[1:])])


@dataclass(frozen=True)
class ExecutorSpec:
    """Which executor a run uses: ``kind`` local or ray; for Ray the cluster's ``address``
    (``auto``, ``local``, ``HOST:PORT``, ``ray://HOST:PORT``), the number of ``workers`` per
    stage (default: the cluster's CPUs), and for ``address: local`` the CPUs and object store
    (bytes) of the Ray it starts."""

    kind: str = "local"
    address: str = "auto"
    workers: int | None = None
    num_cpus: int | None = None
    object_store_memory: int | None = None


def make_executor(spec: ExecutorSpec | None) -> Executor:
    """The executor ``spec`` names (not started)."""
    if spec is None or spec.kind == "local":
        return LocalExecutor()
    if spec.kind == "ray":
        return RayExecutor(address=spec.address, workers=spec.workers, num_cpus=spec.num_cpus,
                           object_store_memory=spec.object_store_memory)
    raise AnonauditError(f"unknown executor {spec.kind!r} (use {' or '.join(KINDS)})")


def parse_executor(raw: Any) -> tuple[ExecutorSpec, list[tuple[str, str]]]:
    """``(spec, problems)`` of a spec's ``executor`` value: ``local``, ``ray``, or a mapping
    ``{kind, address, workers, num_cpus, object_store_memory}``; problems are ``(key, message)``."""
    problems: list[tuple[str, str]] = []
    if raw is None:
        return ExecutorSpec(), problems
    if isinstance(raw, str):
        raw = {"kind": raw}
    if not isinstance(raw, Mapping):
        return ExecutorSpec(), [("executor", "must be local, ray, or a mapping {kind, address, workers}")]
    known = ("kind", "address", "workers", "num_cpus", "object_store_memory")
    for k in set(raw) - set(known):
        problems.append((f"executor.{k}", f"unknown key (use {', '.join(known)})"))
    kind = raw.get("kind", "local")
    if kind not in KINDS:
        problems.append(("executor.kind", f"must be {' or '.join(KINDS)}, got {kind!r}"))
        kind = "local"
    address = raw.get("address") or "auto"
    if not isinstance(address, str):
        problems.append(("executor.address", f"must be auto, local, HOST:PORT or ray://HOST:PORT, got {address!r}"))
        address = "auto"
    ints: dict[str, int | None] = {}
    for k in ("workers", "num_cpus", "object_store_memory"):
        v = raw.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            problems.append((f"executor.{k}", f"must be a positive integer, got {v!r}"))
            v = None
        ints[k] = v
    if kind == "ray" and not problems:
        from importlib.util import find_spec

        if find_spec("ray") is None:
            problems.append(("executor", "the ray executor needs Ray: pip install 'anonaudit[ray]'"))
    return ExecutorSpec(kind=kind, address=address, **ints), problems


# --------------------------------------------------------------------------- Ray


def _prepare(worker: Worker) -> Worker:
    """``worker`` made ready in this Ray process: a ``threads`` attribute gets the number of
    CPUs Ray assigned to the actor or task, then ``setup()`` runs."""
    if hasattr(worker, "threads"):
        import ray

        worker.threads = max(1, int(ray.get_runtime_context().get_assigned_resources().get("CPU", 1)))
    setup = getattr(worker, "setup", None)
    if callable(setup):
        setup()
    return worker


def _apply(worker: Worker, batch: dict[str, Any]) -> dict[str, Any]:
    """One group (the stage's ``batch_size`` is 1) through ``worker``: its outputs, their large
    arrays in the tensor column ``b`` (one row; each group's length its own)."""
    import numpy as np

    (i,), (x,) = batch["i"], batch["x"]
    y, raw = _pack(list(worker(pickle.loads(x))))
    return {"i": np.asarray([i]), "y": np.array([y], dtype=object), "b": raw[None, :]}


class _Actor:
    """One Ray actor of a stage: builds the worker once, then maps groups (rows) through it."""

    def __init__(self, worker: Worker):
        self.worker = _prepare(worker)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        return _apply(self.worker, batch)


def _task(batch: dict[str, Any], worker: Worker) -> dict[str, Any]:
    """One group as a Ray task, for a worker with ``light_setup`` (see :meth:`RayExecutor._run`)."""
    return _apply(_prepare(worker), batch)


def _reachable(address: str, timeout: float = 5.0) -> str | None:
    """Why ``HOST:PORT`` (or ``ray://HOST:PORT``) cannot be reached, or None when it can."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return f"not an address of the form HOST:PORT or ray://HOST:PORT: {address!r}"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return f"{exc.strerror or exc}"


class RayExecutor(Executor):
    """Groups as Ray Data ``map_batches`` over an actor pool (see the module doc)."""

    kind = "ray"
    distributed = True

    def __init__(self, address: str = "auto", *, workers: int | None = None, num_cpus: int | None = None,
                 object_store_memory: int | None = None):
        super().__init__()
        self.address = address
        self.workers = workers
        self.num_cpus = num_cpus
        self.object_store_memory = object_store_memory
        self._started_here = False
        self._ray: Any = None

    def start(self) -> RayExecutor:
        if self._ray is not None:
            return self
        try:
            import ray
        except ImportError:
            raise AnonauditError("the ray executor needs Ray: pip install 'anonaudit[ray]'") from None
        if ray.is_initialized():  # a caller (a test, a notebook) connected already: use it
            self._ray = ray
            return self
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        address = self.address
        if address == "local":
            kw.update(num_cpus=self.num_cpus, object_store_memory=self.object_store_memory)
            # Ray ends idle worker processes beyond one a CPU, counting the stages' actors and Ray
            # Data's own: a task stage after an actor stage would then start its processes anew
            # (1.2-1.5 s here); room for a CPU's worth of each, and Ray Data's, keeps them
            cpus = self.num_cpus or os.cpu_count() or 1
            kw["_system_config"] = {"num_workers_soft_limit": 2 * cpus + 8}
            # workers import this very checkout (not another installed copy)
            paths = [p for p in sys.path if p and os.path.isdir(p)]
            kw["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}}
            address_arg = None
        else:
            if address != "auto":
                why = _reachable(address)
                if why is not None:
                    raise AnonauditError(f"cannot reach the Ray cluster at {address}: {why} (start one with "
                                         "`ray start --head`, or use --ray-address local for a Ray on this machine)")
            address_arg = address
        try:
            ray.init(address=address_arg, **kw)
        except Exception as exc:  # noqa: BLE001  Ray raises a bare Exception when its node does not start
            if address == "local":
                raise AnonauditError(f"could not start a Ray on this machine: {_first_line(exc)} (a machine short of CPU "
                                     "or memory starts Ray slowly: try again when it is quieter, or use "
                                     "--executor local)") from None
            hint = (" (no running cluster found on this machine: start one with `ray start --head`, or use "
                    "--ray-address local)" if address == "auto" else "")
            raise AnonauditError(f"cannot connect to the Ray cluster at {address}: {exc}{hint}") from None
        self._started_here = True
        self._ray = ray
        return self

    def close(self) -> None:
        if self._ray is not None and self._started_here:
            self._ray.shutdown()
        self._ray = None
        self._started_here = False

    def _nodes(self) -> list[dict[str, float]]:
        """The resources of each live node of the cluster (one query of Ray's state)."""
        ray = self.start()._ray
        return [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]

    def cluster(self, nodes: list[dict[str, float]] | None = None) -> dict[str, Any]:
        nodes = self._nodes() if nodes is None else nodes
        return {"nodes": len(nodes), "cpus": int(sum(r.get("CPU", 0) for r in nodes)),
                "gpus": int(sum(r.get("GPU", 0) for r in nodes))}

    def pool_size(self, nodes: list[dict[str, float]] | None = None) -> int:
        return self.workers or max(1, self.cluster(nodes)["cpus"])

    def cpus_per_worker(self, size: int, num_cpus: float, num_gpus: float = 0.0,
                        nodes: list[dict[str, float]] | None = None) -> float:
        """The CPUs each of ``size`` actors asks for: its share of the CPUs of the nodes it can run
        on (those with ``num_gpus`` GPUs, when it asks for any), never more than the largest of
        them has, so that it can be placed, and at least the stage's ``num_cpus``. With fewer
        workers than CPUs, each worker's model gets the spare cores as threads, as a local run's
        does, instead of leaving them idle. ``nodes``: :meth:`_nodes`, when the caller has them."""
        nodes = self._nodes() if nodes is None else nodes
        node_cpus = [r.get("CPU", 0) for r in nodes if not num_gpus or r.get("GPU", 0) >= num_gpus]
        share = min(max(node_cpus, default=1), int(sum(node_cpus)) // max(1, size))
        return max(float(num_cpus), float(share))

    def info(self) -> dict[str, Any]:
        nodes = self._nodes()
        return {"kind": "ray", "address": self.address, **self.cluster(nodes), "workers": self.pool_size(nodes),
                "ray": self.start()._ray.__version__}

    def train_workers(self, num_threads: int | None) -> tuple[int, int | None, bool]:
        """A training's Ray Train workers: one per GPU when the cluster has any; else ``workers``
        (``--ray-workers``; default: one per ``num_threads`` CPUs, one per CPU without it), each
        with its share of the CPUs as torch threads."""
        info = self.info()
        gpus, cpus = int(info.get("gpus") or 0), max(1, int(info.get("cpus") or 1))
        if gpus:
            return gpus, max(1, num_threads or cpus // gpus), True
        workers = self.workers or max(1, cpus // max(1, num_threads or 1))
        return workers, max(1, num_threads or cpus // workers), False

    def check_training(self, workspace: Any) -> None:
        from audit.pipeline.ray_train import check_ray_train

        workspace.check()
        self.start()
        check_ray_train()

    def train(self, job: Any) -> dict[str, Any]:
        """Run the training ``job`` data-parallel on Ray Train (:mod:`audit.pipeline.ray_train`)."""
        from audit.pipeline.ray_train import train_on_ray

        self.start()
        return train_on_ray(job)

    def _run(self, worker: Worker, groups: list[list[Any]], *, label: str, num_cpus: float,
             num_gpus: float) -> list[list[Any]]:
        ray = self.start()._ray
        import ray.data  # noqa: F401  (the Data library, installed by ray[data])
        from ray import exceptions as rex

        nodes = self._nodes()  # once a stage (each query of Ray's state is a round trip to its GCS)
        size = min(self.pool_size(nodes), len(groups))
        num_cpus = self.cpus_per_worker(size, num_cpus, num_gpus, nodes)
        rows = [{"i": i, "x": pickle.dumps(g, protocol=5)} for i, g in enumerate(groups)]
        ds = ray.data.from_items(rows, override_num_blocks=min(len(rows), max(size * 4, 1)))
        with warnings.catch_warnings():  # Ray 2.60 names the retry arguments deprecated, with no successor yet
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
            if getattr(worker, "light_setup", False):
                # a worker that loads nothing (its setup() is cheap and may run for every group)
                # runs as tasks: Ray keeps a task's process for the next task, the next stage's
                # included, where each stage's actors start processes of their own (1.2-1.5 s here)
                ds = ds.map_batches(_task, fn_args=(worker,), batch_size=1, batch_format="numpy",
                                    compute=ray.data.TaskPoolStrategy(size=size), num_cpus=num_cpus,
                                    num_gpus=num_gpus or None, max_retries=MAX_RETRIES)
            else:
                ds = ds.map_batches(_Actor, fn_constructor_args=(worker,), batch_size=1, batch_format="numpy",
                                    compute=ray.data.ActorPoolStrategy(size=size), num_cpus=num_cpus,
                                    num_gpus=num_gpus or None,
                                    # a worker that dies is restarted and its group retried, a few times
                                    # (a lost node); Ray Data's default (forever) would hang on a worker
                                    # that always dies on one group
                                    max_restarts=MAX_RETRIES, max_task_retries=MAX_RETRIES)
        try:
            out = ds.take_all()
        except rex.RayTaskError as exc:  # the worker's own exception: raise it as it is
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            if isinstance(cause, (rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError)):
                raise _died(label, cause) from None
            raise cause from None
        except (rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError,
                rex.OwnerDiedError) as exc:
            raise _died(label, exc) from None
        copy = not getattr(worker, "readonly_outputs", False)
        by_pos: dict[int, list[Any]] = {int(r["i"]): _unpack(r["y"], r["b"], copy) for r in out}
        if len(by_pos) != len(groups):
            raise AnonauditError(f"Ray stage {label!r}: {len(by_pos)} of {len(groups)} groups came back")
        return [by_pos[i] for i in range(len(groups))]


def _first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of Ray's message (its next lines are a traceback or advice), cut at ``limit``."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]


def _died(label: str, exc: BaseException) -> AnonauditError:
    return AnonauditError(f"a Ray worker died during {label!r} ({type(exc).__name__}: {_first_line(exc)}); the "
                          "finished (component, release) pairs are saved: run the same command again to resume")
