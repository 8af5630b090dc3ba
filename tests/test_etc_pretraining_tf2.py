"""ETC pre-training on the newest TensorFlow: etc_model.run_pretraining without the Estimator.

On TF >= 2.16 the job trains and evaluates with realformer_tf.tf2_training.Engine over the graph
the Estimator runs on TF 2.15. Checked here (in `bash run.sh test-latest`, the TF 2.15 side in a
subprocess of $REALFORMER_TF215_PYTHON): the same job with CPC on both engines gives the same
loss at every step, the same MLM and CPC eval metrics and the same checkpoints; the TF2 engine's
checkpoint resumes on the Estimator; the Estimator-only flags are one-line errors.
"""

import json
import os

import numpy as np
import pytest

from conftest import REPO_DIR, last_error_line, run_tool, tf215_python, tool_env
from etc_model import create_pretraining_data as etc_data
from realformer_tf import estimator_utils
from realformer_tf import pretraining_data
from test_tf2_training import ESTIMATOR_WITH_STEP_LOSSES, ROUNDING
from test_tf2_training import _max_difference, _run215, _side_by_side, _state, _step_losses
from test_tf2_training import _values

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
L, G, P = 64, 8, 10
# Dropout off: the two engines' masks are drawn by different ops.
TINY_ETC_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "intermediate_size": 64, "local_radius": 8,
                   "relative_pos_max_distance": 4, "relative_vocab_size": 12,
                   "residual_attention": "sum", "use_hard_g2l_mask": True,
                   "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SETTINGS = {"max_seq_length": L, "max_global_seq_length": G, "max_predictions_per_seq": P,
            "masked_lm_prob": 0.15, "random_seed": 7, "dupe_factor": 2,
            "global_token": "[unused0]", "do_whole_word_mask": False,
            "max_bad_fraction": 0.01, "max_line_chars": 100000}
newest_tf_only = pytest.mark.skipif(
    estimator_utils.has_estimator(),
    reason="TF 2.15 trains with the Estimator: runs in `bash run.sh test-latest`")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """ETC pre-training records of short random documents and a tiny ETC config."""
  root = tmp_path_factory.mktemp("etc_pretrain_tf2")
  rng = np.random.RandomState(0)
  words = ("the king said that a whale was seen near the ship and the captain laughed at "
           "her brother while the sea rose over old stone walls").split()
  docs = [[" ".join(rng.choice(words, rng.randint(3, 12))) + "."
           for _ in range(rng.randint(2, 7))] for _ in range(16)]
  (root / "text.txt").write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n")
  etc_data.create_pretraining_data(
      [str(root / "text.txt")], str(root / "data.tfrecord"),
      pretraining_data.make_tokenizer(VOCAB, True), SETTINGS,
      summary_path=str(root / "data.summary.json"), log_fn=lambda line: None)
  (root / "etc_config.json").write_text(json.dumps(TINY_ETC_CONFIG))
  return root


def _args(root, out, steps=6, extra=()):
  return ["-m", "etc_model.run_pretraining", "--etc_config_file=%s" % (root / "etc_config.json"),
          "--input_file=%s" % (root / "data.tfrecord"), "--output_dir=%s" % out,
          "--max_seq_length=%d" % L, "--max_global_seq_length=%d" % G,
          "--max_predictions_per_seq=%d" % P, "--train_batch_size=2", "--eval_batch_size=2",
          "--num_train_steps=%d" % steps, "--num_warmup_steps=2", "--learning_rate=1e-3",
          "--save_checkpoints_steps=3", "--keep_checkpoint_max=10", "--log_every_n_steps=1",
          "--cpc_loss_weight=0.5", "--do_train", "--do_eval"] + list(extra)


@newest_tf_only
@pytest.mark.slow
def test_etc_pretraining_with_cpc_on_both_engines_gives_the_same_losses_metrics_checkpoints(
    data, tmp_path):
  python215 = tf215_python()
  est, tf2 = tmp_path / "estimator", tmp_path / "tf2"
  # The two engines' jobs side by side.
  est_log, tf2_log = _side_by_side(
      python215, ["-c", ESTIMATOR_WITH_STEP_LOSSES, "etc_model.run_pretraining"] +
      _args(data, est)[2:], None, _args(data, tf2))
  est_losses, tf2_losses = _step_losses(est_log), _step_losses(tf2_log)
  assert len(est_losses) == len(tf2_losses) == 6, (est_losses, tf2_losses)
  np.testing.assert_allclose(tf2_losses, est_losses, rtol=0, atol=ROUNDING)
  est_results, tf2_results = (json.loads((d / "eval_results.json").read_text())
                              for d in (est, tf2))
  assert sorted(tf2_results) == sorted(est_results)
  assert {"cpc_accuracy", "cpc_loss", "masked_lm_accuracy"} <= set(tf2_results)
  for key in ("masked_lm_accuracy", "masked_lm_loss", "cpc_accuracy", "cpc_loss", "loss"):
    assert tf2_results[key] == pytest.approx(est_results[key], abs=ROUNDING), key
  for key in ("global_step", "eval_examples", "eval_records"):
    assert tf2_results[key] == est_results[key], key
  est_summary, tf2_summary = (json.loads((d / "train_summary_local.json").read_text())
                              for d in (est, tf2))
  assert sorted(tf2_summary) == sorted(est_summary)
  assert tf2_summary["global_step"] == est_summary["global_step"] == 6
  assert tf2_summary["cpc"] == est_summary["cpc"]
  assert _state(tf2) == _state(est) == ["model.ckpt-0", "model.ckpt-3", "model.ckpt-6"]
  assert _max_difference(_values(tf2 / "model.ckpt-0"), _values(est / "model.ckpt-0")) == 0
  assert _max_difference(_values(tf2 / "model.ckpt-6"), _values(est / "model.ckpt-6")) <= ROUNDING
  # The TF2 engine's checkpoint goes on with the Estimator (a longer schedule: 8 steps).
  _run215(python215, ["-m", "etc_model.run_pretraining"] + _args(data, tf2, steps=8)[2:])
  assert json.loads((tf2 / "train_summary_local.json").read_text())["resumed_from_step"] == 6
  assert _state(tf2)[-1] == "model.ckpt-8"


@newest_tf_only
def test_estimator_only_flags_are_one_line_errors_on_the_tf2_engine(data, tmp_path):
  for flag, message in (("--iterations_per_loop=10", "--iterations_per_loop=10: implemented by "
                         "the Estimator only"),
                        ("--use_tpu", "--use_tpu: implemented by the Estimator only")):
    result = run_tool(None, _args(data, tmp_path / "out", extra=[flag]), expect_rc=2)
    assert message in last_error_line(result), result.stderr[-2000:]
  assert not (tmp_path / "out").exists()
