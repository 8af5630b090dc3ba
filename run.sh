#!/usr/bin/env bash
# Entry point for a fresh machine: sets up .venv (pinned stack) if needed, then runs a job.
#   bash run.sh demo [flags]   end-to-end demo on the data shipped in data/ (run_demo.py)
#   bash run.sh test [args]    the whole test suite: TF 2.15, then the newest-TF subset (with args:
#                              pytest args for the TF 2.15 run only; -n 0: no worker processes)
#   bash run.sh test-latest    the tests of the library and serving path on the newest TF
#   bash run.sh bench NAME     a benchmark in bench/ (e.g. bench_training_step)
#   bash run.sh python ...     python inside the project's environment (TF 2.15, every command)
#   bash run.sh python-latest ...  python with the newest TF (library, tools without Estimator)
# Paths you pass are taken from where you stand; a command named by its file (run_classifier.py)
# is found in this repository when it is not in your directory. Or activate the environment:
# `source .venv/bin/activate`, then `python run_classifier.py ...` or `python -m etc_model.TOOL`.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

PYTHON_BIN="${PYTHON_BIN:-python3.11}"
command -v "$PYTHON_BIN" >/dev/null 2>&1 || PYTHON_BIN=python3

# setup_env [VENV REQUIREMENTS]: the TF 2.15 environment (.venv, requirements.txt) by default.
# Both are names inside the repository.
setup_env() {
  local venv="$REPO_DIR/${1:-.venv}" requirements="$REPO_DIR/${2:-requirements.txt}"
  local stamp="$venv/.requirements.sha"
  local want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ ! -x "$venv/bin/python" ]; then
    echo "[setup] creating ${venv#"$REPO_DIR"/} with $($PYTHON_BIN --version 2>&1)" >&2
    "$PYTHON_BIN" -m venv "$venv"
  fi
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "[setup] installing ${requirements#"$REPO_DIR"/} into ${venv#"$REPO_DIR"/} (first run only)" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" >&2
    echo "$want" > "$stamp"
  fi
  # The repository root on the environment's path: `python -m etc_model.TOOL` and imports of
  # the repository's modules work from any directory.
  local site
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  [ "$(cat "$site/realformer_repo.pth" 2>/dev/null)" = "$REPO_DIR" ] || echo "$REPO_DIR" > "$site/realformer_repo.pth"
  [ "$venv" = "$REPO_DIR/.venv" ] || return 0
  # TensorFlow 2.15 turns oneDNN on only for AVX-512 CPUs; on AVX2 CPUs it makes training ~1.4x
  # faster (bench/bench_training_step.py). Default it on for every python of this .venv.
  if [ ! -f "$site/realformer_onednn.pth" ]; then
    echo 'import os; os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")' > "$site/realformer_onednn.pth"
  fi
}

# python_args ARGS...: ARGS, with a first argument naming a .py file that is not in the current
# directory but is in the repository (run_classifier.py, translation/run_translation.py) replaced
# by the repository's file. Every other path stays relative to where the user stands.
python_args() {
  if [ $# -gt 0 ] && [[ "$1" == *.py ]] && [ ! -e "$1" ] && [ -f "$REPO_DIR/$1" ]; then
    local script="$REPO_DIR/$1"
    shift
    set -- "$script" "$@"
  fi
  PYTHON_ARGS=("$@")
}

usage() {
  sed -n '2,/^set -euo/p' "$REPO_DIR/run.sh" | sed '$d' | sed 's/^# \{0,1\}//'
}

# Test processes (pytest-xdist): the tests spend much of their time starting TensorFlow and
# subprocesses, so two workers on 2 cores take about half the time of one (docs/testing.md). At
# most 4 (each worker's TensorFlow jobs want memory); REALFORMER_TEST_WORKERS=0 runs them in this
# process.
TEST_WORKERS="${REALFORMER_TEST_WORKERS:-$(n=$(nproc 2>/dev/null || echo 2); echo $(( n < 4 ? n : 4 )))}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export TF_ENABLE_ONEDNN_OPTS="${TF_ENABLE_ONEDNN_OPTS:-1}"
# The newest-TF environment and the tests that must pass there (the library, the tools without a
# training loop, run_classifier's tf.distribute engine, SavedModels exported on TF 2.15):
# docs/compatibility.md.
LATEST_VENV=.venv-tf-latest
LATEST_TESTS=(tests/test_tf_versions.py tests/test_tf2_training.py tests/test_etc_pretraining_tf2.py
              tests/test_run_squad_tf2.py tests/test_run_ner_tf2.py tests/test_tf2_multi_worker.py
              tests/test_tf2_precision.py tests/test_tf2_distribution.py tests/test_paper_drivers_tf2.py
              tests/translation/test_run_translation_tf2.py tests/test_etc_run_long_tasks_tf2.py
              tests/test_modeling.py
              tests/test_tokenization.py tests/test_optimization.py
              tests/test_convert_hf_checkpoint.py
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
    exec "$REPO_DIR/.venv/bin/python" "$REPO_DIR/run_demo.py" "$@" ;;
  test)
    setup_env
    cd "$REPO_DIR"
    if [ $# -gt 0 ]; then
      exec .venv/bin/python -m pytest -q -p no:cacheprovider -n "$TEST_WORKERS" tests "$@"
    fi
    # Both environments before any test: an install that fails (no network, a full disk) fails
    # in the first minute, not after the TF 2.15 run.
    setup_env "$LATEST_VENV" requirements-tf-latest.txt
    .venv/bin/python -m pytest -q -p no:cacheprovider -n "$TEST_WORKERS" --durations=25 tests
    exec bash "$REPO_DIR/run.sh" test-latest ;;
  test-latest)
    setup_env
    setup_env "$LATEST_VENV" requirements-tf-latest.txt
    cd "$REPO_DIR"
    echo "[test-latest] $("$LATEST_VENV/bin/python" -c 'import tensorflow as tf; print("TensorFlow", tf.__version__)' 2>/dev/null): ${LATEST_TESTS[*]}" >&2
    REALFORMER_TF215_PYTHON="$REPO_DIR/.venv/bin/python" \
      exec "$LATEST_VENV/bin/python" -m pytest -q -p no:cacheprovider -n "$TEST_WORKERS" --durations=15 \
      "${LATEST_TESTS[@]}" "$@" ;;
  python-latest)
    setup_env "$LATEST_VENV" requirements-tf-latest.txt
    python_args "$@"
    exec "$REPO_DIR/$LATEST_VENV/bin/python" "${PYTHON_ARGS[@]}" ;;
  bench)
    setup_env
    name="${1:?usage: bash run.sh bench NAME [flags]}"; shift
    exec "$REPO_DIR/.venv/bin/python" "$REPO_DIR/bench/${name%.py}.py" "$@" ;;
  python)
    setup_env
    python_args "$@"
    exec "$REPO_DIR/.venv/bin/python" "${PYTHON_ARGS[@]}" ;;
  help|-h|--help)
    usage ;;
  *)
    echo "run.sh: unknown command '$cmd'" >&2
    usage >&2
    exit 2 ;;
esac
