"""Fault injection: jobs killed (SIGINT, SIGTERM, SIGKILL) at several points and rerun end
exactly where an uninterrupted run ends, and no partial file is ever visible under an output
name.

Each case runs the uninterrupted job once as the reference, then starts the same command,
kills it at a point (after a given checkpoint / file appears) with one signal, checks the exit
status and what is visible, reruns the same command and kills the rerun at a later point with
another signal, checks again, reruns it to the end and compares the final outputs with the
reference: the same final step and weights digest (a resume that is not exact, at either kill,
changes the weights every later step starts from).
"""

import glob
import json
import os
import signal
import time

import numpy as np
import pytest

from conftest import REPO_DIR, TINY_BERT_CONFIG, kill_when, run_tool

pytestmark = pytest.mark.slow

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
SEQ = 32
PREDS = 5
# Exit statuses: 128 + signal for a handled SIGINT / SIGTERM, -9 for SIGKILL (as Popen says).
EXPECTED_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -9}


def _checkpoint_step(model_dir):
  """Step of the latest checkpoint named in model_dir/checkpoint (0 when none)."""
  path = os.path.join(str(model_dir), "checkpoint")
  try:
    with open(path) as f:
      first = f.readline()
  except OSError:
    return 0
  if "ckpt-" not in first:
    return 0
  return int(first.strip().rstrip('"').rsplit("-", 1)[1])


def _corpus(path, num_docs=80, seed=0):
  rng = np.random.RandomState(seed)
  words = ("the king said that a whale was seen near the ship and the captain laughed at "
           "her brother while the sea rose over old stone walls").split()
  lines = []
  for _ in range(num_docs):
    for _ in range(rng.randint(2, 8)):
      lines.append(" ".join(rng.choice(words, rng.randint(4, 14))) + ".")
    lines.append("")
  path.write_text("\n".join(lines))
  return path


@pytest.fixture(scope="module")
def pretraining_data(tmp_path_factory):
  root = tmp_path_factory.mktemp("fi_pretrain")
  _corpus(root / "text.txt")
  run_tool("create_pretraining_data.py", [
      "--input_file=%s" % (root / "text.txt"), "--output_file=%s" % (root / "data.tfrecord"),
      "--vocab_file=%s" % VOCAB, "--max_seq_length=%d" % SEQ,
      "--max_predictions_per_seq=%d" % PREDS, "--dupe_factor=2", "--num_workers=1"])
  (root / "bert_config.json").write_text(json.dumps(dict(TINY_BERT_CONFIG,
                                                         residual_attention="sum")))
  return root


def _pretraining_args(data, output_dir, steps=30):
  return ["--input_file=%s" % (data / "data.tfrecord"), "--output_dir=%s" % output_dir,
          "--bert_config_file=%s" % (data / "bert_config.json"), "--max_seq_length=%d" % SEQ,
          "--max_predictions_per_seq=%d" % PREDS, "--train_batch_size=8",
          "--num_train_steps=%d" % steps, "--num_warmup_steps=2", "--learning_rate=1e-3",
          "--save_checkpoints_steps=10", "--do_train", "--do_eval", "--max_eval_steps=2"]


def test_run_pretraining_killed_and_rerun_ends_like_an_uninterrupted_run(pretraining_data,
                                                                        tmp_path):
  reference = tmp_path / "reference"
  run_tool("run_pretraining.py", _pretraining_args(pretraining_data, reference))
  want = json.loads((reference / "train_summary_local.json").read_text())
  assert want["global_step"] == 30 and want["weights_digest"]
  # Kill points: right after a saved checkpoint (SIGKILL), then the rerun between two saved
  # checkpoints (handled signal); the last rerun ends like the reference only if both resumes
  # were exact. SIGINT is covered by the run_classifier case (the same StopOnSignalHook /
  # resume code).
  out = tmp_path / "killed"
  args = _pretraining_args(pretraining_data, out)
  stopped_at = None
  for sig, after_step in [(signal.SIGKILL, 10), (signal.SIGTERM, 12)]:
    status, err = kill_when("run_pretraining.py", args,
                             lambda: _checkpoint_step(out) >= after_step, sig)
    assert status == EXPECTED_STATUS[sig], (sig, status, err[-2000:])
    if stopped_at is not None:
      assert "Resuming from step %d of 30" % stopped_at in err, sig
    # A stopped job never looks finished.
    assert not (out / "eval_results.json").exists(), sig
    assert not (out / "train_summary_local.json").exists(), sig
    stopped_at = _checkpoint_step(out)
    assert stopped_at < 30
  rerun = run_tool("run_pretraining.py", args)
  assert "Resuming from step %d of 30" % stopped_at in rerun.stderr
  got = json.loads((out / "train_summary_local.json").read_text())
  assert got["global_step"] == 30
  assert got["weights_digest"] == want["weights_digest"]
  assert (out / "eval_results.json").exists()


def _checkpoint_digest(model_dir):
  """Hash of every variable (weights, Adam slots, step) of the latest checkpoint in model_dir."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import run_pretraining  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(model_dir)))
  names = sorted(reader.get_variable_to_shape_map())
  return run_pretraining.weights_digest({n: reader.get_tensor(n) for n in names})


@pytest.fixture(scope="module")
def classifier_setup(tmp_path_factory):
  """120 training and 40 dev sentences of the shipped SST-2 slice, and a random tiny BERT."""
  from conftest import write_random_bert_checkpoint  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("fi_classifier")
  data = root / "glue" / "SST-2"
  data.mkdir(parents=True)
  with open(os.path.join(REPO_DIR, "data", "sst2_slice", "train.tsv")) as f:
    lines = f.read().splitlines()
  (data / "train.tsv").write_text("\n".join(lines[:121]) + "\n")
  with open(os.path.join(REPO_DIR, "data", "sst2_slice", "dev.tsv")) as f:
    lines = f.read().splitlines()
  (data / "dev.tsv").write_text("\n".join(lines[:41]) + "\n")
  config = root / "bert_config.json"
  config.write_text(json.dumps(dict(TINY_BERT_CONFIG, residual_attention="mean")))
  checkpoint = write_random_bert_checkpoint(str(config), str(root / "init" / "bert_model.ckpt"))
  return data, config, checkpoint


def _classifier_args(setup, output_dir):
  data, config, checkpoint = setup
  return ["--task_name=sst-2", "--data_dir=%s" % data, "--vocab_file=%s" % VOCAB,
          "--bert_config_file=%s" % config, "--init_checkpoint=%s" % checkpoint,
          "--output_dir=%s" % output_dir, "--max_seq_length=32", "--train_batch_size=4",
          "--eval_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=1",
          "--save_checkpoints_steps=10", "--do_train", "--do_eval",
          # Length-grouped batches (their windows sorted, their order seeded) resume exactly
          # too; the sweep case below resumes the plain shuffled stream.
          "--group_by_length"]


def test_run_classifier_killed_and_rerun_ends_like_an_uninterrupted_run(classifier_setup,
                                                                        tmp_path):
  reference = tmp_path / "reference"
  first = run_tool("run_classifier.py", _classifier_args(classifier_setup, reference))
  assert "Padding: training longest (--group_by_length)" in first.stderr
  want = json.loads((reference / "eval_results.json").read_text())
  assert want["global_step"] == want["num_train_steps"] == 30
  want_digest = _checkpoint_digest(reference)
  # SIGINT after the first checkpoint, then SIGKILL of the rerun after a later one: the last
  # rerun ends like the reference only if both resumes were exact. SIGTERM is covered by the
  # run_pretraining and sweep cases (the same StopOnSignalHook).
  out = tmp_path / "killed"
  args = _classifier_args(classifier_setup, out)
  for sig, after_step in [(signal.SIGINT, 1), (signal.SIGKILL, 20)]:
    status, err = kill_when("run_classifier.py", args,
                             lambda: _checkpoint_step(out) >= after_step, sig)
    assert status == EXPECTED_STATUS[sig], (sig, status, err[-2000:])
    assert not (out / "eval_results.json").exists(), sig
    assert _checkpoint_step(out) < 30
  run_tool("run_classifier.py", args)
  got = json.loads((out / "eval_results.json").read_text())
  assert got["global_step"] == 30
  assert _checkpoint_digest(out) == want_digest
  for key in ("eval_accuracy", "eval_loss"):
    assert got[key] == want[key], key


def _sweep_args(setup, output_dir):
  data, config, checkpoint = setup
  return ["--tasks=sst-2", "--glue_dir=%s" % data.parent, "--init_checkpoint=%s" % checkpoint,
          "--bert_config_file=%s" % config, "--vocab_file=%s" % VOCAB,
          "--output_dir=%s" % output_dir, "--learning_rates=1e-3", "--epochs=1",
          "--batch_sizes=4", "--seeds=1,2", "--max_seq_length=32",
          "--extra_flags=--eval_batch_size=8 --save_checkpoints_steps=10"]


def _sweep_results(output_dir):
  results = {}
  for path in sorted(glob.glob(str(output_dir / "sst-2" / "*" / "seed*" / "eval_results.json"))):
    with open(path) as f:
      got = json.load(f)
    results[os.path.relpath(path, str(output_dir))] = (got["global_step"], got["eval_accuracy"],
                                                       got["eval_loss"])
  return results


def test_sweep_killed_and_rerun_ends_like_an_uninterrupted_sweep(classifier_setup, tmp_path):
  reference = tmp_path / "reference"
  run_tool("paper/sweep.py", _sweep_args(classifier_setup, reference), timeout=600)
  want = _sweep_results(reference)
  assert len(want) == 2 and all(v[0] == 30 for v in want.values())
  want_table = (reference / "results.csv").read_text()
  run_dir = os.path.join("sst-2", "bs4_lr0.001_ep1")
  # SIGKILL during the first run (the child is orphaned and the rerun must stop it), then
  # SIGTERM of the rerun during the second run (the first run's results must be kept); the last
  # rerun ends like the reference only if both resumes were exact.
  out = tmp_path / "killed"
  for sig, seed, after_step in [(signal.SIGKILL, "seed1", 20), (signal.SIGTERM, "seed2", 1)]:
    target = out / run_dir / seed
    status, err = kill_when("paper/sweep.py", _sweep_args(classifier_setup, out),
                             lambda: _checkpoint_step(target) >= after_step, sig)
    assert status == EXPECTED_STATUS[sig], (sig, status, err[-2000:])
    assert not (out / "results.csv").exists()
    assert not (target / "eval_results.json").exists()
  run_tool("paper/sweep.py", _sweep_args(classifier_setup, out), timeout=600)
  assert _sweep_results(out) == want
  assert (out / "results.csv").read_text() == want_table
