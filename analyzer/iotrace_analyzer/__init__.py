"""iotrace-analyze: summaries and Parquet from iotrace (and DFTracer) traces.

It stands on the format layer (iotrace_format: files, frames, damage, blocks decoded to
columns) and needs numpy and pyarrow; dask.distributed for clusters (--scheduler). `export/`
is `iotrace export`, plugged into the `iotrace` command.
"""
