"""PyTorch data loading without annotations: batches, epochs, samples and worker processes.

In the process that iterates a DataLoader: `fetch` per batch received (the wait for it;
args epoch, batch) and `epoch` per pass (from iter() to its end; args loader — the loader's
number in the process, in order of first use —, epoch, batches, and complete=false for a pass
left early). Wherever a dataset is read (the workers, or the main
process without workers): `sample` per __getitem__ (args index), or per __getitems__ (args
index of the first, count). Loader workers are labelled role "dataloader" with their worker_id.

The hooks replace torch's own methods: DataLoader.__iter__, _BaseDataLoaderIter.__next__, the
map and iterable fetchers' fetch (the same steps as torch's, with a clock around each item),
and the worker loop (worker processes find it by name, so spawn and forkserver children get
the hooked one as soon as they import torch).
"""
from __future__ import annotations

import functools
import itertools
import os
import sys
import weakref

from .. import _core

CAT = "dataloader"
_now = _core.now
_complete = _core.complete
# One C callable per event kind: a fetch or sample costs a clock read and this call.
_FETCH = _core.Event("fetch", CAT)
_SAMPLE = _core.Event("sample", CAT)


# -- the iterating process -------------------------------------------------------------------

class _Pass:
    """One pass over a loader: from iter() to StopIteration (or to being left)."""

    __slots__ = ("loader", "epoch", "start", "batches", "last", "done", "__weakref__")

    def __init__(self, loader: int, epoch: int, start: int) -> None:
        self.loader, self.epoch, self.start = loader, epoch, start
        self.batches, self.last, self.done = 0, start, False

    def end(self, t: int, complete: bool = True) -> None:
        if self.done:
            return
        self.done = True
        args = {"loader": self.loader, "epoch": self.epoch, "batches": self.batches}
        if not complete:
            args["complete"] = False
        _complete("epoch", CAT, self.start, t - self.start, args)

    def left(self) -> None:  # the iterator went away (or a new pass began) before the end
        if not self.done and self.batches:
            self.end(self.last, complete=False)


_epochs: weakref.WeakKeyDictionary[object, list] = weakref.WeakKeyDictionary()
_loader_numbers = itertools.count()


def _hook_loader(module) -> None:  # noqa: ANN001
    loader_cls = module.DataLoader
    iter_cls = module._BaseDataLoaderIter
    loader_iter = loader_cls.__iter__
    next_batch = iter_cls.__next__

    @functools.wraps(loader_iter)
    def __iter__(self):  # noqa: ANN001, ANN202
        t0 = _now()
        it = loader_iter(self)
        state = _epochs.get(self)
        if state is None:  # loader number (in order of first use), next epoch, pass under way
            state = _epochs[self] = [next(_loader_numbers), 0, None]
        elif state[2] is not None:
            state[2].left()
        p = _Pass(state[0], state[1], t0)
        state[1] += 1
        state[2] = p
        try:
            it._iotrace_pass = p
            weakref.finalize(it, p.left)
        except (AttributeError, TypeError):  # an iterator that takes no attributes
            pass
        return it

    @functools.wraps(next_batch)
    def __next__(self):  # noqa: ANN001, ANN202
        p = self.__dict__.get("_iotrace_pass")
        t0 = _now()
        try:
            data = next_batch(self)
        except StopIteration:
            if p is not None:
                p.end(_now())
            raise
        except BaseException as e:
            t1 = _now()
            if p is not None:
                _complete("fetch", CAT, t0, t1 - t0,
                          {"epoch": p.epoch, "batch": p.batches, "exception": type(e).__name__})
            raise
        if p is not None:
            _FETCH(t0, "epoch", p.epoch, "batch", p.batches)
            p.batches += 1
            p.last = _now()
        else:
            _FETCH(t0)
        return data

    loader_cls.__iter__ = __iter__
    iter_cls.__next__ = __next__


# -- wherever the dataset is read -----------------------------------------------------------

def _hook_fetchers(module) -> None:  # noqa: ANN001
    map_fetch = module._MapDatasetFetcher.fetch
    iter_fetch = module._IterableDatasetFetcher.fetch

    @functools.wraps(map_fetch)
    def fetch_map(self, possibly_batched_index):  # noqa: ANN001, ANN202
        dataset = self.dataset
        if self.auto_collation:
            getitems = getattr(dataset, "__getitems__", None)
            if getitems:
                first = possibly_batched_index[0] if len(possibly_batched_index) else None
                t0 = _now()
                try:
                    data = getitems(possibly_batched_index)
                except BaseException as e:
                    _sample(t0, first, len(possibly_batched_index), type(e))
                    raise
                _sample(t0, first, len(possibly_batched_index), None)
            else:
                data = []
                for idx in possibly_batched_index:
                    t0 = _now()
                    try:
                        item = dataset[idx]
                    except BaseException as e:
                        _sample(t0, idx, 0, type(e))
                        raise
                    _SAMPLE(t0, "index", idx if type(idx) is int else _plain(idx))
                    data.append(item)
        else:
            t0 = _now()
            try:
                data = dataset[possibly_batched_index]
            except BaseException as e:
                _sample(t0, possibly_batched_index, 0, type(e))
                raise
            _SAMPLE(t0, "index", _plain(possibly_batched_index))
        return self.collate_fn(data)

    @functools.wraps(iter_fetch)
    def fetch_iterable(self, possibly_batched_index):  # noqa: ANN001, ANN202
        # Each item drawn from the dataset's iterator is a sample; torch's own steps otherwise.
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in possibly_batched_index:
                t0 = _now()
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
                except BaseException as e:
                    _sample(t0, None, 0, type(e))
                    raise
                _SAMPLE(t0)
            if len(data) == 0 or (self.drop_last and len(data) < len(possibly_batched_index)):
                raise StopIteration
        else:
            t0 = _now()
            try:
                data = next(self.dataset_iter)
            except StopIteration:
                raise
            except BaseException as e:
                _sample(t0, None, 0, type(e))
                raise
            _SAMPLE(t0)
        return self.collate_fn(data)

    module._MapDatasetFetcher.fetch = fetch_map
    module._IterableDatasetFetcher.fetch = fetch_iterable


def _sample(t0: int, index: object, count: int, error: type | None) -> None:
    args: dict = {}
    if index is not None:
        args["index"] = _plain(index)
    if count > 1:
        args["count"] = count
    if error is not None:
        args["exception"] = error.__name__
    _complete("sample", CAT, t0, _now() - t0, args)


def _plain(index: object) -> object:
    """An index as the trace can hold it: ints and strings as they are, others as text."""
    if type(index) is int or type(index) is str:
        return index
    try:
        return int(index)  # numpy and torch integers
    except (TypeError, ValueError):
        return str(index)[:200]


# -- worker processes -----------------------------------------------------------------------

def _hook_worker_loop(module) -> None:  # noqa: ANN001
    loop = module._worker_loop
    code = loop.__code__
    position = code.co_varnames[:code.co_argcount].index("worker_id")

    @functools.wraps(loop)
    def _worker_loop(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        worker_id = args[position] if len(args) > position else kwargs.get("worker_id", -1)
        _core.set_process_info(CAT, _parent_pid(), int(worker_id))
        return loop(*args, **kwargs)

    module._worker_loop = _worker_loop


def _parent_pid() -> int:
    mp = sys.modules.get("multiprocessing")
    parent = mp.parent_process() if mp is not None else None
    return parent.pid if parent is not None and parent.pid else os.getppid()
