"""Tests of ETC long-document pre-training: etc_model.create_pretraining_data (packing, masking,
determinism, counts) and etc_model.run_pretraining (side inputs in the pipeline, the MLM loss
learns, train -> rerun resumes -> eval, one-line errors) and its CPC option (etc_model.cpc:
the InfoNCE loss against NumPy, the sentence masking and lone sentences, end to end)."""

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf import common
import convert_hf_checkpoint
from realformer_tf import estimator_utils
import modeling
import run_pretraining as bert_run
from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool, shared_path
from conftest import tool_env
from conftest import write_random_bert_checkpoint
from etc_model import cpc
from etc_model import create_pretraining_data as etc_data
from etc_model import etc_estimator
from etc_model import etc_inputs
from etc_model import etc_modeling
from etc_model import etc_records
from etc_model import lift_bert_checkpoint as lift
from etc_model import run_pretraining as etc_run
from realformer_tf import pretraining_data

tf1 = tf.compat.v1
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
L, G, P = 64, 8, 10
TINY_ETC_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "intermediate_size": 64, "local_radius": 8,
                   "relative_pos_max_distance": 4, "relative_vocab_size": 12,
                   "residual_attention": "sum", "use_hard_g2l_mask": True}
SETTINGS = {"max_seq_length": L, "max_global_seq_length": G, "max_predictions_per_seq": P,
            "masked_lm_prob": 0.15, "random_seed": 7, "dupe_factor": 1,
            "global_token": "[unused0]", "do_whole_word_mask": False,
            "max_bad_fraction": 0.01, "max_line_chars": 100000}


def _corpus():
  """Documents of short sentences, one sentence longer than L (cut into pieces)."""
  rng = np.random.RandomState(0)
  words = ("the king said that a whale was seen near the ship and the captain laughed at "
           "her brother while the sea rose over old stone walls").split()
  docs = []
  for _ in range(12):
    docs.append([" ".join(rng.choice(words, rng.randint(3, 12))) + "."
                 for _ in range(rng.randint(1, 7))])
  docs[3][0] = " ".join(rng.choice(words, 150))
  return docs


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp("etc_pretrain")
  text = root / "text.txt"
  text.write_text("\n\n".join("\n".join(doc) for doc in _corpus()) + "\n")
  tokenizer = pretraining_data.make_tokenizer(VOCAB, True)
  summary = etc_data.create_pretraining_data(
      [str(text)], str(root / "data.tfrecord"), tokenizer, SETTINGS,
      summary_path=str(root / "data.summary.json"), log_fn=lambda line: None)
  # The training jobs recompute activations in the backward pass (the model's test checks the
  # gradients; here the Estimator's train op builds and runs with it).
  (root / "etc_config.json").write_text(json.dumps(dict(TINY_ETC_CONFIG,
                                                        grad_checkpointing_period=1)))
  return {"root": root, "text": text, "tokenizer": tokenizer, "summary": summary}


def test_records_pack_every_sentence_in_order_with_official_masking(data, tmp_path):
  tokenizer = data["tokenizer"]
  records = etc_data.read_examples(str(data["root"] / "data.tfrecord"))
  summary = data["summary"]
  # The [MASK] id CPC masks with, read back by the training script.
  assert summary["mask_token_id"] == tokenizer.vocab["[MASK]"] == etc_run.data_mask_token_id(
      [str(data["root"] / "data.tfrecord")])
  sentences = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s))
               for doc in _corpus() for s in doc]
  long_sentence = max(sentences, key=len)
  assert len(long_sentence) > L
  want_pieces = sum((len(s) + L - 1) // L for s in sentences)
  counts = collections.Counter()
  stream, pieces, doc_ends = [], [], 0
  for rec in records:
    assert set(rec) == set(etc_records.FEATURE_NAMES)
    ids = rec["token_ids"].copy()
    n = int(rec["masked_lm_weights"].sum())
    positions = rec["masked_lm_positions"][:n]
    length = int((rec["long_breakpoints"].nonzero()[0].max()) + 1)
    assert np.all(ids[length:] == 0)
    # Official count: round(0.15 * length), at least 1, at most P; distinct positions.
    assert n == min(P, max(1, int(np.round(length * 0.15)))) and len(set(positions)) == n
    counts["mask"] += int((ids[positions] == tokenizer.vocab["[MASK]"]).sum())
    ids[positions] = rec["masked_lm_ids"][:n]
    stream.extend(ids[:length])
    # One global token per sentence piece; sentence ids index them in order.
    num_global = int((rec["global_token_ids"] != 0).sum())
    assert np.all(rec["global_token_ids"][:num_global] == tokenizer.vocab["[unused0]"])
    sid = rec["sentence_ids"][:length]
    assert sid[0] == 0 and np.all(np.diff(sid) >= 0) and sid[-1] == num_global - 1
    pieces.extend(np.bincount(sid).tolist())
    # Long and global breakpoints end the same packed pieces.
    long_ends = sid[rec["long_breakpoints"][:length].nonzero()[0]]
    assert long_ends.tolist() == rec["global_breakpoints"].nonzero()[0].tolist()
    doc_ends += len(long_ends)
  # Unmasked, the records are the tokenised corpus in order, with nothing lost or repeated.
  assert stream == [t for s in sentences for t in s]
  assert sum(pieces) == len(stream) and len(pieces) == want_pieces
  assert max(pieces) == L
  assert summary["records"] == len(records) and summary["global_tokens"] == want_pieces
  assert summary["documents"] == 12 and summary["sentences"] == len(sentences)
  assert summary["long_sentences_split"] == 1 and summary["long_tokens"] == len(stream)
  assert summary["masked_tokens"] == sum(int(r["masked_lm_weights"].sum()) for r in records)
  assert summary["masked_as_mask"] == counts["mask"]
  assert summary["masked_as_mask"] + summary["masked_as_random"] + \
      summary["masked_as_kept"] == summary["masked_tokens"]
  assert doc_ends >= 12  # every document ends a piece (documents split over records: more)
  # Deterministic: the same bytes again; another seed masks otherwise, packing the same.
  again = tmp_path / "again.tfrecord"
  etc_data.create_pretraining_data([str(data["text"])], str(again), tokenizer, SETTINGS,
                                   log_fn=lambda line: None)
  assert again.read_bytes() == (data["root"] / "data.tfrecord").read_bytes()
  other = tmp_path / "other.tfrecord"
  etc_data.create_pretraining_data([str(data["text"])], str(other), tokenizer,
                                   dict(SETTINGS, random_seed=8), log_fn=lambda line: None)
  other_records = etc_data.read_examples(str(other))
  assert [r["sentence_ids"].tolist() for r in other_records] == \
      [r["sentence_ids"].tolist() for r in records]
  assert other.read_bytes() != again.read_bytes()
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_input_pipeline_side_inputs_match_numpy_and_the_mlm_loss_learns(data):
  config = etc_modeling.EtcConfig.from_dict(dict(TINY_ETC_CONFIG, hidden_dropout_prob=0.0,
                                                 attention_probs_dropout_prob=0.0))
  input_fn = etc_run.input_fn_builder([str(data["root"] / "data.tfrecord")], config, L, G, P,
                                      is_training=False)
  with tf.Graph().as_default():
    batch = tf1.data.make_one_shot_iterator(input_fn({"batch_size": 2})).get_next()
    with tf1.Session() as sess:
      got = sess.run(batch)
  want = etc_inputs.make_global_local_transformer_side_inputs(
      got["long_breakpoints"], got["global_breakpoints"], got["sentence_ids"],
      config.local_radius, config.relative_pos_max_distance, use_hard_g2l_mask=True)
  for name in etc_inputs.SIDE_INPUT_NAMES:
    np.testing.assert_array_equal(got[name], want[name], err_msg=name)
  # The model and head learn a fixed batch (memorisable): the MLM loss falls.
  config.num_hidden_layers = 1
  with tf.Graph().as_default():
    tf1.set_random_seed(1)
    features = {k: tf.constant(v) for k, v in got.items()}
    loss, _, _ = etc_run.build_model(config, features, is_training=False)
    names = {v.op.name for v in tf1.trainable_variables()}
    train = tf1.train.AdamOptimizer(1e-2).minimize(loss)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      losses = [sess.run([loss, train])[0] for _ in range(20)]
  assert "cls/predictions/output_bias" in names
  assert "etc_document_bert/token_emb_lookup/embedding_table" in names
  assert losses[-1] < 0.3 * losses[0], losses


def _train_args(data, out, steps, extra=()):
  root = data["root"]
  return ["-m", "etc_model.run_pretraining", "--etc_config_file=%s" % (root / "etc_config.json"),
          "--input_file=%s" % (root / "data.tfrecord"), "--output_dir=%s" % out,
          "--max_seq_length=%d" % L, "--max_global_seq_length=%d" % G,
          "--max_predictions_per_seq=%d" % P, "--train_batch_size=2",
          "--num_train_steps=%d" % steps, "--num_warmup_steps=1", "--learning_rate=1e-3",
          "--save_checkpoints_steps=100", "--do_train"] + list(extra)


@pytest.mark.slow
def test_train_from_a_lifted_checkpoint_then_a_rerun_resumes_and_evaluates(data, tmp_path):
  out = tmp_path / "out"
  # Initialised from a BERT lifted to ETC: every ETC variable loads, the MLM head is new.
  bert_config = tmp_path / "bert_config.json"
  bert_config.write_text(json.dumps(TINY_BERT_CONFIG))
  write_random_bert_checkpoint(str(bert_config), str(tmp_path / "bert.ckpt"))
  lifted = lift.lift_bert_checkpoint(str(tmp_path / "bert.ckpt"), str(tmp_path / "lifted"),
                                     etc_config_file=str(data["root"] / "etc_config.json"))
  # In bfloat16 from the float32 lifted checkpoint; the rerun goes on in float32.
  result = run_tool(None, _train_args(data, out, 2, [
      "--init_checkpoint=%s" % lifted["output_checkpoint"], "--precision=bf16"]))
  loaded = re.search(r"init_checkpoint \S+: (\d+) variables loaded, (\d+) not in checkpoint: "
                     r"(.*)", result.output)
  assert loaded and int(loaded.group(1)) > 40 and int(loaded.group(2)) == 5, result.output[-3000:]
  assert all(name.startswith("cls/predictions/") for name in loaded.group(3).split(", "))
  first = json.loads((out / "train_summary_local.json").read_text())
  assert first["global_step"] == 2 and first["resumed_from_step"] == 0
  assert first["precision"] == "bf16" and "cpc" not in first
  # The same float32 variables as a float32 job's checkpoint (only the step is not float).
  dtypes = tf1.train.NewCheckpointReader(first["checkpoint"]).get_variable_to_dtype_map()
  assert {name for name, dtype in dtypes.items() if dtype != tf.float32} == {"global_step"}
  saved = json.loads((out / "etc_config.json").read_text())
  assert saved["residual_attention"] == "sum" and saved["local_radius"] == 8
  assert saved["grad_checkpointing_period"] == 1
  # Resuming with another model is one line, before anything is written.
  for change, message in (({"hidden_size": 64, "intermediate_size": 128}, "of shape [32] but"),
                          ({"num_hidden_layers": 1}, "which this job's model lacks")):
    config = etc_modeling.EtcConfig.from_dict(dict(TINY_ETC_CONFIG, **change))
    with pytest.raises(common.UsageError, match=re.escape(message)):
      etc_estimator.check_resume(str(out), lambda: etc_run.variable_shapes(config, L, G))
  # The same command with more steps continues from the last checkpoint, then evaluates; here
  # with ETC's CPC loss on the global tokens (no variables of its own: the same checkpoint).
  cpc_args = ["--cpc_loss_weight=0.5", "--cpc_sentence_mask_rate=0.5",
              "--cpc_max_sentences_per_seq=3", "--cpc_max_sentence_length=16"]
  run_tool(None, _train_args(data, out, 3, ["--do_eval", "--max_eval_steps=1",
                                            "--init_checkpoint=%s" % lifted["output_checkpoint"]]
                            + cpc_args))
  summary = json.loads((out / "train_summary_local.json").read_text())
  assert summary["resumed_from_step"] == 2 and summary["global_step"] == 3
  assert summary["precision"] == "fp32"
  assert summary["cpc"] == {"loss_weight": 0.5, "mask_rate": 0.5, "max_sentences": 3,
                            "max_sentence_length": 16, "mask_token_id": 103}
  results = json.loads((out / "eval_results.json").read_text())
  assert results["global_step"] == 3 and 0.0 <= results["masked_lm_accuracy"] <= 1.0
  assert np.isfinite(results["masked_lm_loss"])
  # CPC's metrics beside MLM's (a softmax over the batch's masked sentences).
  assert 0.0 <= results["cpc_accuracy"] <= 1.0 and 0.0 < results["cpc_loss"] < 50, results
  assert not (out / ".lock-local").exists()


def _bert_pretraining_checkpoint(prefix):
  """A BERT pre-training checkpoint never lifted to ETC: bert/*, cls/predictions/*,
  cls/seq_relationship/* (random values), bert_config.json beside it; returns the prefix."""
  os.makedirs(os.path.dirname(prefix))
  with open(os.path.join(os.path.dirname(prefix), "bert_config.json"), "w") as f:
    json.dump(TINY_BERT_CONFIG, f)
  config = modeling.BertConfig.from_dict(TINY_BERT_CONFIG)
  shapes = dict(estimator_utils.bert_variable_shapes(config), **bert_run.head_shapes(config))
  rng = np.random.RandomState(0)
  convert_hf_checkpoint.write_tf_checkpoint(
      {name: (0.02 * rng.randn(*shape)).astype(np.float32) for name, shape in shapes.items()},
      prefix)
  return prefix


def test_an_unlifted_bert_checkpoint_and_a_lifted_output_dir_are_one_line(data, tmp_path):
  bert = _bert_pretraining_checkpoint(str(tmp_path / "bert" / "model.ckpt"))
  out = tmp_path / "out"
  # Only the masked-LM head's 5 variables match: ETC used to train from random weights.
  result = run_tool(None, _train_args(data, out, 2, ["--init_checkpoint=%s" % bert]),
                    expect_rc=2)
  assert last_error_line(result) == (
      "error: --init_checkpoint=%s: supplies 5 of the model's 59 variables but none of its 54 "
      "encoder variables (missing: etc_document_bert/token_emb_lookup/embedding_table, "
      "etc_document_bert/segment_emb_lookup/embedding_table, etc_document_bert/"
      "long_emb_layer_norm/beta, ...); a checkpoint of another model or config? pass "
      "--allow_unmatched_init to train the missing ones from random weights" % bert)
  assert "Traceback" not in result.output
  assert not [name for name in os.listdir(out) if name.startswith("model.ckpt")]
  # The lifted checkpoint's own directory as --output_dir: no optimizer slots to resume.
  lifted = lift.lift_bert_checkpoint(bert, str(tmp_path / "lifted"),
                                     etc_config_file=str(data["root"] / "etc_config.json"))
  listing = sorted(os.listdir(tmp_path / "lifted"))
  result = run_tool(None, _train_args(data, tmp_path / "lifted", 2, [
      "--init_checkpoint=%s" % lifted["output_checkpoint"]]), expect_rc=2)
  assert last_error_line(result) == (
      "error: --output_dir=%s: its checkpoint model.ckpt is not a checkpoint of this job: it "
      "has no global_step (a checkpoint made for initialising, e.g. lifted, converted or "
      "slimmed); use a new --output_dir with --init_checkpoint=%s to start from its weights" %
      (tmp_path / "lifted", lifted["output_checkpoint"]))
  assert "Traceback" not in result.output
  assert sorted(os.listdir(tmp_path / "lifted")) == listing


@pytest.mark.slow
def test_allow_unmatched_init_and_cpc_with_its_defaults_at_a_small_g(data, tmp_path):
  bert = _bert_pretraining_checkpoint(str(tmp_path / "bert" / "model.ckpt"))
  out = tmp_path / "out"
  # G = 8 < 32: the default --cpc_max_sentences_per_seq follows G.
  result = run_tool(None, _train_args(data, out, 1, [
      "--init_checkpoint=%s" % bert, "--allow_unmatched_init", "--cpc_loss_weight=0.1"]))
  assert ("; 54 encoder variables start from random weights (--allow_unmatched_init)" in
          result.output), result.output[-3000:]
  summary = json.loads((out / "train_summary_local.json").read_text())
  assert summary["global_step"] == 1
  assert summary["cpc"]["max_sentences"] == G and summary["cpc"]["max_sentence_length"] == L


def test_lifting_copies_the_bert_mlm_head_onto_the_head_pretraining_builds():
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  built = {name: shape for name, shape in etc_run.variable_shapes(config, L, G).items()
           if name.startswith("cls/")}
  rng = np.random.RandomState(0)
  bert_values = {name: rng.randn(*shape).astype(np.float32) for name, shape in built.items()}
  bert_values["cls/seq_relationship/output_weights"] = np.zeros([2, 32], np.float32)
  bert_values["cls/predictions/output_bias_wrong"] = np.zeros([3], np.float32)
  # The encoder a BERT checkpoint holds beside its head (lifting refuses a head alone).
  for name, initial in lift.new_etc_values(config, 12345).items():
    if lift.bert_source(name):
      bert_values[lift.bert_source(name)] = np.zeros(initial.shape, np.float32)
  values, report = lift.lift_values(bert_values, config)
  assert sorted(report["head"]) == sorted(built) and len(built) == 5
  for name in built:
    np.testing.assert_array_equal(values[name], bert_values[name])
  assert report["unused"] == ["cls/predictions/output_bias_wrong",
                              "cls/seq_relationship/output_weights"]


def _train_graph_dtypes(precision):
  """The TRAIN graph of model_fn_builder.

  Returns:
    ({variable: dtype}, {(scope, op type): {dtype}}, [class name of each saver collected]).
  """
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  with tf.Graph().as_default() as graph:
    tf1.train.get_or_create_global_step()
    features = etc_estimator.placeholder_features(
        config, L, G, extra={"masked_lm_positions": (tf.int32, [1, P]),
                             "masked_lm_ids": (tf.int32, [1, P]),
                             "masked_lm_weights": (tf.float32, [1, P])})
    model_fn = etc_run.model_fn_builder(config, None, 1e-3, 10, 1, use_tpu=False,
                                        train_batch_size=1, precision=precision)
    spec = model_fn(features, None, tf1.estimator.ModeKeys.TRAIN, {})
    assert spec.loss.dtype == tf.float32
    ops = [op for op in graph.get_operations() if not op.name.startswith("gradients")]
    op_dtypes = {(scope, op_type): {op.get_attr("T") for op in ops if op.type == op_type and
                                    op.name.startswith(scope)}
                 for scope in ("etc_document_bert", "cls/predictions")
                 for op_type in ("Einsum", "MatMul", "Softmax")}
    savers = [type(saver).__name__ for saver in graph.get_collection(tf1.GraphKeys.SAVERS)]
    return ({v.op.name: v.dtype.base_dtype for v in tf1.global_variables()}, op_dtypes,
            savers)


def test_precision_fp16_computes_in_float16_with_float32_variables_and_loss_scaling():
  fp32_variables, fp32_ops, fp32_savers = _train_graph_dtypes("fp32")
  variables, ops, savers = _train_graph_dtypes("fp16")
  # The fp32 job's variables (model, head, Adam slots: all float32) plus the loss scale.
  assert set(fp32_variables.values()) == {tf.float32, tf.int64}  # int64: the global step
  assert variables == dict(fp32_variables, loss_scale=tf.float32,
                           loss_scale_good_steps=tf.int64)
  # fp16's saver also resumes a checkpoint without a loss scale (of a fp32 / bf16 job).
  assert savers == ["LossScaleOptionalSaver"] and not fp32_savers
  assert ops[("etc_document_bert", "Einsum")] == {tf.float16}
  assert ops[("cls/predictions", "MatMul")] == {tf.float16}
  assert ops[("etc_document_bert", "Softmax")] == {tf.float32}
  assert fp32_ops[("etc_document_bert", "Einsum")] == {tf.float32}


def test_data_tool_bad_flags_are_one_line_errors(data, tmp_path):
  base = ["-m", "etc_model.create_pretraining_data", "--input_file=%s" % data["text"],
          "--vocab_file=%s" % VOCAB, "--output_file=%s" % (tmp_path / "x.tfrecord")]
  result = run_tool(None, base + ["--global_token=[nope]", "--max_seq_length=64",
                                  "--max_global_seq_length=8", "--max_predictions_per_seq=10"],
                    expect_rc=2)
  assert last_error_line(result) == "error: --global_token=[nope]: not in --vocab_file=%s" % VOCAB
  assert not os.listdir(tmp_path)


def test_data_tool_lengths_bounded():
  etc_records.check_lengths(65536, 256)
  etc_records.check_lengths(70000, 70000, allow_long_inputs=True)
  with pytest.raises(common.UsageError, match=r"^--max_seq_length=65537: over 65536, .* pass "
                     "--allow_long_inputs if it is meant$"):
    etc_records.check_lengths(65537, 256)
  with pytest.raises(common.UsageError, match=r"^--max_global_seq_length=65: must be <= "
                     r"--max_seq_length=64 \(every global token stands for at least one long "
                     r"token\)$"):
    etc_records.check_lengths(64, 65)
  config = etc_modeling.EtcConfig.from_dict(dict(TINY_ETC_CONFIG,
                                                 max_absolute_position_embeddings=128))
  etc_records.check_lengths(128, 16, config=config, config_file="c.json")
  with pytest.raises(common.UsageError, match="^--max_seq_length=129 is longer than "
                     "max_absolute_position_embeddings=128 in c.json$"):
    etc_records.check_lengths(129, 16, config=config, config_file="c.json")


def test_data_tool_huge_lengths_refused_in_one_line_before_any_work(data, tmp_path):
  # Before, --max_seq_length=100000000 on a 60 kB text grew to GBs and ignored SIGTERM.
  # (G <= L: test_data_tool_lengths_bounded.)
  config = tmp_path / "etc_config.json"
  config.write_text(json.dumps(dict(TINY_ETC_CONFIG, max_absolute_position_embeddings=64)))
  small_vocab = tmp_path / "small_vocab_config.json"
  small_vocab.write_text(json.dumps(dict(TINY_ETC_CONFIG, vocab_size=1000)))
  out_dir = tmp_path / "out"
  base = ["-m", "etc_model.create_pretraining_data", "--input_file=%s" % data["text"],
          "--vocab_file=%s" % VOCAB, "--output_file=%s" % (out_dir / "x.tfrecord"),
          "--max_predictions_per_seq=10"]
  cases = [
      (["--max_seq_length=100000000"],
       "error: --max_seq_length=100000000: over 65536, where every record padded to it costs "
       "memory and time in proportion; pass --allow_long_inputs if it is meant"),
      (["--max_seq_length=128", "--max_global_seq_length=8", "--etc_config_file=%s" % config],
       "error: --max_seq_length=128 is longer than max_absolute_position_embeddings=64 in %s" %
       config),
      (["--max_seq_length=64", "--max_global_seq_length=8", "--etc_config_file=%s" % small_vocab],
       "error: vocab file %s: has ids up to 30521 but vocab_size=1000 in --etc_config_file=%s; "
       "use the vocab the model was trained with" % (VOCAB, small_vocab)),
  ]
  for args, line in cases:
    start = time.time()
    result = run_tool(None, base + args, expect_rc=2, timeout=60)
    assert last_error_line(result) == line
    assert "Traceback" not in result.stderr and time.time() - start < 45
    assert not out_dir.exists()


def _signal_after(proc, line_part, sig, delay_s, timeout=60):
  """Sends `sig` delay_s seconds after the tool's stderr shows line_part; returns (seconds from
  the signal to the exit, the stderr after line_part)."""
  deadline = time.time() + timeout
  while True:
    line = proc.stderr.readline()
    assert line or proc.poll() is None, "the tool ended before %r" % line_part
    if line_part in line:
      break
    assert time.time() < deadline, "no %r after %d s" % (line_part, timeout)
  time.sleep(delay_s)
  assert proc.poll() is None, "the tool ended before it could be signalled"
  proc.send_signal(sig)
  sent = time.time()
  try:
    _, err = proc.communicate(timeout=120)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.communicate(timeout=60)
    raise
  return time.time() - sent, err


@pytest.mark.slow
def test_data_tool_sigterm_inside_a_long_document_stops_within_seconds(tmp_path):
  # One document of ~16 MB (no blank line). Before, the stop was polled between documents only,
  # after the whole document was tokenised and written.
  lines = [line for line in open(shared_path("sample_1mb.txt"), encoding="utf-8") if line.strip()]
  (tmp_path / "one_document.txt").write_text("".join(lines) * 16, encoding="utf-8")
  out_dir = tmp_path / "out"
  # Run as a module (as the README says); every wait below has a timeout.
  proc = subprocess.Popen(
      [sys.executable, "-m", "etc_model.create_pretraining_data",
       "--input_file=%s" % (tmp_path / "one_document.txt"), "--vocab_file=%s" % VOCAB,
       "--output_file=%s" % (out_dir / "long.tfrecord")],
      cwd=REPO_DIR, env=tool_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  seconds, err = _signal_after(proc, "*** Reading 1 input file(s)", signal.SIGTERM, 1.0)
  assert proc.returncode == 143, err[-2000:]
  assert "interrupted (signal 15)" in err and "Traceback" not in err
  assert seconds < 5, "%.1f s from SIGTERM to the exit" % seconds
  assert os.listdir(out_dir) == []  # no output, no temporary, no summary


def _info_nce_reference(queries, keys, valid):
  """float64 NumPy InfoNCE: row i's softmax over the valid keys, -log p(key i), argmax == i."""
  logits = queries.astype(np.float64) @ keys.astype(np.float64).T / np.sqrt(queries.shape[1])
  logits[:, valid == 0] = -np.inf
  top = logits.max(axis=1, keepdims=True)
  log_probs = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
  per_row = -np.diag(log_probs)
  correct = (logits.argmax(axis=1) == np.arange(len(logits))).astype(np.float64)
  return (valid * np.where(valid > 0, per_row, 0)).sum() / valid.sum(), per_row, correct


def test_cpc_info_nce_matches_numpy_zero_for_a_perfect_encoder_log_n_for_a_blind_one():
  rng = np.random.RandomState(0)
  valid = np.array([1, 1, 1, 0, 1, 1], np.float32)
  random_q, random_k = rng.randn(6, 8).astype(np.float32), rng.randn(6, 8).astype(np.float32)
  perfect = 30 * np.eye(6, 8, dtype=np.float32)
  cases = [(random_q, random_k), (perfect, perfect), (np.zeros_like(perfect), perfect),
           (perfect, np.roll(perfect, 1, axis=0))]
  with tf.Graph().as_default(), tf1.Session() as sess:
    got = sess.run([cpc.info_nce(tf.constant(q), tf.constant(k), tf.constant(valid))
                    for q, k in cases])
  for (q, k), (loss, per_row, correct) in zip(cases, got):
    want_loss, want_rows, want_correct = _info_nce_reference(q, k, valid)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(per_row[valid > 0], want_rows[valid > 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(correct[valid > 0], want_correct[valid > 0])
  (_, _, _), (perfect_loss, _, perfect_correct), (blind_loss, _, _), (_, _, shifted) = got
  assert perfect_loss < 1e-6 and perfect_correct[valid > 0].all()
  np.testing.assert_allclose(blind_loss, np.log(valid.sum()), rtol=1e-6)  # uniform over 5
  assert not shifted[valid > 0].any()  # each query's own key moved to the next row


def test_cpc_masks_the_chosen_sentences_and_encodes_each_alone(data):
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  input_fn = etc_run.input_fn_builder([str(data["root"] / "data.tfrecord")], config, L, G, P,
                                      is_training=False)
  rate, slots, cut = 0.5, 3, 6
  with tf.Graph().as_default():
    with tf1.Session() as sess:
      got = sess.run(tf1.data.make_one_shot_iterator(input_fn({"batch_size": 3})).get_next())
  with tf.Graph().as_default():
    batch = {name: tf.constant(value) for name, value in got.items()}
    seed = tf1.placeholder(tf.int64, [2])
    start, length, real = cpc.sentence_spans(batch["sentence_ids"], batch["long_breakpoints"], G)
    chosen, valid = cpc.select_sentences(length, rate, slots, seed)
    masked_ids, _, weights = cpc.masked_long_inputs(
        batch["token_ids"], batch["sentence_ids"], real, chosen, valid, 103, G,
        batch["masked_lm_positions"], batch["masked_lm_weights"])
    original = cpc.unmasked_token_ids(batch["token_ids"], batch["masked_lm_positions"],
                                      batch["masked_lm_ids"], batch["masked_lm_weights"])
    lone = cpc.sentence_inputs(original, batch["global_token_ids"], start, length, chosen,
                               config, cut)
    with tf1.Session() as sess:
      picks, ok, ids, mlm_weights, alone = sess.run(
          [chosen, valid, masked_ids, weights, lone], {seed: [5, 1]})
      # The choice is a function of the seed alone (the step: a resumed job draws the same).
      again, other = [sess.run(chosen, {seed: s}) for s in ([5, 1], [6, 1])]
  np.testing.assert_array_equal(again, picks)
  assert (other != picks).any()
  text = got["token_ids"].copy()
  for b in range(3):
    n = int((got["global_token_ids"][b] != 0).sum())
    real_len = int(got["long_breakpoints"][b].nonzero()[0].max()) + 1
    k = min(slots, int(np.ceil(rate * n)))
    assert ok[b].tolist() == [1.0] * k + [0.0] * (slots - k)
    picked = picks[b, :k]
    assert len(set(picked)) == k and picked.max() < n
    inside = np.isin(got["sentence_ids"][b], picked) & (np.arange(L) < real_len)
    np.testing.assert_array_equal(ids[b], np.where(inside, 103, got["token_ids"][b]))
    hit = inside[got["masked_lm_positions"][b]]
    np.testing.assert_array_equal(mlm_weights[b], got["masked_lm_weights"][b] * ~hit)
    live = got["masked_lm_weights"][b] > 0
    text[b, got["masked_lm_positions"][b][live]] = got["masked_lm_ids"][b][live]
    for m in range(k):
      tokens = text[b, :real_len][got["sentence_ids"][b, :real_len] == picked[m]][:cut]
      row = b * slots + m
      np.testing.assert_array_equal(alone["token_ids"][row],
                                    np.pad(tokens, (0, cut - len(tokens))))
      assert alone["global_token_ids"][row, 0] == got["global_token_ids"][b, picked[m]]
  # The lone sentences' side inputs are etc_inputs' (one example, one sentence, one global).
  lengths = (alone["token_ids"] != 0).sum(axis=1)
  breaks = np.zeros_like(alone["token_ids"])
  breaks[np.arange(len(breaks)), np.maximum(lengths, 1) - 1] = 1
  want = etc_inputs.make_global_local_transformer_side_inputs(
      breaks, np.ones([len(breaks), 1], np.int32), np.zeros_like(breaks), config.local_radius,
      config.relative_pos_max_distance, use_hard_g2l_mask=True)
  for name in etc_inputs.SIDE_INPUT_NAMES:
    np.testing.assert_array_equal(alone[name], want[name], err_msg=name)


def test_cpc_flags_are_checked_in_one_line():
  names = ("cpc_loss_weight cpc_sentence_mask_rate cpc_max_sentences_per_seq "
           "cpc_max_sentence_length cpc_mask_token_id max_seq_length max_global_seq_length")
  flag_values = collections.namedtuple("Flags", names)
  good = dict(cpc_loss_weight=1.0, cpc_sentence_mask_rate=0.1, cpc_max_sentences_per_seq=G,
              cpc_max_sentence_length=L, cpc_mask_token_id=103, max_seq_length=L,
              max_global_seq_length=G)
  assert etc_run.cpc_options_from_flags(flag_values(**dict(good, cpc_loss_weight=0.0)),
                                        30522) is None
  assert etc_run.cpc_options_from_flags(flag_values(**good), 30522) == etc_run.CpcOptions(
      1.0, 0.1, G, L, 103)
  # Not given: as many as G and L allow, up to 32 sentences of 64 tokens.
  unset_maxima = dict(good, cpc_max_sentences_per_seq=None, cpc_max_sentence_length=None)
  assert etc_run.cpc_options_from_flags(flag_values(**unset_maxima), 30522) == (
      etc_run.CpcOptions(1.0, 0.1, G, L, 103))
  assert etc_run.cpc_options_from_flags(flag_values(**dict(
      unset_maxima, max_global_seq_length=256, max_seq_length=4096)), 30522) == (
          etc_run.CpcOptions(1.0, 0.1, 32, 64, 103))
  for change, message in (
      ({"cpc_loss_weight": -1.0},
       "--cpc_loss_weight=-1.0: must be a finite number >= 0 (0: no CPC loss)"),
      ({"cpc_sentence_mask_rate": 0.0}, "--cpc_sentence_mask_rate=0.0: must be in (0, 1]"),
      ({"cpc_max_sentences_per_seq": G + 1},
       "--cpc_max_sentences_per_seq=9: must be in [1, --max_global_seq_length=8]"),
      ({"cpc_max_sentence_length": 0},
       "--cpc_max_sentence_length=0: must be in [1, --max_seq_length=64]"),
      ({"cpc_mask_token_id": 30522},
       "--cpc_mask_token_id=30522: must be a token id in [0, vocab_size=30522)")):
    with pytest.raises(common.UsageError) as error:
      etc_run.cpc_options_from_flags(flag_values(**dict(good, **change)), 30522)
    assert str(error.value) == message
  # The [MASK] id comes from the data's summary unless given; a different one is refused.
  unset = flag_values(**dict(good, cpc_mask_token_id=None))
  assert etc_run.cpc_options_from_flags(unset, 8000, data_mask_id=4).mask_token_id == 4
  for flags_given, data_id, message in (
      (unset, None, "--cpc_mask_token_id: not given, and no summary beside --input_file records "
                    "the data's [MASK] id; pass the [MASK] id of the data's vocabulary"),
      (flag_values(**good), 4, "--cpc_mask_token_id=103: the data's summary records [MASK] = 4 "
                               "(its vocabulary's); leave the flag out")):
    with pytest.raises(common.UsageError) as error:
      etc_run.cpc_options_from_flags(flags_given, 8000, data_mask_id=data_id)
    assert str(error.value) == message
