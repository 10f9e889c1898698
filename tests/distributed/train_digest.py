"""Run under torchrun by tests/test_distributed.py: train the tiny Transformer a few steps through the torch engine's
trainer (DDP, gloo) and write this rank's parameter digest before and after to ``digest_<rank>.json`` in the run
folder (a file per rank: two ranks printing to one pipe can interleave their lines)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

from trainbench.config import ModelConfig, TrainConfig
from trainbench.engines.torch.engine import TorchEngine
from trainbench.training.loop import train


def digest(tensors: list[torch.Tensor]) -> str:
    hasher = hashlib.sha256()
    for tensor in tensors:
        hasher.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return hasher.hexdigest()


def main(run_dir: str) -> None:
    config = TrainConfig(model=ModelConfig(framework="torch", precision="fp32", workload="transformer", size="tiny",
                                           device="cpu"),
                         epochs=1, batch_size=4, steps_per_epoch=3, eval_steps=1, synthetic_train_examples=16,
                         synthetic_eval_examples=4, output=run_dir)
    trainer = TorchEngine().make_trainer(config)
    before = digest(list(trainer.network.parameters()))
    train(config, trainer, Path(run_dir), lambda line: None)
    # Buffers (batch norm's running statistics, in an image network) are each rank's own until DDP's next forward
    # broadcasts rank 0's: reported apart from the parameters, which DDP's averaged gradients keep identical.
    rank = int(os.environ["RANK"])
    (Path(run_dir) / f"digest_{rank}.json").write_text(json.dumps(
        {"rank": rank, "world": torch.distributed.get_world_size(), "before": before,
         "after": digest(list(trainer.network.parameters())), "buffers": digest(list(trainer.network.buffers()))}))


if __name__ == "__main__":
    main(sys.argv[1])
