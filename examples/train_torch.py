"""A plain PyTorch training script, with no line of iotrace in it.

It is what users run first: `iotrace run -- python train_torch.py`. The tracer's start-up
hook sees torch being imported and records the story by itself: one `epoch` event per pass
over the DataLoader, a `fetch` per batch the loop waited for, a `sample` per item read in
the loader's worker processes (labelled "dataloader" with their worker id), each `torch.save`
checkpoint with its size, each `numpy.load` of a sample file, and underneath all of it every
POSIX call. `iotrace-analyze` then says how much of each epoch the loop spent waiting for data.

The dataset is one .npy file per sample (written on the first run under --data); the model is
a small MLP, so reading and decoding samples is what the loop waits for, as in many real jobs.

    python examples/train_torch.py --data /tmp/torch-ds [--epochs 3] [--workers 2]
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SHAPE = (3, 32, 32)
CLASSES = 10


class NpyFiles(Dataset):
    """One sample per .npy file: the label is in the file name."""

    def __init__(self, root: str) -> None:
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".npy"))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        x = np.load(self.paths[i]).astype(np.float32) / 255.0
        label = int(os.path.basename(self.paths[i]).split("_")[1].split(".")[0])
        return torch.from_numpy(x), label


def write_dataset(root: str, n: int) -> None:
    if os.path.isdir(root) and len(os.listdir(root)) >= n:
        return
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        img = rng.integers(0, 256, SHAPE, dtype=np.uint8)
        np.save(os.path.join(root, f"{i:05d}_{i % CLASSES}.npy"), img)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/iotrace-torch-ds")
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--ckpt", default=None, help="checkpoint file (default: DATA/../model.pt)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    write_dataset(a.data, a.samples)
    loader = DataLoader(NpyFiles(a.data), batch_size=a.batch_size, shuffle=True,
                        num_workers=a.workers, persistent_workers=a.workers > 0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(SHAPE)), 64), nn.ReLU(),
                          nn.Linear(64, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    ckpt = a.ckpt or os.path.join(os.path.dirname(os.path.abspath(a.data)), "model.pt")
    for epoch in range(a.epochs):
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        torch.save({"epoch": epoch, "model": model.state_dict(), "opt": opt.state_dict()}, ckpt)
        print(f"epoch {epoch}: mean loss {total / len(loader):.4f}")
    state = torch.load(ckpt)
    model.load_state_dict(state["model"])
    print(f"checkpoint {ckpt}: {os.path.getsize(ckpt)} bytes, epoch {state['epoch']}")


if __name__ == "__main__":
    main()
