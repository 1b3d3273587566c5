#!/usr/bin/env bash
# The main job end to end: set up, trace the example training pipeline (Python + POSIX events,
# 3 processes), analyze the traces, and export one Perfetto trace of the whole job.
#   bash examples/demo.sh [OUT]        (default OUT: ./iotrace-demo)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-iotrace-demo}" && cd "${1:-iotrace-demo}" && pwd)"
bash "$here/../.ci/setup"
rm -rf "$out/traces" "$out/analysis"

echo "== 1. trace: iotrace run -- python examples/train_pipeline.py"
iotrace run -o "$out/traces" -- python3 "$here/train_pipeline.py" --data "$out/data" --layout small
ls -l "$out/traces"
echo "-- the first events of one trace, as JSON lines (iotrace cat):"
traces=("$out"/traces/*.iotc.zst)
iotrace cat "${traces[0]}" | sed -n '5,8p' | cut -c1-160

echo "== 2. analyze: iotrace-analyze"
iotrace-analyze "$out/traces" -o "$out/analysis"

echo "== 3. export for Perfetto: iotrace export"
iotrace export "$out/traces" -o "$out/job.pftrace"
iotrace export "$out/traces" -o "$out/job.json.gz"
ls -l "$out/job.pftrace" "$out/job.json.gz"

cat <<TXT

Done. In $out:
  traces/          one compressed Chrome-trace file per process (iotrace cat FILE prints its JSON)
  analysis/        summary.json, timeline.html, Parquet events (DuckDB/pandas/Spark)
  job.pftrace      the whole job for Perfetto: open it at https://ui.perfetto.dev
  job.json.gz      the same as JSON (Perfetto, chrome://tracing)
To open it from this machine:  iotrace view $out/job.pftrace
TXT
