"""Tests for analyze_attention.py: hand-computed measures and an end-to-end run on tiny checkpoints.

The end-to-end test saves checkpoints made from tests/numpy_bert.random_params, runs the tool
(side by side, three backbones) in a subprocess on hand-written TFRecords with padding, and
compares its tables with an independent NumPy computation: the forward pass of numpy_bert and an
explicit per-token, per-head loop for the Kobayashi decomposition.
"""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import last_error_line, run_tool
import analyze_attention as aa
import numpy_bert

tf1 = tf.compat.v1


def test_entropy_hand_values():
  probs = np.array([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
  np.testing.assert_allclose(aa.attention_entropy(probs), [math.log(4), 0.0, math.log(2)],
                             atol=1e-12)


def test_jsd_hand_values():
  p = np.array([[1.0, 0.0], [0.3, 0.7], [1.0, 0.0]])
  q = np.array([[0.0, 1.0], [0.3, 0.7], [0.5, 0.5]])
  # Third row by hand: M = (0.75, 0.25); KL(p||M) = log2(4/3); KL(q||M) = 0.5 log2(2/3) + 0.5.
  third = 0.5 * math.log2(4.0 / 3.0) + 0.5 * (0.5 * math.log2(2.0 / 3.0) + 0.5)
  np.testing.assert_allclose(aa.jensen_shannon(p, q), [1.0, 0.0, third], atol=1e-12)
  np.testing.assert_allclose(aa.jensen_shannon(q, p), aa.jensen_shannon(p, q), atol=1e-15)


def test_spearman_with_ties():
  np.testing.assert_allclose(aa.rankdata([10, 20, 20, 30]), [1, 2.5, 2.5, 4])
  # Ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): Pearson of the ranks = 4.5 / sqrt(4.5 * 5).
  assert aa.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(22.5))
  assert aa.spearman([1, 2, 3, 4], [9, 7, 5, 1]) == pytest.approx(-1.0)
  assert math.isnan(aa.spearman([1, 1, 1], [1, 2, 3]))


def test_expansion_rate_hand_made_map():
  d = 4
  # M = diag(2, 2, 2, 2, 1): sum sigma^2 = 17.
  assert aa.affine_expansion_rate(2 * np.eye(d), np.zeros(d)) == pytest.approx(math.sqrt(17 / 5))
  # The bias adds its squared norm: 16 + 9 + 1.
  bias = np.array([3.0, 0, 0, 0])
  assert aa.affine_expansion_rate(2 * np.eye(d), bias) == pytest.approx(math.sqrt(26 / 5))
  # Per head: W^h = W_V^h W_O^h; with W_V = W_O = I and 2 heads each head keeps 2 coordinates.
  lp = {"value_kernel": np.eye(d), "value_bias": np.zeros(d), "output_kernel": np.eye(d)}
  per_head, whole = aa.expansion_rates(lp, 2)
  np.testing.assert_allclose(per_head, [math.sqrt(3 / 5)] * 2)
  assert whole == pytest.approx(1.0)   # the identity map


def test_reservoir_exact_then_sampled():
  r = aa.Reservoir(100, seed=1)
  r.add(np.arange(60))
  assert r.count == 60 and sorted(r.sample()) == list(range(60))
  assert r.median() == pytest.approx(29.5)
  r.add(np.arange(60, 1000))
  assert r.count == 1000 and len(r.sample()) == 100
  assert len(set(r.sample().tolist())) == 100 and r.sample().max() < 1000
  assert r.mean() == pytest.approx(499.5)           # exact running mean
  assert r.sample().max() > 500                    # later values got in


def _loop_ratios(x, probs, lp, num_heads, pre_ln):
  """Kobayashi decomposition written token by token (independent of aa.mixing_ratios)."""
  batch, seq, d = x.shape
  head = d // num_heads
  out = {e: np.zeros([batch, seq]) for e in aa.ESTIMATORS}
  for b in range(batch):
    attn_in = x[b]
    if pre_ln:
      attn_in = numpy_bert.layer_norm(x[b], lp["in_ln_gamma"], lp["in_ln_beta"])

    def f(h, j):
      sl = slice(h * head, (h + 1) * head)
      return (attn_in[j] @ lp["value_kernel"][:, sl] + lp["value_bias"][sl]) @ \
          lp["output_kernel"][sl, :]

    for i in range(seq):
      context = np.zeros(d)
      own = np.zeros(d)
      for h in range(num_heads):
        for j in range(seq):
          term = probs[b, h, i, j] * f(h, j)
          if j == i:
            own += term
          else:
            context += term
      y = context + own + lp["output_bias"] + x[b, i]
      s = math.sqrt(np.var(y) + 1e-12)
      g = lambda z: (z - z.mean()) / s * lp["ln_gamma"]
      # The decomposition is exact: LN(y) = g(context) + g(own + x) + g(b_O) + beta.
      np.testing.assert_allclose(
          g(context) + g(own + x[b, i]) + g(lp["output_bias"]) + lp["ln_beta"],
          numpy_bert.layer_norm(y, lp["ln_gamma"], lp["ln_beta"]), atol=1e-9)
      w = 1.0 - np.mean([probs[b, h, i, i] for h in range(num_heads)])
      n = np.linalg.norm
      out["ATTN-W"][b, i] = w
      out["ATTNRES-W"][b, i] = 0.5 * w
      out["ATTN-N"][b, i] = n(context) / (n(context) + n(own))
      out["ATTNRES-N"][b, i] = n(context) / (n(context) + n(own + x[b, i]))
      out["ATTNRESLN-N"][b, i] = n(g(context)) / (n(g(context)) + n(g(own + x[b, i])))
  return out


@pytest.mark.parametrize("pre_ln", [False, True])
def test_mixing_ratios_match_token_loop(pre_ln):
  rng = np.random.RandomState(3)
  d, heads, seq = 8, 2, 5
  x = rng.randn(2, seq, d)
  logits = rng.randn(2, heads, seq, seq) * 2
  probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  lp = {"value_kernel": rng.randn(d, d) / 3, "value_bias": rng.randn(d) * 0.1,
        "output_kernel": rng.randn(d, d) / 3, "output_bias": rng.randn(d) * 0.1,
        "ln_gamma": 1 + 0.2 * rng.randn(d), "ln_beta": 0.1 * rng.randn(d)}
  if pre_ln:
    lp["in_ln_gamma"] = 1 + 0.2 * rng.randn(d)
    lp["in_ln_beta"] = 0.1 * rng.randn(d)
  got = aa.mixing_ratios(x, probs, lp, heads)
  want = _loop_ratios(x, probs, lp, heads, pre_ln)
  for e in aa.ESTIMATORS:
    np.testing.assert_allclose(got[e], want[e], rtol=1e-9, atol=1e-12, err_msg=e)


# ----------------------------------------------------------------------------------------------
# End to end: checkpoints -> tool (subprocess) -> tables, compared with NumPy.
# ----------------------------------------------------------------------------------------------

SEQ = 12
# [CLS]=101 [SEP]=102 [MASK]=103; the rest ordinary word pieces; zeros are padding.
EXAMPLES = [
    ([101, 2023, 2003, 103, 3231, 102, 2178, 6251, 102], [0, 0, 0, 0, 0, 0, 1, 1, 1]),
    ([101, 1996, 4937, 103, 2006, 1996, 13523, 102, 2009, 2001, 2204, 102],
     [0] * 8 + [1] * 4),
    ([101, 7592, 102], [0, 0, 0]),
]


def _write_records(path):
  with tf.io.TFRecordWriter(path) as writer:
    for ids, segs in EXAMPLES:
      pad = SEQ - len(ids)
      feats = {
          "input_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
          "segment_ids": segs + [0] * pad, "masked_lm_positions": [3, 0],
          "masked_lm_ids": [2000, 0], "next_sentence_labels": [0]}
      feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
                 for k, v in feats.items()}
      feature["masked_lm_weights"] = tf.train.Feature(
          float_list=tf.train.FloatList(value=[1.0, 0.0]))
      writer.write(tf.train.Example(features=tf.train.Features(feature=feature))
                   .SerializeToString())


def _save_checkpoint(params, path):
  graph = tf.Graph()
  with graph.as_default():
    variables = {name: tf1.Variable(value, name=name) for name, value in params.items()}
    saver = tf1.train.Saver(variables)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      saver.save(sess, path)


def _config(vocab_size, ln, res):
  return {"vocab_size": vocab_size, "hidden_size": 16, "num_hidden_layers": 3,
          "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.02,
          "layer_norm_type": ln, "residual_attention": res}


def _expected(params, config):
  """Per-layer mean ratios over real tokens, per-head entropy and JSD medians, from NumPy."""
  ids = np.zeros([len(EXAMPLES), SEQ], np.int64)
  mask = np.zeros_like(ids)
  segs = np.zeros_like(ids)
  for k, (i, s) in enumerate(EXAMPLES):
    ids[k, :len(i)] = i
    mask[k, :len(i)] = 1
    segs[k, :len(s)] = s
  out = numpy_bert.bert_forward(params, config, ids, mask, segs, dtype=np.float64)
  real = mask.astype(bool)
  inputs = [out["embedding_output"]] + out["all_encoder_layers"][:-1]
  pre = config["layer_norm_type"] == "pre"
  heads = config["num_attention_heads"]
  means, mask_means, entropy, jsd = [], [], [], []
  for l in range(config["num_hidden_layers"]):
    lp = aa.layer_attention_params(params, l, config["layer_norm_type"])
    probs = out["attention_probs"][l]
    r = _loop_ratios(inputs[l], probs, lp, heads, pre)
    means.append([r[e][real].mean() for e in aa.ESTIMATORS])
    mask_means.append([r[e][ids == 103].mean() for e in aa.ESTIMATORS])
    ent = []
    js = []
    for h in range(heads):
      rows = probs[:, h][real]
      ent.append(np.median([-sum(p * math.log(p) for p in row if p > 0) for row in rows]))
      if l:
        prev = out["attention_probs"][l - 1][:, h][real]
        vals = []
        for p, q in zip(rows, prev):
          m = 0.5 * (p + q)
          kl = lambda a: sum(a[t] * math.log2(a[t] / m[t]) for t in range(len(a)) if a[t] > 0)
          vals.append(0.5 * kl(p) + 0.5 * kl(q))
        js.append(np.median(vals))
    entropy.append(ent)
    if l:
      jsd.append(js)
  return means, mask_means, entropy, jsd


@pytest.mark.slow
def test_end_to_end_side_by_side_matches_numpy(tmp_path, vocab_file):
  with open(vocab_file) as f:
    vocab_size = sum(1 for line in f if line.strip())
  variants = [("postln", "post", "none"), ("preln", "pre", "none"), ("realformer", "post", "sum")]
  ckpts, cfg_files, all_params, configs = [], [], [], []
  for k, (name, ln, res) in enumerate(variants):
    config = _config(vocab_size, ln, res)
    params = numpy_bert.random_params(config, seed=11 + k)
    path = str(tmp_path / name / "model.ckpt")
    os.makedirs(os.path.dirname(path))
    _save_checkpoint(params, path)
    cfg = str(tmp_path / name / "bert_config.json")
    with open(cfg, "w") as f:
      json.dump(config, f)
    ckpts.append(str(tmp_path / name))     # a directory: the tool takes its latest checkpoint
    all_params.append(params)
    configs.append(config)
  records = str(tmp_path / "data.tfrecord")
  _write_records(records)
  freq = tmp_path / "freq.txt"
  freq.write_text("this is a test sentence .\nthe cat sat on the mat , it was good .\n"
                  "hello hello the the the\n")
  out_dir = tmp_path / "out"
  run_tool("analyze_attention.py", [
      "--init_checkpoint=%s" % ",".join(ckpts), "--labels=Post,Pre,Real",
      "--vocab_file=%s" % vocab_file, "--input_tfrecord=%s" % records,
      "--frequency_corpus=%s" % freq, "--batch_size=2", "--output_dir=%s" % out_dir])

  mixing = json.loads((out_dir / "mixing.json").read_text())
  ent_json = json.loads((out_dir / "entropy_medians.json").read_text())
  jsd_json = json.loads((out_dir / "jsd_medians.json").read_text())
  num_real = sum(len(i) for i, _ in EXAMPLES)
  for label, params, config in zip(["Post", "Pre", "Real"], all_params, configs):
    means, mask_means, entropy, jsd = _expected(params, config)
    model = mixing["models"][label]
    got = np.array(model["means"])                     # [layer][token type][estimator]
    np.testing.assert_allclose(got[:, 0, :], means, rtol=2e-4, atol=2e-5, err_msg=label)
    mask_type = aa.TOKEN_TYPES.index("[MASK]")
    np.testing.assert_allclose(got[:, mask_type, :], mask_means, rtol=2e-4, atol=2e-5)
    counts = np.array(model["counts"])
    assert counts[0, 0] == num_real                    # padding never counted
    assert counts[0, aa.TOKEN_TYPES.index("[CLS]")] == 3
    assert counts[0, aa.TOKEN_TYPES.index("[SEP]")] == 5
    assert counts[0, mask_type] == 2
    for l in range(config["num_hidden_layers"]):
      np.testing.assert_allclose(ent_json[label]["medians"]["layer_%d" % l], entropy[l],
                                 rtol=1e-4, atol=1e-5)
      if l:
        np.testing.assert_allclose(jsd_json[label]["medians"]["layer_%d" % l], jsd[l - 1],
                                   rtol=1e-3, atol=1e-5)
    sp = model["spearman_freq_rank_vs_attnres_n"]
    assert sp["num_pieces"] > 3 and -1 <= sp["mean_over_layers"] <= 1
    lp = aa.layer_attention_params(params, 0, config["layer_norm_type"])
    assert model["expansion_rate"]["layer"][0] == pytest.approx(
        aa.affine_expansion_rate(lp["value_kernel"] @ lp["output_kernel"],
                                 lp["value_bias"] @ lp["output_kernel"]), rel=1e-6)
  # The RealFormer and Post-LN models differ only in alpha, so their entropies must differ.
  assert ent_json["Post"]["medians"]["layer_2"] != ent_json["Real"]["medians"]["layer_2"]

  for name in ("entropy.png", "jsd.png", "mixing.png"):
    data = (out_dir / name).read_bytes()
    assert len(data) > 1024 and data[:8] == b"\x89PNG\r\n\x1a\n", name
  report = (out_dir / "report.md").read_text()
  assert "| Post | all |" in report and "entropy.png" in report
  csv_lines = (out_dir / "mixing.csv").read_text().splitlines()
  assert csv_lines[0].startswith("model,layer,token_type,estimator")
  assert len(csv_lines) == 1 + 3 * 3 * len(aa.TOKEN_TYPES) * len(aa.ESTIMATORS)
  assert len((out_dir / "entropy_medians.csv").read_text().splitlines()) == 1 + 3 * 3 * 2


def test_text_input_pairs_and_masks(vocab_file, tmp_path):
  import tokenization
  text = tmp_path / "t.txt"
  text.write_text("the cat sat .\nit was good .\nvery good .\n\na lone sentence here .\n")
  tok = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=True)
  examples = list(aa.text_examples([str(text)], tok, 16, 0.0, 0))
  assert len(examples) == 2
  ids, segs = examples[0]
  assert ids[0] == 101 and ids.count(102) == 2 and ids[-1] == 102
  assert segs[0] == 0 and segs[-1] == 1 and len(ids) <= 16
  assert examples[1][0].count(102) == 1 and set(examples[1][1]) == {0}
  masked = list(aa.text_examples([str(text)], tok, 16, 0.99, 0))
  assert masked[0][0].count(103) == len(ids) - 3       # every normal token masked


def test_bad_flag_is_one_line_error(tmp_path, vocab_file):
  proc = run_tool("analyze_attention.py", [
      "--init_checkpoint=%s" % tmp_path, "--vocab_file=%s" % vocab_file,
      "--input_text=%s" % vocab_file, "--output_dir=%s" % tmp_path], expect_rc=2)
  assert last_error_line(proc).startswith("error: --init_checkpoint=")


def test_latin1_text_is_decoded_with_replacement_and_counted(vocab_file, tmp_path):
  import tokenization
  # "café" in latin-1 (0xe9) is not UTF-8; the tokenizer drops the replacement character, as
  # it drops the bytes tokenization.convert_to_unicode ignores.
  text = tmp_path / "latin1.txt"
  text.write_bytes(b"the caf\xe9 was good .\nit was \xe0 la carte .\n\nfine text .\n")
  stats = aa.DecodeStats()
  docs = list(aa.read_documents([str(text)], stats))
  assert docs == [["the caf\ufffd was good .", "it was \ufffd la carte ."], ["fine text ."]]
  assert (stats.lines, stats.first) == (2, "%s:1" % text)
  tok = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=True)
  assert tok.tokenize(docs[0][0]) == tok.tokenize(
      tokenization.convert_to_unicode(b"the caf\xe9 was good ."))
  freq_stats = aa.DecodeStats()
  counts = aa.count_frequencies([str(text)], tok, 10 ** 6, freq_stats)
  assert freq_stats.lines == 2 and counts[tok.vocab["good"]] == 1


@pytest.mark.slow
def test_text_run_on_latin1_and_one_line_errors(tmp_path, vocab_file):
  with open(vocab_file) as f:
    vocab_size = sum(1 for line in f if line.strip())
  config = _config(vocab_size, "post", "none")
  model_dir = tmp_path / "model"
  model_dir.mkdir()
  _save_checkpoint(numpy_bert.random_params(config, seed=5), str(model_dir / "model.ckpt"))
  (model_dir / "bert_config.json").write_text(json.dumps(config))
  text = tmp_path / "latin1.txt"
  text.write_bytes(b"the caf\xe9 was good .\nit was fine .\n\nna\xefve text here .\n")
  out_dir = tmp_path / "out"
  base = ["--init_checkpoint=%s" % model_dir, "--vocab_file=%s" % vocab_file,
          "--input_text=%s" % text, "--max_seq_length=16", "--batch_size=2"]
  proc = run_tool("analyze_attention.py", base + ["--output_dir=%s" % out_dir])
  warnings = [l for l in proc.stderr.splitlines() if l.startswith("warning: ")]
  # Once for the analysed text, once for the frequency corpus (the same file by default).
  assert warnings == [
      "warning: --%s: 2 line(s) are not valid UTF-8 (first: %s:1); their undecodable bytes "
      "were dropped" % (flag, text) for flag in ("input_text", "input_text")]
  meta = json.loads((out_dir / "summary.json").read_text())["meta"]
  assert meta["examples"] == 2 and meta["lines_with_undecodable_bytes"] == 2
  assert meta["frequency_corpus_lines_with_undecodable_bytes"] == 2
  assert "2 input line(s) were not valid UTF-8" in (out_dir / "report.md").read_text()
  # --output_dir that is a file, or under one: one line, nothing written.
  stray = tmp_path / "stray.txt"
  stray.write_text("x")
  for target, message in ((stray, "is a file, expected a directory"),
                          (stray / "sub", "%s is a file, not a directory" % stray)):
    proc = run_tool("analyze_attention.py", base + ["--output_dir=%s" % target], expect_rc=2)
    assert last_error_line(proc) == "error: --output_dir=%s: %s" % (target, message)
  assert stray.read_text() == "x"
  # The tokenizer set-up check: an uncased vocab with --do_lower_case=False.
  proc = run_tool("analyze_attention.py", base + ["--output_dir=%s" % out_dir,
                                                  "--do_lower_case=false"], expect_rc=2)
  assert last_error_line(proc).startswith(
      "error: --do_lower_case=False: vocab %s has no upper-case entries" % vocab_file)
