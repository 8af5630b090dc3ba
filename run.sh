#!/usr/bin/env bash
# Entry point for a fresh machine: sets up .venv (pinned stack) if needed, then runs a job.
#   bash run.sh demo [flags]   end-to-end demo on the data shipped in data/ (run_demo.py)
#   bash run.sh test [args]    the whole test suite (pytest args may follow)
#   bash run.sh bench NAME     a benchmark in bench/ (e.g. bench_training_step)
#   bash run.sh python ...     python inside the project's environment
set -euo pipefail
cd "$(dirname "$0")"

PYTHON_BIN="${PYTHON_BIN:-python3.11}"
command -v "$PYTHON_BIN" >/dev/null 2>&1 || PYTHON_BIN=python3

setup_env() {
  local stamp=.venv/.requirements.sha
  local want
  want=$(sha256sum requirements.txt | cut -d' ' -f1)
  if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv with $($PYTHON_BIN --version 2>&1)" >&2
    "$PYTHON_BIN" -m venv .venv
  fi
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "[setup] installing requirements.txt into .venv (first run only)" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt >&2
    echo "$want" > "$stamp"
  fi
  # TensorFlow 2.15 turns oneDNN on only for AVX-512 CPUs; on AVX2 CPUs it makes training ~1.4x
  # faster (bench/bench_training_step.py). Default it on for every python of this .venv.
  local site
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [ ! -f "$site/realformer_onednn.pth" ]; then
    echo 'import os; os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")' > "$site/realformer_onednn.pth"
  fi
}

export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export TF_ENABLE_ONEDNN_OPTS="${TF_ENABLE_ONEDNN_OPTS:-1}"
cmd="${1:-help}"
shift || true
case "$cmd" in
  demo)
    setup_env
    exec .venv/bin/python run_demo.py "$@" ;;
  test)
    setup_env
    exec .venv/bin/python -m pytest -q -p no:cacheprovider tests "$@" ;;
  bench)
    setup_env
    name="${1:?usage: bash run.sh bench NAME [flags]}"; shift
    exec .venv/bin/python "bench/${name%.py}.py" "$@" ;;
  python)
    setup_env
    exec .venv/bin/python "$@" ;;
  *)
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
    [ "$cmd" = help ] || exit 2 ;;
esac
