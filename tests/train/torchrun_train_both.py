"""Started by the distributed test under torchrun: ``layerscale train`` with run.strategy ddp, then fsdp, in the
same two processes (one launch instead of two keeps the test short). The process group is created here, once:
``layerscale train`` uses a group that already exists and leaves it to its owner."""

import sys

import torch.distributed as dist

from layerscale.cli import main

if __name__ == "__main__":
    config, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    try:
        for strategy in ("ddp", "fsdp"):
            code = main(["train", "--config", config, "--out", f"{out}-{strategy}", "--set",
                         f"run.strategy={strategy}"])
            if code:
                sys.exit(code)
    finally:
        dist.destroy_process_group()
