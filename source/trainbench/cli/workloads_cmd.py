"""``trainbench workloads``: what the suite can benchmark, read from the workload registry (no framework loaded).

``--json`` adds what each workload is at each size on each framework: its trainable parameters and training FLOPs
per sample at the default settings, counted where a framework can count without allocating the network (PyTorch on
its meta device, ``engines.torch.meta_counts``; torch is imported then only)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from trainbench.config import ModelConfig
from trainbench.engines import counts_without_memory
from trainbench.frameworks import FRAMEWORKS, Framework, capabilities_of
from trainbench.workloads import Workload, all_workloads


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "workloads", help="list the workloads the suite benchmarks",
        description="Each workload: its category, what one sample is (samples/s counts them; sequence workloads "
        "also report tokens/s), its shape settings with their defaults and bounds, its sizes (--size), the reference "
        "implementation each framework builds, the reference's optimizer (what timed runs update with), and the "
        "frameworks it refuses with why.",
    )
    parser.add_argument(
        "--json", action="store_true",
        help="print one JSON list instead, an entry for every workload x size x framework: workload, size, "
        "framework, params (the shape settings' defaults at that size), parameters (trainable, tied weights once), "
        "train_flops_per_sample (forward and backward, as runs record them), tokens_per_sample (null without "
        "tokens) and note (how they were counted, or why they are null). PyTorch counts on the meta device, "
        "nothing allocated (seconds, even at 8B); TensorFlow has none, so its counts are null (its runs record "
        "them); a framework the workload refuses (gpt2 on tf) is listed with null counts and the refusal as note.",
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
        published = workload.published_parameters
        count = f"{published / 1e9:.2f} B" if published >= 1e9 else f"{published / 1e6:.1f} M"
        lines.append(f"  parameters at --size full: about {count} (published)")
    return lines


def entry(workload: Workload, size: str, framework: Framework) -> dict[str, Any]:
    """What ``--json`` lists for one workload at one size on one framework."""
    params = {name: workload.default(name, size) for name in workload.params}
    counted: dict[str, Any] = {"parameters": None, "train_flops_per_sample": None}
    refusal = workload.framework_problem(framework)
    counts = None if refusal is not None else counts_without_memory(
        ModelConfig(framework=framework, workload=workload.name, size=size, device="cpu"))
    if refusal is not None:
        note = refusal
    elif counts is None:
        note = (f"not counted: {capabilities_of(framework).title} has no meta device, and building the network "
                "would allocate its weights; its runs record parameters and train_flops_per_sample")
    else:
        counted = {"parameters": counts.parameters, "train_flops_per_sample": counts.train_flops_per_sample}
        note = counts.note
    return {"workload": workload.name, "size": size, "framework": framework, "params": params, **counted,
            "tokens_per_sample": workload.tokens_per_sample(params), "note": note}


def entries() -> list[dict[str, Any]]:
    return [entry(workload, size, framework) for workload in all_workloads() for size in workload.sizes
            for framework in FRAMEWORKS]


def run(args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(entries(), indent=2))
        return 0
    for workload in all_workloads():
        print("\n".join(describe(workload)))
    return 0
