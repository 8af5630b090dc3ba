"""Tests for modeling.py: residual attention against an independent NumPy model (and `none`
against google-research/bert's own modeling.py, tests/official/), the official API, variable
names, checkpoint interchange between none/sum/mean, Pre-LN init, bad configs."""

import contextlib
import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

import modeling
import numpy_bert

tf1 = tf.compat.v1

TINY = dict(vocab_size=97, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, max_position_embeddings=40, type_vocab_size=3,
            initializer_range=0.02, residual_attention="none", layer_norm_type="post")


def _config(**overrides):
  values = dict(TINY)
  values.update(overrides)
  return modeling.BertConfig.from_dict(values)


def _inputs(batch=3, seq=11, vocab=97, seed=1):
  rng = np.random.RandomState(seed)
  input_ids = rng.randint(0, vocab, size=(batch, seq)).astype(np.int32)
  # Different padding per example, one example unpadded.
  lengths = [seq, seq - 4, 3][:batch]
  input_mask = np.array([[1] * n + [0] * (seq - n) for n in lengths], dtype=np.int32)
  token_type_ids = rng.randint(0, 3, size=(batch, seq)).astype(np.int32)
  return input_ids, input_mask, token_type_ids


def _build(config, input_ids, input_mask, token_type_ids, is_training=False):
  model = modeling.BertModel(
      config=config, is_training=is_training,
      input_ids=tf.constant(input_ids), input_mask=tf.constant(input_mask),
      token_type_ids=tf.constant(token_type_ids))
  return model


def _load_params(sess, params):
  """Assigns NumPy values to the graph variables with the same (official) names."""
  by_name = {v.op.name: v for v in tf1.global_variables()}
  missing = set(by_name) - set(params)
  assert not missing, "graph variables without a reference value: %s" % sorted(missing)
  # Variable.load's feed of each initializer's value, in one run (a run per variable costs
  # ~15 ms).
  loaded = [name for name in params if name in by_name]
  sess.run([by_name[name].initializer for name in loaded],
           feed_dict={by_name[name].initializer.inputs[1]: params[name] for name in loaded})


def _tf_outputs(config, params, input_ids, input_mask, token_type_ids):
  with tf.Graph().as_default():
    model = _build(config, input_ids, input_mask, token_type_ids)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      _load_params(sess, params)
      return sess.run({
          "embedding_output": model.get_embedding_output(),
          "all_encoder_layers": model.get_all_encoder_layers(),
          "sequence_output": model.get_sequence_output(),
          "pooled_output": model.get_pooled_output(),
          "attention_scores": model.get_attention_scores(),
          "attention_probs": model.get_attention_probs(),
      })


@pytest.mark.parametrize("residual_attention", ["none", "sum", "mean"])
@pytest.mark.parametrize("layer_norm_type", ["post", "pre"])
def test_matches_independent_numpy_model(residual_attention, layer_norm_type):
  config = _config(residual_attention=residual_attention, layer_norm_type=layer_norm_type)
  params = numpy_bert.random_params(config.to_dict(), seed=7)
  input_ids, input_mask, token_type_ids = _inputs()
  got = _tf_outputs(config, params, input_ids, input_mask, token_type_ids)
  want = numpy_bert.bert_forward(params, config.to_dict(), input_ids, input_mask,
                                 token_type_ids, dtype=np.float64)
  for key in ("embedding_output", "sequence_output", "pooled_output"):
    np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=0, err_msg=key)
  for key in ("all_encoder_layers", "attention_scores", "attention_probs"):
    assert len(got[key]) == config.num_hidden_layers
    for layer, (g, w) in enumerate(zip(got[key], want[key])):
      np.testing.assert_allclose(g, w, atol=1e-5, rtol=0, err_msg="%s[%d]" % (key, layer))
  if (residual_attention, layer_norm_type) == ("none", "post"):
    _check_none_against_the_official_model(params, (input_ids, input_mask, token_type_ids),
                                           got, want)


def test_input_embedding_adder_is_added_to_the_word_embeddings():
  """input_embedding_adder = word_embeddings[y] - word_embeddings[x] on input x gives the NumPy
  model's outputs on input y (the adder enters before the embedding layer norm)."""
  config = _config(residual_attention="sum")
  params = numpy_bert.random_params(config.to_dict(), seed=8)
  input_ids, input_mask, token_type_ids = _inputs()
  other_ids = (input_ids + 5) % config.vocab_size
  table = params["bert/embeddings/word_embeddings"]
  with tf.Graph().as_default():
    model = modeling.BertModel(
        config=config, is_training=False, input_ids=tf.constant(input_ids),
        input_mask=tf.constant(input_mask), token_type_ids=tf.constant(token_type_ids),
        input_embedding_adder=tf.constant(table[other_ids] - table[input_ids]))
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      _load_params(sess, params)
      got = sess.run(model.get_sequence_output())
  want = numpy_bert.bert_forward(params, config.to_dict(), other_ids, input_mask,
                                 token_type_ids, dtype=np.float64)["sequence_output"]
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
  plain = _tf_outputs(config, params, input_ids, input_mask, token_type_ids)["sequence_output"]
  assert np.abs(plain - want).max() > 1e-2


def test_residual_attention_changes_upper_layers_only():
  input_ids, input_mask, token_type_ids = _inputs()
  params = numpy_bert.random_params(TINY, seed=3)
  outs = {ra: _tf_outputs(_config(residual_attention=ra), params, input_ids, input_mask,
                          token_type_ids)
          for ra in ("none", "sum", "mean")}
  # Layer 0 has no previous scores: identical for all three.
  for ra in ("sum", "mean"):
    np.testing.assert_allclose(outs[ra]["all_encoder_layers"][0],
                               outs["none"]["all_encoder_layers"][0], atol=1e-6)
    assert np.abs(outs[ra]["sequence_output"] - outs["none"]["sequence_output"]).max() > 1e-3
  # The running sum is handed on: scores of layer 1 (sum) = own scores + layer-0 scores.
  assert np.abs(outs["sum"]["attention_scores"][3] -
                outs["mean"]["attention_scores"][3]).max() > 1e-4


def test_running_scores_are_unmasked_and_undivided():
  """The handed-on sum never contains the -10000 mask adder (no accumulation over layers)."""
  config = _config(residual_attention="mean")
  params = numpy_bert.random_params(config.to_dict(), seed=5)
  input_ids, input_mask, token_type_ids = _inputs()
  got = _tf_outputs(config, params, input_ids, input_mask, token_type_ids)
  for scores, probs in zip(got["attention_scores"], got["attention_probs"]):
    assert np.abs(scores).max() < 1000.0
    # Padded keys get (numerically) zero probability.
    padded = np.broadcast_to(input_mask[:, None, None, :] == 0, probs.shape)
    assert probs[padded].max() < 1e-6
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)


def _official_modeling():
  """google-research/bert's modeling.py (tests/official/, bert-tensorflow 1.0.4) as a module.

  Its one TF1-only dependency, tf.contrib.layers.layer_norm, is given as TF 1.15 computed it
  for that call: tf.nn.moments + tf.nn.batch_normalization over the last axis, epsilon 1e-12.
  """
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "official", "modeling.py")
  with open(path, encoding="utf-8") as f:
    source = f.read()
  contrib_import = "from tensorflow.contrib import layers as contrib_layers"
  assert contrib_import in source

  def contrib_layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
    assert begin_norm_axis == begin_params_axis == -1
    with tf1.variable_scope(scope, "LayerNorm", [inputs]):
      beta = tf1.get_variable("beta", inputs.shape[-1:], initializer=tf1.zeros_initializer())
      gamma = tf1.get_variable("gamma", inputs.shape[-1:], initializer=tf1.ones_initializer())
      mean, variance = tf.nn.moments(inputs, [inputs.shape.ndims - 1], keepdims=True)
      return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, 1e-12)

  official = types.ModuleType("official_bert_modeling")
  official.contrib_layers = types.SimpleNamespace(layer_norm=contrib_layer_norm)
  exec(compile(source.replace(contrib_import, "pass"), path, "exec"),  # pylint: disable=exec-used
       official.__dict__)
  return official


def _check_none_against_the_official_model(params, inputs, got, want):
  """residual_attention=none against google-research/bert's own modeling.py, same weights.

  Not bit-identical (the closed-form LayerNorm and the fused attention round differently),
  but within float32 rounding: max abs diff 1.7e-6 here (outputs up to ~5; 6.4e-6 for
  bert_small at seq 128, README), and ours is no further from the float64 NumPy model than the
  official one.

  Args:
    params: the weights (official names).
    inputs: (input_ids, input_mask, token_type_ids).
    got: our outputs (_tf_outputs) on them.
    want: the float64 NumPy model's outputs.
  """
  if not hasattr(tf1.layers, "dense"):
    # The official modeling.py builds its pooler with tf.layers.dense, which the newest TF
    # (Keras 3) no longer has: the comparison runs in the TF 2.15 environment.
    return
  official_modeling = _official_modeling()
  config = dict(TINY)
  del config["residual_attention"], config["layer_norm_type"]
  input_ids, input_mask, token_type_ids = inputs
  with tf.Graph().as_default():
    model = official_modeling.BertModel(
        config=official_modeling.BertConfig.from_dict(config), is_training=False,
        input_ids=tf.constant(input_ids), input_mask=tf.constant(input_mask),
        token_type_ids=tf.constant(token_type_ids))
    with tf1.Session() as sess:
      _load_params(sess, params)
      official = sess.run({"sequence_output": model.get_sequence_output(),
                           "pooled_output": model.get_pooled_output(),
                           "all_encoder_layers": model.get_all_encoder_layers()})
  for key in ("sequence_output", "pooled_output"):
    np.testing.assert_allclose(got[key], official[key], atol=1e-5, rtol=0, err_msg=key)
  for layer, (g, o) in enumerate(zip(got["all_encoder_layers"], official["all_encoder_layers"])):
    np.testing.assert_allclose(g, o, atol=1e-5, rtol=0, err_msg="layer %d" % layer)
  ours_error = np.abs(got["sequence_output"] - want["sequence_output"]).max()
  official_error = np.abs(official["sequence_output"] - want["sequence_output"]).max()
  assert ours_error < 2 * official_error + 1e-6, (ours_error, official_error)


def test_official_api_shapes_and_getters():
  config = modeling.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=37,
                               residual_attention="sum")
  with tf.Graph().as_default():
    input_ids = tf.constant(np.random.randint(0, 99, (2, 7)), tf.int32)
    model = modeling.BertModel(config=config, is_training=True, input_ids=input_ids,
                               use_one_hot_embeddings=True)
    assert model.get_sequence_output().shape.as_list() == [2, 7, 32]
    assert model.get_pooled_output().shape.as_list() == [2, 32]
    assert model.get_embedding_output().shape.as_list() == [2, 7, 32]
    assert model.get_embedding_table().shape.as_list() == [99, 32]
    assert len(model.get_all_encoder_layers()) == 2
    assert [s.shape.as_list() for s in model.get_attention_scores()] == [[2, 4, 7, 7]] * 2
    assert [p.shape.as_list() for p in model.get_attention_probs()] == [[2, 4, 7, 7]] * 2
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      out = sess.run(model.get_sequence_output())
      assert np.isfinite(out).all()


def test_dynamic_batch_size_placeholder():
  """Estimator predict and SavedModel export feed a batch of unknown size."""
  with tf.Graph().as_default():
    input_ids = tf1.placeholder(tf.int32, [None, 9])
    model = modeling.BertModel(config=_config(residual_attention="sum"), is_training=False,
                               input_ids=input_ids)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      out = sess.run(model.get_pooled_output(), {input_ids: np.ones((5, 9), np.int32)})
      assert out.shape == (5, 32)


def test_config_json_round_trip(tmp_path):
  config = _config(residual_attention="mean", layer_norm_type="pre", hidden_act="gelu_exact")
  path = tmp_path / "bert_config.json"
  path.write_text(config.to_json_string())
  again = modeling.BertConfig.from_json_file(str(path))
  assert again.to_dict() == config.to_dict()
  assert json.loads(again.to_json_string()) == config.to_dict()


def test_shipped_configs_load_and_match_paper_sizes():
  sizes = {"small": (4, 512, 8, 2048), "base": (12, 768, 12, 3072),
           "large": (24, 1024, 16, 4096), "xlarge": (36, 1536, 24, 6144)}
  config_dir = os.path.join(os.path.dirname(os.path.dirname(__file__)), "configs")
  for size, (layers, hidden, heads, inter) in sizes.items():
    for variant, (ra, ln) in {"post_ln": ("none", "post"), "pre_ln": ("none", "pre"),
                              "realformer": ("mean" if size == "xlarge" else "sum", "post")
                             }.items():
      c = modeling.BertConfig.from_json_file(
          os.path.join(config_dir, "bert_%s_%s.json" % (size, variant)))
      assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads,
              c.intermediate_size) == (layers, hidden, heads, inter)
      assert (c.residual_attention, c.layer_norm_type) == (ra, ln)
      assert c.vocab_size == 30522 and c.type_vocab_size == 2


def test_official_realformer_config_key(tmp_path):
  base = {k: v for k, v in TINY.items() if k not in ("residual_attention", "layer_norm_type")}
  for flag, expected in ((True, "mean"), (False, "sum")):
    path = tmp_path / ("rf_%s.json" % flag)
    path.write_text(json.dumps(dict(base, use_running_mean=flag)))
    assert modeling.BertConfig.from_json_file(str(path)).residual_attention == expected
  # A plain official BERT config means no residual attention.
  path = tmp_path / "bert.json"
  path.write_text(json.dumps(dict(base, directionality="bidi", pooler_type="first_token_transform")))
  config = modeling.BertConfig.from_json_file(str(path))
  assert (config.residual_attention, config.layer_norm_type) == ("none", "post")


def test_official_realformer_constructor_argument_and_saved_key(tmp_path):
  # The official RealFormer code's BertConfig(..., use_running_mean=...) means the same here.
  base = {k: v for k, v in TINY.items() if k not in ("residual_attention", "layer_norm_type")}
  assert modeling.BertConfig(use_running_mean=True, **base).residual_attention == "mean"
  assert modeling.BertConfig(use_running_mean=False, **base).residual_attention == "sum"
  assert modeling.BertConfig(**base).residual_attention == "none"
  with pytest.raises(ValueError, match="contradicts"):
    modeling.BertConfig(use_running_mean=True, residual_attention="sum", **base)
  with pytest.raises(ValueError, match="must be true or false"):
    modeling.BertConfig(use_running_mean="yes", **base)
  # A saved config tells the official code (which reads only use_running_mean and always uses
  # residual attention) what it is; "none" has no official equivalent, so no key is written.
  for residual_attention, official in (("mean", True), ("sum", False), ("none", None)):
    config = modeling.BertConfig(residual_attention=residual_attention, **base)
    saved = json.loads(config.to_json_string())
    assert saved.get("use_running_mean") == official
    assert saved["residual_attention"] == residual_attention
    path = tmp_path / ("saved_%s.json" % residual_attention)
    path.write_text(config.to_json_string())
    assert modeling.BertConfig.from_json_file(str(path)).to_dict() == config.to_dict()


@pytest.mark.parametrize("change,message", [
    ({"use_running_mean": False, "residual_attention": "none"}, "contradicts"),
    ({"hidden_sise": 32}, "unknown config key 'hidden_sise'"),
    ({"hidden_size": "32"}, "key 'hidden_size' must be an integer"),
    ({"num_hidden_layers": True}, "key 'num_hidden_layers' must be an integer"),
    ({"hidden_size": 30}, "'hidden_size' (30) is not a multiple of 'num_attention_heads' (4)"),
    ({"residual_attention": "avg"}, "key 'residual_attention' must be one of none, sum, mean"),
    ({"layer_norm_type": "sandwich"}, "key 'layer_norm_type' must be one of post, pre"),
    ({"hidden_act": "swish"}, "key 'hidden_act' must be one of"),
    ({"hidden_dropout_prob": 1.5}, "key 'hidden_dropout_prob' must be in [0, 1)"),
    ({"vocab_size": 0}, "key 'vocab_size' must be >= 1"),
    ({"use_running_mean": True, "residual_attention": "sum"}, "contradicts"),
])
def test_bad_config_names_key_and_file(tmp_path, change, message):
  path = tmp_path / "bad_config.json"
  path.write_text(json.dumps(dict(TINY, **change)))
  with pytest.raises(ValueError) as err:
    modeling.BertConfig.from_json_file(str(path))
  assert message in str(err.value)
  assert str(path) in str(err.value)
  assert "\n" not in str(err.value)


def test_missing_and_invalid_json_config(tmp_path):
  with pytest.raises(ValueError, match="does not exist"):
    modeling.BertConfig.from_json_file(str(tmp_path / "nope.json"))
  path = tmp_path / "broken.json"
  path.write_text("{not json")
  with pytest.raises(ValueError, match="not valid JSON"):
    modeling.BertConfig.from_json_file(str(path))


def _official_names(num_layers):
  """The variable names of an official BERT checkpoint (no heads), written out by hand."""
  names = ["bert/embeddings/word_embeddings", "bert/embeddings/token_type_embeddings",
           "bert/embeddings/position_embeddings", "bert/embeddings/LayerNorm/beta",
           "bert/embeddings/LayerNorm/gamma"]
  for i in range(num_layers):
    p = "bert/encoder/layer_%d/" % i
    for part in ("query", "key", "value"):
      names += [p + "attention/self/%s/kernel" % part, p + "attention/self/%s/bias" % part]
    names += [p + "attention/output/dense/kernel", p + "attention/output/dense/bias",
              p + "attention/output/LayerNorm/beta", p + "attention/output/LayerNorm/gamma",
              p + "intermediate/dense/kernel", p + "intermediate/dense/bias",
              p + "output/dense/kernel", p + "output/dense/bias",
              p + "output/LayerNorm/beta", p + "output/LayerNorm/gamma"]
  names += ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]
  return names


@pytest.mark.parametrize("residual_attention", ["none", "sum", "mean"])
def test_exact_variable_names_and_shapes(residual_attention):
  config = _config(residual_attention=residual_attention)
  with tf.Graph().as_default():
    _build(config, *_inputs())
    got = {v.op.name: v.shape.as_list() for v in tf1.global_variables()}
  assert sorted(got) == sorted(_official_names(config.num_hidden_layers))
  want_shapes = numpy_bert.param_shapes(config.to_dict())
  assert got == {k: list(v) for k, v in want_shapes.items()}


def test_pre_ln_adds_only_the_final_layer_norm():
  with tf.Graph().as_default():
    _build(_config(layer_norm_type="pre"), *_inputs())
    got = sorted(v.op.name for v in tf1.global_variables())
  want = _official_names(4) + ["bert/encoder/final_layer_norm/beta",
                               "bert/encoder/final_layer_norm/gamma"]
  assert got == sorted(want)


def test_checkpoint_interchange_none_sum_mean(tmp_path):
  """A checkpoint saved by a plain BERT restores into sum / mean RealFormers and back."""
  input_ids, input_mask, token_type_ids = _inputs()
  ckpt = str(tmp_path / "none" / "model.ckpt")
  with tf.Graph().as_default():
    _build(_config(residual_attention="none"), input_ids, input_mask, token_type_ids)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      saved = sess.run({v.op.name: v for v in tf1.global_variables()})
      tf1.train.Saver().save(sess, ckpt)
  for ra in ("sum", "mean", "none"):
    with tf.Graph().as_default():
      _build(_config(residual_attention=ra), input_ids, input_mask, token_type_ids)
      initialized = modeling.init_from_checkpoint(ckpt, tf1.global_variables())
      assert len(initialized) == 2 * len(saved)
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        restored = sess.run({v.op.name: v for v in tf1.global_variables()})
        for name, value in restored.items():
          np.testing.assert_array_equal(value, saved[name])
        # ... and back: save as RealFormer, reload as plain BERT.
        back = str(tmp_path / ra / "model.ckpt")
        tf1.train.Saver().save(sess, back)
    assert sorted(n for n, _ in tf.train.list_variables(back)) == sorted(saved)


def test_checkpoint_with_wrong_shapes_names_variable_and_shapes(tmp_path):
  input_ids, input_mask, token_type_ids = _inputs()
  ckpt = str(tmp_path / "model.ckpt")
  with tf.Graph().as_default():
    _build(_config(intermediate_size=48), input_ids, input_mask, token_type_ids)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      tf1.train.Saver().save(sess, ckpt)
  with tf.Graph().as_default():
    _build(_config(), input_ids, input_mask, token_type_ids)
    with pytest.raises(ValueError) as err:
      modeling.get_assignment_map_from_checkpoint(tf1.global_variables(), ckpt)
  message = str(err.value)
  assert "bert/encoder/layer_0/intermediate/dense/bias" in message
  assert "[48]" in message and "[64]" in message and ckpt in message


def test_pre_ln_gpt2_init_scale():
  """Residual-branch output projections start with stddev / sqrt(2 * layers) in Pre-LN only."""
  config_kw = dict(hidden_size=256, num_attention_heads=4, intermediate_size=512,
                   num_hidden_layers=8)
  stds = {}
  for ln in ("post", "pre"):
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      _build(_config(layer_norm_type=ln, **config_kw), *_inputs())
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        values = sess.run({v.op.name: v for v in tf1.global_variables()})
    stds[ln] = {
        "attn_out": np.mean([values["bert/encoder/layer_%d/attention/output/dense/kernel" % i].std()
                             for i in range(8)]),
        "ffn_out": np.mean([values["bert/encoder/layer_%d/output/dense/kernel" % i].std()
                            for i in range(8)]),
        "query": np.mean([values["bert/encoder/layer_%d/attention/self/query/kernel" % i].std()
                          for i in range(8)]),
        "inter": np.mean([values["bert/encoder/layer_%d/intermediate/dense/kernel" % i].std()
                          for i in range(8)]),
    }
  expected_ratio = 1.0 / np.sqrt(2 * 8)
  for key in ("attn_out", "ffn_out"):
    assert abs(stds["pre"][key] / stds["post"][key] - expected_ratio) < 0.02, key
  for key in ("query", "inter"):
    assert abs(stds["pre"][key] / stds["post"][key] - 1.0) < 0.05, key
  # A truncated normal at 2 stddev has std 0.88 * stddev.
  assert abs(stds["post"]["attn_out"] - 0.02 * 0.88) < 0.001


def test_dropout_only_in_training():
  config = _config(residual_attention="sum", hidden_dropout_prob=0.5,
                   attention_probs_dropout_prob=0.5)
  input_ids, input_mask, token_type_ids = _inputs()
  for is_training, should_differ in ((False, False), (True, True)):
    with tf.Graph().as_default():
      model = _build(config, input_ids, input_mask, token_type_ids, is_training=is_training)
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        a, b = sess.run(model.get_sequence_output()), sess.run(model.get_sequence_output())
    assert (np.abs(a - b).max() > 1e-3) == should_differ


def test_no_per_head_python_loop():
  """All heads go through one batched matmul per layer for scores and one for context."""
  config = _config(num_attention_heads=4, num_hidden_layers=2)
  with tf.Graph().as_default() as graph:
    _build(config, *_inputs())
    batch_matmuls = [op for op in graph.get_operations()
                     if op.type in ("BatchMatMulV2", "BatchMatMulV3", "BatchMatMul")]
  assert len(batch_matmuls) == 2 * config.num_hidden_layers


def test_activations():
  x = np.linspace(-4, 4, 33).astype(np.float32)
  with tf.Graph().as_default():
    with tf1.Session() as sess:
      tanh_gelu = sess.run(modeling.get_activation("gelu")(tf.constant(x)))
      exact_gelu = sess.run(modeling.get_activation("gelu_exact")(tf.constant(x)))
  np.testing.assert_allclose(tanh_gelu, numpy_bert.gelu_tanh(x.astype(np.float64)), atol=1e-6)
  np.testing.assert_allclose(exact_gelu, numpy_bert.gelu_exact(x.astype(np.float64)), atol=1e-6)
  assert np.abs(tanh_gelu - exact_gelu).max() > 1e-4
  assert modeling.get_activation("linear") is None
  with pytest.raises(ValueError, match="Unsupported activation"):
    modeling.get_activation("swish")


@pytest.mark.parametrize("shape,offset", [((6, 32), 0.0), ((2, 5, 48), 3.0), ((4, 512), 100.0)])
def test_layer_norm_and_its_gradient_match_numpy(shape, offset):
  """layer_norm's hand-written gradient equals the float64 closed form (also far from 0 mean)."""
  rng = np.random.RandomState(len(shape))
  x = (offset + 2.0 * rng.randn(*shape)).astype(np.float32)
  dy = rng.randn(*shape).astype(np.float32)
  hidden = shape[-1]
  gamma = (1.0 + 0.1 * rng.randn(hidden)).astype(np.float32)
  beta = (0.1 * rng.randn(hidden)).astype(np.float32)
  with tf.Graph().as_default():
    x_t = tf.constant(x)
    y = modeling.layer_norm(x_t)
    by_name = {v.op.name: v for v in tf1.global_variables()}
    assert sorted(by_name) == ["LayerNorm/beta", "LayerNorm/gamma"]
    grads = tf.gradients(y, [x_t, by_name["LayerNorm/gamma"], by_name["LayerNorm/beta"]],
                         grad_ys=tf.constant(dy))
    with tf1.Session() as sess:
      by_name["LayerNorm/gamma"].load(gamma, sess)
      by_name["LayerNorm/beta"].load(beta, sess)
      got_y, got_dx, got_dgamma, got_dbeta = sess.run([y] + grads)
  x64 = x.astype(np.float64)
  centered = x64 - x64.mean(-1, keepdims=True)
  inv_std = 1.0 / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-12)
  normalized = centered * inv_std
  g = dy * gamma
  want_dx = inv_std * (g - g.mean(-1, keepdims=True) -
                       normalized * (g * normalized).mean(-1, keepdims=True))
  axes = tuple(range(len(shape) - 1))
  np.testing.assert_allclose(got_y, normalized * gamma + beta, atol=1e-5, rtol=0)
  np.testing.assert_allclose(got_dx, want_dx, atol=1e-5, rtol=0)
  np.testing.assert_allclose(got_dgamma, (dy * normalized).sum(axes), atol=1e-4, rtol=1e-5)
  np.testing.assert_allclose(got_dbeta, dy.sum(axes), atol=1e-4, rtol=1e-5)


def test_word_embeddings_are_not_gathered_from_the_variable():
  """A ResourceGather on the table would make every other read of it a full copy."""
  with tf.Graph().as_default() as graph:
    _build(_config(), *_inputs(), is_training=True)
    gathers = [op for op in graph.get_operations() if op.type == "ResourceGather"]
  assert not gathers, [op.name for op in gathers]


def test_bad_compute_dtype():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="compute_dtype must be one of fp32, bf16, fp16"):
      modeling.BertModel(_config(), False, tf.constant(_inputs()[0]), compute_dtype="int8")
    with pytest.raises(ValueError, match="compute_dtype"):
      modeling.BertModel(_config(), False, tf.constant(_inputs()[0]), compute_dtype=tf.float64)


# ----------------------------------------------------------------------------------------------
# full_length_dropout: masks of (seed, real position), whatever the padded length.


def _fixed_seed(_):
  return tf.constant([3, 5], tf.int64)


def test_full_length_dropout_masks_are_slices_of_the_full_length_mask():
  b, n, h, s, m, rate = 2, 3, 5, 6, 16, 0.3
  rng = np.random.RandomState(0)
  x3, x4 = rng.rand(b, m, h).astype(np.float32) + 1, rng.rand(b, n, m, m).astype(np.float32) + 1
  with tf.Graph().as_default():
    seq = tf1.placeholder(tf.int32, [])  # a batch's length, unknown to the graph
    cut3 = tf.constant(x3)[:, :seq]
    cut4 = tf.constant(x4)[:, :, :seq, :seq]
    longer = tf1.placeholder(tf.float32, [b, None, h])
    with modeling.dropout_seed_override(_fixed_seed):
      # The official masks (no full_length_dropout: seq_axes change nothing).
      official = [tf.nn.experimental.stateless_dropout(tf.constant(x), rate, seed=_fixed_seed(0))
                  for x in (x3, x4)]
      default = modeling.dropout(cut3, rate, seq_axes=(1,))
      default_want = tf.nn.experimental.stateless_dropout(cut3, rate, seed=_fixed_seed(0))
      with modeling.full_length_dropout(m):
        got = {
            "bsh": modeling.dropout(cut3, rate, seq_axes=(1,)),
            "flat": tf.reshape(modeling.dropout(tf.reshape(cut3, [-1, h]), rate,
                                                seq_length=seq), [b, -1, h]),
            "bnst": modeling.dropout(cut4, rate, seq_axes=(2, 3)),
            "bf16": tf.cast(modeling.dropout(tf.cast(cut3, tf.bfloat16), rate, seq_axes=(1,)),
                            tf.float32),
            "no_axes": modeling.dropout(cut3, rate),  # e.g. a pooled [batch, hidden]
        }
        too_long = modeling.dropout(longer, rate, seq_axes=(1,))
    with tf1.Session() as sess:
      want3, want4 = sess.run(official)
      full = sess.run(got, {seq: m})
      short = sess.run(got, {seq: s})
      default_got, default_ref = sess.run([default, default_want], {seq: s})
      with pytest.raises(tf.errors.InvalidArgumentError, match="longer than full_length"):
        sess.run(too_long, {longer: np.ones((b, m + 1, h), np.float32)})
  # At the full length: tf.nn.experimental.stateless_dropout, bit for bit.
  for name in ("bsh", "flat", "no_axes"):
    np.testing.assert_array_equal(full[name], want3, err_msg=name)
  np.testing.assert_array_equal(full["bnst"], want4)
  np.testing.assert_array_equal(full["bf16"] != 0, want3 != 0)
  assert 0.6 < (want3 != 0).mean() < 0.8
  # Shorter: the slice of the full-length result at every kept position.
  for name in ("bsh", "flat"):
    np.testing.assert_array_equal(short[name], want3[:, :s], err_msg=name)
  np.testing.assert_array_equal(short["bnst"], want4[:, :, :s, :s])
  np.testing.assert_array_equal(short["bf16"] != 0, want3[:, :s] != 0)
  # Without named axes, and outside the block: the mask over the tensor's own shape.
  np.testing.assert_array_equal(short["no_axes"], default_ref)
  np.testing.assert_array_equal(default_got, default_ref)
  assert not np.array_equal(short["no_axes"] != 0, want3[:, :s] != 0)
  with pytest.raises(ValueError, match="longer than full_length_dropout"):
    with tf.Graph().as_default(), modeling.full_length_dropout(4):
      tf1.train.get_or_create_global_step()
      modeling.dropout(tf.ones([1, 5, 2]), 0.1, seq_axes=(1,))


def _training_outputs(config, ids, mask, types, full_length, params=None, dtype=None,
                      skip_padding=False):
  """BertModel(is_training=True) step-seeded (global step, graph seed 7): (every layer's output,
  the variables' values), under full_length_dropout(full_length) unless it is None."""
  with tf.Graph().as_default():
    tf1.set_random_seed(7)
    tf1.train.get_or_create_global_step()
    with (modeling.full_length_dropout(full_length) if full_length else
          contextlib.nullcontext()):
      model = modeling.BertModel(config, True, tf.constant(ids), tf.constant(mask),
                                 tf.constant(types), compute_dtype=dtype,
                                 skip_padding=skip_padding)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      if params is not None:
        _load_params(sess, params)
      params = sess.run({v.op.name: v for v in tf1.global_variables()})
      return sess.run([model.get_embedding_output()] + model.get_all_encoder_layers()), params


@pytest.mark.parametrize("dtype", [None, "bf16"])
def test_full_length_dropout_bert_equals_official_masks_and_ignores_padding(dtype):
  config = _config(residual_attention="sum", hidden_dropout_prob=0.3,
                   attention_probs_dropout_prob=0.3, num_hidden_layers=2)
  ids, mask, types = _inputs(seq=24)
  mask[:, 13:] = 0  # real lengths 13, 13 and 3: a batch padded to 16 keeps them
  want, params = _training_outputs(config, ids, mask, types, None, dtype=dtype)
  # At the full length: today's masks, bit for bit (same seeds: no op renamed).
  full, _ = _training_outputs(config, ids, mask, types, 24, params, dtype=dtype)
  for layer, (g, w) in enumerate(zip(full, want)):
    np.testing.assert_array_equal(g, w, err_msg="layer %d" % layer)
  if dtype:
    return  # the masks of a shorter batch: the float32 masks (above, and the test before)
  # The batch cut to 16: the full-length run's outputs at every real position.
  short, _ = _training_outputs(config, ids[:, :16], mask[:, :16], types[:, :16], 24, params,
                               dtype=dtype)
  real = mask[:, :16, None] == 1
  for layer, (g, w) in enumerate(zip(short, want)):
    np.testing.assert_allclose(np.where(real, g, 0), np.where(real, w[:, :16], 0),
                               atol=1e-5, err_msg="layer %d" % layer)
  # skip_padding (the real rows only, dropout masks gathered from the padded matrix's): the
  # same at every real position, 0 at the padding of the encoder layers.
  skipped, _ = _training_outputs(config, ids[:, :16], mask[:, :16], types[:, :16], 24, params,
                                 skip_padding=True)
  for layer, (g, w) in enumerate(zip(skipped, want)):
    np.testing.assert_allclose(np.where(real, g, 0), np.where(real, w[:, :16], 0),
                               atol=1e-5, err_msg="layer %d" % layer)
    if layer:
      assert not np.where(real, 0, g).any(), layer


def _loss_and_gradients(config, ids, mask, skip_padding, full_length):
  """A training BertModel's real-position loss, pooled outputs and gradients (graph seed 3)."""
  with tf.Graph().as_default():
    tf1.set_random_seed(3)
    tf1.train.get_or_create_global_step()
    with (modeling.full_length_dropout(full_length) if full_length else
          contextlib.nullcontext()):
      model = modeling.BertModel(config, True, tf.constant(ids), tf.constant(mask),
                                 skip_padding=skip_padding)
    real = tf.constant(mask[:, :, None], tf.float32)
    pooled = model.get_pooled_output()
    # A head's dropout on the sequence output: keyed on the op's name, which must not move.
    sequence = modeling.dropout(model.get_sequence_output(), 0.3, seq_axes=(1,))
    loss = (tf.reduce_sum(tf.square(sequence) * real) +
            tf.reduce_sum(tf.square(pooled[:-1])))  # the last example is all padding
    grads = [tf.convert_to_tensor(g) for g in tf.gradients(loss, tf1.trainable_variables())]
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return sess.run([loss, pooled, grads])


@pytest.mark.parametrize("layer_norm_type,residual_attention,full_length",
                         [("post", "sum", 16), ("pre", "mean", None)])
def test_skip_padding_equals_the_padded_model(layer_norm_type, residual_attention, full_length):
  # BertModel(skip_padding=True) computes the real rows only; with dropout (step-seeded, with
  # and without full_length_dropout) its loss, pooled outputs and every gradient equal the
  # padded model's to float rounding. A masked position 0 still gets its row (the pooled
  # output); an all-padding example's pooled output differs (nothing to attend to but zeros).
  config = _config(residual_attention=residual_attention, layer_norm_type=layer_norm_type,
                   hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
  ids = np.random.RandomState(2).randint(1, 97, size=(4, 12)).astype(np.int32)
  mask = (np.arange(12)[None, :] < np.array([[12], [5], [1], [0]])).astype(np.int32)
  mask[1, 0] = 0
  ids = ids * mask
  want = _loss_and_gradients(config, ids, mask, False, full_length)
  got = _loss_and_gradients(config, ids, mask, True, full_length)
  np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
  np.testing.assert_allclose(got[1][:-1], want[1][:-1], atol=1e-5)
  assert np.abs(got[1][-1] - want[1][-1]).max() > 1e-4
  for g, w in zip(got[2], want[2]):
    np.testing.assert_allclose(g, w, atol=1e-4, rtol=1e-4)
