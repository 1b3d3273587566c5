"""Events no one had to write: what a training job's Python libraries do, recorded by hooks.

Installed once per traced interpreter (see `startup.py`: under `iotrace run`, a bare
LD_PRELOAD of the library, IOTRACE_ENABLE=1 or iotrace.init()), unless IOTRACE_AUTO=0:

- torch.utils.data: `fetch` per batch and `epoch` per pass where a DataLoader is iterated,
  `sample` per item where the dataset is read, workers labelled role "dataloader";
- checkpoints: torch.save / torch.load;
- torch.distributed: each process's rank once init_process_group returns, and the ranks'
  clocks measured against rank 0's there (torch_dist.py);
- data libraries: numpy, h5py, PIL, pyarrow.parquet and pandas whole-file calls.

Each hook waits for its library to be imported by the program (../post_import.py), and the
module that holds it is imported only then: at start-up (every traced interpreter) nothing is
imported here but this table.
"""
from __future__ import annotations

import os

# (module the program imports, our module holding the hook, the hook: called with the module)
HOOKS = (
    ("torch.utils.data._utils.fetch", "torch_data", "_hook_fetchers"),
    ("torch.utils.data._utils.worker", "torch_data", "_hook_worker_loop"),
    ("torch.utils.data.dataloader", "torch_data", "_hook_loader"),
    ("torch.distributed.distributed_c10d", "torch_dist", "_hook"),
    ("torch.serialization", "file_calls", "_hook_torch"),
    ("numpy", "file_calls", "_hook_numpy"),
    ("h5py", "file_calls", "_hook_h5py"),
    ("PIL.Image", "file_calls", "_hook_pil"),
    ("PIL.ImageFile", "file_calls", "_hook_pil_decoding"),
    ("pyarrow.parquet", "file_calls", "_hook_parquet"),
    ("pandas", "file_calls", "_hook_pandas"),
)

_installed = False


def enabled() -> bool:
    return os.environ.get("IOTRACE_AUTO", "1").strip().lower() not in ("0", "false", "no", "off")


def install() -> None:
    global _installed
    if _installed or not enabled():
        return
    _installed = True
    from ..post_import import when_imported

    for name, holder, hook in HOOKS:
        when_imported(name, _deferred(holder, hook))


def _deferred(holder: str, hook: str):  # noqa: ANN202
    def run(module) -> None:  # noqa: ANN001
        getattr(__import__(f"{__name__}.{holder}", fromlist=[hook]), hook)(module)

    return run
