#!/usr/bin/env bash
# The main job end to end: set up, trace the example training pipeline (Python + POSIX events,
# 3 processes), analyze the traces, and export one Perfetto trace of the whole job.
#   bash examples/demo.sh [OUT]        (default OUT: ./iotrace-demo)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-iotrace-demo}" && cd "${1:-iotrace-demo}" && pwd)"
bash "$here/../.ci/setup"
rm -rf "$out/traces" "$out/analysis" "$out/torch-traces" "$out/torch-analysis"

echo "== 1. trace: iotrace run -- python examples/train_pipeline.py"
iotrace run -o "$out/traces" -- python3 "$here/train_pipeline.py" --data "$out/data" --layout small
ls -l "$out/traces"
echo "-- the first events of one trace, as JSON lines (iotrace cat):"
traces=("$out"/traces/*.iotc.zst)
iotrace cat "${traces[0]}" | sed -n '5,8p' | cut -c1-160

echo "== 1b. trace a PyTorch script with no annotation: iotrace run -- python examples/train_torch.py"
if python3 -c "import torch" 2>/dev/null; then
  iotrace run -o "$out/torch-traces" -- python3 "$here/train_torch.py" --data "$out/torch-data"
else
  echo "(torch is not installed: skipped)"
fi

echo "== 2. analyze: iotrace-analyze"
iotrace-analyze "$out/traces" -o "$out/analysis"
if [ -d "$out/torch-traces" ]; then
  echo "-- the PyTorch script's training loop, found without annotations:"
  iotrace-analyze "$out/torch-traces" -o "$out/torch-analysis" | sed -n '/^Training loop/,/^Access pattern/p' | sed '$d'
fi

echo "== 3. export for Perfetto: iotrace export"
iotrace export "$out/traces" -o "$out/job.pftrace"
iotrace export "$out/traces" -o "$out/job.json.gz"
ls -l "$out/job.pftrace" "$out/job.json.gz"

cat <<TXT

Done. In $out:
  traces/          one compressed Chrome-trace file per process (iotrace cat FILE prints its JSON)
  analysis/        report.html (open it in a browser: findings, plots, tables; works offline),
                   summary.json, Parquet events (DuckDB/pandas/Spark)
  torch-traces/, torch-analysis/   the unannotated PyTorch script: epochs, batches, samples,
                   checkpoints recorded by iotrace's own hooks
  job.pftrace      the whole job for Perfetto: open it at https://ui.perfetto.dev
  job.json.gz      the same as JSON (Perfetto, chrome://tracing)
To open it from this machine:  iotrace view $out/job.pftrace
TXT
