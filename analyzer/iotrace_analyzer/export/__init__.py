"""`iotrace export`: a job's per-process traces as one Perfetto trace.

labels.py   the process tree: labels, sort order, which flows to draw
filters.py  --pid/--rank/--cat/--name/--from/--to/--min-dur/--max-events, on columns
flows.py    where the flows (fork and spawn arrows) start and end, on columns
merge.py    the passes over the input files, in worker processes
json_out.py Chrome JSON output (.json.gz in one gzip member, via gzjoin.py)
cli.py      argparse wiring of `iotrace export`

The events are read as column batches (iotrace_format.reader.iter_batches) and written by
the compiled writers of `iotrace_analyzer._export` (csrc/export/: Perfetto protobuf and
Chrome JSON). Nothing is imported here: `iotrace --help` must stay cheap.
"""
