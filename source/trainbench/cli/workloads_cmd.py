"""``trainbench workloads``: what the suite can benchmark, read from the workload registry (no framework loaded)."""

from __future__ import annotations

import argparse

from trainbench.workloads import Workload, all_workloads


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "workloads", help="list the workloads the suite benchmarks",
        description="Each workload: its category, what one sample is, its shape settings with their defaults and "
        "bounds, its sizes, and the reference implementation each framework builds.",
    )
    parser.set_defaults(run=run)


def describe(workload: Workload) -> list[str]:
    lines = [f"{workload.name}: {workload.title}, {workload.category}; one sample is one {workload.sample_unit}"]
    lines += [f"  {name}: default {p.default} ({p.minimum} to {p.maximum}): {p.help}"
              for name, p in workload.params.items()]
    lines += [f"  size {name}: {size.about}" for name, size in workload.sizes.items()]
    lines += [f"  {framework}: {reference}" for framework, reference in workload.references.items()]
    return lines


def run(args: argparse.Namespace) -> int:
    for workload in all_workloads():
        print("\n".join(describe(workload)))
    return 0
