"""The TensorFlow engine's distribution strategy: one device, MirroredStrategy over this process's GPUs, or
MultiWorkerMirroredStrategy over several processes (one per node) that TF_CONFIG or a Slurm job step describes.

Kept apart from the network and the training step (``trainbench.engines.tf.engine``), which only ask for the
strategy a model configuration trains under (``make_strategy``) and for env.json's record of it. Nothing here
touches Keras, so importing this module before engines/tf/engine.py sets TF_USE_LEGACY_KERAS changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

# Memory on demand, as _gpus asks, even when something ran a TensorFlow operation before it could (set_memory_growth
# then fails and TensorFlow would take nearly all of every GPU): read when TensorFlow sets up its GPUs. A user's
# value stays.
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")

import tensorflow as tf

from trainbench.config import ModelConfig
from trainbench.engines.devices import check_precision, resolve_device
from trainbench.errors import UsageError

StrategyKind = Literal["one_device", "mirrored", "multi_worker"]


class Cluster(NamedTuple):
    """This process's place in a job of several worker processes, as its environment describes it."""

    source: Literal["TF_CONFIG", "Slurm"]
    workers: int  # processes training together: TF_CONFIG's chief and worker tasks, or the Slurm step's tasks
    chief: bool  # the one process that writes checkpoints and results


def _tf_config_cluster(text: str) -> Cluster | None:
    """TF_CONFIG's cluster when it has more than one training task; a malformed one is a one-line UsageError."""
    try:
        tf_config = json.loads(text)
    except ValueError as error:
        raise UsageError(f"TF_CONFIG is not valid JSON ({error})") from None
    cluster = tf_config.get("cluster") if isinstance(tf_config, dict) else None
    task = tf_config.get("task", {}) if isinstance(tf_config, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict) or not all(
        isinstance(addresses, list) for addresses in cluster.values()
    ):
        raise UsageError('TF_CONFIG must look like {"cluster": {"worker": ["host:port", ...]}, '
                         '"task": {"type": "worker", "index": 0}}')
    chiefs, workers = len(cluster.get("chief", [])), len(cluster.get("worker", []))
    if chiefs + workers <= 1:
        return None  # a cluster of one: the process trains alone
    if cluster.get("ps"):
        raise UsageError("TF_CONFIG names parameter servers (ps): trainbench trains with "
                         "MultiWorkerMirroredStrategy, chief and worker tasks only")
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type not in ("chief", "worker") or not isinstance(index, int) or not 0 <= index < len(
        cluster.get(task_type, [])
    ):
        raise UsageError(f"TF_CONFIG's task {task!r} is not one of its cluster's chief or worker tasks")
    chief = task_type == "chief" or (not chiefs and index == 0)
    return Cluster("TF_CONFIG", chiefs + workers, chief)


def _slurm_number(environ: Mapping[str, str], name: str) -> int:
    try:
        return int(environ[name])
    except ValueError:
        raise UsageError(f"{name}={environ[name]!r} is not a whole number") from None


def cluster_of(environ: Mapping[str, str]) -> Cluster | None:
    """The multi-worker job this process is one worker of, or None when it trains alone.

    TF_CONFIG (set by the user, explicit) comes first. Slurm counts when the process is one task of a job step of
    several (``srun``): SLURM_STEP_NUM_TASKS, which only srun sets. SLURM_NTASKS is not enough: a batch script
    itself has SLURM_NTASKS and SLURM_PROCID=0 too, and would then wait forever for workers that never start.
    """
    if environ.get("TF_CONFIG", "").strip():
        return _tf_config_cluster(environ["TF_CONFIG"])
    if "SLURM_STEP_NUM_TASKS" in environ and "SLURM_PROCID" in environ:
        tasks = _slurm_number(environ, "SLURM_STEP_NUM_TASKS")
        if tasks > 1:
            return Cluster("Slurm", tasks, _slurm_number(environ, "SLURM_PROCID") == 0)
    return None


def strategy_kind(environ: Mapping[str, str], gpus: int, device: str) -> StrategyKind:
    """Which strategy trains: several workers, several GPUs of this process, or one device.

    ``gpus``: the GPUs TensorFlow sees; ``device``: the resolved device, 'cuda' or 'cpu'."""
    if cluster_of(environ) is not None:
        return "multi_worker"
    return "mirrored" if device == "cuda" and gpus > 1 else "one_device"


def _gpus() -> list[Any]:
    # Listing physical devices does not start TensorFlow's runtime: MultiWorkerMirroredStrategy can still follow.
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        # Grow on demand instead of taking all memory up front: the OOM probe of a batch-size sweep then fails on
        # what the step needs, and nvidia-smi shows real use. Too late once the GPU is initialised; that's fine.
        with contextlib.suppress(RuntimeError, ValueError):
            tf.config.experimental.set_memory_growth(gpu, True)
    return gpus


def _cluster_resolver(cluster: Cluster, gpus: int) -> tf.distribute.cluster_resolver.ClusterResolver:
    """TF_CONFIG's resolver, or Slurm's restated with this process's own GPU count.

    SlurmClusterResolver would count GPUs with nvidia-smi (absent on CPU nodes), split a node's GPUs evenly over its
    tasks (zero GPUs per task breaks its arithmetic) and rewrite CUDA_VISIBLE_DEVICES. Here it only names the
    hosts, ports and this task; each task trains on the GPUs it sees (Slurm's --gpus-per-task, or one task per
    node with all of them), so its GPU numbers below only satisfy its checks."""
    if cluster.source == "TF_CONFIG":
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()  # MWMS counts this process's GPUs itself
    slurm = tf.distribute.cluster_resolver.SlurmClusterResolver(
        gpus_per_node=cluster.workers, gpus_per_task=1, auto_set_gpu=False
    )
    spec = slurm.cluster_spec()  # also sets task_type and task_id
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        spec, task_type=slurm.task_type, task_id=slurm.task_id, num_accelerators={"GPU": gpus}, rpc_layer="grpc"
    )


# The process's one MultiWorkerMirroredStrategy and the device it was made for: TensorFlow allows one per process,
# made before anything starts its runtime, and the engine may be asked for a runner and then a trainer.
_multi_worker: dict[str, tf.distribute.Strategy] = {}


def world_record() -> dict[str, Any] | None:
    """The workers this process trained with, for env.json (None alone)."""
    if not _multi_worker:
        return None
    [(device, strategy)] = _multi_worker.items()
    cluster = cluster_of(os.environ)
    return {"strategy": type(strategy).__name__, "device": device, "replicas": strategy.num_replicas_in_sync,
            "workers": cluster.workers if cluster else None, "source": cluster.source if cluster else None}


def _multi_worker_strategy(cluster: Cluster, device: str, gpus: int) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy over every worker (each with its GPUs, or its CPU): made once per process."""
    if _multi_worker:
        [(made_for, strategy)] = _multi_worker.items()
        if made_for != device:
            raise UsageError(f"this worker already trains on {made_for} with its peers; it cannot switch to {device}")
        return strategy
    if device == "cpu" and gpus:
        tf.config.set_visible_devices([], "GPU")  # MWMS takes every GPU it sees; still allowed at this point
    implementation = (tf.distribute.experimental.CommunicationImplementation.NCCL if device == "cuda"
                      else tf.distribute.experimental.CommunicationImplementation.RING)
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=_cluster_resolver(cluster, gpus if device == "cuda" else 0),
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation),
        )
    except RuntimeError as error:
        if "program startup" not in str(error):
            raise
        raise UsageError(f"{cluster.source} makes this process one of {cluster.workers} TensorFlow workers, but "
                         "TensorFlow already ran an operation in it: MultiWorkerMirroredStrategy must come "
                         "first") from None
    if sigterm is not None and threading.current_thread() is threading.main_thread():
        # The coordination service replaced the process's SIGTERM handler with a flag for TensorFlow's preemption
        # checkpointing (unused here): SIGTERM would no longer end a worker, nor reach the CLI's own handler. Put
        # the previous one back; a peer that is gone is then noticed by its heartbeats (10 s) and fails the rest.
        signal.signal(signal.SIGTERM, sigterm)
    _multi_worker[device] = strategy
    return strategy


def make_strategy(model: ModelConfig) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy when this process is one worker of several (TF_CONFIG, a Slurm step);
    else MirroredStrategy over all GPUs when there are several, else one device (also the CPU on a GPU machine).

    Nothing here starts TensorFlow's runtime before MultiWorkerMirroredStrategy is made, which it requires."""
    gpus = len(_gpus())
    device = resolve_device(model.device, gpus, "TensorFlow")
    check_precision(model.precision, device)
    kind = strategy_kind(os.environ, gpus, device)
    if kind == "multi_worker":
        cluster = cluster_of(os.environ)
        assert cluster is not None
        return _multi_worker_strategy(cluster, device, gpus)
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy()
    return tf.distribute.OneDeviceStrategy("/gpu:0" if device == "cuda" else "/cpu:0")
