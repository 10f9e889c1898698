"""``trainbench workloads``: what the suite can benchmark, read from the workload registry (no framework loaded)."""

from __future__ import annotations

import argparse

from trainbench.workloads import Workload, all_workloads


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "workloads", help="list the workloads the suite benchmarks",
        description="Each workload: its category, what one sample is (samples/s counts them; sequence workloads "
        "also report tokens/s), its shape settings with their defaults and bounds, its sizes (--size), the reference "
        "implementation each framework builds, the reference's optimizer (what timed runs update with), and the "
        "frameworks it refuses with why.",
    )
    parser.set_defaults(run=run)


def _default(workload: Workload, name: str) -> str:
    tiny = workload.default(name, "tiny")
    return f"default {workload.default(name)}" + (f" (tiny: {tiny})" if tiny != workload.default(name) else "")


def describe(workload: Workload) -> list[str]:
    tokens = ", and tokens/s" if workload.tokens_param else ""
    lines = [f"{workload.name}: {workload.title}, {workload.category}; one sample is one {workload.sample_unit} "
             f"({workload.sample_unit}s/s{tokens})"]
    lines += [f"  --{name.replace('_', '-')}: {_default(workload, name)}, {p.minimum} to {p.maximum}: {p.help}"
              for name, p in workload.params.items()]
    lines += [f"  --size {name}: {size.about}" for name, size in workload.sizes.items()]
    lines += [f"  {framework}: {reference}" for framework, reference in workload.references.items()]
    lines += [f"  {framework}: refused: {why}" for framework, why in workload.refused.items()]
    reference = workload.optimizer
    recipe = reference.source or (f"{reference.name}, {reference.base_learning_rate:g} per 256 samples, weight decay "
                                  f"{reference.weight_decay:g}")
    lines.append(f"  optimizer (what timed runs update with): {recipe}")
    if workload.published_parameters:
        lines.append(f"  parameters at --size full: about {workload.published_parameters / 1e6:.1f} M (published)")
    return lines


def run(args: argparse.Namespace) -> int:
    for workload in all_workloads():
        print("\n".join(describe(workload)))
    return 0
