"""Every GPU check of the suite in at most four commands, each under 9 minutes, with figures a reader can trust.

From the repository root, with the machine's own Python and packages (benchmarks/gpu_check/README.md):

    PYTHONPATH=source python3 benchmarks/gpu_check/run.py --part 1|2|3|4|all [--output DIR] [--device cuda|cpu]

Each step is a subprocess with its own time budget (plan.py); its result or its failure (the first error line) is
recorded and the next step runs. The parts merge into DIR/gpu_check.json (a part already there is refused, never
replaced) and DIR/README.md (device, driver, versions; figure | value | goal | met | command; the failures). DIR
defaults to benchmarks/results/<gpu>_<date>/. ``--device cpu`` is the smoke run: tiny sizes, and every GPU-only step
recorded as "not run: no GPU". Exit status: 0 when every step ran or was rightly not run, 1 when one failed, 2 on a
usage error (one line).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "benchmarks")]  # gpu_speed and the gpu_check package, whatever the working directory

from gpu_check import plan, table  # noqa: E402

BREAK_OPTION = "--no-such-option"  # what --break appends: the step's command then fails as a real one does
NOT_RUN_SKIPPED = "not run: --skip"  # tests leave out steps whose command another test already runs
PACKAGE_IMPORTS = {"pynvml": "pynvml", "torch": "torch", "transformers": "transformers"}


class UsageError(Exception):
    """One line for the user, exit 2."""


def gpu_slug() -> str | None:
    """The first GPU's name, as a folder name (``NVIDIA H100 80GB HBM3`` -> ``h100_80gb_hbm3``); None without one."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = done.stdout.strip().splitlines()
    if done.returncode != 0 or not names:
        return None
    return re.sub(r"[^a-z0-9]+", "_", names[0].lower().replace("nvidia", "")).strip("_") or "gpu"


def default_output(device: str) -> Path:
    name = (gpu_slug() or "gpu") if device == "cuda" else "cpu"
    return REPO / "benchmarks" / "results" / f"{name}_{datetime.datetime.now(datetime.UTC):%Y-%m-%d}"


def missing(needs: tuple[str, ...]) -> str | None:
    """The first tool or package a step needs and this machine lacks, as the step's status."""
    for need in needs:
        kind, name = need.split(":", 1)
        if kind == "tool" and not shutil.which(name):
            return f"not run: {name} not found on PATH"
        if kind == "package" and importlib.util.find_spec(PACKAGE_IMPORTS.get(name, name)) is None:
            return f"not run: Python package {name} missing"
    return None


def first_error(*texts: str) -> str:
    """The first line that says error (argparse's, a Python exception's, a tool's), else the last line."""
    for text in texts:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        for line in lines:
            if re.search(r"error|exception|not found|no such|killed", line, re.IGNORECASE) and \
                    not line.startswith("Traceback"):
                return line[:300]
    for text in texts:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1][:300]
    return "no output"


def shown(argv: list[str]) -> str:
    """A command as a reader retypes it from the repository root."""
    parts = ["python3" if arg == sys.executable else arg.replace(f"{REPO}/", "") for arg in argv]
    return "PYTHONPATH=source " + shlex.join(parts)


def run_command(argv: list[str], timeout_s: float, log: Path) -> tuple[int | None, str, str]:
    """Runs one command in its own process group (so a stopped step leaves no worker behind); None: timed out."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'source'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    with open(log.with_suffix(".out"), "a") as out, open(log.with_suffix(".err"), "a") as err:
        out.write(f"$ {shown(argv)}\n")
        out.flush()
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                                   start_new_session=True)
        try:
            stdout, _ = process.communicate(timeout=max(1.0, timeout_s))
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    stdout, _ = process.communicate(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue
            stdout, code = stdout or "", None
        out.write(stdout)
    return code, stdout, log.with_suffix(".err").read_text()


def run_step(step: plan.Step, ctx: plan.Context, broken: set[str],
             skipped: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The step's record: status (ok, failed: <first error line>, timed out..., not run: <why>), figures, commands."""
    record: dict[str, Any] = {"name": step.name, "part": step.part, "device": ctx.device, "budget_s": step.budget_s,
                              "expected": list(step.expected), "commands": [], "figures": {}, "not_run": {}}
    if not ctx.gpu:
        record["not_run"] = {name: table.NOT_RUN_NO_GPU for name in step.gpu_figures}
    if step.name in skipped:
        status: str | None = NOT_RUN_SKIPPED
    else:
        status = table.NOT_RUN_NO_GPU if step.gpu_only and not ctx.gpu else missing(step.needs)
    commands: list[list[str]] = []
    if status is None:
        try:
            commands = step.commands(ctx)
        except plan.StepFailure as error:
            status = str(error)
    if step.name in broken and commands:
        commands[0] = [*commands[0], BREAK_OPTION]
    record["commands"] = [shown(argv) for argv in commands]
    if status is not None:
        record["status"] = status
        return record
    log = ctx.output / "logs" / step.name
    log.parent.mkdir(parents=True, exist_ok=True)
    record["log"] = str(log.with_suffix(".err").relative_to(ctx.output))
    budget = step.budget_s if ctx.gpu else plan.CPU_BUDGET_S
    started, stdout, stderr, status = time.monotonic(), "", "", "ok"
    code: int | None = 0
    for argv in commands:
        code, stdout, stderr = run_command(argv, budget - (time.monotonic() - started), log)
        if code is None:
            status = f"timed out after {budget} s"
            break
        if code not in step.ok_codes:
            status = f"failed: {first_error(stderr, stdout)}"
            break
    record["seconds"] = round(time.monotonic() - started, 1)
    try:  # partial figures too: a stopped sweep's summary.json keeps every finished batch size
        figures = step.read(ctx, stdout)
    except (plan.StepFailure, OSError, KeyError, ValueError, TypeError, IndexError) as error:
        figures = {}
        if status == "ok":  # exit 1 without a result: the command's own error, else why the result is unreadable
            reason = str(error) if isinstance(error, plan.StepFailure) else f"failed: result unreadable: {error!r}"
            status = f"failed: {first_error(stderr, stdout)}" if code else reason
    record["info"] = figures.pop("info", None)
    failure = figures.pop("failure", None)
    record["figures"] = figures
    record["status"] = failure if failure and status == "ok" else status
    return record


def read_record(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def suite_facts(output: Path) -> dict[str, Any] | None:
    """The suite's commit and version and the framework's versions, from the newest run folder's env.json."""
    found = sorted((output / "runs").rglob("env.json"), key=lambda path: path.stat().st_mtime)
    if not found:
        return None
    env = json.loads(found[-1].read_text())
    return {"suite_commit": env.get("suite_commit"), "trainbench_version": env.get("trainbench_version"),
            "framework": env.get("framework"), "from": str(found[-1].relative_to(output))}


def check_parts(output: Path, parts: list[int]) -> None:
    """Never overwrite: a part already recorded in this folder, or one left unfinished, is refused before anything."""
    record = read_record(output / "gpu_check.json") or {"parts": {}}
    for part in parts:
        if str(part) in record["parts"]:
            raise UsageError(f"part {part} is already in {output / 'gpu_check.json'}: give another --output "
                             f"(results are never overwritten)")


def run_part(part: int, ctx: plan.Context, broken: set[str], command: str,
             skipped: frozenset[str] = frozenset()) -> bool:
    """Runs one part, writing gpu_check.json and README.md after every step; True when no step failed."""
    path = ctx.output / "gpu_check.json"
    earlier = read_record(path)
    ctx.done = dict((earlier or {}).get("steps", {}))
    started = time.monotonic()
    facts = {"command": command, "time_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
             "device": ctx.device, "seconds": 0.0}
    steps: dict[str, Any] = {}
    for step in plan.part_steps(part):
        print(f"part {part}: {step.name} ...", flush=True)
        record = run_step(step, ctx, broken, skipped)
        steps[step.name] = ctx.done[step.name] = record
        print(f"part {part}: {step.name}: {record['status']} ({record.get('seconds', 0):.0f} s)", flush=True)
        facts["seconds"] = round(time.monotonic() - started, 1)
        new = {"part": facts, "steps": steps,
               "environment": (steps.get("environment") or {}).get("info")}
        merged = table.merge(earlier, part, new)
        merged["suite"] = suite_facts(ctx.output) or merged.get("suite")
        path.write_text(json.dumps(merged, indent=1, default=str))
        (ctx.output / "README.md").write_text(table.markdown(merged))
    return all(not record["status"].startswith(("failed", "timed out")) for record in steps.values())


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=[*map(str, plan.PARTS), "all"], required=True)
    parser.add_argument("--output", type=Path, help="default benchmarks/results/<gpu>_<date>/")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--scratch", type=Path, help="where the generated JPEGs and TFRecords go (default: a new "
                        "folder gpu_check_<output name>_* in the system's temporary folder), never the results folder")
    parser.add_argument("--break", dest="broken", action="append", default=[], metavar="STEP",
                        help=f"tests: append {BREAK_OPTION} to STEP's first command, so that it fails")
    parser.add_argument("--skip", action="append", default=[], metavar="STEP",
                        help=f"tests: record STEP as '{NOT_RUN_SKIPPED}' without running it")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    parts = list(plan.PARTS) if args.part == "all" else [int(args.part)]
    try:
        names = {step.name for step in plan.steps()}
        for option, asked in (("--break", args.broken), ("--skip", args.skip)):
            unknown = sorted(set(asked) - names)
            if unknown:
                raise UsageError(f"{option} {unknown[0]}: no such step (steps: {', '.join(sorted(names))})")
        if args.device == "cuda" and gpu_slug() is None:
            raise UsageError("no GPU visible (nvidia-smi found none): --device cpu runs the smoke run")
        output = (args.output or default_output(args.device)).resolve()
        check_parts(output, parts)
    except UsageError as error:
        print(f"gpu_check: {error}", file=sys.stderr)
        return 2
    output.mkdir(parents=True, exist_ok=True)
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix=f"gpu_check_{output.name}_"))
    ctx = plan.Context(args.device, output, sys.executable, scratch_dir=scratch.resolve())
    command = shown([sys.executable, "benchmarks/gpu_check/run.py", *(sys.argv[1:] if argv is None else argv)])
    ok = all([run_part(part, ctx, set(args.broken), command, frozenset(args.skip)) for part in parts])
    record = read_record(output / "gpu_check.json") or {"steps": {}}
    print("\n".join(line for line in table.markdown(record).splitlines() if line.startswith("|")))
    print(output)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
