"""TensorFlow across processes: MultiWorkerMirroredStrategy when TF_CONFIG or a Slurm step names several workers.

Fast: which strategy an environment asks for (``strategy_kind``, ``cluster_of``), TF_CONFIG refusals, the Slurm
resolver's cluster. Slow: two local CPU workers (TF_CONFIG, gRPC on localhost) train the engine's trainer and end with
bit-identical parameters, the ones MirroredStrategy over two replicas in one process reaches (that process also
holds the engine's MirroredStrategy checks); two more, told by srun's variables instead, step its benchmark runner.

TensorFlow and PyTorch must not be imported into one process in that order (it crashes): nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("official")

from tensorflow.python.distribute import multi_worker_util

from trainbench.config import ModelConfig
from trainbench.engines.tf import distribute as tf_distribute
from trainbench.engines.tf.distribute import Cluster, _cluster_resolver, cluster_of, strategy_kind
from trainbench.errors import UsageError

SOURCE = Path(__file__).resolve().parents[1] / "source"


def tf_config(workers: int, task_type: str = "worker", index: int = 0, chiefs: int = 0) -> dict[str, str]:
    cluster = {"worker": [f"localhost:{2000 + i}" for i in range(workers)]}
    if chiefs:
        cluster["chief"] = [f"localhost:{3000 + i}" for i in range(chiefs)]
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})}


# --- fast: which strategy ---------------------------------------------------------------------------------------


def test_tensorflow_grows_gpu_memory_on_demand_even_when_set_memory_growth_comes_too_late() -> None:
    # Set by tf_distribute before TensorFlow sets up a GPU (this process's environment, which TF reads then).
    assert os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"


def test_alone_one_gpu_or_the_cpu_is_one_device_and_several_gpus_mirror() -> None:
    assert cluster_of({}) is None
    assert strategy_kind({}, gpus=0, device="cpu") == "one_device"
    assert strategy_kind({}, gpus=1, device="cuda") == "one_device"
    assert strategy_kind({}, gpus=4, device="cuda") == "mirrored"
    assert strategy_kind({}, gpus=4, device="cpu") == "one_device"  # --device cpu on a GPU machine


def test_tf_config_of_one_worker_trains_alone() -> None:
    assert cluster_of(tf_config(1)) is None
    assert strategy_kind(tf_config(1), gpus=2, device="cuda") == "mirrored"
    assert cluster_of({"TF_CONFIG": ""}) is None
    assert cluster_of({"TF_CONFIG": json.dumps({"cluster": {}})}) is None


def test_tf_config_of_two_workers_is_multi_worker_with_worker_0_as_chief() -> None:
    assert strategy_kind(tf_config(2), gpus=0, device="cpu") == "multi_worker"
    assert strategy_kind(tf_config(2, index=1), gpus=4, device="cuda") == "multi_worker"
    assert cluster_of(tf_config(2, index=0)) == Cluster("TF_CONFIG", 2, chief=True)
    assert cluster_of(tf_config(2, index=1)) == Cluster("TF_CONFIG", 2, chief=False)
    # With a chief task, the chief is it and worker 0 is not.
    assert cluster_of(tf_config(1, "chief", 0, chiefs=1)) == Cluster("TF_CONFIG", 2, chief=True)
    assert cluster_of(tf_config(1, "worker", 0, chiefs=1)) == Cluster("TF_CONFIG", 2, chief=False)


@pytest.mark.parametrize(("workers", "chiefs", "task_type", "index"),
                         [(2, 0, "worker", 0), (3, 0, "worker", 2), (2, 1, "chief", 0), (2, 1, "worker", 0)])
def test_the_chief_is_tensorflows_chief(workers: int, chiefs: int, task_type: str, index: int) -> None:
    environ = tf_config(workers, task_type, index, chiefs)
    cluster = cluster_of(environ)
    assert cluster is not None
    spec = json.loads(environ["TF_CONFIG"])["cluster"]
    assert cluster.chief == multi_worker_util.is_chief(spec, task_type, index)


@pytest.mark.parametrize(("text", "fragment"), [
    ('{"cluster": {"worker": ["a:1", "b:2"]', "not valid JSON"),
    ("not json at all", "not valid JSON"),
    ('["a:1", "b:2"]', "must look like"),
    ('{"cluster": {"worker": "a:1,b:2"}}', "must look like"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}}', "task"),  # several workers, but which one is this?
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}', "task"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "evaluator", "index": 0}}', "task"),
    ('{"cluster": {"worker": ["a:1", "b:2"], "ps": ["c:3"]}, "task": {"type": "worker", "index": 0}}', "ps"),
])
def test_a_malformed_tf_config_is_one_line_naming_it(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as raised:
        strategy_kind({"TF_CONFIG": text}, gpus=0, device="cpu")
    message = str(raised.value)
    assert "TF_CONFIG" in message and fragment in message
    assert "\n" not in message


def slurm(tasks: int, procid: int, **more: str) -> dict[str, str]:
    return {"SLURM_STEP_NUM_TASKS": str(tasks), "SLURM_NTASKS": str(tasks), "SLURM_PROCID": str(procid), **more}


def test_a_slurm_step_of_several_tasks_is_multi_worker_with_task_0_as_chief() -> None:
    assert strategy_kind(slurm(2, 0), gpus=0, device="cpu") == "multi_worker"
    assert cluster_of(slurm(4, 0)) == Cluster("Slurm", 4, chief=True)
    assert cluster_of(slurm(4, 3)) == Cluster("Slurm", 4, chief=False)
    assert cluster_of(slurm(1, 0)) is None  # srun -n 1
    # A batch script (no job step of its own) has SLURM_NTASKS and SLURM_PROCID=0 too: it trains alone.
    assert cluster_of({"SLURM_NTASKS": "4", "SLURM_PROCID": "0"}) is None
    assert cluster_of({"SLURM_STEP_NUM_TASKS": "4"}) is None  # no task of it
    # TF_CONFIG is the user's explicit word: it wins over the Slurm step around the process.
    assert cluster_of({**slurm(4, 1), **tf_config(1)}) is None
    assert cluster_of({**slurm(1, 0), **tf_config(2)}) == Cluster("TF_CONFIG", 2, chief=True)


def test_a_malformed_slurm_number_is_one_line_naming_it() -> None:
    with pytest.raises(UsageError, match="SLURM_STEP_NUM_TASKS='two'"):
        cluster_of({"SLURM_STEP_NUM_TASKS": "two", "SLURM_PROCID": "0"})
    with pytest.raises(UsageError, match="SLURM_PROCID"):
        cluster_of(slurm(2, 0, SLURM_PROCID=""))


@pytest.mark.parametrize(("nodes", "tasks_per_node", "addresses"), [
    ("node[1-2]", "1(x2)", ["node1:8888", "node2:8888"]),
    ("node1", "2", ["node1:8888", "node1:8889"]),  # two tasks on one node: a port each
])
def test_slurms_resolver_names_the_step_and_leaves_the_gpus_alone(monkeypatch: pytest.MonkeyPatch, nodes: str,
                                                                  tasks_per_node: str, addresses: list[str]) -> None:
    environ = slurm(2, 1, SLURM_STEP_NODELIST=nodes, SLURM_STEP_TASKS_PER_NODE=tasks_per_node)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    cluster = cluster_of(environ)
    assert cluster is not None
    for gpus in (0, 3):  # a CPU node (no nvidia-smi, no GPU to split) and a task that sees three GPUs
        resolver = _cluster_resolver(cluster, gpus)
        assert resolver.cluster_spec().as_dict() == {"worker": addresses}
        assert (resolver.task_type, resolver.task_id) == ("worker", 1)
        assert resolver.num_accelerators() == {"GPU": gpus}
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"  # Slurm's (or the user's) binding stays


def test_a_worker_whose_tensorflow_already_ran_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    tf = pytest.importorskip("tensorflow")
    tf.constant(1.0) + 1  # this process's runtime runs: too late for MultiWorkerMirroredStrategy
    monkeypatch.setenv("TF_CONFIG", tf_config(2)["TF_CONFIG"])
    model = ModelConfig(framework="tf", image_size=32, num_classes=4, device="cpu")
    with pytest.raises(UsageError, match=r"TF_CONFIG makes this process one of 2 TensorFlow workers.*must come first"):
        tf_distribute.make_strategy(model)
    assert not tf_distribute._multi_worker  # nothing cached: the process trains alone again without TF_CONFIG
    monkeypatch.delenv("TF_CONFIG")
    assert isinstance(tf_distribute.make_strategy(model), tf.distribute.OneDeviceStrategy)


# --- slow: two worker processes -----------------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import hashlib, json, signal, sys
    from pathlib import Path

    import numpy as np
    import tensorflow as tf
    import tf_keras

    run_dir, weights_file, how = sys.argv[1:]  # how: trainer, runner (both multi-worker) or mirrored
    if how == "mirrored":  # the reference: two replicas in one process
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    from trainbench.config import BenchConfig, ModelConfig, TrainConfig
    from trainbench.engines.tf import engine as tf_engine
    from trainbench.training.loop import CHECKPOINTS, train

    if how == "mirrored":
        mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        tf_engine.make_strategy = lambda model: mirrored

    def digest(variables):
        hasher = hashlib.sha256()
        for variable in variables:
            hasher.update(np.ascontiguousarray(variable.numpy(), np.float32).tobytes())
        return hasher.hexdigest()

    def sigterm_caught():
        status = Path("/proc/self/status").read_text().splitlines()
        caught = next(int(line.split()[1], 16) for line in status if line.startswith("SigCgt:"))
        return bool(caught >> (signal.SIGTERM - 1) & 1)

    def common(strategy):
        return {
            "replicas": strategy.num_replicas_in_sync,
            "multi_worker": isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy),
            "cached": tf_engine.make_strategy(model) is strategy,  # a second request gets the process's one strategy
            "sigterm_caught": sigterm_caught(),
        }

    # Tiny BERT: what is promised is the strategy's work across replicas and workers (broadcast, all-reduce, the
    # chief's checkpoint, the gathered evaluation), not the network, at a fraction of ResNet-50's build and trace.
    model = ModelConfig(framework="tf", workload="bert", size="tiny", precision="fp32", device="cpu")
    if how == "runner":  # the benchmark's runner: 2 sequences per replica, one step, this worker's devices synced
        runner = tf_engine.ENGINE.make_runner(BenchConfig(model=model, batch_size=2))
        before = digest(runner.network.trainable_variables)
        runner.step()
        runner.sync()
        print(json.dumps({**common(runner._strategy), "samples_per_step": runner.samples_per_step, "before": before,
                          "after": digest(runner.network.trainable_variables)}), flush=True)
        sys.exit()

    mirrored_runner = {}
    if how == "mirrored":  # the engine's runner over the two replicas first: 2 sequences per replica, one step
        runner = tf_engine.ENGINE.make_runner(BenchConfig(model=model, batch_size=2))
        variables = runner.network.trainable_variables
        before = [variable.values[0].numpy().copy() for variable in variables]
        runner.step()
        runner.sync()
        copies = [[value.numpy() for value in variable.values] for variable in variables]
        mirrored_runner = {
            "runner_samples_per_step": runner.samples_per_step,
            "runner_copies": [len(values) for values in copies],
            "runner_moved": sum(not np.array_equal(old, values[0]) for old, values in zip(before, copies)),
            "runner_variables": len(variables),
            # the replicas applied the same all-reduced update
            "runner_copies_equal": all(np.array_equal(values[0], values[1]) for values in copies),
        }

    config = TrainConfig(model=model, epochs=1, batch_size=4, steps_per_epoch=2, warmup_epochs=0.0,
                         synthetic_train_examples=16, synthetic_eval_examples=5, log_every=1)
    trainer = tf_engine.ENGINE.make_trainer(config)
    # Dropout off (before the step is traced): its masks are drawn per replica, differently under the two
    # strategies; without it both compute the same all-reduced update, compared below.
    for layer in trainer.network.submodules:
        if isinstance(layer, tf_keras.layers.Dropout):
            layer.rate = 0.0
    variables = trainer.network.trainable_variables
    before = digest(variables)
    rows = train(config, trainer, Path(run_dir), lambda line: print(line, flush=True))
    after = digest(variables)
    np.save(weights_file, np.concatenate([variable.numpy().ravel() for variable in variables]))
    strategy = trainer._parts.strategy

    @tf.function
    def barrier():  # the other worker's save returns while the chief may still be writing the run folder's checkpoint
        return strategy.gather(strategy.run(lambda: tf.constant([1])), axis=0)

    barrier()
    print(json.dumps({
        **common(strategy),
        **mirrored_runner,
        "primary": trainer.is_primary,
        "global_batch": trainer.global_batch,
        "steps": [trainer.steps_per_epoch, trainer.eval_steps],
        "eval_examples": rows[0]["eval_examples"],
        "restored": trainer.restore(Path(run_dir) / CHECKPOINTS),  # every worker reads the chief's checkpoint
        "before": before,
        "after": after,
        "after_restore": digest(variables),
    }), flush=True)
    """
)


SLURM_PORTS = (8888, 8889)  # SlurmClusterResolver's default port base, one port per task on a node


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("localhost", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def environment(**more: str) -> dict[str, str]:
    base = {name: value for name, value in os.environ.items() if name != "TF_CONFIG" and not name.startswith("SLURM_")}
    return {**base, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE), os.environ.get("PYTHONPATH")])),
            "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "1", **more}


def start(folder: Path, name: str, run_dir: Path, how: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """One process, its output into files of ``folder`` (two processes' pipes would need reading side by side)."""
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, "-c", WORKER, str(run_dir), str(folder / f"{name}.npy"), how], env=env,
                            stdout=(folder / f"{name}.out").open("w"), stderr=(folder / f"{name}.err").open("w"),
                            text=True)


def finish(processes: dict[str, subprocess.Popen[str]], folder: Path, timeout: float = 240) -> dict[str, dict]:
    """Each process's exit 0 and last (JSON) line. All are killed if one fails or time runs out: a worker whose peer
    never came waits for it (an hour, TensorFlow's default) and ignores SIGTERM meanwhile."""
    try:
        for process in processes.values():
            process.wait(timeout=timeout)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    reports = {}
    for name, process in processes.items():
        stdout, stderr = (folder / f"{name}.out").read_text(), (folder / f"{name}.err").read_text()
        assert process.returncode == 0, f"{name} exited {process.returncode}:\n{stdout[-2000:]}\n{stderr[-4000:]}"
        reports[name] = {**json.loads(stdout.strip().splitlines()[-1]), "lines": stdout.strip().splitlines()[:-1]}
    return reports


def two_workers(root: Path, how: str, slurm: bool = False) -> dict[str, dict]:
    """Two CPU workers on localhost sharing one run folder (a shared file system), each with a temp folder of its
    own; their reports, by name. Told by TF_CONFIG, or by srun's variables for a step of two tasks on this node."""
    addresses = [f"localhost:{port}" for port in free_ports(2)]
    processes = {}
    for index in range(2):
        if slurm:
            told = {"SLURM_PROCID": str(index), "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2",
                    "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "2"}
        else:
            told = {"TF_CONFIG": json.dumps({"cluster": {"worker": addresses},
                                             "task": {"type": "worker", "index": index}})}
        scratch = root / f"tmp{index}"
        scratch.mkdir(parents=True)
        processes[f"worker{index}"] = start(root, f"worker{index}", root / "run", how,
                                            environment(**told, TMPDIR=str(scratch)))
    return finish(processes, root)


def check_workers(reports: dict[str, dict]) -> None:
    """What every two-worker run shows: one strategy of two replicas per process, SIGTERM still ending it."""
    for report in reports.values():
        assert report["multi_worker"] and report["replicas"] == 2
        assert report["cached"]
        # TensorFlow's coordination service takes SIGTERM over (a flag for its preemption checkpointing); the
        # engine puts the previous handler back, so SIGTERM still ends a worker.
        assert not report["sigterm_caught"]
    chief, other = reports["worker0"], reports["worker1"]
    assert chief["before"] == other["before"]  # the chief's initial values, broadcast
    assert chief["after"] == other["after"]  # bit-identical after training
    assert chief["after"] != chief["before"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], Path]:
    root = tmp_path_factory.mktemp("tf-multiworker")
    return two_workers(root, "trainer"), root


@pytest.mark.slow
def test_two_workers_train_to_identical_parameters(trained: tuple[dict[str, dict], Path]) -> None:
    reports, root = trained
    check_workers(reports)
    chief, other = reports["worker0"], reports["worker1"]
    for report in (chief, other):
        assert report["global_batch"] == 4  # 2 per replica, one replica per worker
        assert report["eval_examples"] == 5  # every worker's share of the evaluation set, gathered
        assert report["restored"] == 1
        assert report["after_restore"] == report["after"]
    # Only the chief is primary: it alone logs, writes metrics and keeps checkpoints in the run folder.
    assert (chief["primary"], other["primary"]) == (True, False)
    assert chief["lines"] and not other["lines"]
    run_dir = root / "run"
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 1
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == [
        "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index"]
    # The other worker saved too (saving is collective), into a temporary folder it then deleted.
    assert not [path for path in (root / "tmp1").iterdir() if "checkpoint" in path.name]


@pytest.mark.slow
def test_two_workers_train_as_two_replicas_in_one_process(trained: tuple[dict[str, dict], Path]) -> None:
    """The same global batch split the same way, the same all-reduced update: MirroredStrategy's parameters.

    The reference process is also the engine's test of MirroredStrategy over two CPU replicas (what two GPUs get):
    the runner counts both replicas' sequences and its replicas apply the same update; the trainer's global batch is
    split over them and its evaluation counts the 5 examples, not the padding of the last batch."""
    _, root = trained
    reference = finish({"mirrored": start(root, "mirrored", root / "mirrored-run", "mirrored", environment())}, root)
    mirrored = reference["mirrored"]
    assert mirrored["replicas"] == 2 and not mirrored["multi_worker"] and mirrored["cached"]
    assert mirrored["runner_samples_per_step"] == 4  # 2 per replica
    assert mirrored["runner_copies"] == [2] * mirrored["runner_variables"]
    assert mirrored["runner_moved"] == mirrored["runner_variables"] > 0
    assert mirrored["runner_copies_equal"]
    assert mirrored["global_batch"] == 4 and mirrored["steps"] == [2, 2]  # 5 evaluation examples: 2 batches of 4
    assert mirrored["eval_examples"] == 5
    assert mirrored["after"] != mirrored["before"]
    np.testing.assert_allclose(np.load(root / "worker0.npy"), np.load(root / "mirrored.npy"), rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_two_slurm_tasks_step_the_benchmark_runner(tmp_path: Path) -> None:
    """Through Slurm's variables this time (SlurmClusterResolver: ports 8888 and 8889 for two tasks on a node), on
    tiny BERT: what is promised here is the cluster and the runner's count, not the network."""
    for port in SLURM_PORTS:
        with socket.socket() as sock:
            try:
                sock.bind(("", port))
            except OSError:
                pytest.skip(f"port {port} is in use here; SlurmClusterResolver's workers listen on {SLURM_PORTS}")
    reports = two_workers(tmp_path, "runner", slurm=True)
    check_workers(reports)
    assert reports["worker0"]["samples_per_step"] == 4  # what sequences/s counts: both workers' replicas
