"""Does the torchrun path cost anything? One process launched plainly against one launched by torchrun with DDP.

The same PyTorch ``trainbench throughput`` sweep runs alternately as it is and with ``--gpus 1 --torchrun`` (one
process under torchrun, DistributedDataParallel over a world of one), ``--pairs`` times. Printed: each batch size's
median images/s both ways and their ratio (torchrun / plain); the multi-GPU figures stand on this path, so it should
match the plain one within noise (ratio >= --threshold, default 0.98).

    python benchmarks/torchrun_overhead.py [--pairs 3] -- [trainbench throughput options]
    e.g. python benchmarks/torchrun_overhead.py -- --device cuda --precision bf16 --batch-sizes 64,256 --steps 200

Prints one JSON line with all figures last; exits 1 when a ratio is below the threshold.
"""

from __future__ import annotations

import argparse
import json

from ab_sweeps import interleaved, ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="plain/torchrun pairs, interleaved (default 3)")
    parser.add_argument("--threshold", type=float, default=0.98)
    parser.add_argument("options", nargs="*", help="trainbench throughput options (after --)")
    args = parser.parse_args()
    plain, launched = interleaved(["--framework", "torch", *args.options], [], ["--gpus", "1", "--torchrun"],
                                  args.pairs)
    figures = ratios(plain, launched)
    for figure in figures:
        print(f"batch {figure['batch_size']}: plain {figure['a_images_per_sec']:.2f}, torchrun "
              f"{figure['b_images_per_sec']:.2f} images/s, ratio {figure['ratio_b_over_a']:.4f}")
    print(json.dumps({"pairs": args.pairs, "figures": figures}))
    return 0 if all(f["ratio_b_over_a"] >= args.threshold for f in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
