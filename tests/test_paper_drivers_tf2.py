"""The paper's drivers on the newest TensorFlow (TF >= 2.16, `bash run.sh test-latest`).

There the commands they run train with the TF2 engine (realformer_tf.tf2_training) instead of
the Estimator, with the same flags and output files, so the drivers run unchanged:
- paper.sweep fine-tunes and aggregates a tiny GLUE grid into the same results.{md,csv,json} as
  the same sweep on TF 2.15 (its side in a subprocess of $REALFORMER_TF215_PYTHON; no dropout);
- paper.reproduce_table2, reproduce_table7 and reproduce_table8 make their plans (the first two
  their data too) instead of stopping with "needs TensorFlow 2.15".
The three reproductions' whole tiny runs take minutes: their own tests (tests/test_reproduce_
table2.py, tests/translation/test_reproduce_table7.py, tests/test_reproduce_table8_real_tasks.py)
pass with either interpreter.
On TF 2.15 every test here skips (tests/test_sweep.py, tests/test_reproduce_table2.py, ...).
"""

import json
import os
import re
import shutil

import pytest

from conftest import REPO_DIR, TINY_BERT_CONFIG, run_tool, shared_path, tf215_python
from conftest import write_random_bert_checkpoint
from realformer_tf import estimator_utils
from test_tf2_training import _run215

pytestmark = pytest.mark.skipif(
    estimator_utils.has_estimator(),
    reason="TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")

GLUE_FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "glue")


def _tiny_bert(directory):
  """A tiny random BERT without dropout (bert_config.json, bert_model.ckpt) in `directory`."""
  os.makedirs(directory)
  config = dict(TINY_BERT_CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  config_file = os.path.join(directory, "bert_config.json")
  with open(config_file, "w") as f:
    json.dump(config, f)
  return config_file, write_random_bert_checkpoint(config_file,
                                                   os.path.join(directory, "bert_model.ckpt"))


def test_sweep_runs_on_the_engine_as_on_the_estimator(tmp_path, vocab_file):
  """One sst-2 run (8 examples, batch 4, 1 epoch: 2 steps) per TensorFlow: the same report."""
  python215 = tf215_python()
  config_file, checkpoint = _tiny_bert(str(tmp_path / "bert"))
  args = ["--tasks=sst-2", "--glue_dir=%s" % GLUE_FIXTURES, "--init_checkpoint=%s" % checkpoint,
          "--bert_config_file=%s" % config_file, "--vocab_file=%s" % vocab_file,
          "--learning_rates=1e-3", "--epochs=1", "--batch_sizes=4", "--seeds=1",
          "--max_seq_length=32"]
  newest = tmp_path / "newest"
  log = run_tool("paper/sweep.py", args + ["--output_dir=%s" % newest]).output
  assert "Plan: 1 runs, 1 to run, 0 already done" in log and "needs TensorFlow" not in log
  run_dir = newest / "sst-2" / "bs4_lr0.001_ep1" / "seed1"
  results = json.loads((run_dir / "eval_results.json").read_text())
  assert results["global_step"] == results["num_train_steps"] == 2
  # The same sweep with TF 2.15's python (its runs on the Estimator).
  tf215 = tmp_path / "tf215"
  _run215(python215, ["-m", "paper.sweep"] + args + ["--output_dir=%s" % tf215])
  for name in ("results.md", "results.csv"):
    assert (newest / name).read_text() == (tf215 / name).read_text(), name
  assert "| sst-2 | Acc |" in (newest / "results.md").read_text()


@pytest.mark.parametrize("module", ["paper.reproduce_table2", "paper.reproduce_table7",
                                    "paper.reproduce_table8"])
def test_reproductions_plan_on_the_engine(module, tmp_path, vocab_file):
  out = tmp_path / "out"
  if module == "paper.reproduce_table2":
    args = ["--tiny_test", "--plan_only", "--corpus=%s" % shared_path("corpus")]
    expected = r"Plan: 4 runs \(post_ln,pre_ln,realformer_sum,realformer_mean x seeds 12345\)"
  elif module == "paper.reproduce_table7":
    args = ["--tiny_test", "--plan_only", "--data_dir=%s" % shared_path("nmt", "multi30k")]
    expected = r"Plan: 2 runs \(admin s1, realformer_mean s1\)"
  else:
    bert = tmp_path / "bert"
    _tiny_bert(str(bert))
    shutil.copy(vocab_file, str(bert / "vocab.txt"))
    (tmp_path / "novels.txt").write_text("It was a dark night.\n")
    (tmp_path / "plays.txt").write_text("To be.\n")
    args = ["--dry_run", "--bert_checkpoint=%s" % bert, "--seeds=1",
            "--task_input_file=%s" % (tmp_path / "novels.txt"),
            "--pretraining_input_file=%s" % (tmp_path / "plays.txt")]
    expected = (r"Plan: 10 stages; systems etc_none,etc_sum,bert_windows; tasks "
                r"supporting,classify;")
  proc = run_tool(None, ["-m", module, "--output_dir=%s" % out] + args)
  assert re.search(expected, proc.stdout), proc.stdout + proc.stderr[-2000:]
  assert "needs TensorFlow" not in proc.stderr
