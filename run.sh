#!/usr/bin/env bash
# Entry point for a fresh machine: sets up .venv (pinned stack) if needed, then runs a job.
#   bash run.sh demo [flags]   end-to-end demo on the data shipped in data/ (run_demo.py)
#   bash run.sh test [args]    the whole test suite: TF 2.15, then the newest-TF subset (with args:
#                              pytest args for the TF 2.15 run only; -n 0: no worker processes)
#   bash run.sh test-latest    the tests of the library and serving path on the newest TF
#   bash run.sh bench NAME     a benchmark in bench/ (e.g. bench_training_step)
#   bash run.sh python ...     python inside the project's environment (TF 2.15, every script)
#   bash run.sh python-latest ...  python with the newest TF (library, tools without Estimator)
set -euo pipefail
cd "$(dirname "$0")"

PYTHON_BIN="${PYTHON_BIN:-python3.11}"
command -v "$PYTHON_BIN" >/dev/null 2>&1 || PYTHON_BIN=python3

# setup_env [VENV REQUIREMENTS]: the TF 2.15 environment (.venv, requirements.txt) by default.
setup_env() {
  local venv="${1:-.venv}" requirements="${2:-requirements.txt}"
  local stamp="$venv/.requirements.sha"
  local want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ ! -x "$venv/bin/python" ]; then
    echo "[setup] creating $venv with $($PYTHON_BIN --version 2>&1)" >&2
    "$PYTHON_BIN" -m venv "$venv"
  fi
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "[setup] installing $requirements into $venv (first run only)" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" >&2
    echo "$want" > "$stamp"
  fi
  # The repository root on the environment's path: `python translation/...` style runs and
  # imports from any directory find the top-level modules.
  local site
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ "$(cat "$site/realformer_repo.pth" 2>/dev/null)" = "$PWD" ] || echo "$PWD" > "$site/realformer_repo.pth"
  [ "$venv" = .venv ] || return 0
  # TensorFlow 2.15 turns oneDNN on only for AVX-512 CPUs; on AVX2 CPUs it makes training ~1.4x
  # faster (bench/bench_training_step.py). Default it on for every python of this .venv.
  if [ ! -f "$site/realformer_onednn.pth" ]; then
    echo 'import os; os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")' > "$site/realformer_onednn.pth"
  fi
}

# Test processes (pytest-xdist): the tests spend much of their time starting TensorFlow and
# subprocesses, so two workers on 2 cores take about half the time of one (README "Tests"). At most 4
# (each worker's TensorFlow jobs want memory); REALFORMER_TEST_WORKERS=0 runs them in this process.
TEST_WORKERS="${REALFORMER_TEST_WORKERS:-$(n=$(nproc 2>/dev/null || echo 2); echo $(( n < 4 ? n : 4 )))}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export TF_ENABLE_ONEDNN_OPTS="${TF_ENABLE_ONEDNN_OPTS:-1}"
# The newest-TF environment and the tests that must pass there (the library, the tools without a
# training loop, SavedModels exported on TF 2.15): README "Which TensorFlow".
LATEST_VENV=.venv-tf-latest
LATEST_TESTS=(tests/test_tf_versions.py tests/test_modeling.py tests/test_tokenization.py
              tests/test_optimization.py tests/test_convert_hf_checkpoint.py
              tests/test_checkpoint_utils.py tests/test_average_checkpoints.py
              tests/test_slim_checkpoint.py tests/test_etc_modeling.py tests/test_etc_inputs.py
              tests/translation/test_nmt_modeling.py tests/translation/test_beam_search.py
              tests/translation/test_translation_metrics.py
              tests/translation/test_export_translation.py)
cmd="${1:-help}"
shift || true
case "$cmd" in
  demo)
    setup_env
    exec .venv/bin/python run_demo.py "$@" ;;
  test)
    setup_env
    if [ $# -gt 0 ]; then
      exec .venv/bin/python -m pytest -q -p no:cacheprovider -n "$TEST_WORKERS" tests "$@"
    fi
    .venv/bin/python -m pytest -q -p no:cacheprovider -n "$TEST_WORKERS" --durations=25 tests
    exec bash "$0" test-latest ;;
  test-latest)
    setup_env
    setup_env "$LATEST_VENV" requirements-tf-latest.txt
    echo "[test-latest] $("$LATEST_VENV/bin/python" -c 'import tensorflow as tf; print("TensorFlow", tf.__version__)' 2>/dev/null): ${LATEST_TESTS[*]}" >&2
    REALFORMER_TF215_PYTHON="$PWD/.venv/bin/python" \
      exec "$LATEST_VENV/bin/python" -m pytest -q -p no:cacheprovider -n "$TEST_WORKERS" "${LATEST_TESTS[@]}" "$@" ;;
  python-latest)
    setup_env "$LATEST_VENV" requirements-tf-latest.txt
    exec "$LATEST_VENV/bin/python" "$@" ;;
  bench)
    setup_env
    name="${1:?usage: bash run.sh bench NAME [flags]}"; shift
    exec .venv/bin/python "bench/${name%.py}.py" "$@" ;;
  python)
    setup_env
    exec .venv/bin/python "$@" ;;
  *)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    [ "$cmd" = help ] || exit 2 ;;
esac
