"""Several workers on the newest TensorFlow: run_pretraining.py and run_classifier.py with the
TF2 engine under MultiWorkerMirroredStrategy (two local worker processes talking over loopback,
TF_CONFIG).

Two workers of one replica each end with the weights of one process mirrored over two logical
CPUs (to float32 rounding): each worker reads every other per-replica batch of the one input
pipeline, the gradients are averaged over the global batch before clipping, the chief alone
writes the checkpoints, TensorBoard events and the evaluation, and every worker writes its
train_summary with the same weights digest. (Against one device the masked-LM loss differs: each
replica normalises it by its own masked positions, as the Estimator's replicas and TPU cores do.)
run_classifier's workers likewise end with the mirrored process's weights; its chief alone
writes into --output_dir (the other worker's feature caches, config and labels go to a private
directory it removes) and evaluates.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_DIR, TINY_BERT_CONFIG, run_tool, tool_env
from realformer_tf import estimator_utils
from test_tf2_training import ROUNDING, WITHOUT_DROPOUT, _job_args, _max_difference, _state
from test_tf2_training import _step_losses, _values, model  # pylint: disable=unused-import

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
pytestmark = pytest.mark.skipif(
    estimator_utils.has_estimator(),
    reason="TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")


def _free_ports(count):
  """`count` loopback ports free now."""
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("localhost", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """Pre-training records and a tiny RealFormer config without dropout (each worker would draw
  its own masks)."""
  root = tmp_path_factory.mktemp("multi_worker")
  rng = np.random.RandomState(0)
  words = ("the king said that a whale was seen near the ship and the captain laughed at "
           "her brother while the sea rose over old stone walls").split()
  documents = ["\n".join(" ".join(rng.choice(words, rng.randint(4, 14))) + "."
                         for _ in range(rng.randint(2, 8))) for _ in range(30)]
  (root / "text.txt").write_text("\n\n".join(documents) + "\n")
  run_tool("create_pretraining_data.py", [
      "--input_file=%s" % (root / "text.txt"), "--output_file=%s" % (root / "data.tfrecord"),
      "--vocab_file=%s" % VOCAB, "--max_seq_length=32", "--max_predictions_per_seq=5",
      "--dupe_factor=1", "--num_workers=1"])
  (root / "bert_config.json").write_text(json.dumps(dict(
      TINY_BERT_CONFIG, residual_attention="sum", hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0)))
  return root


def _args(root, output_dir, extra=()):
  return ["--input_file=%s" % (root / "data.tfrecord"), "--output_dir=%s" % output_dir,
          "--bert_config_file=%s" % (root / "bert_config.json"), "--max_seq_length=32",
          "--max_predictions_per_seq=5", "--train_batch_size=8", "--eval_batch_size=8",
          "--num_train_steps=6", "--num_warmup_steps=2", "--learning_rate=1e-3",
          "--save_checkpoints_steps=3", "--keep_checkpoint_max=10", "--log_every_n_steps=1",
          "--do_train", "--do_eval"] + list(extra)


def _run_workers(command):
  """Runs `command` (its arguments after the Python executable) as the two workers of a
  loopback cluster (TF_CONFIG); returns their logs (stderr), the chief's first."""
  ports = _free_ports(2)
  cluster = {"worker": ["localhost:%d" % port for port in ports]}
  workers = []
  for index in range(2):
    env = tool_env({"TF_CONFIG": json.dumps({"cluster": cluster,
                                             "task": {"type": "worker", "index": index}})})
    workers.append(subprocess.Popen(
        [sys.executable] + [str(a) for a in command], cwd=REPO_DIR, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
  logs = []
  try:
    for worker in workers:
      logs.append(worker.communicate(timeout=600)[1])
  finally:
    for worker in workers:  # a worker whose peer failed waits for it for ever
      if worker.poll() is None:
        worker.kill()
  for worker, log in zip(workers, logs):
    assert worker.returncode == 0, log[-3000:]
  return logs


def test_two_workers_end_with_the_weights_of_two_local_replicas(data, tmp_path):
  single, multi = tmp_path / "single", tmp_path / "multi"
  single_log = run_tool("run_pretraining.py", _args(data, single, [
      "--num_cpu_devices=2", "--distribution_strategy=mirrored"])).stderr
  logs = _run_workers([os.path.join(REPO_DIR, "run_pretraining.py")] + _args(
      data, multi, ["--distribution_strategy=multi_worker_mirrored"]))
  assert "2 replicas in sync: 4 examples per replica per step" in logs[0]
  # The chief's losses (the global batch's) are the single process's.
  np.testing.assert_allclose(_step_losses(logs[0]), _step_losses(single_log), rtol=0,
                             atol=ROUNDING)
  assert len(_step_losses(logs[0])) == 6
  assert _state(multi) == _state(single) == ["model.ckpt-0", "model.ckpt-3", "model.ckpt-6"]
  assert _max_difference(_values(multi / "model.ckpt-0"), _values(single / "model.ckpt-0")) == 0
  assert _max_difference(_values(multi / "model.ckpt-6"),
                         _values(single / "model.ckpt-6")) <= ROUNDING
  # One events file (the chief's), one evaluation, a summary per worker with the same weights.
  assert len([n for n in os.listdir(str(multi)) if n.startswith("events.")]) == 1
  summaries = [json.loads((multi / ("train_summary_worker_%d.json" % i)).read_text())
               for i in range(2)]
  assert summaries[0]["weights_digest"] == summaries[1]["weights_digest"]
  assert summaries[0]["global_step"] == 6
  results = json.loads((multi / "eval_results.json").read_text())
  single_results = json.loads((single / "eval_results.json").read_text())
  assert results["masked_lm_accuracy"] == pytest.approx(single_results["masked_lm_accuracy"],
                                                        abs=ROUNDING)


def _listing(output_dir):
  """The files of an output directory, an events file named by its kind only."""
  return sorted("events" if name.startswith("events.") else name
                for name in os.listdir(str(output_dir)))


def test_two_classifier_workers_end_with_the_weights_of_two_local_replicas(model, tmp_path):
  single, multi = tmp_path / "single", tmp_path / "multi"
  # 8 examples in global batches of 4 for 2 epochs: 4 steps.
  extra = ["--do_train", "--do_eval", "--num_train_epochs=2"]
  single_log = run_tool(None, ["-c", WITHOUT_DROPOUT, "--two_cpus"] + _job_args(
      model, single, extra + ["--distribution_strategy=mirrored"])).stderr
  logs = _run_workers(["-c", WITHOUT_DROPOUT, "--one_cpu"] + _job_args(
      model, multi, extra + ["--distribution_strategy=multi_worker_mirrored"]))
  assert "2 replicas in sync: 2 examples per replica per step" in logs[0]
  np.testing.assert_allclose(_step_losses(logs[0]), _step_losses(single_log), rtol=0,
                             atol=ROUNDING)
  assert len(_step_losses(logs[0])) == 4
  assert _state(multi) == _state(single) == ["model.ckpt-0", "model.ckpt-4"]
  assert _max_difference(_values(multi / "model.ckpt-4"),
                         _values(single / "model.ckpt-4")) <= ROUNDING
  # The chief's files only: what the one process writes, one events file; the other worker
  # evaluated nothing.
  assert _listing(multi) == _listing(single)
  assert "Worker worker_1: writes its own files into" in logs[1]
  assert "Running evaluation" not in logs[1]
  results, single_results = (json.loads((d / "eval_results.json").read_text())
                             for d in (multi, single))
  assert results["eval_accuracy"] == single_results["eval_accuracy"]
  assert results["eval_loss"] == pytest.approx(single_results["eval_loss"], abs=ROUNDING)
