"""Tests for convert_hf_checkpoint.py, the NumPy reference (numpy_bert.py) and modeling.py against both.

1. Unit: tiny random HF-style directories ("gelu" and "gelu_new", with/without "bert." prefix and
   pre-training heads) -> every TF variable name, shape and value checked against a mapping written
   out here by hand from DATA_FORMATS.md; error cases; reverse round trip.
2. Real: the shared all-MiniLM-L6-v2 checkpoint: NumPy forward on the converted TF variables vs an
   independent NumPy forward on the raw HF tensors; paraphrases rank above unrelated sentences.
3. modeling.py: the TF graph restored from converted / random checkpoints vs the NumPy reference
   (skipped only while modeling.py does not exist).
"""

import json
import os
import re

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file
import tensorflow as tf

from conftest import REPO_DIR, last_error_line, run_tool, shared_path
from realformer_tf import common
import convert_hf_checkpoint as conv
import numpy_bert

TINY = {
    "vocab_size": 40, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 12, "max_position_embeddings": 16, "type_vocab_size": 2,
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
    "layer_norm_eps": 1e-12, "model_type": "bert", "position_embedding_type": "absolute",
}


def _tiny_hf_tensors(rng, prefix="", heads=False, tied_decoder=True):
  """Random tensors with Hugging Face BERT names and PyTorch layouts ([out, in] Linear weights)."""
  v, h, i, p = TINY["vocab_size"], TINY["hidden_size"], TINY["intermediate_size"], 16
  r = lambda *shape: rng.randn(*shape).astype(np.float32)
  t = {
      prefix + "embeddings.word_embeddings.weight": r(v, h),
      prefix + "embeddings.position_embeddings.weight": r(p, h),
      prefix + "embeddings.token_type_embeddings.weight": r(2, h),
      prefix + "embeddings.LayerNorm.weight": r(h),
      prefix + "embeddings.LayerNorm.bias": r(h),
      prefix + "embeddings.position_ids": np.arange(p, dtype=np.int64)[None],
      prefix + "pooler.dense.weight": r(h, h),
      prefix + "pooler.dense.bias": r(h),
  }
  for n in range(TINY["num_hidden_layers"]):
    pre = prefix + "encoder.layer.%d." % n
    for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                 "attention.output.dense"):
      t[pre + name + ".weight"] = r(h, h)
      t[pre + name + ".bias"] = r(h)
    t[pre + "intermediate.dense.weight"] = r(i, h)
    t[pre + "intermediate.dense.bias"] = r(i)
    t[pre + "output.dense.weight"] = r(h, i)
    t[pre + "output.dense.bias"] = r(h)
    for name in ("attention.output.LayerNorm", "output.LayerNorm"):
      t[pre + name + ".weight"] = r(h)
      t[pre + name + ".bias"] = r(h)
  if heads:
    t["cls.predictions.transform.dense.weight"] = r(h, h)
    t["cls.predictions.transform.dense.bias"] = r(h)
    t["cls.predictions.transform.LayerNorm.weight"] = r(h)
    t["cls.predictions.transform.LayerNorm.bias"] = r(h)
    t["cls.predictions.bias"] = r(v)
    t["cls.predictions.decoder.bias"] = t["cls.predictions.bias"].copy()
    t["cls.predictions.decoder.weight"] = (t[prefix + "embeddings.word_embeddings.weight"].copy()
                                           if tied_decoder else r(v, h))
    t["cls.seq_relationship.weight"] = r(2, h)
    t["cls.seq_relationship.bias"] = r(2)
  return t


def _expected_tf(hf, prefix, heads):
  """The TF checkpoint the converter must write, spelled out name by name (DATA_FORMATS.md)."""
  e = {
      "bert/embeddings/word_embeddings": hf[prefix + "embeddings.word_embeddings.weight"],
      "bert/embeddings/position_embeddings": hf[prefix + "embeddings.position_embeddings.weight"],
      "bert/embeddings/token_type_embeddings": hf[prefix + "embeddings.token_type_embeddings.weight"],
      "bert/embeddings/LayerNorm/gamma": hf[prefix + "embeddings.LayerNorm.weight"],
      "bert/embeddings/LayerNorm/beta": hf[prefix + "embeddings.LayerNorm.bias"],
      "bert/pooler/dense/kernel": hf[prefix + "pooler.dense.weight"].T,
      "bert/pooler/dense/bias": hf[prefix + "pooler.dense.bias"],
  }
  for n in range(TINY["num_hidden_layers"]):
    src = prefix + "encoder.layer.%d." % n
    dst = "bert/encoder/layer_%d/" % n
    pairs = [("attention.self.query", "attention/self/query"),
             ("attention.self.key", "attention/self/key"),
             ("attention.self.value", "attention/self/value"),
             ("attention.output.dense", "attention/output/dense"),
             ("intermediate.dense", "intermediate/dense"),
             ("output.dense", "output/dense")]
    for a, b in pairs:
      e[dst + b + "/kernel"] = hf[src + a + ".weight"].T
      e[dst + b + "/bias"] = hf[src + a + ".bias"]
    for a, b in [("attention.output.LayerNorm", "attention/output/LayerNorm"),
                 ("output.LayerNorm", "output/LayerNorm")]:
      e[dst + b + "/gamma"] = hf[src + a + ".weight"]
      e[dst + b + "/beta"] = hf[src + a + ".bias"]
  if heads:
    e["cls/predictions/transform/dense/kernel"] = hf["cls.predictions.transform.dense.weight"].T
    e["cls/predictions/transform/dense/bias"] = hf["cls.predictions.transform.dense.bias"]
    e["cls/predictions/transform/LayerNorm/gamma"] = hf["cls.predictions.transform.LayerNorm.weight"]
    e["cls/predictions/transform/LayerNorm/beta"] = hf["cls.predictions.transform.LayerNorm.bias"]
    e["cls/predictions/output_bias"] = hf["cls.predictions.bias"]
    e["cls/seq_relationship/output_weights"] = hf["cls.seq_relationship.weight"]  # [2, H], as is
    e["cls/seq_relationship/output_bias"] = hf["cls.seq_relationship.bias"]
  return e


def _write_hf_dir(path, tensors, hf_config, vocab_size=TINY["vocab_size"]):
  os.makedirs(path, exist_ok=True)
  save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(hf_config, f)
  with open(os.path.join(path, "vocab.txt"), "w") as f:
    f.write("".join("tok%d\n" % k for k in range(vocab_size)))
  return str(path)


@pytest.mark.parametrize("hf_act,bert_act,prefix,heads", [
    ("gelu", "gelu_exact", "", False),
    ("gelu_new", "gelu", "bert.", True),
])
def test_convert_tiny_every_variable(tmp_path, capsys, hf_act, bert_act, prefix, heads):
  rng = np.random.RandomState(1)
  hf = _tiny_hf_tensors(rng, prefix, heads)
  hf["classifier.weight"] = rng.randn(3, 8).astype(np.float32)  # task head: must be reported
  hf_dir = _write_hf_dir(tmp_path / "hf", hf, dict(TINY, hidden_act=hf_act))
  out = str(tmp_path / "out")
  summary = conv.convert_forward(hf_dir, out)
  assert "classifier.weight" in capsys.readouterr().err  # one warning line lists it
  assert summary["unknown"] == ["classifier.weight"]

  expected = _expected_tf(hf, prefix, heads)
  reader = tf.train.load_checkpoint(os.path.join(out, "bert_model.ckpt"))
  shapes = reader.get_variable_to_shape_map()
  assert set(shapes) == set(expected)
  for name, value in expected.items():
    assert tuple(shapes[name]) == value.shape, name
    got = reader.get_tensor(name)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, value, err_msg=name)
  assert summary["num_tensors"] == len(expected)
  assert summary["num_params"] == sum(v.size for v in expected.values())
  # A non-square kernel really was transposed (a missing transpose would not even have this shape).
  assert tuple(shapes["bert/encoder/layer_1/intermediate/dense/kernel"]) == (8, 12)

  with open(os.path.join(out, "bert_config.json")) as f:
    cfg = json.load(f)
  assert cfg["hidden_act"] == bert_act
  assert cfg["residual_attention"] == "none" and cfg["layer_norm_type"] == "post"
  for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "max_position_embeddings", "type_vocab_size"):
    assert cfg[key] == TINY[key], key
  assert "layer_norm_eps" not in cfg and "model_type" not in cfg
  with open(os.path.join(out, "vocab.txt")) as f:
    assert f.read().split("\n")[:3] == ["tok0", "tok1", "tok2"]
  assert tf.train.latest_checkpoint(out) == os.path.join(out, "bert_model.ckpt")
  assert not [n for n in os.listdir(out) if n.startswith(".tmp")]


def test_converted_tiny_model_runs_like_hf(tmp_path):
  """Forward on converted TF variables == forward on the HF tensors (catches any transposition slip)."""
  rng = np.random.RandomState(2)
  hf = _tiny_hf_tensors(rng)
  for act in ("gelu", "gelu_new"):
    hf_config = dict(TINY, hidden_act=act)
    out = str(tmp_path / act)
    conv.convert_forward(_write_hf_dir(tmp_path / ("hf_" + act), hf, hf_config), out)
    params = conv.read_tf_checkpoint(os.path.join(out, "bert_model.ckpt"))
    with open(os.path.join(out, "bert_config.json")) as f:
      cfg = json.load(f)
    ids = rng.randint(0, 40, size=(2, 9))
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    types = (np.arange(9)[None] >= 5).astype(np.int64).repeat(2, 0)
    ours = numpy_bert.bert_forward(params, cfg, ids, mask, types)
    ref = numpy_bert.hf_bert_forward(hf, hf_config, ids, mask, types)
    np.testing.assert_allclose(ours["sequence_output"], ref["sequence_output"], atol=1e-9)
    np.testing.assert_allclose(ours["pooled_output"], ref["pooled_output"], atol=1e-9)
  # The two activations really differ, so the mapping of hidden_act matters.
  a = numpy_bert.hf_bert_forward(hf, dict(TINY, hidden_act="gelu"), ids)["sequence_output"]
  b = numpy_bert.hf_bert_forward(hf, dict(TINY, hidden_act="gelu_new"), ids)["sequence_output"]
  assert np.abs(a - b).max() > 1e-5


def test_convert_errors(tmp_path):
  rng = np.random.RandomState(3)
  hf = _tiny_hf_tensors(rng)

  def fails(config_overrides, tensors=hf, pattern=""):
    path = tmp_path / ("case%d" % len(os.listdir(tmp_path)))
    hf_dir = _write_hf_dir(path, tensors, dict(dict(TINY, hidden_act="gelu"), **config_overrides))
    with pytest.raises(common.UsageError, match=pattern):
      conv.convert_forward(hf_dir, str(path / "out"))

  fails({"hidden_act": "swish"}, pattern="hidden_act 'swish'")
  fails({"layer_norm_eps": 1e-5}, pattern="layer_norm_eps")
  fails({"model_type": "roberta"}, pattern="model_type")
  fails({"num_hidden_layers": 3}, pattern="layer_2")
  fails({"num_hidden_layers": 1}, pattern="beyond num_hidden_layers")
  fails({"intermediate_size": 10}, pattern=r"intermediate\.dense\.\w+ has shape")
  fails({"vocab_size": 39}, pattern="vocab has 40 tokens")
  broken = dict(hf)
  del broken["encoder.layer.1.output.LayerNorm.bias"]
  fails({}, broken, pattern="layer_1/output/LayerNorm/beta")
  untied = _tiny_hf_tensors(np.random.RandomState(4), heads=True, tied_decoder=False)
  path = _write_hf_dir(tmp_path / "untied", untied, dict(TINY, hidden_act="gelu"))
  assert "cls.predictions.decoder.weight (untied from the word embeddings)" in (
      conv.convert_forward(path, str(tmp_path / "untied_out"))["unknown"])

  # eps override only warns; an existing output needs --overwrite.
  ok = _write_hf_dir(tmp_path / "eps", hf, dict(TINY, hidden_act="gelu", layer_norm_eps=1e-5))
  conv.convert_forward(ok, str(tmp_path / "eps_out"), allow_eps_mismatch=True)
  with pytest.raises(common.UsageError, match="--overwrite"):
    conv.convert_forward(ok, str(tmp_path / "eps_out"), allow_eps_mismatch=True)
  conv.convert_forward(ok, str(tmp_path / "eps_out"), hidden_act="relu", allow_eps_mismatch=True,
                       overwrite=True)
  with open(tmp_path / "eps_out" / "bert_config.json") as f:
    assert json.load(f)["hidden_act"] == "relu"


def test_bfloat16_and_fp16_weights_are_read(tmp_path):
  rng = np.random.RandomState(5)
  hf = _tiny_hf_tensors(rng)
  hf_dir = _write_hf_dir(tmp_path / "hf", hf, dict(TINY, hidden_act="gelu"))
  # Rewrite the file by hand with word embeddings in BF16 (NumPy has no bfloat16 dtype).
  word = hf["embeddings.word_embeddings.weight"]
  bf16_bits = (word.view(np.uint32) >> 16).astype(np.uint16)
  rest = {k: v for k, v in hf.items() if k != "embeddings.word_embeddings.weight"}
  rest["embeddings.pooler_half_test"] = np.zeros(3, np.float16)
  save_file(rest, os.path.join(hf_dir, "rest.safetensors"))
  header_len = int.from_bytes(open(os.path.join(hf_dir, "rest.safetensors"), "rb").read(8), "little")
  with open(os.path.join(hf_dir, "rest.safetensors"), "rb") as f:
    f.seek(8)
    header = json.loads(f.read(header_len))
    data = f.read()
  end = len(data)
  header["embeddings.word_embeddings.weight"] = {
      "dtype": "BF16", "shape": list(word.shape), "data_offsets": [end, end + bf16_bits.nbytes]}
  blob = json.dumps(header).encode()
  with open(os.path.join(hf_dir, "model.safetensors"), "wb") as f:
    f.write(len(blob).to_bytes(8, "little") + blob + data + bf16_bits.tobytes())
  os.remove(os.path.join(hf_dir, "rest.safetensors"))
  tensors = conv.read_hf_weights(hf_dir)
  expected = (bf16_bits.astype(np.uint32) << 16).view(np.float32)
  np.testing.assert_array_equal(tensors["embeddings.word_embeddings.weight"], expected)
  assert np.abs(expected - word).max() < 0.05 * np.abs(word).max()
  np.testing.assert_array_equal(tensors["encoder.layer.0.output.dense.weight"],
                                hf["encoder.layer.0.output.dense.weight"])


def test_reverse_round_trip(tmp_path):
  rng = np.random.RandomState(6)
  for prefix, heads in (("", False), ("bert.", True)):
    hf = _tiny_hf_tensors(rng, prefix, heads)
    hf_dir = _write_hf_dir(tmp_path / ("hf" + prefix), hf, dict(TINY, hidden_act="gelu_new"))
    tf_dir = str(tmp_path / ("tf" + prefix))
    conv.convert_forward(hf_dir, tf_dir)
    back_dir = str(tmp_path / ("back" + prefix))
    conv.convert_reverse(tf_dir, back_dir)
    back = load_file(os.path.join(back_dir, "model.safetensors"))
    skipped = ("embeddings.position_ids", "cls.predictions.decoder.weight",
               "cls.predictions.decoder.bias")
    want = {k: v for k, v in hf.items() if not k.endswith(skipped)}
    assert set(back) == set(want)
    for k, v in want.items():
      np.testing.assert_array_equal(back[k], v, err_msg=k)
    with open(os.path.join(back_dir, "config.json")) as f:
      cfg = json.load(f)
    assert cfg["hidden_act"] == "gelu_new"
    assert cfg["architectures"] == ["BertForPreTraining" if heads else "BertModel"]
  # A RealFormer / Pre-LN model has no Hugging Face BERT equivalent.
  with open(os.path.join(tf_dir, "bert_config.json")) as f:
    cfg = json.load(f)
  cfg["residual_attention"] = "sum"
  with open(os.path.join(tf_dir, "bert_config.json"), "w") as f:
    json.dump(cfg, f)
  with pytest.raises(common.UsageError, match="residual_attention"):
    conv.convert_reverse(tf_dir, str(tmp_path / "nope"))


def test_cli_one_line_errors_and_self_check(tmp_path):
  # Fully quiet TensorFlow: the checks read the last stderr line and stdout.
  env = {"TF_CPP_MIN_LOG_LEVEL": "3"}
  bin_dir = tmp_path / "torch_only"
  bin_dir.mkdir()
  (bin_dir / "config.json").write_text(json.dumps(dict(TINY, hidden_act="gelu")))
  (bin_dir / "pytorch_model.bin").write_bytes(b"not read")
  (bin_dir / "vocab.txt").write_text("".join("t%d\n" % k for k in range(40)))
  proc = run_tool("convert_hf_checkpoint.py", ["--hf_dir=%s" % bin_dir,
                                                "--output_dir=%s" % (tmp_path / "o")],
                  expect_rc=2, timeout=120, env=env)
  last = last_error_line(proc)
  assert last.startswith("error: --hf_dir=") and "pytorch_model.bin" in last and "safetensors" in last

  hf = _tiny_hf_tensors(np.random.RandomState(9))
  hf_dir = _write_hf_dir(tmp_path / "hf", hf, dict(TINY, hidden_act="gelu_pytorch_tanh"))
  proc = run_tool("convert_hf_checkpoint.py", ["--hf_dir=%s" % hf_dir,
                                                "--output_dir=%s" % (tmp_path / "o")],
                  timeout=120, env=env)
  n_params = sum(v.size for k, v in hf.items() if not k.endswith("position_ids"))
  assert "self-check: %d tensors, %s parameters" % (len(hf) - 1, "{:,}".format(n_params)) in proc.stdout
  assert "hidden_act gelu" in proc.stdout


# ---------------------------------------------------------------------------------------------------
# Real checkpoint: all-MiniLM-L6-v2.
# ---------------------------------------------------------------------------------------------------

TRIPLES = [
    ("A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply today."),
    ("The cat sits on the mat.", "A cat is sitting on a rug.",
     "Interest rates were raised by the central bank."),
    ("How do I bake bread at home?", "What is a good recipe for homemade bread?",
     "The train to Paris leaves at noon."),
    ("She is reading a book in the library.", "A woman reads a novel in the library.",
     "Heavy rain caused flooding in the city."),
]


def _mini_tokenize(text, vocab):
  """Lower-case, split words and punctuation, greedy longest-match WordPiece (enough for ASCII text)."""
  pieces = []
  for word in re.findall(r"\w+|[^\w\s]", text.lower()):
    start, sub = 0, []
    while start < len(word):
      end = len(word)
      while end > start:
        cand = word[start:end] if start == 0 else "##" + word[start:end]
        if cand in vocab:
          break
        end -= 1
      if end == start:
        sub = ["[UNK]"]
        break
      sub.append(cand)
      start = end
    pieces.extend(sub)
  return [vocab["[CLS]"]] + [vocab[p] for p in pieces] + [vocab["[SEP]"]]


def _batch(sentences, vocab_file):
  with open(vocab_file, encoding="utf-8") as f:
    vocab = {tok.rstrip("\n"): i for i, tok in enumerate(f)}
  rows = [_mini_tokenize(s, vocab) for s in sentences]
  seq = max(len(r) for r in rows)
  ids = np.zeros((len(rows), seq), np.int64)
  mask = np.zeros_like(ids)
  for b, r in enumerate(rows):
    ids[b, :len(r)] = r
    mask[b, :len(r)] = 1
  return ids, mask, np.zeros_like(ids)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
  """all-MiniLM-L6-v2 converted once; yields (hf_dir, tf_dir, tf params, bert_config)."""
  hf_dir = shared_path("checkpoints", "all-MiniLM-L6-v2")
  out = str(tmp_path_factory.mktemp("minilm"))
  summary = conv.convert_forward(hf_dir, out, overwrite=True)
  assert summary["unknown"] == []
  assert summary["num_params"] == 22713216
  params = conv.read_tf_checkpoint(os.path.join(out, "bert_model.ckpt"))
  with open(os.path.join(out, "bert_config.json")) as f:
    cfg = json.load(f)
  return hf_dir, out, params, cfg


def test_minilm_converted_matches_hf_forward(minilm):
  hf_dir, out, params, cfg = minilm
  assert cfg["hidden_act"] == "gelu_exact"
  with open(os.path.join(hf_dir, "config.json")) as f:
    hf_config = json.load(f)
  hf = load_file(os.path.join(hf_dir, "model.safetensors"))
  sentences = [s for t in TRIPLES[:2] for s in t]
  ids, mask, types = _batch(sentences, os.path.join(out, "vocab.txt"))
  assert mask.sum(1).min() < ids.shape[1]  # padding is exercised
  ref = numpy_bert.hf_bert_forward(hf, hf_config, ids, mask, types)
  ours64 = numpy_bert.bert_forward(params, cfg, ids, mask, types)
  ours32 = numpy_bert.bert_forward(params, cfg, ids, mask, types, dtype=np.float32)
  diff64 = np.abs(ours64["sequence_output"] - ref["sequence_output"]).max()
  diff32 = np.abs(ours32["sequence_output"] - ref["sequence_output"]).max()
  pooled = np.abs(ours64["pooled_output"] - ref["pooled_output"]).max()
  print("MiniLM max abs diff: float64 %.3g, float32 %.3g, pooled %.3g" % (diff64, diff32, pooled))
  assert diff64 <= 1e-4 and diff32 <= 1e-4 and pooled <= 1e-4
  for a, b in zip(ours64["all_encoder_layers"], ref["hidden_states"][1:]):
    assert np.abs(a - b).max() <= 1e-4


def test_minilm_paraphrases_rank_above_unrelated(minilm):
  _, out, params, cfg = minilm
  sentences = [s for t in TRIPLES for s in t]
  ids, mask, types = _batch(sentences, os.path.join(out, "vocab.txt"))
  emb = numpy_bert.mean_pool(numpy_bert.bert_forward(params, cfg, ids, mask, types)["sequence_output"],
                             mask)
  emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
  for k, (a, p, u) in enumerate(TRIPLES):
    ea, ep, eu = emb[3 * k], emb[3 * k + 1], emb[3 * k + 2]
    para, unrel = float(ea @ ep), float(ea @ eu)
    print("cos(%r, paraphrase) = %.3f, cos(unrelated) = %.3f" % (a, para, unrel))
    assert para > unrel + 0.3, (a, para, unrel)


# ---------------------------------------------------------------------------------------------------
# modeling.py against the NumPy reference.
# ---------------------------------------------------------------------------------------------------


def _modeling():
  if not os.path.exists(os.path.join(REPO_DIR, "modeling.py")):
    pytest.skip("modeling.py does not exist yet")
  import modeling  # pylint: disable=g-import-not-at-top
  return modeling


def _run_modeling(modeling, config, ckpt, ids, mask, types):
  """Builds modeling.BertModel (is_training=False), restores every variable from ckpt, runs it."""
  with tf.Graph().as_default():
    model = modeling.BertModel(config=config, is_training=False, input_ids=tf.constant(ids, tf.int32),
                               input_mask=tf.constant(mask, tf.int32),
                               token_type_ids=tf.constant(types, tf.int32))
    # Saver(var_list=all model variables) fails if any model variable is missing from the checkpoint.
    saver = tf.compat.v1.train.Saver(var_list=tf.compat.v1.global_variables())
    fetch = {
        "embedding_output": model.get_embedding_output(),
        "all_encoder_layers": model.get_all_encoder_layers(),
        "sequence_output": model.get_sequence_output(),
        "pooled_output": model.get_pooled_output(),
    }
    if hasattr(model, "get_attention_scores"):
      fetch["attention_scores"] = model.get_attention_scores()
      fetch["attention_probs"] = model.get_attention_probs()
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, ckpt)
      return sess.run(fetch)


def _compare(got, want, atol):
  worst = 0.0
  for key, value in got.items():
    ref = want[key]
    values = value if isinstance(value, list) else [value]
    refs = ref if isinstance(ref, list) else [ref]
    assert len(values) == len(refs), key
    for n, (a, b) in enumerate(zip(values, refs)):
      assert a.shape == b.shape, (key, n, a.shape, b.shape)
      d = float(np.abs(a - b).max())
      assert d <= atol, "%s[%d]: max abs diff %.3g" % (key, n, d)
      worst = max(worst, d)
  return worst


def test_modeling_restores_converted_minilm(minilm):
  modeling = _modeling()
  _, out, params, cfg = minilm
  config = modeling.BertConfig.from_json_file(os.path.join(out, "bert_config.json"))
  ids, mask, types = _batch([s for t in TRIPLES[:2] for s in t], os.path.join(out, "vocab.txt"))
  got = _run_modeling(modeling, config, os.path.join(out, "bert_model.ckpt"), ids, mask, types)
  want = numpy_bert.bert_forward(params, cfg, ids, mask, types)
  worst = _compare({k: got[k] for k in ("sequence_output", "pooled_output", "all_encoder_layers")},
                   want, 1e-4)
  print("modeling.py vs NumPy on MiniLM: max abs diff %.3g" % worst)


@pytest.mark.parametrize("residual,ln_type,act", [
    ("none", "post", "gelu"), ("sum", "post", "gelu_exact"), ("mean", "post", "relu"),
    ("none", "pre", "gelu"), ("sum", "pre", "tanh"), ("mean", "pre", "gelu_exact"),
])
def test_modeling_matches_numpy_random_weights(tmp_path, residual, ln_type, act):
  modeling = _modeling()
  cfg = dict(vocab_size=40, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
             intermediate_size=24, max_position_embeddings=16, type_vocab_size=2, hidden_act=act,
             hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
             residual_attention=residual, layer_norm_type=ln_type)
  params = numpy_bert.random_params(cfg, seed=7)
  ckpt = str(tmp_path / "bert_model.ckpt")
  conv.write_tf_checkpoint(params, ckpt)
  rng = np.random.RandomState(8)
  ids = rng.randint(0, 40, size=(2, 7))
  mask = np.ones_like(ids)
  mask[1, 4:] = 0
  types = np.array([[0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0, 0]])
  got = _run_modeling(modeling, modeling.BertConfig.from_dict(cfg), ckpt, ids, mask, types)
  want = numpy_bert.bert_forward(params, cfg, ids, mask, types)
  _compare(got, want, 1e-4)
