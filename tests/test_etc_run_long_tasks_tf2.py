"""ETC fine-tuning on the long tasks on the newest TensorFlow: etc_model.run_long_tasks without
the Estimator.

On TF >= 2.16 the job trains, evaluates (during training too) and predicts with
realformer_tf.tf2_training.Engine over the graph the Estimator runs on TF 2.15. Checked here (in
`bash run.sh test-latest`, the TF 2.15 side in a subprocess of $REALFORMER_TF215_PYTHON), with a
tiny ETC (dropout 0) from a lifted BERT:
- cloze with --eval_every_steps / --keep_best, hotpotqa (per-long-token outputs, the official
  answers) and the bert_windows baseline (supporting, hotpotqa, openkp with its visual-feature
  embeddings) on both engines: the same loss at every step, the same
  evaluations, predictions (in the records' order) and checkpoints (names with the Adam slots
  and global_step, values); a checkpoint of either engine resumes on the other;
- the flags only the Estimator implements are one-line errors.
On TF 2.15 every test here skips (tests/test_etc_run_long_tasks.py, test_etc_wikihop.py and
test_etc_hotpotqa.py cover the Estimator's job).
"""

import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool, tf215_python
from conftest import tool_env
from conftest import write_random_bert_checkpoint
from etc_model import create_hotpotqa
from etc_model import create_long_tasks
from etc_model import create_openkp
from etc_model import lift_bert_checkpoint as lift
from realformer_tf import estimator_utils
from realformer_tf import pretraining_data
from test_etc_long_tasks import _corpus, _settings
from test_tf2_training import ESTIMATOR_WITH_STEP_LOSSES, ROUNDING
from test_tf2_training import _max_difference, _state, _step_losses, _values
import test_etc_hotpotqa
import test_etc_openkp
import test_etc_run_long_tasks

VOCAB = test_etc_run_long_tasks.VOCAB
# Dropout off: the two engines' masks are drawn by different ops.
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
ETC_CONFIG = dict(test_etc_run_long_tasks.TINY_ETC_CONFIG, **NO_DROPOUT)
BERT_CONFIG = dict(TINY_BERT_CONFIG, **NO_DROPOUT)
SCRIPT = "etc_model.run_long_tasks"
# Result keys that differ between two runs of one job (timings, the output directory).
RUN_KEYS = ("checkpoint", "train_seconds", "eval_seconds")

newest_tf_only = pytest.mark.skipif(
    estimator_utils.has_estimator(),
    reason="TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")


def _lifted(root):
  """Writes etc_config.json, bert_config.json, a random BERT and its lifted ETC in root."""
  (root / "etc_config.json").write_text(json.dumps(ETC_CONFIG))
  (root / "bert_config.json").write_text(json.dumps(BERT_CONFIG))
  write_random_bert_checkpoint(str(root / "bert_config.json"), str(root / "bert.ckpt"))
  return lift.lift_bert_checkpoint(str(root / "bert.ckpt"), str(root / "lifted"),
                                   etc_config_file=str(root / "etc_config.json"),
                                   )["output_checkpoint"]


@pytest.fixture(scope="module")
def long_tasks(tmp_path_factory):
  """The cloze / supporting records of etc_model.create_long_tasks (test_etc_run_long_tasks'
  corpus and lengths) and the models."""
  root = tmp_path_factory.mktemp("long_tasks_tf2")
  _corpus(str(root / "corpus.txt"))
  tokenizer = pretraining_data.make_tokenizer(VOCAB, True)
  L, G, C = (test_etc_run_long_tasks.L, test_etc_run_long_tasks.G,  # pylint: disable=invalid-name
             test_etc_run_long_tasks.C)
  create_long_tasks.create_long_tasks(
      [str(root / "corpus.txt")], str(root / "data"), tokenizer,
      _settings(tokenizer, max_seq_length=L, max_global_seq_length=G, max_candidates=C),
      extra_settings={"vocab_file": VOCAB})
  return {"root": root, "init": _lifted(root), "flags": [
      "--data_dir=%s" % (root / "data"), "--max_seq_length=%d" % L,
      "--max_global_seq_length=%d" % G, "--max_candidates=%d" % C, "--train_batch_size=4",
      "--eval_batch_size=4", "--predict_batch_size=4"]}


@pytest.fixture(scope="module")
def hotpotqa_job(tmp_path_factory):
  """The HotpotQA fixtures' records (create_hotpotqa, in this process; test_etc_hotpotqa's
  lengths) and the models."""
  root = tmp_path_factory.mktemp("hotpotqa_tf2")
  L, G = test_etc_hotpotqa.L, test_etc_hotpotqa.G  # pylint: disable=invalid-name
  create_hotpotqa.create_hotpotqa(
      test_etc_hotpotqa._fixture_examples(),  # pylint: disable=protected-access
      str(root / "data"), pretraining_data.make_tokenizer(VOCAB, True), VOCAB,
      test_etc_hotpotqa.SETTINGS, extra_settings={"vocab_file": VOCAB})
  return {"root": root, "init": _lifted(root), "flags": [
      "--data_dir=%s" % (root / "data"), "--max_seq_length=%d" % L,
      "--max_global_seq_length=%d" % G, "--train_batch_size=2", "--eval_batch_size=2",
      "--predict_batch_size=2"]}


@pytest.fixture(scope="module")
def openkp_job(tmp_path_factory):
  """OpenKP records of test_etc_openkp's documents (visual features on one element of a dev
  document; create_openkp, in this process) and the models."""
  root = tmp_path_factory.mktemp("openkp_tf2")
  L, G = test_etc_openkp.L, test_etc_openkp.G  # pylint: disable=invalid-name
  write = test_etc_openkp._write_jsonl  # pylint: disable=protected-access
  document = test_etc_openkp._document  # pylint: disable=protected-access
  inputs = {"train": write(root / "train.jsonl", [document("t1"), document("t2", [["cat"]])]),
            "dev": write(root / "dev.jsonl", test_etc_openkp.DEV)}
  create_openkp.create_openkp(inputs, str(root / "data"),
                              pretraining_data.make_tokenizer(VOCAB, True),
                              {"max_seq_length": L, "max_global_seq_length": G,
                               "do_lower_case": True}, extra_settings={"vocab_file": VOCAB})
  return {"root": root, "init": _lifted(root), "flags": [
      "--data_dir=%s" % (root / "data"), "--max_seq_length=%d" % L,
      "--max_global_seq_length=%d" % G, "--train_batch_size=2", "--eval_batch_size=2",
      "--predict_batch_size=2"]}


def _args(job, task, out, extra=(), model="etc"):
  """run_long_tasks' command line (after the interpreter) for a job of `job`'s data."""
  root = job["root"]
  if model == "etc":
    model_flags = ["--etc_config_file=%s" % (root / "etc_config.json"),
                   "--init_checkpoint=%s" % job["init"]]
  else:
    model_flags = ["--model=bert_windows", "--bert_config_file=%s" % (root / "bert_config.json"),
                   "--init_checkpoint=%s" % (root / "bert.ckpt"), "--window_length=24",
                   "--window_stride=11"]
  return (["-m", SCRIPT, "--task=" + task, "--output_dir=%s" % out] + job["flags"] +
          model_flags + ["--learning_rate=1e-3", "--log_every_n_steps=1",
                         "--save_checkpoints_steps=2", "--keep_checkpoint_max=10"] + list(extra))


def _run_on_both(python215, est_args, tf2_args, log_dir):
  """Runs the job est_args on the Estimator (TF 2.15, every step's loss logged) while the job
  tf2_args runs on the TF2 engine (the two processes side by side: half the wall time).

  Returns:
    (the Estimator's log, the TF2 engine's log): their stderr.
  """
  log_path = log_dir / "estimator.log"
  with open(str(log_path), "w") as log:
    estimator = subprocess.Popen(
        [python215, "-c", ESTIMATOR_WITH_STEP_LOSSES, SCRIPT] + [str(a) for a in est_args[2:]],
        cwd=REPO_DIR, env=tool_env(), stdout=subprocess.DEVNULL, stderr=log)
    try:
      tf2_log = run_tool(None, tf2_args).stderr
    finally:
      returncode = estimator.wait(timeout=300)
  est_log = log_path.read_text()
  assert returncode == 0, est_log[-3000:]
  return est_log, tf2_log


def _both_engines(python215, args_for, tmp_path):
  """Runs one job on the Estimator and on the TF2 engine (_run_on_both).

  Returns:
    (estimator output dir, TF2 output dir, {"estimator": step losses, "tf2": step losses}).
  """
  est, tf2 = tmp_path / "estimator", tmp_path / "tf2"
  est_log, tf2_log = _run_on_both(python215, args_for(est), args_for(tf2), tmp_path)
  return est, tf2, {"estimator": _step_losses(est_log), "tf2": _step_losses(tf2_log)}


def _json(path):
  return json.loads(path.read_text())


def _jsonl(path):
  return [json.loads(line) for line in path.read_text().splitlines()]


def _assert_same_results(got, want, est_dir, tf2_dir):
  """Two result dicts of one job on the two engines: the same keys and values (numbers to
  float32 rounding); the checkpoint each names is its own directory's."""
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    if key in ("train_seconds", "eval_seconds"):
      continue
    if key == "checkpoint":
      assert os.path.relpath(got[key], str(tf2_dir)) == os.path.relpath(value, str(est_dir))
    elif isinstance(value, float):
      assert got[key] == pytest.approx(value, abs=ROUNDING), key
    else:
      assert got[key] == value, key


def _assert_close_lines(got, want, float_keys):
  """Prediction lines of the two engines: the same lines, `float_keys` to rounding."""
  assert len(got) == len(want)
  for got_line, want_line in zip(got, want):
    assert sorted(got_line) == sorted(want_line)
    for key, value in want_line.items():
      if key in float_keys:
        np.testing.assert_allclose(got_line[key], value, rtol=0, atol=ROUNDING)
      else:
        assert got_line[key] == value, key


def _record_labels(path):
  """The `label` feature of every record of a TFRecord file, in the file's order."""
  return [tf.train.Example.FromString(record).features.feature["label"].int64_list.value[0]
          for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]


@newest_tf_only
@pytest.mark.slow
def test_cloze_on_both_engines_with_evaluations_during_training_and_cross_engine_resume(
    long_tasks, tmp_path):
  python215 = tf215_python()
  est, tf2, losses = _both_engines(python215, lambda out: _args(long_tasks, "cloze", out, [
      "--do_train", "--do_eval", "--do_predict", "--num_train_steps=4", "--eval_every_steps=2",
      "--keep_best"]), tmp_path)
  assert len(losses["estimator"]) == len(losses["tf2"]) == 4, losses
  np.testing.assert_allclose(losses["tf2"], losses["estimator"], rtol=0, atol=ROUNDING)
  # The evaluations during training, the best checkpoint, the final dev and test results.
  est_history, tf2_history = _jsonl(est / "eval_history.jsonl"), _jsonl(tf2 / "eval_history.jsonl")
  assert [h["step"] for h in tf2_history] == [h["step"] for h in est_history] == [2, 4]
  for got, want in zip(tf2_history, est_history):
    assert got["score"] == pytest.approx(want["score"], abs=ROUNDING)
  results = _json(tf2 / "eval_results.json")
  _assert_same_results(results, _json(est / "eval_results.json"), est, tf2)
  assert results["scored_checkpoint"] == "best" and results["num_evaluations"] == 2
  assert os.path.dirname(results["checkpoint"]) == str(tf2 / "best")
  _assert_same_results(_json(tf2 / "test_results.json"), _json(est / "test_results.json"),
                       est, tf2)
  lines = _jsonl(tf2 / "test_predictions.jsonl")
  _assert_close_lines(lines, _jsonl(est / "test_predictions.jsonl"), ("probabilities",))
  # Each line is its record's: the engine's batches come back in the file's order.
  data = long_tasks["root"] / "data"
  assert [line["label"] for line in lines] == _record_labels(data / "cloze_test.tfrecord")
  assert _json(tf2 / "test_predictions.jsonl.checkpoint.json") == {
      "checkpoint": results["checkpoint"], "global_step": results["global_step"]}
  # The checkpoints: the same ones kept, with the same names (weights, the Adam slots of the
  # trained variables, global_step); the initial weights equal (the lifted BERT's and the
  # head's random ones), the trained ones to rounding.
  assert _state(tf2) == _state(est) == ["model.ckpt-0", "model.ckpt-2", "model.ckpt-4"]
  assert _max_difference(_values(tf2 / "model.ckpt-0"), _values(est / "model.ckpt-0")) == 0
  assert _max_difference(_values(tf2 / "model.ckpt-4"), _values(est / "model.ckpt-4")) <= ROUNDING
  # Each engine's checkpoint resumes on the other (a longer schedule: 6 steps); both end with
  # the same weights.
  resume = ["--do_train", "--num_train_steps=6"]
  est_log, tf2_log = _run_on_both(python215, _args(long_tasks, "cloze", tf2, resume),
                                  _args(long_tasks, "cloze", est, resume), tmp_path)
  assert "Restoring %s (step 4)" % (est / "model.ckpt-4") in tf2_log
  assert len(_step_losses(tf2_log)) == len(_step_losses(est_log)) == 2
  np.testing.assert_allclose(_step_losses(tf2_log), _step_losses(est_log), rtol=0,
                             atol=ROUNDING)
  assert _state(est)[-1] == _state(tf2)[-1] == "model.ckpt-6"
  assert _max_difference(_values(est / "model.ckpt-6"), _values(tf2 / "model.ckpt-6")) <= ROUNDING


@newest_tf_only
@pytest.mark.slow
def test_hotpotqa_on_both_engines_gives_the_same_losses_answers_and_checkpoints(
    hotpotqa_job, tmp_path):
  python215 = tf215_python()
  est, tf2, losses = _both_engines(python215, lambda out: _args(hotpotqa_job, "hotpotqa", out, [
      "--do_train", "--do_eval", "--do_predict", "--num_train_steps=2",
      "--sp_threshold=0.4"]), tmp_path)
  assert len(losses["estimator"]) == len(losses["tf2"]) == 2, losses
  np.testing.assert_allclose(losses["tf2"], losses["estimator"], rtol=0, atol=ROUNDING)
  # The official scores, the official submissions and the predictions file (batches cut to
  # their real lengths by the default --padding=longest, padded back for the lines).
  _assert_same_results(_json(tf2 / "eval_results.json"), _json(est / "eval_results.json"),
                       est, tf2)
  _assert_same_results(_json(tf2 / "test_results.json"), _json(est / "test_results.json"),
                       est, tf2)
  for name in ("dev_predictions.json", "test_predictions.json"):
    assert _json(tf2 / name) == _json(est / name), name
  lines = _jsonl(tf2 / "test_predictions.jsonl")
  assert [line["id"] for line in lines] == ["hp_test_0", "hp_test_1"]
  _assert_close_lines(lines, _jsonl(est / "test_predictions.jsonl"),
                      [k for k in lines[0] if k.endswith("probabilities")])
  assert _state(tf2) == _state(est) == ["model.ckpt-0", "model.ckpt-2"]
  assert _max_difference(_values(tf2 / "model.ckpt-0"), _values(est / "model.ckpt-0")) == 0
  assert _max_difference(_values(tf2 / "model.ckpt-2"), _values(est / "model.ckpt-2")) <= ROUNDING


def _bert_windows_on_both_engines(job, task, tmp_path):
  """Two training steps and the dev evaluation of --model=bert_windows on each engine: the same
  step losses and eval_results.json; returns the two output directories (Estimator, TF2)."""
  est, tf2, losses = _both_engines(tf215_python(), lambda out: _args(job, task, out, [
      "--do_train", "--do_eval", "--num_train_steps=2"], model="bert_windows"), tmp_path)
  assert len(losses["estimator"]) == len(losses["tf2"]) == 2, losses
  np.testing.assert_allclose(losses["tf2"], losses["estimator"], rtol=0, atol=ROUNDING)
  _assert_same_results(_json(tf2 / "eval_results.json"), _json(est / "eval_results.json"),
                       est, tf2)
  return est, tf2


@newest_tf_only
@pytest.mark.slow
def test_bert_windows_hotpotqa_on_both_engines_gives_the_same_answers(hotpotqa_job, tmp_path):
  """The BERT-window baseline's HotpotQA head (the ETC head over each global token's long
  tokens) on both engines: the same losses, official answers and weights."""
  est, tf2 = _bert_windows_on_both_engines(hotpotqa_job, "hotpotqa", tmp_path)
  assert _json(tf2 / "dev_predictions.json") == _json(est / "dev_predictions.json")
  assert _max_difference(_values(tf2 / "model.ckpt-2"), _values(est / "model.ckpt-2")) <= ROUNDING


@newest_tf_only
@pytest.mark.slow
def test_bert_windows_openkp_on_both_engines_gives_the_same_keyphrases(openkp_job, tmp_path):
  """The BERT-window baseline on OpenKP (the ETC head over the token states, the visual-feature
  embeddings added in every window) on both engines: the same losses, keyphrases and weights."""
  est, tf2 = _bert_windows_on_both_engines(openkp_job, "openkp", tmp_path)
  keyphrases = [[line["url"], line["KeyPhrases"]] for line in _jsonl(est / "dev_predictions.jsonl")]
  assert [[line["url"], line["KeyPhrases"]]
          for line in _jsonl(tf2 / "dev_predictions.jsonl")] == keyphrases
  values = _values(tf2 / "model.ckpt-2")
  assert "cls/long_tasks_bert/openkp/font_id_emb_lookup/embedding_table/adam_m" in values
  assert _max_difference(values, _values(est / "model.ckpt-2")) <= ROUNDING


@newest_tf_only
@pytest.mark.slow
def test_bert_windows_on_both_engines_leaves_the_pooler_untrained_as_the_estimator(
    long_tasks, tmp_path):
  est, tf2 = _bert_windows_on_both_engines(long_tasks, "supporting", tmp_path)
  # The pooler gets no gradient: loaded from the BERT checkpoint, no Adam slots, unchanged.
  values = _values(tf2 / "model.ckpt-2")
  assert "bert/pooler/dense/kernel" in values and "bert/pooler/dense/kernel/adam_m" not in values
  np.testing.assert_array_equal(values["bert/pooler/dense/kernel"], tf.train.load_checkpoint(
      str(long_tasks["root"] / "bert.ckpt")).get_tensor("bert/pooler/dense/kernel"))
  assert _max_difference(values, _values(est / "model.ckpt-2")) <= ROUNDING


@newest_tf_only
def test_estimator_only_flags_are_one_line_errors_on_the_tf2_engine(long_tasks, tmp_path):
  out = tmp_path / "out"
  result = run_tool(None, _args(long_tasks, "cloze", out,
                                ["--do_train", "--iterations_per_loop=10"]), expect_rc=2)
  assert last_error_line(result).startswith(
      "error: --iterations_per_loop=10: implemented by the Estimator only"), result.stderr[-2000:]
  assert "-m %s on TF %s" % (SCRIPT, tf.__version__) in last_error_line(result)
  assert not out.exists()
