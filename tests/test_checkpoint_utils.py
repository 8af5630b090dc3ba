"""checkpoint_utils: trained-weights checks, unmatched init checkpoints, protected checkpoint files."""

import errno
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from conftest import REPO_DIR
from realformer_tf import checkpoint_utils
from realformer_tf import common
from realformer_tf import estimator_utils


def _save_checkpoint(directory, step, names=("bert/w",)):
  """A checkpoint at `directory`/model.ckpt-`step` with a global_step; returns its prefix."""
  with tf.Graph().as_default():
    for name in names:
      tf.compat.v1.get_variable(name, [2], initializer=tf.compat.v1.zeros_initializer())
    step_var = tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(step_var.assign(step))
      return tf.compat.v1.train.Saver().save(sess, os.path.join(str(directory), "model.ckpt"),
                                             global_step=step)


def test_require_trained_weights(tmp_path):
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(common.UsageError) as e:
    checkpoint_utils.require_trained_weights(
        "--do_eval", [("output_dir", str(empty)), ("init_checkpoint", None)],
        allow_random_eval=False, give_flag="init_checkpoint")
  assert "--do_eval" in str(e.value) and "--init_checkpoint" in str(e.value)
  assert "--allow_random_eval" in str(e.value) and str(empty) in str(e.value)
  assert checkpoint_utils.require_trained_weights(
      "--do_eval", [("output_dir", str(empty))], allow_random_eval=True) is None
  prefix = _save_checkpoint(tmp_path / "run", 7)
  assert checkpoint_utils.require_trained_weights(
      "--do_eval", [("output_dir", str(empty)), ("init_checkpoint", prefix)],
      allow_random_eval=False) == ("init_checkpoint", prefix)
  assert checkpoint_utils.require_trained_weights(
      "--do_eval", [("output_dir", str(tmp_path / "run"))],
      allow_random_eval=False) == ("output_dir", str(tmp_path / "run"))
  assert checkpoint_utils.checkpoint_record(prefix) == {"checkpoint": prefix, "global_step": 7}
  assert checkpoint_utils.checkpoint_record(None)["checkpoint"] is None


# A BERT classifier's variables (graph order): the encoder, its pooler, the task head.
BERT_NAMES = ["bert/embeddings/word_embeddings:0", "bert/encoder/layer_0/attention/self/query/"
              "kernel:0", "bert/encoder/layer_0/output/LayerNorm/gamma:0",
              "bert/pooler/dense/kernel:0", "bert/pooler/dense/bias:0", "output_weights:0",
              "output_bias:0"]
BERT_ENCODER = [n[:-2] for n in BERT_NAMES if n.startswith("bert/")]


def _warnings(monkeypatch):
  """The WARNING lines checkpoint_utils logs from now on (a list that fills up)."""
  lines = []
  monkeypatch.setattr(checkpoint_utils.tf1.logging, "warning",
                      lambda fmt, *args: lines.append(fmt % args))
  return lines


def test_check_init_matches_needs_every_encoder_variable(monkeypatch):
  warnings = _warnings(monkeypatch)
  check = checkpoint_utils.check_init_matches
  # Every encoder variable supplied: the task head may start fresh, nothing is logged.
  assert check("ck", BERT_ENCODER, BERT_NAMES, allow_unmatched=False) == []
  assert check("ck", BERT_ENCODER + ["output_weights", "output_bias"], BERT_NAMES,
               allow_unmatched=False) == []
  assert not warnings
  # One encoder variable missing: one line naming it, the counts and the way out.
  lacking = [n for n in BERT_ENCODER if "LayerNorm" not in n]
  with pytest.raises(common.UsageError) as e:
    check("ck", lacking, BERT_NAMES, allow_unmatched=False)
  assert str(e.value) == (
      "--init_checkpoint=ck: supplies 4 of the model's 7 variables but only 4 of its 5 encoder "
      "variables (missing: bert/encoder/layer_0/output/LayerNorm/gamma); a checkpoint of another "
      "model or config? pass --allow_unmatched_init to train the missing ones from random "
      "weights")
  # --allow_unmatched_init: accepted, with a WARNING counting the encoder variables left random.
  assert check("ck", lacking, BERT_NAMES, allow_unmatched=True) == [
      "bert/encoder/layer_0/output/LayerNorm/gamma"]
  assert len(warnings) == 1 and warnings[0].endswith(
      "; 1 encoder variables start from random weights (--allow_unmatched_init)")
  # Without the flag defined (a library caller), the default is to refuse.
  with pytest.raises(common.UsageError):
    check("ck", lacking, BERT_NAMES)


def test_check_init_matches_refuses_another_family_that_only_fills_heads():
  # An ETC pre-training checkpoint into BERT's pre-training: only the shared MLM head matches.
  head = ["cls/predictions/output_bias", "cls/predictions/transform/dense/kernel"]
  names = BERT_NAMES[:5] + head
  with pytest.raises(common.UsageError) as e:
    checkpoint_utils.check_init_matches("etc/model.ckpt", head, names, allow_unmatched=False)
  assert str(e.value).startswith(
      "--init_checkpoint=etc/model.ckpt: supplies 2 of the model's 7 variables but none of its "
      "3 encoder variables (missing: bert/embeddings/word_embeddings, bert/encoder/layer_0/"
      "attention/self/query/kernel, bert/encoder/layer_0/output/LayerNorm/gamma); ")
  # A BERT checkpoint into ETC (the family named, as etc_model's tools do).
  etc_names = ["etc_document_bert/token_emb_lookup/embedding_table",
               "etc_document_bert/global_local_transformer_layers/x"] + head
  with pytest.raises(common.UsageError, match="but none of its 2 encoder variables"):
    checkpoint_utils.check_init_matches(
        "bert/model.ckpt", head, etc_names,
        encoder_scopes=checkpoint_utils.ENCODER_SCOPES["etc"], allow_unmatched=False)
  # Translation: the whole encoder-decoder is the encoder.
  nmt_names = ["embeddings/word_embeddings", "encoder/layer_0/k", "decoder/layer_0/k"]
  with pytest.raises(common.UsageError, match="but only 2 of its 3 encoder variables "
                     r"\(missing: decoder/layer_0/k\)"):
    checkpoint_utils.check_init_matches(
        "enc.ckpt", nmt_names[:2], nmt_names,
        encoder_scopes=checkpoint_utils.ENCODER_SCOPES["translation"], allow_unmatched=False)
  # More than three missing: the first three, then "...".
  many = ["bert/encoder/layer_%d/k" % i for i in range(5)]
  with pytest.raises(common.UsageError, match=r"\(missing: bert/encoder/layer_0/k, "
                     r"bert/encoder/layer_1/k, bert/encoder/layer_2/k, \.\.\.\)"):
    checkpoint_utils.check_init_matches("ck", [], many, allow_unmatched=False)


def test_check_init_matches_pooler_counts_only_when_the_checkpoint_has_one(monkeypatch):
  warnings = _warnings(monkeypatch)
  no_pooler = [n for n in BERT_ENCODER if "pooler" not in n]
  # A Hugging Face model converted without a pooler: fine-tuning starts the pooler fresh.
  assert checkpoint_utils.check_init_matches("hf", no_pooler, BERT_NAMES,
                                             allow_unmatched=False) == [
                                                 "bert/pooler/dense/kernel",
                                                 "bert/pooler/dense/bias"]
  assert warnings == ["--init_checkpoint=hf: has no bert/pooler variables: the model's 2 start "
                      "from random weights (bert/pooler/dense/kernel, bert/pooler/dense/bias)"]
  # Half a pooler is not a pooler-less model: all of it must be there.
  with pytest.raises(common.UsageError, match=r"\(missing: bert/pooler/dense/bias\)"):
    checkpoint_utils.check_init_matches("ck", no_pooler + ["bert/pooler/dense/kernel"],
                                        BERT_NAMES, allow_unmatched=False)


def test_check_init_matches_of_a_model_without_a_known_encoder(monkeypatch):
  warnings = _warnings(monkeypatch)
  # A library caller's own model: a checkpoint supplying some of it is taken.
  assert checkpoint_utils.check_init_matches("ck", {"a": "a"}, ["a", "b", "c"],
                                             allow_unmatched=False) == []
  with pytest.raises(common.UsageError) as e:
    checkpoint_utils.check_init_matches("ck", {}, ["a", "b", "c"], allow_unmatched=False)
  assert str(e.value).startswith("--init_checkpoint=ck: supplies none of the model's 3 "
                                 "variables (missing: a, b, c); a checkpoint of another model "
                                 "or config?")
  assert "--allow_unmatched_init" in str(e.value)
  assert checkpoint_utils.check_init_matches("ck", {}, ["a", "b", "c"],
                                             allow_unmatched=True) == ["a", "b", "c"]
  assert warnings == ["--init_checkpoint=ck: supplies none of the model's 3 variables "
                      "(missing: a, b, c); 3 variables start from random weights "
                      "(--allow_unmatched_init)"]


def test_init_checkpoint_scaffold_fn_applies_the_rule(tmp_path, monkeypatch):
  """estimator_utils.init_checkpoint_scaffold_fn: the graph's trainable variables, the rule."""
  warnings = _warnings(monkeypatch)
  prefix = _save_checkpoint(tmp_path / "etc", 3, names=("etc_document_bert/w",
                                                        "cls/predictions/output_bias"))
  with tf.Graph().as_default():
    for name in ("bert/embeddings/word_embeddings", "cls/predictions/output_bias"):
      tf.compat.v1.get_variable(name, [2])
    with pytest.raises(common.UsageError, match="--init_checkpoint=%s: supplies 1 of the "
                       "model's 2 variables but none of its 1 encoder variables" % prefix):
      estimator_utils.init_checkpoint_scaffold_fn(prefix, use_tpu=False, allow_unmatched=False)
    assert estimator_utils.init_checkpoint_scaffold_fn(prefix, use_tpu=False,
                                                       allow_unmatched=True) is None
  assert len(warnings) == 1 and "1 encoder variables start from random" in warnings[0]


def test_check_resumable_by_what_the_job_restores():
  """estimator_utils.check_resumable: training needs slots and global_step, the Estimator's
  evaluation the global_step, an export the model variables alone."""
  want = {"bert/w": [2], "cls/b": [3]}
  trained = {"bert/w": [2], "bert/w/adam_m": [2], "bert/w/adam_v": [2], "cls/b": [3],
             "global_step": []}
  for restore in estimator_utils.RESTORE_MODES:
    estimator_utils.check_resumable("--output_dir=d", "d/model.ckpt-5", trained, want,
                                    restore=restore)
  slim = {"bert/w": [2], "cls/b": [3], "global_step": []}
  release = {"bert/w": [2], "cls/b": [3]}
  converted = {"bert/w": [2]}
  for ckpt, restore, reason in (
      (slim, "train", "it has no optimizer slots (a checkpoint made for initialising"),
      (release, "train", "it has no global_step (a checkpoint made for initialising"),
      (release, "estimator", "it has no global_step (a checkpoint made for initialising"),
      (converted, "variables", "it lacks cls/b of this job's model; use the config it was "
                               "trained with, or")):
    with pytest.raises(common.UsageError) as e:
      estimator_utils.check_resumable("--output_dir=d", "d/model.ckpt", ckpt, want,
                                      restore=restore)
    assert str(e.value) == (
        "--output_dir=d: its checkpoint model.ckpt is not a checkpoint of this job: %s%s a new "
        "--output_dir with --init_checkpoint=d/model.ckpt to start from its weights" % (
            reason, "" if restore == "variables" else ", e.g. lifted, converted or slimmed); use"))
  estimator_utils.check_resumable("--output_dir=d", "d/model.ckpt", slim, want,
                                  restore="estimator")
  estimator_utils.check_resumable("--output_dir=d", "d/model.ckpt", release, want,
                                  restore="variables")
  assert estimator_utils.restore_mode(True) == "train"
  assert estimator_utils.restore_mode(False) == "estimator"
  assert estimator_utils.restore_mode(False, estimator_reads=False) == "variables"


def test_checkpoint_files_protect_state_and_every_shard(tmp_path):
  run = tmp_path / "run"
  first = _save_checkpoint(run, 5)
  _save_checkpoint(run, 9)
  (run / "features.jsonl").write_text("x")
  files = {os.path.basename(p) for p in checkpoint_utils.checkpoint_files(str(run))}
  assert "checkpoint" in files and "model.ckpt-5.index" in files
  assert "model.ckpt-9.data-00000-of-00001" in files and "features.jsonl" not in files
  # Reading the newest checkpoint still protects the older one's shards and the state file.
  inputs = checkpoint_utils.checkpoint_files(first)
  for name in ("checkpoint", "model.ckpt-9.index"):
    with pytest.raises(common.UsageError):
      common.check_not_input(str(run / name), inputs)
  common.check_not_input(str(run / "new.jsonl"), inputs)
  assert checkpoint_utils.checkpoint_files(None) == []


def test_storage_errors_are_one_line_naming_the_file(tmp_path):
  """ENOSPC while writing: the tool prints one line with the file name, exit 1, no temporary."""
  out = tmp_path / "out.txt"
  script = (
      "import errno, sys\n"
      "sys.path.insert(0, %r)\n"
      "from realformer_tf import common\n"
      "def main(argv):\n"
      "  with common.atomic_output(%r) as f:\n"
      "    f.write('x')\n"
      "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
      "common.run_main(main, [])\n" % (REPO_DIR, str(out)))
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 1, result.stderr
  last = result.stderr.strip().splitlines()[-1]
  assert last == "error: %s: No space left on device (errno %d)" % (out, errno.ENOSPC), last
  assert "Traceback" not in result.stderr
  assert os.listdir(tmp_path) == []
