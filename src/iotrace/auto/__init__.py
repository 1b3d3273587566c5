"""Events no one had to write: what a training job's Python libraries do, recorded by hooks.

Installed once per traced interpreter (see `startup.py`: under `iotrace run`, a bare
LD_PRELOAD of the library, IOTRACE_ENABLE=1 or iotrace.init()), unless IOTRACE_AUTO=0:

- torch.utils.data: `fetch` per batch and `epoch` per pass where a DataLoader is iterated,
  `sample` per item where the dataset is read, workers labelled role "dataloader";
- checkpoints: torch.save / torch.load;
- torch.distributed: each process's rank once init_process_group returns, and the ranks'
  clocks measured against rank 0's there (torch_dist.py);
- data libraries: numpy, h5py, PIL, pyarrow.parquet and pandas whole-file calls.

Each hook waits for its library to be imported by the program (../post_import.py): nothing is
imported here but the standard library.
"""
from __future__ import annotations

import os

_installed = False


def enabled() -> bool:
    return os.environ.get("IOTRACE_AUTO", "1").strip().lower() not in ("0", "false", "no", "off")


def install() -> None:
    global _installed
    if _installed or not enabled():
        return
    _installed = True
    from . import file_calls, torch_data, torch_dist
    from ..post_import import when_imported

    torch_data.install(when_imported)
    torch_dist.install(when_imported)
    file_calls.install(when_imported)
