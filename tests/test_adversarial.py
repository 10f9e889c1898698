"""Bad inputs x commands: every command keeps the suite's promise, whatever it is handed.

The promise: exit status 2, exactly one line on stderr that starts ``trainbench:`` and names the culprit (the file,
folder or option), no traceback, and nothing lost: every file that existed before the command is unchanged after it
and nothing new is written. Each row of CASES is one bad input for one command. The first row of each command runs
as a user runs it (``python -m trainbench ...``, or the thin coreutil script, in a new process); the others run in
this process through the same entry point (``trainbench.cli.main.main``, or the script's own ``main``), which
also checks that no Python warning escapes. A new command joins the table with its own rows; the classes of input
below (outputs that cannot be made, numbers that are no numbers, paths that are not what they claim, files of the
wrong shape or encoding) apply to every command.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from tests.conftest import REPO, run_cli
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.results.records import BatchResult

COREUTIL_SCRIPT = ("script", "Core-Utilization-Analyzer/coreutil.py")


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]  # "{w}" stands for the world folder; COREUTIL_SCRIPT first runs the thin script
    named: tuple[str, ...]  # fragments the error line must hold (the culprit), "{w}" as above


def world_files(world: Path) -> None:
    """The inputs every case may point at, made once."""
    (world / "afile").write_text("a plain file\n")
    (world / "empty.csv").write_text("")
    (world / "garbage.bin").write_bytes(bytes(range(256)) * 64)
    (world / "loop").symlink_to(world / "loop")
    (world / "dangling").symlink_to(world / "nowhere")
    (world / "emptydir").mkdir()
    run = world / "run_ok"
    run.mkdir()
    store = ThroughputRun(run, {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic"})
    store.add(BatchResult.from_row({"batch_size": 4, "status": "ok", "samples_per_sec": 40.0, "window_s": 0.5,
                                    "timed_steps": 5, "warmup_steps": 1}), step_s=[0.1] * 5)
    for name, summary in (("run_list", [1, 2]), ("run_text_rate", {"results": [
            {"batch_size": 4, "status": "ok", "samples_per_sec": "fast"}]})):
        (world / name).mkdir()
        (world / name / "summary.json").write_text(json.dumps(summary))
    (world / "variability_binary").mkdir()
    (world / "variability_binary" / "variability.json").write_bytes(b"\xff\xfe\x00garbage")
    (world / "variability_no_gpus").mkdir()
    (world / "variability_no_gpus" / "variability.json").write_text('{"format": 2, "gpus": [], "repetitions": 1}')
    (world / "run_binary").mkdir()
    (world / "run_binary" / "summary.json").write_bytes(b"\xff\xfe\x00garbage")
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
              '"Metric Name","Metric Unit","Metric Value"')
    row = '"0","7","p","h","k","1","7","S","sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_elapsed","%","{}"'
    (world / "pct_negative.csv").write_text(f"{header}\n{row.format('-50')}\n")
    (world / "pct_nan.csv").write_text(f"{header}\n{row.format('nan')}\n")
    (world / "utf16_broken.csv").write_bytes(f"{header}\n".encode("utf-16") + b"\x00\xd8")
    (world / "imagenet_no_train").mkdir()
    (world / "imagenet_no_train" / "val").mkdir()
    one_class = world / "imagenet_one" / "train" / "n01440764"
    one_class.mkdir(parents=True)
    Image.new("RGB", (40, 30), (200, 10, 10)).save(one_class / "n01440764_1.JPEG", "JPEG")
    (world / "solution.csv").write_text("ImageId,PredictionString\n")
    (world / "m.yaml").write_text("axes: {framework: [torch], batch_size: [1], image_size: [64], device: [cpu]}\n")


def output_cases(command: tuple[str, ...]) -> list[Case]:
    """An output that cannot be made: a file, a path inside a file, an empty name, a symlink loop."""
    return [
        Case((*command, "--output", "{w}/afile"), ("{w}/afile",)),
        Case((*command, "--output", "{w}/afile/inside"), ("{w}/afile",)),
        Case((*command, "--output", ""), ("--output",)),
        Case((*command, "--output", "{w}/loop"), ("{w}/loop",)),
    ]


def number_cases(command: tuple[str, ...], option: str, bad: tuple[str, ...]) -> list[Case]:
    return [Case((*command, option, value), (option,)) for value in bad]


# Tiny settings first, so that a case wrongly accepted ends in seconds (the option under test comes later and wins).
SMALL = ("--device", "cpu", "--image-size", "32")
THROUGHPUT = ("throughput", *SMALL, "--warmup", "0", "--steps", "1", "--batch-sizes", "2")
TRAIN = ("train", *SMALL, "--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "2", "--eval-steps", "1")
PROFILE = ("profile", "torch", *SMALL, "--start-iteration", "0", "--iterations", "1", "--batch-sizes", "2")
NOT_COUNTS = ("0", "-1", "nan", "1.5", "x", "", "99999999999999999999")
NOT_SECONDS = ("0", "-5", "nan", "inf", "x", "")
NOT_RATES = ("-1", "nan", "inf", "x", "")

CASES: dict[str, Case] = {}


def add(group: str, cases: list[Case]) -> None:
    for case in cases:
        words = 2
        name = f"{group}:{' '.join(case.argv[-words:])}"
        while name in CASES and words < len(case.argv):
            words += 1
            name = f"{group}:{' '.join(case.argv[-words:])}"
        assert name not in CASES, name
        CASES[name] = case


add("throughput", output_cases(THROUGHPUT))
add("throughput", number_cases(THROUGHPUT, "--steps", NOT_COUNTS))
add("throughput", number_cases(THROUGHPUT, "--warmup", ("-1", "nan", "x", "")))
add("throughput", number_cases(THROUGHPUT, "--repeats", NOT_COUNTS))
add("throughput", number_cases(THROUGHPUT, "--timeout", NOT_SECONDS))
add("throughput", number_cases(THROUGHPUT, "--image-size", ("0", "-32", "nan", "99999999")))
add("throughput", number_cases(THROUGHPUT, "--num-classes", ("0", "-1", "x")))
add("throughput", number_cases(THROUGHPUT, "--batch-sizes", ("4,,8", "", ",", "4,-8", "99999999999999999999")))
add("throughput", number_cases(THROUGHPUT, "--telemetry-interval", ("-1", "0.001", "61", "nan", "x", "")))
add("throughput", [Case((*THROUGHPUT, "--data", "{w}/afile"), ("{w}/afile",)),
                   Case((*THROUGHPUT, "--data", "{w}/loop"), ("{w}/loop",)),
                   Case((*THROUGHPUT, "--data", "{w}/emptydir"), ("{w}/emptydir",))])
add("train", output_cases(TRAIN))
add("train", number_cases(TRAIN, "--batch-size", NOT_COUNTS))
add("train", number_cases(TRAIN, "--epochs", ("0", "-1", "nan", "x")))
add("train", number_cases(TRAIN, "--base-lr", NOT_RATES))
add("train", number_cases(TRAIN, "--weight-decay", NOT_RATES))
add("train", number_cases(TRAIN, "--label-smoothing", ("-0.1", "1.5", "nan")))
add("train", number_cases(TRAIN, "--decay-epochs", ("30,,60", "", "x")))
add("train", number_cases(TRAIN, "--log-every", ("0", "-1", "x")))
add("train", [Case((*TRAIN, "--resume", "{w}/afile"), ("{w}/afile",)),
              Case((*TRAIN, "--resume", "{w}/emptydir"), ("{w}/emptydir",))])
add("profile", output_cases(PROFILE))
add("profile", number_cases(PROFILE, "--iterations", ("0", "-1", "nan", "x")))
add("profile", number_cases(PROFILE, "--start-iteration", ("-1", "nan", "x")))
add("profile", number_cases(PROFILE, "--timeout", NOT_SECONDS))
add("profile", number_cases(PROFILE, "--batch-sizes", ("4,,8", "")))
add("input-bench", number_cases(("input-bench", "{w}/emptydir"), "--batch-size", ("0", "nan", "")))
add("input-bench", number_cases(("input-bench", "{w}/emptydir"), "--workers", ("-1", "x")))
add("input-bench", [Case(("input-bench", "{w}/afile"), ("{w}/afile",)),
                    Case(("input-bench", "{w}/emptydir"), ("{w}/emptydir",))])
add("data convert", [
    Case(("data", "convert", "{w}/missing"), ("{w}/missing",)),
    Case(("data", "convert", "{w}/afile"), ("{w}/afile",)),
    Case(("data", "convert", "{w}/imagenet_no_train"), ("{w}/imagenet_no_train",)),
    Case(("data", "convert", "{w}/loop"), ("{w}/loop",)),
    Case(("data", "convert", "{w}/imagenet_one", "--output", "{w}/afile"), ("{w}/afile",)),
    Case(("data", "convert", "{w}/imagenet_one", "--output", "{w}/afile/inside"), ("{w}/afile",)),
    Case(("data", "convert", "{w}/imagenet_one", "--output", ""), ("--output",)),
    Case(("data", "convert", "{w}/imagenet_one", "--synset-names", "{w}/missing"), ("{w}/missing",)),
    Case(("data", "convert", "{w}/imagenet_one", "--synset-names", "{w}/garbage.bin"), ("{w}/garbage.bin",)),
    Case(("data", "convert", ""), ("DATA_DIR",)),
    *number_cases(("data", "convert", "{w}/imagenet_no_train"), "--train-shards", ("0", "-1", "x", "")),
    *number_cases(("data", "convert", "{w}/imagenet_no_train"), "--workers", ("0", "x")),
])
add("data verify", [
    Case(("data", "verify", "{w}/missing"), ("{w}/missing",)),
    Case(("data", "verify", "{w}/afile"), ("{w}/afile",)),
    Case(("data", "verify", "{w}/emptydir"), ("{w}/emptydir",)),
])
add("data valprep", [
    Case(("data", "valprep", "{w}/emptydir", "--solution", "{w}/missing"), ("{w}/missing",)),
    Case(("data", "valprep", "{w}/emptydir", "--solution", "{w}/garbage.bin"), ("{w}/garbage.bin",)),
    Case(("data", "valprep", "{w}/missing", "--solution", "{w}/solution.csv"), ("{w}/missing",)),
    Case(("data", "valprep", "{w}/afile", "--solution", "{w}/solution.csv"), ("{w}/afile",)),
])
add("data synth", [
    *output_cases(("data", "synth", "--classes", "2", "--train-per-class", "1")),
    *number_cases(("data", "synth", "--output", "{w}/new", "--train-per-class", "1"), "--classes", ("0", "x")),
])
add("compare", [
    Case(("compare", "{w}/run_ok", "{w}/missing"), ("{w}/missing",)),
    Case(("compare", "{w}/run_ok", "{w}/afile"), ("{w}/afile",)),
    Case(("compare", "{w}/run_ok", "{w}/emptydir"), ("{w}/emptydir",)),
    Case(("compare", "{w}/run_ok", "{w}/run_list"), ("{w}/run_list/summary.json",)),
    Case(("compare", "{w}/run_ok", "{w}/run_text_rate"), ("{w}/run_text_rate/summary.json", "samples_per_sec")),
    Case(("compare", "{w}/run_ok", "{w}/run_binary"), ("{w}/run_binary/summary.json",)),
    *number_cases(("compare", "{w}/run_ok", "{w}/run_ok"), "--alpha", ("2", "-1", "0", "nan", "x")),
])
add("campaign", [
    *(Case(("campaign", "run", f"{{w}}/{name}"), (f"{{w}}/{name}",))
      for name in ("missing.yaml", "afile", "garbage.bin", "emptydir", "loop", "dangling")),
    Case(("campaign", "run", "{w}/m.yaml", "--output", "{w}/afile"), ("{w}/afile",)),
    Case(("campaign", "run", "{w}/m.yaml", "precision"), ("precision",)),
    Case(("campaign", "run", "{w}/m.yaml", "framework=mxnet", "--dry-run"), ("framework=mxnet", "mxnet")),
    Case(("campaign", "run", "{w}/m.yaml", "--only", "9", "--output", "{w}/never"), ("--only 9",)),
    *number_cases(("campaign", "run", "{w}/m.yaml", "--dry-run"), "--shuffle", ("-1", "x")),
    Case(("campaign", "summary", "{w}/missing"), ("{w}/missing",)),
    Case(("campaign", "summary", "{w}/emptydir"), ("{w}/emptydir",)),
    Case(("campaign", "summary", "{w}/afile"), ("{w}/afile",)),
])
# No --device: "auto" without a GPU is refused (an explicit --device cpu would run the CPU stand-in for real).
VARIABILITY = ("variability", "run", "--image-size", "32", "--warmup", "0", "--steps", "1", "--batch-sizes", "2",
               "--output", "{w}/variability_out")
add("variability", [
    Case(VARIABILITY, ("variability: no GPU to compare",)),  # run_cli hides every GPU (CUDA_VISIBLE_DEVICES="")
    *number_cases(VARIABILITY, "--repetitions", NOT_COUNTS),
    *number_cases(VARIABILITY, "--outlier-threshold", ("0", "1", "-0.1", "nan", "x")),
    *number_cases(VARIABILITY, "--telemetry-interval", ("-1", "x")),
    *(Case(("variability", "report", f"{{w}}/{name}"), (f"{{w}}/{name}",))
      for name in ("missing", "afile", "emptydir", "loop", "run_ok")),
    Case(("variability", "report", "{w}/variability_binary"), ("{w}/variability_binary/variability.json",)),
    Case(("variability", "report", "{w}/variability_no_gpus"), ("{w}/variability_no_gpus/variability.json",)),
    *number_cases(("variability", "report", "{w}/variability_no_gpus"), "--outlier-threshold", ("2", "x")),
])
add("model", [
    *(Case(("model", f"{{w}}/{name}"), (f"{{w}}/{name}",)) for name in ("missing", "afile", "emptydir", "loop")),
    Case(("model", "{w}/run_binary"), ("{w}/run_binary/summary.json",)),
    Case(("model", "{w}/run_list"), ("{w}/run_list/summary.json",)),
    Case(("model", "{w}/run_ok"), ("batch_size", "nothing to model")),  # one batch size: no model, no folder
    *number_cases(("model", "{w}/run_ok"), "--predict", ("batch_size=x", "x", "", "gpus=-1")),
    *number_cases(("model", "{w}/run_ok"), "--param", ("nodes", "")),
    *number_cases(("model", "{w}/run_ok"), "--leave-out", ("batch_size=4,", "batch_size=8")),
])
add("report", [Case(("report", f"{{w}}/{name}", "-o", "{w}/never.html"), (f"{{w}}/{name}",))
               for name in ("missing", "afile", "emptydir", "loop", "run_binary")])
add("workloads", [Case(("workloads", "{w}/missing"), ("{w}/missing",))])  # it takes no argument
add("timeline", [Case(("timeline", f"{{w}}/{name}"), (f"{{w}}/{name}",))
                 for name in ("missing.csv", "afile", "emptydir", "garbage.bin", "empty.csv", "loop")])
for runner in (("coreutil",), COREUTIL_SCRIPT):
    add(" ".join(runner), [
        Case((*runner, "{w}/missing.csv"), ("{w}/missing.csv",)),
        Case((*runner, "{w}/emptydir"), ("{w}/emptydir",)),
        Case((*runner, "{w}/empty.csv"), ("{w}/empty.csv",)),
        Case((*runner, "{w}/garbage.bin"), ("{w}/garbage.bin",)),
        Case((*runner, "{w}/loop"), ("{w}/loop",)),
        Case((*runner, "{w}/pct_negative.csv"), ("{w}/pct_negative.csv", "-50")),
        Case((*runner, "{w}/pct_nan.csv"), ("{w}/pct_nan.csv", "nan")),
        Case((*runner, "{w}/utf16_broken.csv"), ("{w}/utf16_broken.csv", "UTF-16")),
        *number_cases((*runner, "{w}/empty.csv"), "--per-kernel", ("0", "x")),
    ])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("world")
    world_files(folder)
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under folder: a file's digest, a link's target, 'dir' for a folder."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            relative = str(path.relative_to(folder))
            if path.is_symlink():
                found[relative] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[relative] = "dir"
            else:
                found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def group(name: str) -> str:
    return name.split(":")[0]


# The first row of each command runs in a new process (the variability one needs it: CUDA is hidden from it only
# through the environment it starts with); the rest in this process.
IN_A_PROCESS = {name for name in CASES if next(other for other in CASES if group(other) == group(name)) == name}


@dataclass(frozen=True)
class Outcome:
    code: int | str | None
    stdout: str
    stderr: str
    warned: tuple[str, ...] = ()


def run_in_process(case: Case, world: Path, capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> Outcome:
    """The command's own ``main`` with the CLI's environment (CUDA hidden, cwd the world); the process's
    environment, signal handlers and working folder are restored after it."""
    from trainbench.cli.coreutil_cmd import main as coreutil_main
    from trainbench.cli.main import main

    argv = [part.replace("{w}", str(world)) for part in case.argv]
    entry, argv = (coreutil_main, argv[2:]) if tuple(argv[:2]) == COREUTIL_SCRIPT else (main, argv)
    monkeypatch.chdir(world)
    environment = dict(os.environ)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    os.environ.update({"CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
    capsys.readouterr()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                code: int | str | None = entry(argv)
            except SystemExit as leaving:
                code = leaving.code
    finally:
        os.environ.clear()
        os.environ.update(environment)
        for number, handler in handlers.items():
            signal.signal(number, handler)
    out = capsys.readouterr()
    return Outcome(code, out.out, out.err, tuple(f"{w.category.__name__}: {w.message}" for w in caught))


def run_in_a_process(case: Case, world: Path) -> Outcome:
    argv = [part.replace("{w}", str(world)) for part in case.argv]
    if tuple(argv[:2]) == COREUTIL_SCRIPT:
        result = subprocess.run([sys.executable, argv[1], *argv[2:]], cwd=REPO, capture_output=True, text=True,
                                timeout=120)
    else:
        result = run_cli(*argv, cwd=world, timeout=300)
    return Outcome(result.returncode, result.stdout, result.stderr)


def check_promise(case: Case, world: Path, before: dict[str, str], result: Outcome) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.code == 2, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("trainbench: ") and not lines[0].startswith("trainbench: trainbench:"), lines[0]
    for fragment in case.named:
        assert fragment.replace("{w}", str(world)) in lines[0], lines[0]
    assert not result.warned, result.warned
    assert snapshot(world) == before, "a refused command changed or added files"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(IN_A_PROCESS))
def test_bad_input_keeps_the_promise_in_a_new_process(world: Path, name: str) -> None:
    case = CASES[name]
    before = snapshot(world)
    check_promise(case, world, before, run_in_a_process(case, world))


@pytest.mark.parametrize("name", [name for name in CASES if name not in IN_A_PROCESS])
def test_bad_input_keeps_the_promise(world: Path, name: str, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    before = snapshot(world)
    check_promise(case, world, before, run_in_process(case, world, capsys, monkeypatch))


def test_every_command_has_a_case_run_as_a_user_runs_it() -> None:
    assert {group(name) for name in IN_A_PROCESS} == {group(name) for name in CASES}
    assert len(IN_A_PROCESS) == len({group(name) for name in CASES})


def test_the_table_covers_every_command() -> None:
    """A command added to the CLI without rows here fails this test."""
    from trainbench.cli.main import build_parser

    commands = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    covered = {name.split(":")[0].split()[0] for name in CASES} - {"script"}
    assert commands <= covered, commands - covered
