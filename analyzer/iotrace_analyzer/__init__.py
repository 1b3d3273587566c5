"""iotrace-analyze: summaries and Parquet from iotrace (and DFTracer) traces.

`reader` (file discovery, damage-tolerant decoding) imports only zstandard and the standard
library; the rest needs numpy, pyarrow, numba and, for clusters, dask.distributed.
"""
