"""A small but real training pipeline to trace end to end.

What it does, as such jobs do:
  1. writes a synthetic image-like dataset to disk in one of two layouts:
       --layout small  one .npz file per sample (many small files, as in ImageNet-style sets)
       --layout large  all samples in one binary file with fixed-size records (a shard)
  2. trains for --epochs over a randomly shuffled sampler, batches loaded by --workers
     processes (multiprocessing, as a data loader does) and wrapped in iotrace.iter
  3. computes each step with numpy (a two-layer model, forward and backward)
  4. writes a checkpoint every --ckpt-every steps (np.save + fsync, as frameworks do)

Run it traced:
    iotrace run -o traces -- python examples/train_pipeline.py --data /tmp/ds
It runs untraced too (the decorators cost close to nothing when tracing is off).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

# The loader's worker processes and the training loop share the machine's cores: one BLAS
# thread per process, as multi-process pipelines are run (numpy's default is a spinning BLAS
# thread per core in every process, which oversubscribes small machines; set the variable to
# override). Before numpy is imported, which is when OpenBLAS reads it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import iotrace

SAMPLE_SHAPE = (32, 32, 3)  # a small image
N_CLASSES = 10


# --- dataset on disk ---------------------------------------------------------------------------

@iotrace.trace(cat="prepare", args=["layout", "n"])
def write_dataset(root: str, layout: str, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    os.makedirs(root, exist_ok=True)
    marker = os.path.join(root, f".done-{layout}-{n}")
    if os.path.exists(marker):
        return
    x = rng.integers(0, 255, size=(n, *SAMPLE_SHAPE), dtype=np.uint8)
    y = rng.integers(0, N_CLASSES, size=n, dtype=np.int64)
    if layout == "small":
        for i in range(n):
            np.savez(os.path.join(root, f"sample_{i:06d}.npz"), x=x[i], y=y[i])
    else:
        with open(os.path.join(root, "shard.bin"), "wb") as f:
            for i in range(n):
                f.write(x[i].tobytes())
                f.write(int(y[i]).to_bytes(8, "little"))
    open(marker, "w").close()


class Dataset:
    """Random access to one sample; the I/O is what the tracer sees."""

    record = int(np.prod(SAMPLE_SHAPE)) + 8

    def __init__(self, root: str, layout: str, n: int) -> None:
        self.root, self.layout, self.n = root, layout, n
        self._fd = -1

    def __len__(self) -> int:
        return self.n

    @iotrace.trace(cat="fetch", args=["i"])
    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        if self.layout == "small":
            with np.load(os.path.join(self.root, f"sample_{i:06d}.npz")) as z:
                return z["x"], int(z["y"])
        if self._fd < 0:  # opened lazily: each worker process has its own fd
            self._fd = os.open(os.path.join(self.root, "shard.bin"), os.O_RDONLY)
        raw = os.pread(self._fd, self.record, i * self.record)
        x = np.frombuffer(raw[:-8], dtype=np.uint8).reshape(SAMPLE_SHAPE)
        return x, int.from_bytes(raw[-8:], "little")


# --- loader: worker processes, random sampling -------------------------------------------------

_dataset: Dataset | None = None


def _init_worker(root: str, layout: str, n: int) -> None:
    global _dataset
    _dataset = Dataset(root, layout, n)


@iotrace.trace(cat="fetch", name="load_batch")
def _load_batch(indices: list[int]) -> tuple[np.ndarray, np.ndarray]:
    items = [_dataset[i] for i in indices]
    x = np.stack([a for a, _ in items]).astype(np.float32) / 255.0
    return x.reshape(len(items), -1), np.array([b for _, b in items])


class Loader:
    """Shuffled batches loaded in worker processes, `prefetch` batches ahead."""

    def __init__(self, ds: Dataset, batch: int, workers: int, seed: int, start_method: str) -> None:
        self.ds, self.batch, self.seed = ds, batch, seed
        ctx = mp.get_context(start_method)
        self.pool = ctx.Pool(workers, initializer=_init_worker, initargs=(ds.root, ds.layout, ds.n))

    def epoch(self, e: int):
        order = np.random.default_rng(self.seed + e).permutation(len(self.ds))
        batches = [order[i:i + self.batch].tolist() for i in range(0, len(order), self.batch)]
        return self.pool.imap(_load_batch, batches)

    def close(self) -> None:
        self.pool.close()
        self.pool.join()


# --- model: a two-layer MLP in numpy ------------------------------------------------------------

class Model:
    def __init__(self, d_in: int, hidden: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.w1 = rng.normal(0, 0.02, (d_in, hidden)).astype(np.float32)
        self.w2 = rng.normal(0, 0.02, (hidden, N_CLASSES)).astype(np.float32)

    @iotrace.trace(cat="compute")
    def step(self, x: np.ndarray, y: np.ndarray, lr: float = 0.05) -> float:
        h = np.maximum(x @ self.w1, 0)
        logits = h @ self.w2
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        loss = float(-np.log(p[np.arange(len(y)), y] + 1e-9).mean())
        g = p
        g[np.arange(len(y)), y] -= 1
        g /= len(y)
        gw2 = h.T @ g
        gh = (g @ self.w2.T) * (h > 0)
        self.w1 -= lr * (x.T @ gh)
        self.w2 -= lr * gw2
        return loss

    def checkpoint(self, path: str, step: int) -> None:
        with iotrace.region("checkpoint", cat="checkpoint", step=step) as r:
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                np.save(f, self.w1)
                np.save(f, self.w2)
                f.flush()
                os.fsync(f.fileno())
                r.update(nbytes=f.tell())
            os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/tmp/iotrace-example-data", help="dataset folder")
    ap.add_argument("--layout", choices=["small", "large"], default="small")
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ckpt-every", type=int, default=16)
    ap.add_argument("--ckpt-dir", default=None, help="default: DATA/checkpoints")
    ap.add_argument("--start-method", default="fork", choices=["fork", "spawn", "forkserver"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    root = os.path.join(args.data, args.layout)
    write_dataset(root, args.layout, args.samples, args.seed)
    ckpt_dir = args.ckpt_dir or os.path.join(args.data, "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)

    ds = Dataset(root, args.layout, args.samples)
    model = Model(int(np.prod(SAMPLE_SHAPE)), args.hidden, args.seed)
    loader = Loader(ds, args.batch, args.workers, args.seed, args.start_method)
    t0 = time.perf_counter()
    step = 0
    try:
        for epoch in range(args.epochs):
            with iotrace.region("epoch", cat="train", epoch=epoch):
                for x, y in iotrace.iter(loader.epoch(epoch), name="fetch_wait", cat="fetch"):
                    loss = model.step(x, y)
                    step += 1
                    if step % args.ckpt_every == 0:
                        model.checkpoint(os.path.join(ckpt_dir, "model.npy"), step)
                        iotrace.counter("train", loss=loss, step=step)
    finally:
        loader.close()
    dt = time.perf_counter() - t0
    print(f"trained {step} steps in {dt:.2f} s ({args.samples * args.epochs / dt:.0f} samples/s), "
          f"last loss {loss:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
