"""Targeted mutations of the suite's core promises: each must make its fast tests fail.

Run it from the repository root (it is not collected by pytest):

    .venv/bin/python tests/mutation_check.py [--only TEXT] [--no-baseline] [--list]

Every row of MUTATIONS is a deliberate bug: a file, an exact piece of its text, what replaces it, and the test files
that must catch it. The repository (source/, tests/ and the rest, without .git and the virtual environments) is
copied once into a temporary folder; each mutation is applied to that copy, the listed test files run there with
``-m "not slow" -x -q`` (this Python, ``PYTHONPATH`` pointing at the copy's source), and the file is put back. The
working tree is never touched. A mutation is killed when pytest fails; it survives when every listed test passes,
or when none of its test files exists ("no such test file"). A row whose text is no longer in its file is "stale"
(the table needs updating). First, unless --no-baseline, the listed test files run once unmutated: a test failing
there would kill every mutation and prove nothing. Exit 1 when a mutation survives, a row is stale, or the baseline
fails.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOT_COPIED = {".git", ".venv", ".venv-extrap", ".ruff_cache", ".pytest_cache", "__pycache__", ".mypy_cache",
              ".hypothesis", "variability_data", "throughput_data", "training_data", "profiled_data"}
LINKED = (".venv", ".venv-extrap")  # tests that look for them find the real ones
TIMEOUT_S = 300


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str  # relative to the repository
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]  # test files (glob patterns allowed) that must fail


MUTATIONS: tuple[Mutation, ...] = (
    # --- the thirteen
    Mutation("compare tests every batch size on the smallest one's windows", "source/trainbench/bench/compare.py",
             "verdict = compare_results(a.values, b.values, alpha=alpha)",
             "verdict = compare_results(run_a.results[min(run_a.results)].values,\n"
             "                                  run_b.results[min(run_b.results)].values, alpha=alpha)",
             ("tests/test_compare.py",)),
    Mutation("input-bound threshold 1.1 x -> 1.0 x", "source/trainbench/bench/input_bench.py",
             "INPUT_HEADROOM = 1.1", "INPUT_HEADROOM = 1.0",
             ("tests/test_input_bound.py",)),
    Mutation("training crop 8-100 % -> 90-100 % (shared parameters)", "source/trainbench/data/preprocess_params.py",
             "CROP_AREA_RANGE: tuple[float, float] = (0.08, 1.0)", "CROP_AREA_RANGE: tuple[float, float] = (0.9, 1.0)",
             ("tests/test_loader_crops.py",)),
    Mutation("training crop 90-100 % in the PyTorch CPU loader", "source/trainbench/engines/torch/image_pipeline.py",
             "v2.RandomResizedCrop(image_size, scale=CROP_AREA_RANGE,",
             "v2.RandomResizedCrop(image_size, scale=(0.9, 1.0),",
             ("tests/test_loader_crops.py",)),
    Mutation("training crop 90-100 % in the GPU loader", "source/trainbench/engines/torch/gpu_image_pipeline.py",
             "shape_only, list(CROP_AREA_RANGE), list(CROP_ASPECT_RANGE)))",
             "shape_only, [0.9, 1.0], list(CROP_ASPECT_RANGE)))",
             ("tests/test_loader_crops.py",)),
    Mutation("a missing value drawn as 0 in a figure", "source/trainbench/render/plot.py",
             'measured = [r for r in results if r["status"] == Status.OK and r.get(field) is not None]\n'
             '        x, y = [r["batch_size"] for r in measured], [float(r[field]) * scale for r in measured]',
             'measured = [r for r in results if r["status"] == Status.OK]\n'
             '        x, y = [r["batch_size"] for r in measured], [float(r.get(field) or 0) * scale for r in measured]',
             ("tests/test_report.py", "tests/test_report_html.py")),
    Mutation("the campaign folder's lock removed", "source/trainbench/campaign/runner.py",
             "            fcntl.flock(descriptor, fcntl.LOCK_EX)\n", "            pass\n",
             ("tests/test_campaign_runner.py",)),
    Mutation("manifest entries in the order shards finished", "source/trainbench/data/shards.py",
             '"shards": dict(sorted(self.shards.items()))}', '"shards": dict(self.shards.items())}',
             ("tests/test_data_units.py", "tests/test_data_convert.py")),
    Mutation("BERT's [CLS] place may be masked", "source/trainbench/workloads/bert.py",
             "random.choice(np.arange(1, length)", "random.choice(np.arange(0, length)",
             ("tests/test_same_task.py",)),
    Mutation("no torch.cuda.synchronize() at the window's edges", "source/trainbench/engines/torch/engine.py",
             "        elif self._cuda:\n            torch.cuda.synchronize()\n",
             "        elif self._cuda:\n            pass\n",
             ("tests/test_window_sync.py",)),
    Mutation("the warm-up repeated before every window", "source/trainbench/bench/worker.py",
             "config.warmup_steps if i == 0 else 0", "config.warmup_steps",
             ("tests/test_timing*.py",)),
    Mutation("the sweep stops at the first failed batch size", "source/trainbench/bench/sweep.py",
             '            echo(f"batch size {config.batch_size}: {result.status}: {result.error}")\n',
             '            echo(f"batch size {config.batch_size}: {result.status}: {result.error}")\n'
             "            break\n",
             ("tests/test_sweep_continues.py",)),
    Mutation("a resumed campaign redoes its finished runs", "source/trainbench/campaign/runner.py",
             "            if finished_folder(folder, run, answers) is not None:",
             "            if False and finished_folder(folder, run, answers) is not None:",
             ("tests/test_campaign_runner.py",)),
    Mutation("the warm-up counted in the timed window", "source/trainbench/bench/timing.py",
             "    start = previous = clock()\n", "    previous = clock()\n    start = previous - sum(warmup_s)\n",
             ("tests/test_timing*.py",)),
    Mutation("an existing run folder reused", "source/trainbench/results/files.py",
             "path.mkdir()  # atomic: fails if someone else has the name",
             "path.mkdir(exist_ok=True)  # atomic: fails if someone else has the name",
             ("tests/test_store.py",)),
    Mutation("coreutil without its per-launch weights", "source/trainbench/analysis/coreutil.py",
             "            return name, frame[name].fillna(0.0).clip(lower=0.0)",
             "            return name, pd.Series(1.0, index=frame.index)",
             ("tests/test_coreutil_units.py", "tests/test_coreutil_values.py")),
    # --- more, on modules that compute or compare numbers
    Mutation("compare's change the wrong way round", "source/trainbench/bench/compare.py",
             "verdict = compare_results(a.values, b.values, alpha=alpha)",
             "verdict = compare_results(b.values, a.values, alpha=alpha)",
             ("tests/test_compare.py",)),
    Mutation("compare ignores --alpha", "source/trainbench/bench/compare.py",
             "verdict = compare_results(a.values, b.values, alpha=alpha)",
             "verdict = compare_results(a.values, b.values)",
             ("tests/test_compare.py",)),
    Mutation("versions in two notations taken for a setting difference", "source/trainbench/bench/compare.py",
             "for key in differing({k: a[k] for k in common}, {k: b[k] for k in common})]",
             "for key in common if a[key] != b[key]]",
             ("tests/test_compare.py",)),
    Mutation("throughput counts one step too few", "source/trainbench/bench/stats.py",
             "return batch_size * steps / window_s", "return batch_size * (steps - 1) / window_s",
             ("tests/test_stats.py",)),
    Mutation("MAD as the mean absolute deviation", "source/trainbench/bench/stats.py",
             "return float(np.median(np.abs(values - np.median(values))))",
             "return float(np.mean(np.abs(values - np.median(values))))",
             ("tests/test_stats.py",)),
    Mutation("step-time p10/p90 as p5/p95", "source/trainbench/bench/stats.py",
             "np.percentile(steps, [10, 50, 90])", "np.percentile(steps, [5, 50, 95])",
             ("tests/test_stats.py",)),
    Mutation("coreutil's mean divides by every launch's weight", "source/trainbench/analysis/coreutil.py",
             "denominator = np.where(present, w, 0.0).sum(axis=0)",
             "denominator = np.broadcast_to(w, x.shape).sum(axis=0)",
             ("tests/test_coreutil_units.py", "tests/test_coreutil_values.py")),
    Mutation("a rank merge takes rank 0's value where the rule says the worst", "source/trainbench/bench/ranks.py",
             "    if rule is Merge.MAX:\n        return max(present)\n",
             "    if rule is Merge.MAX:\n        return present[0]\n",
             ("tests/test_fields.py",)),
    Mutation("a value no result field declares dropped without a word", "source/trainbench/bench/throughput_run.py",
             "        if unknown := fields.unknown(result.values):\n",
             "        if unknown := []:\n",
             ("tests/test_fields.py",)),
    Mutation("manifest header keys in another order", "source/trainbench/data/convert.py",
             '"synsets": list(tree.synsets), "seed": options.seed,',
             '"seed": options.seed, "synsets": list(tree.synsets),',
             ("tests/test_data_convert.py",)),
    Mutation("convert benchmark: a ratio at its goal counted as missed", "benchmarks/convert_speed.py",
             'warm["ratio"] >= min_ratio', 'warm["ratio"] > min_ratio',
             ("tests/test_convert_benchmark.py",)),
    Mutation("coreutil benchmark: a naive ratio below its goal accepted", "benchmarks/coreutil_speed.py",
             "naive_over_coreutil >= args.min_naive_ratio", "naive_over_coreutil >= args.min_naive_ratio / 2",
             ("tests/test_coreutil_benchmark.py",)),
    # --- telemetry: the energy and throttle counters are read just outside each timed window (issue 38: the test runs
    # on one stand-in clock, so a read one step off, or inside the window, is exact to see on any machine)
    Mutation("the counters' start edge read inside the timed window", "source/trainbench/bench/timing.py",
             "    if at_start is not None:\n        at_start()\n\n    start = previous = clock()\n",
             "\n    start = previous = clock()\n    if at_start is not None:\n        at_start()\n",
             ("tests/test_telemetry_worker.py",)),
    Mutation("the counters' end edge read before the window's clock stops", "source/trainbench/bench/timing.py",
             "    end = clock()\n    if at_end is not None:\n        at_end()\n",
             "    if at_end is not None:\n        at_end()\n    end = clock()\n",
             ("tests/test_telemetry_worker.py",)),
    Mutation("the counters' start edge read before the warm-up", "source/trainbench/bench/timing.py",
             "    warmup_s = []\n    previous = clock()\n",
             "    warmup_s = []\n    if at_start is not None:\n        at_start()\n        at_start = None\n"
             "    previous = clock()\n",
             ("tests/test_telemetry_worker.py",)),
    Mutation("the counters' end edge read before the last step", "source/trainbench/bench/timing.py",
             "    one_step()\n    runner.sync()\n    end = clock()\n    if at_end is not None:\n        at_end()\n",
             "    if at_end is not None:\n        at_end()\n    one_step()\n    runner.sync()\n    end = clock()\n",
             ("tests/test_telemetry_worker.py",)),
    # --- issue 42: reliability of the report, data and compare commands
    Mutation("an MFU above the peak read as measured", "source/trainbench/results/derived.py",
             "if mfu is not None and mfu > 1.0:", "if mfu is not None and mfu > 10.0:",
             ("tests/test_results_derived.py",)),
    Mutation("a formula cell written as it is", "source/trainbench/results/csv_cells.py",
             "    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):",
             "    if True:",
             ("tests/test_csv_cells.py",)),
    Mutation("batch sizes paired with every other, not their neighbours", "source/trainbench/results/run_settings.py",
             "            if name in ordered:\n", "            if False:\n",
             ("tests/test_run_settings.py",)),
    Mutation("a tiny network's positions not bounding its sequence", "source/trainbench/workloads/__init__.py",
             "        if name == self.tokens_param and positions is not None:",
             "        if False:",
             ("tests/test_size_bounds.py",)),
    Mutation("a default and the same value given compared as a difference", "source/trainbench/bench/compare.py",
             "effective = {**model, **(params if isinstance(params, dict) else {})}", "effective = model",
             ("tests/test_compare.py",)),
    # --- issue 40: the same step in both frameworks, and its memory
    Mutation("a timed run's optimizer SGD whatever the workload's reference", "source/trainbench/config.py",
             'object.__setattr__(self, "optimizer", OptimizerConfig.reference(self.model.workload))',
             'object.__setattr__(self, "optimizer", OptimizerConfig())',
             ("tests/test_step_fidelity.py",)),
    Mutation("BERT's reference optimizer SGD", "source/trainbench/workloads/bert.py",
             'optimizer=ReferenceOptimizer("adamw", 1e-4, 0.01,', 'optimizer=ReferenceOptimizer("sgd", 1e-4, 0.01,',
             ("tests/test_step_fidelity.py",)),
    Mutation("Adam's step counters counted as per-parameter state", "source/trainbench/engines/torch/memory.py",
             "                if value.shape == parameter.shape:", "                if True:",
             ("tests/test_engine_contract.py",)),
    Mutation("parameter memory in elements, not bytes", "source/trainbench/engines/torch/memory.py",
             "    return _storage_bytes(_trainable(network))", "    return sum(p.numel() for p in _trainable(network))",
             ("tests/test_engine_contract.py",)),
    Mutation("the activations' bytes counting the parameters saved for backward",
             "source/trainbench/engines/torch/memory.py",
             "data_ptr() not in parameters and not isinstance(tensor, nn.Parameter):",
             "data_ptr() is not None:",
             ("tests/test_step_fidelity.py",)),
    Mutation("torch's convolutions left in TF32 at --matmul-precision highest",
             "source/trainbench/engines/torch/engine.py",
             '    torch.backends.cudnn.allow_tf32 = precision == "high"', "    torch.backends.cudnn.allow_tf32 = True",
             ("tests/test_step_fidelity.py",)),
    Mutation("a NaN loss in a window taken as a result", "source/trainbench/bench/trained.py",
             "        if not math.isfinite(loss):", "        if math.isinf(loss):",
             ("tests/test_step_fidelity.py",)),
    # --- issue 41: sharding and recomputation
    Mutation("FSDP sharding the root only (every block whole on every rank)",
             "source/trainbench/engines/torch/parallel.py",
             "            fully_shard(block, mp_policy=policy)", "            pass",
             ("tests/test_sharding.py",)),
    Mutation("FSDP summing the ranks' gradients instead of averaging them",
             "source/trainbench/engines/torch/parallel.py",
             "    fully_shard(network, mp_policy=policy)\n",
             "    fully_shard(network, mp_policy=policy)\n    network.set_gradient_divide_factor(1.0)\n",
             ("tests/test_sharding.py",)),
    Mutation("the model's FLOPs counted on the checkpointed blocks (MFU counting the recompute)",
             "source/trainbench/engines/torch/engine.py",
             '        if sharded or model.activation_checkpointing != "none":', "        if sharded:",
             ("tests/test_sharding.py",)),
    Mutation("HFU from the model's FLOPs", "source/trainbench/bench/work.py",
             "    hardware = hardware_flops_per_sample or flops_per_sample", "    hardware = flops_per_sample",
             ("tests/test_sharding.py",)),
)


def copy_repository(target: Path) -> None:
    """The repository without .git, virtual environments and caches; the environments linked, not copied."""
    shutil.copytree(REPO, target, symlinks=True, ignore=lambda folder, names: [n for n in names if n in NOT_COPIED
                                                                              or n.endswith(".egg-info")])
    for name in LINKED:
        if (REPO / name).exists():
            (target / name).symlink_to(REPO / name)


def listed_test_files(copy: Path, patterns: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(the files found in the copy, the patterns that matched none)."""
    found: list[str] = []
    missing: list[str] = []
    for pattern in patterns:
        matches = sorted(str(Path(path).relative_to(copy)) for path in glob.glob(str(copy / pattern)))
        found += [match for match in matches if match not in found]
        if not matches:
            missing.append(pattern)
    return found, missing


def environment(copy: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(copy / "source"), "CUDA_VISIBLE_DEVICES": "",
            "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"}


def pytest(copy: Path, files: list[str], stop_first: bool) -> tuple[int | None, str]:
    """pytest's exit status (None: past the time limit) and its output."""
    command = [sys.executable, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider", *files]
    if stop_first:
        command.insert(5, "-x")
    try:
        result = subprocess.run(command, cwd=copy, env=environment(copy), capture_output=True, text=True,
                                timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, ""
    return result.returncode, result.stdout + result.stderr


def first_failure(output: str) -> str:
    match = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    return match.group(1) if match else (output.strip().splitlines() or ["no output"])[-1]


def check_copy(copy: Path) -> None:
    """The copy's source is what the tests import, not the working tree's."""
    found = subprocess.run([sys.executable, "-c", "import trainbench; print(trainbench.__file__)"], cwd=copy,
                           env=environment(copy), capture_output=True, text=True, check=True).stdout.strip()
    if not Path(found).is_relative_to(copy):
        raise SystemExit(f"the copy imports trainbench from {found}, not from {copy}: nothing would be checked")


def baseline(copy: Path, mutations: list[Mutation]) -> bool:
    files = sorted({file for mutation in mutations for file in listed_test_files(copy, mutation.tests)[0]})
    started = time.perf_counter()
    code, output = pytest(copy, files, stop_first=False)
    seconds = time.perf_counter() - started
    if code == 0:
        print(f"baseline: the {len(files)} test files pass unmutated ({seconds:.0f} s)")
        return True
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    print(f"baseline: FAILS unmutated ({'timed out' if code is None else f'exit {code}'}, {seconds:.0f} s): "
          f"{', '.join(failures) or first_failure(output)}")
    return False


def check(copy: Path, mutation: Mutation) -> str:
    """'killed', 'survived' or 'stale', with the mutation printed on one line."""
    path = copy / mutation.file
    original = path.read_text() if path.is_file() else ""
    files, missing = listed_test_files(copy, mutation.tests)
    notes = [f"no such test file: {pattern}" for pattern in missing]
    if original.count(mutation.old) != 1:
        verdict, detail = "stale", f"the text occurs {original.count(mutation.old)} times in {mutation.file}"
    elif not files:
        verdict, detail = "survived", "no test to run"
    else:
        path.write_text(original.replace(mutation.old, mutation.new))
        started = time.perf_counter()
        try:
            code, output = pytest(copy, files, stop_first=True)
        finally:
            path.write_text(original)
        seconds = time.perf_counter() - started
        if code is None:
            verdict, detail = "killed", f"timed out after {TIMEOUT_S} s"
        elif code in (0, 5):  # 5: no test collected (every one slow)
            verdict, detail = "survived", f"{', '.join(files)} pass ({seconds:.0f} s)"
        else:
            verdict, detail = "killed", f"by {first_failure(output)} ({seconds:.0f} s)"
    print(f"{verdict.upper():<9} {mutation.name}: {detail}" + "".join(f"; {note}" for note in notes), flush=True)
    return verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run the mutations whose name contains this text")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the test files")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if args.only is None or args.only.lower() in m.name.lower()]
    if args.list or not chosen:
        for mutation in chosen or MUTATIONS:
            print(f"{mutation.name}: {mutation.file} -> {', '.join(mutation.tests)}")
        return 0 if chosen else 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mutation_check_") as folder:
        copy = Path(folder) / "repo"
        copy_repository(copy)
        check_copy(copy)
        clean = args.no_baseline or baseline(copy, chosen)
        verdicts = [check(copy, mutation) for mutation in chosen]
    killed = verdicts.count("killed")
    print(f"total: {killed} of {len(chosen)} killed, {verdicts.count('survived')} survived, "
          f"{verdicts.count('stale')} stale ({time.perf_counter() - started:.0f} s)")
    return 0 if clean and killed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
