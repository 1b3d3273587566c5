"""`iotrace export`: a job's per-process traces as one Perfetto trace.

labels.py   the process tree: labels, sort order, flows
filters.py  --pid/--rank/--cat/--name/--from/--to/--min-dur/--max-events
merge.py    the passes over the input files, in 2 worker processes
json_out.py Chrome JSON output (.json.gz in one gzip member, via gzjoin.py)
proto_out.py Perfetto protobuf output (.pftrace, TrackEvent)
cli.py      argparse wiring of `iotrace export` and `iotrace view`

Nothing is imported here: `import iotrace` must stay cheap.
"""
