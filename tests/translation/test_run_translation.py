"""run_translation.py: training (ADMIN profile, exact resume), evaluation, decoding, errors."""

import glob
import gzip
import json
import os
import re
import signal
import socket
import types

import numpy as np
import pytest
import tensorflow as tf

from conftest import TINY_BERT_CONFIG, kill_when, last_error_line, run_tool, shared_path
from conftest import write_random_bert_checkpoint
from realformer_tf import checkpoint_utils
from realformer_tf import common
import convert_hf_checkpoint
from realformer_tf import estimator_utils
import numpy_nmt
from translation import nmt_modeling
from translation import run_translation
from translation import translation_input
from translation import translation_records

tf1 = tf.compat.v1

TINY_NMT_CONFIG = {"vocab_size": 300, "hidden_size": 32, "num_encoder_layers": 2,
                   "num_decoder_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                   "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                   "activation_dropout_prob": 0.1, "residual_attention": "mean",
                   "layer_norm_type": "admin"}


def _head(path, n):
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return [next(f) for _ in range(n)]


@pytest.fixture(scope="module")
def nmt_data(tmp_path_factory):
  """A tiny En-De task from the first Multi30K lines: spm (300 pieces), TFRecords, raw test."""
  root = tmp_path_factory.mktemp("nmt")
  for lang in ("en", "de"):
    lines = _head(shared_path("nmt", "multi30k", "train.%s.gz" % lang), 400)
    (root / ("train.%s" % lang)).write_text("".join(lines[:360]), encoding="utf-8")
    (root / ("dev.%s" % lang)).write_text("".join(lines[360:]), encoding="utf-8")
    # 12 test sentences and a 13th far over --max_source_length (all 12 run together, twice).
    long_line = " ".join(line.strip() for line in lines[360:372] * 2) + "\n"
    (root / ("test.%s" % lang)).write_text("".join(lines[360:372]) + long_line,
                                           encoding="utf-8")
  spm = str(root / "spm.model")
  run_tool("translation/create_translation_data.py", [
      "--source_file=%s" % (root / "train.en"), "--target_file=%s" % (root / "train.de"),
      "--spm_model=%s" % spm, "--train_spm_vocab_size=300",
      "--output_file=%s" % (root / "train.tfrecord")])
  run_tool("translation/create_translation_data.py", [
      "--source_file=%s" % (root / "dev.en"), "--target_file=%s" % (root / "dev.de"),
      "--spm_model=%s" % spm, "--output_file=%s" % (root / "dev.tfrecord")])
  config = root / "tiny.json"
  config.write_text(json.dumps(TINY_NMT_CONFIG))
  return root


def _train_args(data, output_dir, steps=12, extra=()):
  return ["--do_train", "--train_file=%s" % (data / "train.tfrecord"),
          "--config_file=%s" % (data / "tiny.json"), "--output_dir=%s" % output_dir,
          "--num_train_steps=%d" % steps, "--warmup_steps=4", "--learning_rate=3e-3",
          "--max_tokens=512", "--save_checkpoints_steps=6", "--keep_checkpoint_max=10"] + list(extra)


def _weights(checkpoint):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name) for name, _ in tf.train.list_variables(checkpoint)}


@pytest.fixture(scope="module")
def trained_run(nmt_data, tmp_path_factory):
  """One 12-step ADMIN + mean job with eval and beam-3 decoding (shared by the tests below).

  The translations go to decoded/translations.txt, a directory that does not exist yet.
  """
  out = tmp_path_factory.mktemp("trained") / "run"
  run_tool("translation/run_translation.py", _train_args(nmt_data, out) + [
      "--do_eval", "--dev_file=%s" % (nmt_data / "dev.tfrecord"), "--do_predict",
      "--spm_model=%s" % (nmt_data / "spm.model"),
      "--predict_source_file=%s" % (nmt_data / "test.en"),
      "--predict_reference_file=%s" % (nmt_data / "test.de"), "--max_decode_length=24",
      "--beam_size=3", "--max_source_length=64",
      "--predict_output_file=%s" % (out / "decoded" / "translations.txt")])
  return out


@pytest.mark.slow
def test_train_eval_predict_end_to_end(trained_run):
  out = trained_run
  summary = json.loads((out / "train_summary.json").read_text())
  assert summary["global_step"] == 12 and summary["target_tokens_per_second"] > 0
  results = json.loads((out / "eval_results.json").read_text())
  assert np.isclose(results["eval_perplexity"], np.exp(results["eval_nll_per_token"]))
  assert results["eval_nll_per_token"] < np.log(300)  # better than uniform after 12 steps
  # Every result says which weights produced it: path and global step.
  record = {"checkpoint": str(out / "model.ckpt-12"), "global_step": 12}
  assert {k: results[k] for k in record} == record
  decoded = out / "decoded" / "translations.txt"  # its directory was created
  translations = decoded.read_text(encoding="utf-8").splitlines()
  assert len(translations) == 13
  assert json.loads((out / "decoded" / "translations.txt.checkpoint.json").read_text()) == record
  bleu = json.loads((out / "bleu.json").read_text())
  assert {"bleu", "chrf", "tokenized_compound_split_bleu"} <= set(bleu)
  assert bleu["num_sentences"] == 13 and {k: bleu[k] for k in record} == record
  # The 13th source is cut to --max_source_length, counted.
  assert bleu["max_source_length"] == 64
  assert bleu["num_sources_cut_at_max_source_length"] == 1
  profile = json.loads((out / "admin_profile.json").read_text())
  assert len(profile["encoder"]) == 4 and len(profile["decoder"]) == 6
  # The step-0 checkpoint (the initial model) holds the profile's omegas.
  initial = _weights(str(out / "model.ckpt-0"))
  names = numpy_nmt.omega_names(TINY_NMT_CONFIG)
  for stack in ("encoder", "decoder"):
    for name, omega in zip(names[stack], profile[stack]):
      np.testing.assert_allclose(initial[name], np.full([32], omega), rtol=1e-6)


@pytest.mark.slow
def test_profile_is_that_of_the_initial_training_weights(nmt_data, trained_run):
  """The profiling graph starts from the weights the Estimator starts from (name-seeded)."""
  out = trained_run
  profile = json.loads((out / "admin_profile.json").read_text())
  initial = {k: v for k, v in _weights(str(out / "model.ckpt-0")).items()
             if k in numpy_nmt.variable_shapes(TINY_NMT_CONFIG) and not k.endswith("/omega")}
  input_fn = translation_input.input_fn_builder([str(nmt_data / "train.tfrecord")], 512, 128,
                                                is_training=True, seed=12345)
  with tf.Graph().as_default():
    tf1.set_random_seed(12345)  # the job's --seed: the shuffle depends on the graph seed too
    first = tf1.data.make_one_shot_iterator(input_fn({})).get_next()
    with tf1.Session() as session:
      batch = session.run(first)
  expected = numpy_nmt.admin_profile(initial, TINY_NMT_CONFIG, batch["source_ids"],
                                     batch["target_input_ids"])
  np.testing.assert_allclose(profile["encoder"], expected["encoder"], rtol=1e-4)
  np.testing.assert_allclose(profile["decoder"], expected["decoder"], rtol=1e-4)


@pytest.mark.slow
def test_killed_job_resumes_to_the_uninterrupted_weights(nmt_data, trained_run, tmp_path):
  reference = trained_run
  resumed = tmp_path / "resumed"
  status, _ = kill_when("translation/run_translation.py", _train_args(nmt_data, resumed),
                        lambda: os.path.exists(resumed / "model.ckpt-6.index"), signal.SIGKILL)
  assert status == -9
  assert not (resumed / "train_summary.json").exists()
  run_tool("translation/run_translation.py", _train_args(nmt_data, resumed))
  expected = _weights(str(reference / "model.ckpt-12"))
  actual = _weights(str(resumed / "model.ckpt-12"))
  assert sorted(expected) == sorted(actual)
  for name in expected:
    np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_greedy_and_beam_decoding_follow_the_teacher_forced_model(tmp_path):
  """translate_graph's output is what the teacher-forced model scores it as."""
  config = nmt_modeling.NmtConfig.from_dict(dict(TINY_NMT_CONFIG, vocab_size=40,
                                                 layer_norm_type="post"))
  weights = numpy_nmt.random_weights(config.to_dict(), seed=11)
  source = np.array([[5, 9, 12, 7, 3, 0], [8, 4, 6, 11, 19, 3]], np.int32)
  length = 7
  with tf.Graph().as_default():
    greedy = run_translation.translate_graph(config, tf.constant(source), 1, 0.0, length)
    beam = run_translation.translate_graph(config, tf.constant(source), 4, 0.0, length)
    with tf1.Session() as session:
      # Variable.load's feed of each initializer's value, in one run.
      session.run([v.initializer for v in tf1.global_variables()],
                  feed_dict={v.initializer.inputs[1]: weights[v.op.name]
                             for v in tf1.global_variables()})
      greedy, beam = session.run([greedy, beam])
  for result in (greedy, beam):
    for row in range(2):
      ids = result["ids"][row][:result["length"][row]]
      target_input = np.concatenate([[nmt_modeling.BOS_ID], ids[:-1]])[None]
      logits = numpy_nmt.forward(weights, config.to_dict(), source[row:row + 1],
                                 target_input)[0]
      log_probs = numpy_nmt.log_softmax(logits)
      if result is greedy:
        np.testing.assert_array_equal(np.argmax(logits, axis=-1), ids)
      else:
        np.testing.assert_allclose(result["score"][row],
                                   log_probs[np.arange(len(ids)), ids].sum(), rtol=1e-4)


def test_one_line_errors(nmt_data, tmp_path):
  spm = "--spm_model=%s" % (nmt_data / "spm.model")
  proc = run_tool("translation/run_translation.py", ["--do_train", "--output_dir=%s" % tmp_path],
                  expect_rc=2)
  assert "--do_train needs --train_file" in last_error_line(proc)
  wrong_vocab = tmp_path / "wrong.json"
  wrong_vocab.write_text(json.dumps(dict(TINY_NMT_CONFIG, vocab_size=500)))
  proc = run_tool("translation/run_translation.py", [
      "--do_predict", "--output_dir=%s" % (tmp_path / "o"), "--config_file=%s" % wrong_vocab,
      spm, "--predict_source_file=%s" % (nmt_data / "test.en")], expect_rc=2)
  assert "300 pieces, the model's vocab_size is 500" in last_error_line(proc)
  bad_key = tmp_path / "bad.json"
  bad_key.write_text(json.dumps(dict(TINY_NMT_CONFIG, num_layers=3)))
  proc = run_tool("translation/run_translation.py", _train_args(nmt_data, tmp_path / "o2") +
                  ["--config_file=%s" % bad_key], expect_rc=2)
  assert "unknown NMT config key 'num_layers'" in last_error_line(proc)
  # No trained weights: one line naming the flag to give, before any work.
  proc = run_tool("translation/run_translation.py", [
      "--do_predict", "--output_dir=%s" % (tmp_path / "o3"),
      "--config_file=%s" % (nmt_data / "tiny.json"), spm,
      "--predict_source_file=%s" % (nmt_data / "test.en")], expect_rc=2)
  assert last_error_line(proc) == (
      "error: --do_predict: no trained weights (no checkpoint in --output_dir=%s), so it would "
      "score a randomly initialised model; give --checkpoint, or pass --allow_random_eval to do "
      "that deliberately" % (tmp_path / "o3"))
  assert not (tmp_path / "o3").exists()
  other_profile = tmp_path / "profile.json"
  other_profile.write_text(json.dumps(nmt_modeling.profile_document(
      nmt_modeling.NmtConfig.from_dict(dict(TINY_NMT_CONFIG, hidden_size=64)),
      {"encoder": [1.0] * 4, "decoder": [1.0] * 6})))
  proc = run_tool("translation/run_translation.py", _train_args(nmt_data, tmp_path / "o4") +
                  ["--admin_profile=%s" % other_profile], expect_rc=2)
  assert "made for hidden_size=64, the model has 32" in last_error_line(proc)
  assert not glob.glob(str(tmp_path / "o4" / "model.ckpt-*"))


@pytest.mark.slow
def test_output_dir_of_another_model_is_refused(nmt_data, trained_run, tmp_path):
  out = trained_run
  wider = tmp_path / "wider.json"
  wider.write_text(json.dumps(dict(TINY_NMT_CONFIG, hidden_size=64)))
  proc = run_tool("translation/run_translation.py", _train_args(nmt_data, out, steps=2) +
                  ["--config_file=%s" % wider], expect_rc=2)
  assert "holds a model with hidden_size=32" in last_error_line(proc)


@pytest.mark.slow
def test_learns_to_translate_its_training_pairs(nmt_data, tmp_path):
  """A small model memorises 40 pairs: beam search then reproduces their references.

  Fails if the decoder ignores the source (a broken cross-attention or cache would leave it a
  target-side language model, far from BLEU 80 on 40 different sentences).
  """
  for lang in ("en", "de"):
    lines = (nmt_data / ("train.%s" % lang)).read_text(encoding="utf-8").splitlines()[:40]
    (tmp_path / ("memo.%s" % lang)).write_text("\n".join(lines) + "\n", encoding="utf-8")
  spm = "--spm_model=%s" % (nmt_data / "spm.model")
  run_tool("translation/create_translation_data.py", [
      "--source_file=%s" % (tmp_path / "memo.en"), "--target_file=%s" % (tmp_path / "memo.de"),
      spm, "--output_file=%s" % (tmp_path / "memo.tfrecord")])
  config = tmp_path / "memo.json"
  config.write_text(json.dumps(dict(TINY_NMT_CONFIG, hidden_size=64, intermediate_size=128,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                    activation_dropout_prob=0.0)))
  out = tmp_path / "memo"
  run_tool("translation/run_translation.py", [
      "--do_train", "--do_predict", "--train_file=%s" % (tmp_path / "memo.tfrecord"), spm,
      "--config_file=%s" % config, "--output_dir=%s" % out, "--num_train_steps=400",
      "--warmup_steps=40", "--learning_rate=3e-3", "--max_tokens=512", "--label_smoothing=0",
      "--predict_source_file=%s" % (tmp_path / "memo.en"),
      "--predict_reference_file=%s" % (tmp_path / "memo.de"), "--max_decode_length=48"])
  bleu = json.loads((out / "bleu.json").read_text())["bleu"]
  assert bleu > 80, bleu


def test_resume_check_compares_the_checkpoint_shapes(tmp_path):
  """estimator_utils.check_resume_shapes (run_translation.check_resume): step, or one line."""
  assert estimator_utils.check_resume_shapes(str(tmp_path / "none"), {}) is None

  def save(directory, slots):
    with tf.Graph().as_default():
      tf1.get_variable("embeddings/word_embeddings", [10, 4])
      if slots:
        tf1.get_variable("embeddings/word_embeddings/adam_m", [10, 4])
      step = tf1.train.get_or_create_global_step()
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        sess.run(step.assign(7))
        return tf1.train.Saver().save(sess, str(directory / "model.ckpt"), global_step=7)

  trained = save(tmp_path / "trained", slots=True)
  want = {"embeddings/word_embeddings": [10, 4]}
  assert estimator_utils.check_resume_shapes(str(tmp_path / "trained"), want) == 7
  with pytest.raises(common.UsageError, match=r"--output_dir=.*model.ckpt-7 has "
                     r"embeddings/word_embeddings of shape \[10, 4\] but this job's model "
                     r"needs \[10, 8\]"):
    estimator_utils.check_resume_shapes(str(tmp_path / "trained"),
                                        {"embeddings/word_embeddings": [10, 8]})
  # A variable of the job's model that the checkpoint lacks: the restore would fail.
  with pytest.raises(common.UsageError) as e:
    estimator_utils.check_resume_shapes(str(tmp_path / "trained"),
                                        dict(want, **{"decoder/layer_0/x": [3]}))
  assert str(e.value) == (
      "--output_dir=%s: its checkpoint model.ckpt-7 is not a checkpoint of this job: it lacks "
      "decoder/layer_0/x of this job's model; use the config it was trained with, or a new "
      "--output_dir with --init_checkpoint=%s to start from its weights" %
      (tmp_path / "trained", trained))
  # No optimizer slots (an averaged or slimmed checkpoint): evaluation reads it, training
  # cannot resume from it.
  slim = save(tmp_path / "slim", slots=False)
  assert estimator_utils.check_resume_shapes(str(tmp_path / "slim"), want, restore="estimator") == 7
  with pytest.raises(common.UsageError) as e:
    estimator_utils.check_resume_shapes(str(tmp_path / "slim"), want)
  assert str(e.value) == (
      "--output_dir=%s: its checkpoint model.ckpt-7 is not a checkpoint of this job: it has no "
      "optimizer slots (a checkpoint made for initialising, e.g. lifted, converted or "
      "slimmed); use a new --output_dir with --init_checkpoint=%s to start from its weights" %
      (tmp_path / "slim", slim))


def test_read_lines_splits_at_newlines_only(tmp_path):
  """Sources and references stay aligned: U+0085 / U+2028 inside a line do not end it."""
  text = "a\u0085b\r\nc\u2028d\ne\n"
  plain = tmp_path / "plain.txt"
  plain.write_bytes(text.encode("utf-8"))
  packed = tmp_path / "packed.gz"
  packed.write_bytes(gzip.compress(text.encode("utf-8")))
  for path in (plain, packed):
    assert run_translation.read_lines(str(path), "predict_source_file") == [
        "a\u0085b", "c\u2028d", "e"]


# ---------------------------------------------------------------------------------------------
# Which weights a job reads, on a random checkpoint: no training job.
# ---------------------------------------------------------------------------------------------
def _save_noisy_nmt_checkpoint(config, prefix, global_step, seed=5):
  """Saves the model's variables with noise on their initial values; returns (prefix, values).

  The initial values are name-seeded (nmt_modeling), so a checkpoint of plain initial values
  would equal the weights any fresh job starts from: the noise tells loaded from not loaded.
  """
  rng = np.random.RandomState(seed)
  with tf.Graph().as_default():
    ids = tf1.placeholder(tf.int32, [None, None])
    nmt_modeling.NmtModel(config, False, ids, ids)
    step = tf1.train.get_or_create_global_step()
    variables = tf1.trainable_variables()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      values = {v.op.name: value + rng.normal(0.0, 0.1, value.shape).astype(np.float32)
                for v, value in zip(variables, sess.run(variables))}
      feed = {v.initial_value: values[v.op.name] for v in variables}
      feed[step.initial_value] = global_step
      sess.run([v.initializer for v in variables + [step]], feed)
      return tf1.train.Saver().save(sess, prefix, global_step=global_step), values


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
  """(output_dir with nmt_config.json and model.ckpt-5 of TINY_NMT_CONFIG, prefix, values)."""
  out = tmp_path_factory.mktemp("random_model")
  config = nmt_modeling.NmtConfig.from_dict(TINY_NMT_CONFIG)
  (out / run_translation.CONFIG_NAME).write_text(config.to_json_string())
  prefix, values = _save_noisy_nmt_checkpoint(config, str(out / "model.ckpt"), 5)
  return out, prefix, values


@pytest.fixture(scope="module")
def bert_checkpoint(tmp_path_factory):
  """A tiny BERT checkpoint (bert/* variables): another model's weights."""
  root = tmp_path_factory.mktemp("bert")
  config_file = root / "bert_config.json"
  config_file.write_text(json.dumps(TINY_BERT_CONFIG))
  return write_random_bert_checkpoint(str(config_file), str(root / "bert_model.ckpt"))


def test_init_checkpoint_is_loaded_into_the_model(model_dir, bert_checkpoint, tmp_path):
  """The assignment map was built before the model existed (0 variables loaded)."""
  config = nmt_modeling.NmtConfig.from_dict(TINY_NMT_CONFIG)
  _, prefix, values = model_dir

  def build(init_checkpoint):
    features = {"source_ids": tf.constant([[5, 6, 3]]),
                "target_input_ids": tf.constant([[2, 7, 8]]),
                "target_ids": tf.constant([[7, 8, 3]])}
    model_fn = run_translation.model_fn_builder(config, init_checkpoint=init_checkpoint,
                                                num_train_steps=10, num_warmup_steps=1)
    model_fn(features, None, tf1.estimator.ModeKeys.TRAIN, {})

  with tf.Graph().as_default():
    build(prefix)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      got = sess.run({v.op.name: v for v in tf1.trainable_variables()})
  assert sorted(got) == sorted(values)
  for name, value in values.items():
    np.testing.assert_array_equal(got[name], value, err_msg=name)
  # A BERT checkpoint supplies none of the variables: one line, in model_fn and in
  # the check main runs before any work.
  message = r"^--init_checkpoint=%s: supplies none of the model's %d variables" % (
      re.escape(bert_checkpoint), len(values))
  with tf.Graph().as_default():
    with pytest.raises(common.UsageError, match=message):
      build(bert_checkpoint)
  with pytest.raises(common.UsageError, match=message):
    run_translation.check_init_checkpoint(config, bert_checkpoint)
  # An encoder-only checkpoint (the decoder's variables dropped): the decoder would start from
  # random weights, so it is refused too, unless --allow_unmatched_init.
  reader = tf.train.load_checkpoint(prefix)
  encoder_only = str(tmp_path / "encoder_only" / "model.ckpt")
  convert_hf_checkpoint.write_tf_checkpoint(
      {name: reader.get_tensor(name) for name in values if not name.startswith("decoder/")},
      encoder_only)
  decoder = sorted(name for name in values if name.startswith("decoder/"))
  with pytest.raises(common.UsageError, match=r"^--init_checkpoint=%s: supplies %d of the "
                     r"model's %d variables but only %d of its %d encoder variables \(missing: "
                     r"decoder/" % (re.escape(encoder_only), len(values) - len(decoder),
                                    len(values), len(values) - len(decoder), len(values))):
    run_translation.check_init_checkpoint(config, encoder_only)
  with tf.Graph().as_default():
    missing = checkpoint_utils.check_init_matches(
        encoder_only, set(values) - set(decoder), values,
        encoder_scopes=run_translation.ENCODER_SCOPES, allow_unmatched=True)
  assert sorted(missing) == decoder


@pytest.mark.slow
def test_a_bert_init_checkpoint_is_refused_unless_allowed(nmt_data, bert_checkpoint, tmp_path):
  out = tmp_path / "out"
  result = run_tool("translation/run_translation.py", _train_args(
      nmt_data, out, steps=1, extra=["--init_checkpoint=%s" % bert_checkpoint]), expect_rc=2)
  last = last_error_line(result)
  assert last.startswith("error: --init_checkpoint=%s: supplies none of the model's " %
                         bert_checkpoint), last
  assert last.endswith("pass --allow_unmatched_init to train the missing ones from random "
                       "weights") and "Traceback" not in result.output
  assert not out.exists() or not glob.glob(str(out / "model.ckpt*"))
  result = run_tool("translation/run_translation.py", _train_args(
      nmt_data, out, steps=1, extra=["--init_checkpoint=%s" % bert_checkpoint,
                                     "--allow_unmatched_init"]))
  assert "variables start from random weights (--allow_unmatched_init)" in result.output
  assert json.loads((out / "train_summary.json").read_text())["global_step"] == 1


def test_predict_output_never_replaces_an_input(nmt_data, model_dir, tmp_path):
  """--predict_output_file may replace none of the source, references, spm model, checkpoint."""
  out, prefix, _ = model_dir
  fv = types.SimpleNamespace(
      output_dir=str(out), predict_source_file=str(nmt_data / "test.en"),
      predict_reference_file=str(nmt_data / "test.de"), spm_model=str(nmt_data / "spm.model"),
      config_file=str(nmt_data / "tiny.json"), admin_profile=None, checkpoint=None,
      init_checkpoint=None)
  inputs = run_translation.job_inputs(fv, prefix)
  results = [str(out / run_translation.BLEU_NAME)]
  for path in (fv.predict_source_file, fv.predict_reference_file, fv.spm_model, fv.config_file,
               str(out / "checkpoint"), prefix + ".index", str(out / "nmt_config.json")):
    with pytest.raises(common.UsageError, match=r"^--predict_output_file=%s: is also an input" %
                       re.escape(path)):
      run_translation.check_predict_output(path, inputs, results)
  with pytest.raises(common.UsageError, match="writes bleu.json there"):
    run_translation.check_predict_output(results[0], inputs, results)
  with pytest.raises(common.UsageError, match="is a directory, expected a file name"):
    run_translation.check_predict_output(str(tmp_path), inputs, results)
  with pytest.raises(common.UsageError, match="test.en is a file, not a directory"):
    run_translation.check_predict_output(str(nmt_data / "test.en" / "t.txt"), inputs, results)
  # A missing parent is no error: predict() creates it.
  run_translation.check_predict_output(str(tmp_path / "new" / "t.txt"), inputs, results)


def test_encode_sources_cuts_over_long_sources(nmt_data):
  """One very long line is cut to --max_source_length ids (pieces + eos), counted."""
  sp = translation_records.load_spm(str(nmt_data / "spm.model"))
  lines = ["A man rides a bike.", "A dog runs in the park. " * 4000]
  ids, cut = run_translation.encode_sources(sp, lines, 16)
  assert cut == 1 and len(ids[1]) == 16
  assert ids[0] == sp.encode(lines[0]) + [nmt_modeling.EOS_ID]
  assert ids[1] == sp.encode(lines[1])[:15] + [nmt_modeling.EOS_ID]
  assert run_translation.encode_sources(sp, lines, 0)[1] == 0  # 0: no limit


def test_weights_of_another_model_or_none(nmt_data, model_dir, bert_checkpoint, tmp_path):
  """One line before any work: a BERT checkpoint as --checkpoint (25.9), the checkpoint state
  file as --predict_output_file (25.2); --allow_random_eval (27) evaluates random weights and
  says so in the results."""
  out, _, _ = model_dir
  spm = "--spm_model=%s" % (nmt_data / "spm.model")
  dev = "--dev_file=%s" % (nmt_data / "dev.tfrecord")
  config = "--config_file=%s" % (nmt_data / "tiny.json")
  state = (out / "checkpoint").read_bytes()
  proc = run_tool("translation/run_translation.py", [
      "--do_predict", "--output_dir=%s" % out, spm,
      "--predict_source_file=%s" % (nmt_data / "test.en"),
      "--predict_output_file=%s" % (out / "checkpoint")], expect_rc=2)
  assert last_error_line(proc) == ("error: --predict_output_file=%s: is also an input; writing "
                                   "it would replace that input" % (out / "checkpoint"))
  assert (out / "checkpoint").read_bytes() == state
  proc = run_tool("translation/run_translation.py", [
      "--do_eval", dev, config, "--output_dir=%s" % (tmp_path / "e"),
      "--checkpoint=%s" % bert_checkpoint], expect_rc=2)
  assert last_error_line(proc).startswith(
      "error: --checkpoint=%s: lacks %d variable(s) of the translation model: " % (
          bert_checkpoint, len(model_dir[2]) + 1))
  # An evaluation-only job takes the output_dir lock too (25.18): beside a live job (this test
  # process holds the lock) it refuses instead of scoring an intermediate checkpoint.
  locked = tmp_path / "locked"
  locked.mkdir()
  (locked / ".lock-local").write_text(json.dumps(
      {"pid": os.getpid(), "host": socket.gethostname(), "time": "2024-01-01T00:00:00"}))
  proc = run_tool("translation/run_translation.py", [
      "--do_eval", dev, config, "--output_dir=%s" % locked, "--allow_random_eval"], expect_rc=2)
  assert last_error_line(proc).startswith(
      "error: --output_dir=%s: in use by another job (pid %d" % (locked, os.getpid()))
  assert sorted(os.listdir(locked)) == [".lock-local"]
  random_dir = tmp_path / "random"
  run_tool("translation/run_translation.py", [
      "--do_eval", dev, config, "--output_dir=%s" % random_dir, "--allow_random_eval"])
  results = json.loads((random_dir / "eval_results.json").read_text())
  assert results["checkpoint"] is None and results["global_step"] == 0
