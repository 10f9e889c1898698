"""How fast ``trainbench data convert`` turns an ImageNet folder into TFRecords, against ``cp -r`` of the same tree.

Generates ``--images`` ImageNet-sized JPEGs (``trainbench data synth``'s default 500x375, about 110 kB each, with
their Annotation XML), then measures in one run, interleaved (each round runs its members in a rotated order) so
that a machine shared with other work slows every member alike:

1. ``--repeats`` rounds (after one unmeasured round) on a warm, then on a cold page cache: ``cp -r`` of the tree
   (the goal's baseline), ``tar -cf`` of it (a reference only: it reads every file and writes one, the
   conversion's own I/O pattern, where ``cp -r`` also creates as many files as it reads) and the conversion with 2
   workers. Every member starts from the same state: earlier writes flushed and the page cache emptied (``sync;
   echo 3 > /proc/sys/vm/drop_caches``); warm: the tree is then read back in. Where drop_caches is refused (not
   root), warm only reads the tree and cold evicts the tree's own pages with ``posix_fadvise`` (the output says
   which). MB/s = the tree's bytes / seconds. The conversion runs the ``convert()`` the CLI runs, in a fresh
   process: its own seconds (scan to last shard) are the figure; the whole process (interpreter start and the
   converter's imports, about 0.2 s, which ImageNet's 150 GB would not notice; the CLI's own start takes about
   0.5 s more) is kept beside it.
2. CPU seconds per GB of tree (user + system of the converter and its worker processes, from getrusage: less
   sensitive to I/O noise than wall time), warm cache, 2 workers, interleaved: the C library's CRC-32C against the
   numpy one (``TRAINBENCH_CRC32C=numpy``), and with ``--before DIR`` a converter from another source tree too
   (``git archive <commit> source | tar -x -C DIR``, then ``--before DIR/source``).
3. Scaling: images/s with 1, 2 and all cores' workers, warm cache, interleaved.

Other work on a shared machine is measured too: during each run, the cores busy (/proc/stat) less the run's own
CPU time. A run during which others kept more than ``--max-other-cores`` (0.25) busy is run again, up to
``--retries`` (2) times; the report says how many runs were repeated and how many stayed busy.

Medians with min and max of the repeats. Goals (exit 1 when one is missed): with 2 workers on a warm cache, the
conversion at least ``--min-ratio`` (0.9) of the copy's median MB/s and at least ``--min-images`` (2,000) images/s.
The last line printed is a JSON object with every figure.

    python benchmarks/convert_speed.py [--images 4000] [--repeats 5] [--before DIR] [--scratch DIR]
                                       [--max-other-cores 0.25] [--retries 2] [--no-drop-caches]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

try:
    import trainbench  # noqa: F401
except ImportError:  # run from a plain checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "source"))

from trainbench.bench.machine_load import busy_cpu_s  # the machine's busy CPU seconds (/proc/stat)
from trainbench.data.parallel import default_workers
from trainbench.data.synth_tree import SynthOptions, synth

SOURCE = Path(__file__).resolve().parents[1] / "source"  # what the converter processes import
CLASSES = 10
VALIDATION_SHARE = 0.1
IMAGE_BYTES = 112_000  # a generated 500x375 JPEG with its annotation, on average
IMAGES_PER_SHARD = 110  # ImageNet's 1,250 would leave a few shards here; ~110 keeps every worker busy to the end
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}

# The converter in a fresh process, as the CLI runs it; it reports its own time and the CPU of itself and its
# (waited-for) workers, excluding the interpreter's start and the imports.
CONVERTER = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    from trainbench.data import crc32c
    from trainbench.data.convert import ConvertOptions, convert

    def cpu():
        usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
        return sum(usage.ru_utime + usage.ru_stime for usage in usages)

    tree, output, workers, train_shards, validation_shards = sys.argv[1:]
    cpu_before, start = cpu(), time.perf_counter()
    summary = convert(ConvertOptions(Path(tree), output=Path(output), workers=int(workers),
                                     train_shards=int(train_shards), validation_shards=int(validation_shards)))
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu_s": cpu() - cpu_before,
                      "records": summary.written, "crc32c": getattr(crc32c, "IMPLEMENTATION", "numpy"),
                      "source": crc32c.__file__}))
""")


@dataclass(frozen=True)
class Tree:
    root: Path
    bytes: int
    images: int
    train_images: int

    @property
    def mb(self) -> float:
        return self.bytes / 1e6


@dataclass(frozen=True)
class Converter:
    """Which converter runs: the crc32c it must report, and the environment that makes it run."""
    name: str
    crc32c: str
    source: Path
    env: dict[str, str]


def converters(before: Path | None) -> list[Converter]:
    own = {**ENV, "PYTHONPATH": str(SOURCE)}
    found = [Converter("google-crc32c", "google-crc32c (C)", SOURCE, own),
             Converter("numpy", "numpy", SOURCE, {**own, "TRAINBENCH_CRC32C": "numpy"})]
    if before is not None:
        before = before.resolve()
        found.append(Converter(f"before ({before})", "numpy", before, {**ENV, "PYTHONPATH": str(before)}))
    return found


# --- page cache -------------------------------------------------------------------------------------------------


def drop_caches_allowed() -> bool:
    try:
        DROP_CACHES.write_text("3\n")
    except OSError:
        return False
    return True


def evict_tree(root: Path) -> None:
    """The tree's clean pages out of the cache (no root needed; dirty pages stay, hence the sync before)."""
    for path in root.rglob("*"):
        if path.is_file():
            descriptor = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(descriptor)


def read_tree(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            path.read_bytes()


def settle(tree: Tree, cache: str, drop: bool) -> None:
    """Every member starts from the same state: earlier members' writes flushed, the page cache emptied (here a
    ``cp -r``'s kernel time grew with every copy and delete since the last drop, 0.6 s to 2.5 s for the same
    tree), and for a warm start the tree read back in."""
    os.sync()
    if drop:
        DROP_CACHES.write_text("3\n")
    elif cache == "cold":
        evict_tree(tree.root)
    if cache == "warm":
        read_tree(tree.root)


# --- one measured member ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    seconds: float
    cpu_s: float  # user + system of the command and its waited-for descendants
    others_cores: float  # cores that other work on the machine kept busy meanwhile, on average
    stdout: str


def timed(command: list[str], env: dict[str, str]) -> Timing:
    before, busy = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_s()
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after, busy = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_s() - busy
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"{Path(command[0]).name} failed ({result.returncode}): {last}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Timing(wall, cpu, max(0.0, busy - cpu) / wall, result.stdout)


def copy_tree(tree: Tree, scratch: Path) -> dict[str, float]:
    timing = timed(["cp", "-r", str(tree.root), str(scratch / "copy")], ENV)
    shutil.rmtree(scratch / "copy")
    return {"seconds": timing.seconds, "cpu_s": timing.cpu_s, "others_cores": timing.others_cores}


def tar_tree(tree: Tree, scratch: Path) -> dict[str, float]:
    timing = timed(["tar", "-cf", str(scratch / "tree.tar"), "-C", str(tree.root), "."], ENV)
    (scratch / "tree.tar").unlink()
    return {"seconds": timing.seconds, "cpu_s": timing.cpu_s, "others_cores": timing.others_cores}


def shard_counts(tree: Tree) -> tuple[int, int]:
    validation = tree.images - tree.train_images
    return max(2, tree.train_images // IMAGES_PER_SHARD), max(2, validation // IMAGES_PER_SHARD)


def convert_tree(tree: Tree, scratch: Path, workers: int, converter: Converter) -> dict[str, float]:
    """One conversion into a fresh folder: its own seconds and CPU, the whole process's wall and CPU."""
    output = scratch / "records"
    train_shards, validation_shards = shard_counts(tree)
    command = [sys.executable, "-c", CONVERTER, str(tree.root), str(output), str(workers), str(train_shards),
               str(validation_shards)]
    timing = timed(command, converter.env)
    shutil.rmtree(output)
    own = json.loads(timing.stdout.strip().splitlines()[-1])
    ran = (own["crc32c"], Path(own["source"]).is_relative_to(converter.source), own["records"])
    if ran != (converter.crc32c, True, tree.images):
        raise SystemExit(f"{converter.name}: ran with {own['crc32c']} ({own['source']}) and wrote {own['records']} "
                         f"records; expected {converter.crc32c} and {tree.images}")
    return {"seconds": own["seconds"], "cpu_s": own["cpu_s"], "process_s": timing.seconds,
            "process_cpu_s": timing.cpu_s, "others_cores": timing.others_cores}


# --- rounds -----------------------------------------------------------------------------------------------------


Member = Callable[[], dict[str, float]]


@dataclass(frozen=True)
class Schedule:
    repeats: int
    max_other_cores: float  # a run during which other work kept more cores busy is run again ...
    retries: int  # ... up to this many times (the last attempt is kept, with its count)


def attempt(member: Member, prepare: Callable[[], None], schedule: Schedule) -> dict:
    """The member run on a machine quiet enough, or its last attempt; ``attempts`` says how many it took."""
    for count in range(1, schedule.retries + 2):  # noqa: B007 - the count is reported
        prepare()
        run = member()
        if run["others_cores"] <= schedule.max_other_cores:
            break
    return {**run, "attempts": count}


def rounds(members: dict[str, Member], schedule: Schedule, prepare: Callable[[], None]) -> dict[str, list[dict]]:
    """One unmeasured round (the first writes after a drop wait for the file system's metadata), then
    ``repeats`` rounds of every member, each round starting one member later (no member always goes first)."""
    names = list(members)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for index in range(schedule.repeats + 1):
        for name in names[index % len(names):] + names[:index % len(names)]:
            if index == 0:
                prepare()
                members[name]()
            else:
                runs[name].append(attempt(members[name], prepare, schedule))
    return runs


def quietness(runs: dict[str, list[dict]], schedule: Schedule) -> dict:
    """How much other work shared the machine during the kept runs, and how many runs it made us repeat."""
    kept = [run for member in runs.values() for run in member]
    return {"others_cores": spread([run["others_cores"] for run in kept]), "runs": len(kept),
            "retried": sum(run["attempts"] > 1 for run in kept),
            "busy": sum(run["others_cores"] > schedule.max_other_cores for run in kept)}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def against_copy(tree: Tree, scratch: Path, cache: str, schedule: Schedule, drop: bool) -> tuple[dict, dict]:
    """Copy, tar and conversion (2 workers) interleaved on one cache state: MB/s medians, spread, ratios."""
    converter = converters(None)[0]
    runs = rounds({"copy": lambda: copy_tree(tree, scratch), "tar": lambda: tar_tree(tree, scratch),
                   "convert": lambda: convert_tree(tree, scratch, 2, converter)},
                  schedule, lambda: settle(tree, cache, drop))
    return copy_figures(tree, runs), quietness(runs, schedule)


def copy_figures(tree: Tree, runs: dict[str, list[dict]]) -> dict:
    """The measured runs of copy, tar and conversion as rates: MB/s = the tree's bytes / seconds, images/s."""
    mb_s = {name: [tree.mb / run["seconds"] for run in member] for name, member in runs.items()}
    process_mb_s = [tree.mb / run["process_s"] for run in runs["convert"]]
    copy_median = statistics.median(mb_s["copy"])
    return {"copy_mb_s": spread(mb_s["copy"]), "tar_mb_s": spread(mb_s["tar"]),
            "convert_mb_s": spread(mb_s["convert"]), "convert_process_mb_s": spread(process_mb_s),
            "convert_images_s": spread([tree.images / run["seconds"] for run in runs["convert"]]),
            "ratio": statistics.median(mb_s["convert"]) / copy_median,
            "process_ratio": statistics.median(process_mb_s) / copy_median,
            "worst_ratio": min(mb_s["convert"]) / max(mb_s["copy"]),
            "tar_ratio": statistics.median(mb_s["convert"]) / statistics.median(mb_s["tar"]),
            "runs": runs}


def cpu_per_gb(tree: Tree, scratch: Path, schedule: Schedule, drop: bool,
               before: Path | None) -> tuple[dict, dict]:
    """CPU seconds per GB of tree, converter by converter (2 workers, warm), interleaved."""
    members = {found.name: (lambda found=found: convert_tree(tree, scratch, 2, found)) for found in converters(before)}
    runs = rounds(members, schedule, lambda: settle(tree, "warm", drop))
    gigabytes = tree.bytes / 1e9
    return {name: {"converter": spread([run["cpu_s"] / gigabytes for run in member]),
                   "process": spread([run["process_cpu_s"] / gigabytes for run in member]),
                   "images_s": spread([tree.images / run["seconds"] for run in member])}
            for name, member in runs.items()}, quietness(runs, schedule)


def scaling(tree: Tree, scratch: Path, schedule: Schedule, drop: bool) -> tuple[dict, dict]:
    converter = converters(None)[0]
    counts = sorted({1, 2, default_workers()})
    members = {str(count): (lambda count=count: convert_tree(tree, scratch, count, converter)) for count in counts}
    runs = rounds(members, schedule, lambda: settle(tree, "warm", drop))
    rates = {name: [tree.images / run["seconds"] for run in member] for name, member in runs.items()}
    one = statistics.median(rates["1"])
    return ({name: {**spread(values), "speedup": statistics.median(values) / one} for name, values in rates.items()},
            quietness(runs, schedule))


# --- report -----------------------------------------------------------------------------------------------------


def _range(figure: dict[str, float], digits: int = 1) -> str:
    return f"{figure['median']:,.{digits}f} ({figure['min']:,.{digits}f}-{figure['max']:,.{digits}f})"


def print_caches(figures: dict) -> None:
    for cache, pair in figures["caches"].items():
        print(f"{cache} cache: cp -r {_range(pair['copy_mb_s'])} MB/s; tar -cf {_range(pair['tar_mb_s'])} MB/s; "
              f"convert --workers 2 {_range(pair['convert_mb_s'])} MB/s = {pair['ratio']:.0%} of the copy "
              f"(slowest conversion / fastest copy {pair['worst_ratio']:.0%}; {pair['tar_ratio']:.0%} of tar; "
              f"with the process start {_range(pair['convert_process_mb_s'])} MB/s = {pair['process_ratio']:.0%}), "
              f"{_range(pair['convert_images_s'], 0)} images/s")
    print(f"caches: {figures['cache_method']}")


def print_cpu(figures: dict) -> None:
    print("CPU s per GB (2 workers, warm)   converter            whole process        images/s")
    for name, cpu in figures["cpu_s_per_gb"].items():
        print(f"{name:<32} {_range(cpu['converter'], 2):<20} {_range(cpu['process'], 2):<20} "
              f"{_range(cpu['images_s'], 0)}")
    print("workers  images/s (warm)          speed-up")
    for count, figure in figures["scaling"].items():
        print(f"{count:>7}  {_range(figure, 0):<24} {figure['speedup']:.2f}x")


def print_quiet(figures: dict) -> None:
    print(f"other work on the machine (cores it kept busy during each kept run; a run above "
          f"{figures['max_other_cores']} was run again, up to {figures['retries']} times):")
    for name, quiet in figures["quiet"].items():
        print(f"  {name:<8} {_range(quiet['others_cores'], 2)} cores; {quiet['retried']} of {quiet['runs']} runs "
              f"repeated, {quiet['busy']} kept busy")


def verdict(figures: dict, min_ratio: float, min_images: float) -> dict[str, bool]:
    """Each goal met or not, from the warm cache's figures (both missed without them)."""
    warm = figures["caches"].get("warm")
    return {"ratio": warm is not None and warm["ratio"] >= min_ratio,
            "images": warm is not None and warm["convert_images_s"]["median"] >= min_images}


def report(figures: dict, args: argparse.Namespace) -> bool:
    """Prints the tables and the JSON line; True when both goals are met."""
    print(f"tree: {figures['images']:,} JPEGs, {figures['tree_mb']:.1f} MB with the annotations; {figures['cores']} "
          f"cores; CRC-32C: {figures['crc32c']}; medians (min-max) of {args.repeats} interleaved rounds")
    print_caches(figures)
    print_cpu(figures)
    print_quiet(figures)
    met = figures["goals_met"]
    print(f"goal: warm-cache conversion >= {args.min_ratio:.0%} of the copy: {'met' if met['ratio'] else 'missed'}; "
          f">= {args.min_images:,.0f} images/s with 2 workers: {'met' if met['images'] else 'missed'}")
    busy = sum(quiet["busy"] for quiet in figures["quiet"].values())
    if busy:
        print(f"note: other work kept more than {figures['max_other_cores']} cores busy during {busy} of the kept "
              "runs: these figures are of a shared machine")
    print(json.dumps(figures))
    return all(met.values())


def check_space(scratch: Path, images: int) -> None:
    """The tree and one output at a time (a copy, an archive or the shards), with room to spare."""
    needed, free = 3 * images * IMAGE_BYTES, shutil.disk_usage(scratch).free
    if free < needed:
        raise SystemExit(f"{scratch}: {free / 1e9:.1f} GB free, {needed / 1e9:.1f} GB needed for {images:,} images "
                         "(--scratch elsewhere, or fewer --images)")


def make_tree(scratch: Path, images: int) -> Tree:
    per_class = images // CLASSES
    val_per_class = round(per_class * VALIDATION_SHARE)
    made = synth(SynthOptions(scratch / "imagenet", CLASSES, per_class - val_per_class, val_per_class,
                              workers=default_workers()))
    size = sum(path.stat().st_size for path in made.output.rglob("*") if path.is_file())
    return Tree(made.output, size, made.images, CLASSES * (per_class - val_per_class))


def cache_method(drop: bool) -> str:
    if drop:
        return "sync; echo 3 > /proc/sys/vm/drop_caches before every member (warm: then the tree read)"
    return (f"{DROP_CACHES} left alone (not root, or --no-drop-caches): cold = the tree's pages evicted with "
            "posix_fadvise, the rest of the cache (Python, its libraries, earlier outputs) kept as it was")


def measure(tree: Tree, scratch: Path, args: argparse.Namespace) -> dict:
    drop = not args.no_drop_caches and drop_caches_allowed()
    from trainbench.data.crc32c import IMPLEMENTATION

    schedule = Schedule(args.repeats, args.max_other_cores, args.retries)
    phases = {cache: against_copy(tree, scratch, cache, schedule, drop) for cache in ("warm", "cold")}
    phases["cpu"] = cpu_per_gb(tree, scratch, schedule, drop, args.before)
    phases["scaling"] = scaling(tree, scratch, schedule, drop)
    figures = {"images": tree.images, "tree_mb": tree.mb, "cores": default_workers(), "crc32c": IMPLEMENTATION,
               "repeats": args.repeats, "shards": dict(zip(("train", "validation"), shard_counts(tree), strict=True)),
               "cache_method": cache_method(drop), "max_other_cores": args.max_other_cores, "retries": args.retries,
               "caches": {cache: phases[cache][0] for cache in ("warm", "cold")},
               "cpu_s_per_gb": phases["cpu"][0], "scaling": phases["scaling"][0],
               "quiet": {name: phase[1] for name, phase in phases.items()}}
    figures["goals_met"] = verdict(figures, args.min_ratio, args.min_images)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-ratio", type=float, default=0.9)
    parser.add_argument("--min-images", type=float, default=2000.0)
    parser.add_argument("--max-other-cores", type=float, default=0.25,
                        help="run a member again when other work kept more cores busy during it (default 0.25)")
    parser.add_argument("--retries", type=int, default=2, help="at most this many times (default 2)")
    parser.add_argument("--before", type=Path, help="a source folder (holding trainbench/) to measure CPU s/GB of")
    parser.add_argument("--no-drop-caches", action="store_true",
                        help="leave /proc/sys/vm/drop_caches alone (as without root; the tests use it)")
    parser.add_argument("--scratch", type=Path, help="where the tree and the outputs go (default: the temp folder)")
    args = parser.parse_args()
    if args.before is not None and not (args.before / "trainbench" / "data" / "convert.py").is_file():
        parser.error(f"--before {args.before}: no trainbench/data/convert.py in it")
    with tempfile.TemporaryDirectory(prefix="convert_speed_", dir=args.scratch) as folder:
        scratch = Path(folder)
        check_space(scratch, args.images)
        figures = measure(make_tree(scratch, args.images), scratch, args)
    return 0 if report(figures, args) else 1


if __name__ == "__main__":
    sys.exit(main())
