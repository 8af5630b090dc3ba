"""Tests of etc_model/etc_modeling.py: the ETC model against the NumPy reference, names, config."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

import numpy_etc
from etc_model import etc_inputs
from etc_model import etc_modeling

tf1 = tf.compat.v1

BATCH, LONG, GLOBAL = 2, 13, 3

TINY_ETC = {"vocab_size": 40, "segment_vocab_size": 4, "hidden_size": 16,
            "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 24,
            "local_radius": 3, "relative_pos_max_distance": 2, "relative_vocab_size": 9,
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def _random_inputs(rng, config, structured=False):
  """Token ids and side inputs: random masks / relative ids (every row keeps at least one key),
  or `structured`: those of packed sentences from etc_inputs (hard g2l mask, padding)."""
  radius = config["local_radius"]
  window = 2 * radius + 1
  inputs = {
      "token_ids": rng.randint(0, config["vocab_size"], [BATCH, LONG]),
      "global_token_ids": rng.randint(0, config["vocab_size"], [BATCH, GLOBAL]),
      "segment_ids": rng.randint(0, config["segment_vocab_size"], [BATCH, LONG]),
      "global_segment_ids": rng.randint(0, config["segment_vocab_size"], [BATCH, GLOBAL]),
  }
  side = {
      "l2l_att_mask": (rng.rand(BATCH, LONG, window) < 0.7).astype(np.int32),
      "g2g_att_mask": (rng.rand(BATCH, GLOBAL, GLOBAL) < 0.7).astype(np.int32),
      "l2g_att_mask": (rng.rand(BATCH, LONG, GLOBAL) < 0.7).astype(np.int32),
      "g2l_att_mask": (rng.rand(BATCH, GLOBAL, LONG) < 0.7).astype(np.int32),
  }
  side["l2l_att_mask"][:, :, radius] = 1  # a token always sees itself
  side["g2g_att_mask"][:, np.arange(GLOBAL), np.arange(GLOBAL)] = 1
  vocab = config.get("relative_vocab_size")
  if structured:
    # Sentence-level global tokens as the input utilities make them, hard g2l mask, padding.
    rows = []
    for _ in range(BATCH):
      examples = [[list(rng.randint(5, 40, rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
                  for _ in range(2)]
      rows.append(etc_inputs.make_sentence_global_inputs(examples, LONG - 1, GLOBAL,
                                                         global_token_id=1))
    features = {k: np.pad(np.stack([r[k] for r in rows]), [[0, 0], [0, 1 if "global" not in k
                                                                      else 0]])
                for k in rows[0]}
    inputs["token_ids"], inputs["global_token_ids"] = (features["token_ids"],
                                                       features["global_token_ids"])
    return inputs, etc_inputs.make_global_local_transformer_side_inputs(
        features["long_breakpoints"], features["global_breakpoints"],
        features["sentence_ids"], radius, config["relative_pos_max_distance"],
        use_hard_g2l_mask=True)
  for name, shape in (("l2l", [BATCH, LONG, window]), ("g2g", [BATCH, GLOBAL, GLOBAL]),
                      ("l2g", [BATCH, LONG, GLOBAL]), ("g2l", [BATCH, GLOBAL, LONG])):
    side[name + "_relative_att_ids"] = (rng.randint(0, vocab, shape).astype(np.int32)
                                        if vocab else None)
  return inputs, side


def _run_tf(config_dict, inputs, side, seed=0, compute_dtype=None, graph_out=None):
  """Runs the TF model (full and sparse layouts) with random weights.

  `compute_dtype` is EtcModel's; `graph_out`, a list, receives the graph.

  Returns:
    ({layout: [long_output, global_output]}, {variable name: value}).
  """
  config = etc_modeling.EtcConfig.from_dict(config_dict)
  rng = np.random.RandomState(seed)
  with tf.Graph().as_default() as graph:
    if graph_out is not None:
      graph_out.append(graph)
    model = etc_modeling.EtcModel(config, is_training=False, compute_dtype=compute_dtype)
    feed = {k: tf.constant(v, tf.int32) for k, v in inputs.items()}
    feed.update({k: tf.constant(v, tf.int32) for k, v in side.items() if v is not None})
    outputs = {impl: model(att_implementation=impl, **feed) for impl in ("full", "sparse")}
    params = {}
    for var in tf1.global_variables():
      value = rng.normal(0.0, 0.3, var.shape.as_list())
      params[var.name[:-2]] = (value + 1.0 if var.name.endswith("gamma:0") else value)
    # Every variable starts from its random value (fed into the initializers: one run).
    init_feed = {var.initial_value: params[var.name[:-2]].astype(np.float32)
                 for var in tf1.global_variables()}
    with tf1.Session(config=_SESSION_CONFIG) as sess:
      sess.run(tf1.global_variables_initializer(), feed_dict=init_feed)
      result = sess.run(outputs)
  return result, {k: v.astype(np.float32) for k, v in params.items()}


# Grappler's graph rewrites cost more than these small graphs' runs.
_SESSION_CONFIG = tf1.ConfigProto()
_SESSION_CONFIG.graph_options.rewrite_options.disable_meta_optimizer = True

CASES = {
    "none_post_shared": {"residual_attention": "none"},
    "sum_post_unshared_sentences": {"residual_attention": "sum", "share_qkv_projections": False,
                                    "share_feed_forward_params": False, "structured": True},
    "mean_pre_kv_shared": {"residual_attention": "mean", "use_pre_activation_order": True,
                           "share_qkv_projections": False, "share_kv_projections": True,
                           "share_att_output_projection": True, "num_hidden_layers": 3,
                           "embedding_size": 8, "max_absolute_position_embeddings": 20},
    "sum_pre_shared_no_relative": {"residual_attention": "sum", "use_pre_activation_order": True,
                                   "relative_vocab_size": None, "relative_pos_max_distance": 0,
                                   "local_radius": 2},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_numpy_reference_in_both_layouts(case):
  config = dict(TINY_ETC, **CASES[case])
  structured = config.pop("structured", False)
  rng = np.random.RandomState(len(case))
  inputs, side = _random_inputs(rng, config, structured)
  result, params = _run_tf(config, inputs, side)
  want_long, want_global, _ = numpy_etc.etc_forward(params, config, side=side, **inputs)
  for impl in ("full", "sparse"):
    got_long, got_global = result[impl]
    np.testing.assert_allclose(got_long, want_long, atol=2e-5, rtol=1e-5, err_msg=impl)
    np.testing.assert_allclose(got_global, want_global, atol=2e-5, rtol=1e-5, err_msg=impl)
  # The two layouts are one computation.
  np.testing.assert_allclose(result["full"][0], result["sparse"][0], atol=1e-5)
  if config["residual_attention"] != "none":
    # Residual attention changes the outputs on these weights (the comparison can fail).
    plain_long = numpy_etc.etc_forward(params, dict(config, residual_attention="none"),
                                       side=side, **inputs)[0]
    assert np.abs(plain_long - want_long).max() > 1e-3


LAYERS = "etc_document_bert/global_local_transformer_layers/"

# The official checkpoint names of one small config: shared q/k/v and feed-forward (the official
# defaults), an ALBERT-style embedding projection and absolute positions.
EXPECTED_VARIABLES_ONE_LAYER = """
etc_document_bert/token_emb_lookup/embedding_table [40, 8]
etc_document_bert/token_emb_lookup/projection/kernel [8, 16]
etc_document_bert/token_emb_lookup/projection/bias [16]
etc_document_bert/segment_emb_lookup/embedding_table [4, 16]
etc_document_bert/position_emb_lookup_long/embedding_table [20, 16]
etc_document_bert/long_emb_layer_norm/beta [16]
etc_document_bert/long_emb_layer_norm/gamma [16]
etc_document_bert/position_emb_lookup_global/embedding_table [20, 16]
etc_document_bert/global_emb_layer_norm/beta [16]
etc_document_bert/global_emb_layer_norm/gamma [16]
{att}long_query_projection/linear/kernel [16, 16]
{att}long_query_projection/linear/bias [16]
{att}l2l_key_projection/linear/kernel [16, 16]
{att}l2l_key_projection/linear/bias [16]
{att}l2l_value_projection/linear/kernel [16, 16]
{att}l2l_value_projection/linear/bias [16]
{att}long_qkv_attention/qkv_relative_attention/relative_emb_table [9, 2, 8]
{att}long_qkv_attention/qkv_relative_attention/relative_bias_table [9, 2]
{att}global_qkv_attention/relative_emb_table [9, 2, 8]
{att}global_qkv_attention/relative_bias_table [9, 2]
{att}long_output_projection/kernel [16, 16]
{att}long_output_projection/bias [16]
{att}global_output_projection/kernel [16, 16]
{att}global_output_projection/bias [16]
{layers}fused_att_layer_0/layer_norm_0/beta [16]
{layers}fused_att_layer_0/layer_norm_0/gamma [16]
{layers}fused_att_layer_0/layer_norm_1/beta [16]
{layers}fused_att_layer_0/layer_norm_1/gamma [16]
{layers}feed_forward_layer_0/dense_layers/layer_0/kernel [16, 24]
{layers}feed_forward_layer_0/dense_layers/layer_0/bias [24]
{layers}feed_forward_layer_0/dense_layers/layer_1/kernel [24, 16]
{layers}feed_forward_layer_0/dense_layers/layer_1/bias [16]
{layers}feed_forward_layer_0/layer_norm/beta [16]
{layers}feed_forward_layer_0/layer_norm/gamma [16]
"""

# What the fully unshared options add or rename in a layer (under fused_global_local_att).
UNSHARED_PROJECTIONS = {
    "long_query_projection", "l2l_key_projection", "l2l_value_projection", "l2g_key_projection",
    "l2g_value_projection", "global_query_projection", "g2g_key_projection",
    "g2g_value_projection", "g2l_key_projection", "g2l_value_projection"}


def _variable_shapes(config_dict):
  with tf.Graph().as_default():
    model = etc_modeling.EtcModel(etc_modeling.EtcConfig.from_dict(config_dict),
                                  is_training=False)
    model(token_ids=tf.zeros([1, LONG], tf.int32), global_token_ids=tf.zeros([1, GLOBAL],
                                                                             tf.int32))
    return {v.name[:-2]: v.shape.as_list() for v in tf1.global_variables()}


def test_official_variable_names():
  got = _variable_shapes(dict(TINY_ETC, num_hidden_layers=1, embedding_size=8,
                              max_absolute_position_embeddings=20))
  want = {}
  for line in EXPECTED_VARIABLES_ONE_LAYER.strip().splitlines():
    name, shape = line.split(" ", 1)
    name = name.format(layers=LAYERS, att=LAYERS + "fused_att_layer_0/fused_global_local_att/")
    want[name] = json.loads(shape)
  assert got == want

  unshared = _variable_shapes(dict(TINY_ETC, num_hidden_layers=1, share_qkv_projections=False,
                                   share_feed_forward_params=False))
  projections = {name.split("/")[4] for name in unshared
                 if name.startswith(LAYERS + "fused_att_layer_0/fused_global_local_att/") and
                 name.endswith("/linear/kernel")}
  assert projections == UNSHARED_PROJECTIONS
  feed_forward = {name.split("/")[2] for name in unshared if "feed_forward" in name}
  assert feed_forward == {"long_feed_forward_layer_0", "global_feed_forward_layer_0"}


def test_config_loads_official_file_and_rejects_bad_values(tmp_path):
  official = {"vocab_size": 50265, "segment_vocab_size": 16, "embedding_size": None,
              "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
              "local_radius": 84, "att_size_per_head": None, "relative_pos_max_distance": 12,
              "relative_vocab_size": 32, "max_absolute_position_embeddings": 0,
              "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
              "share_feed_forward_params": True, "share_kv_projections": False,
              "share_qkv_projections": True, "share_att_output_projection": False,
              "use_pre_activation_order": False, "use_hard_g2l_mask": False,
              "use_hard_l2g_mask": False, "grad_checkpointing_period": 0}
  path = tmp_path / "etc_config.json"
  path.write_text(json.dumps(official))
  config = etc_modeling.EtcConfig.from_json_file(str(path))
  assert config.to_dict() == dict(official, residual_attention="none")

  for bad, message in (({"hidden_size": "768"}, "key 'hidden_size' must be an integer"),
                       ({"colour": 1}, "unknown config key 'colour'"),
                       ({"relative_vocab_size": 27}, "'relative_vocab_size' (27) is too small"),
                       ({"share_qkv_projections": 1}, "'share_qkv_projections' must be true or"),
                       ({"residual_attention": "max"}, "key 'residual_attention' must be one of"),
                       ({"local_radius": 0}, "key 'local_radius' must be >= 1")):
    path.write_text(json.dumps(dict(official, **bad)))
    with pytest.raises(ValueError) as error:
      etc_modeling.EtcConfig.from_json_file(str(path))
    assert str(error.value).startswith(str(path) + ": ") and message in str(error.value)
    assert "\n" not in str(error.value)


# Mixed precision: max |output - float32 output| on these LayerNorm-scale outputs (weights of
# stddev 0.3: large scores). Measured: bf16 <= 0.045, fp16 <= 0.011.
PRECISION_ATOL = {"bf16": 0.1, "fp16": 0.02}


@pytest.mark.parametrize("residual", ["none", "sum"])
def test_mixed_precision_close_to_float32_with_float32_variables_and_statistics(residual):
  config = dict(TINY_ETC, residual_attention=residual)
  inputs, side = _random_inputs(np.random.RandomState(3), config)
  want, want_params = _run_tf(config, inputs, side)
  errors = {}
  for precision, atol in sorted(PRECISION_ATOL.items()):
    compute = tf.as_dtype({"bf16": "bfloat16", "fp16": "float16"}[precision])
    graphs = []
    got, got_params = _run_tf(config, inputs, side, compute_dtype=precision, graph_out=graphs)
    # Same variables: names, shapes and float32 (one checkpoint for every precision).
    assert {k: (v.shape, v.dtype) for k, v in got_params.items()} == {
        k: (v.shape, v.dtype) for k, v in want_params.items()}
    variables = graphs[0].get_collection(tf1.GraphKeys.GLOBAL_VARIABLES)
    assert {v.dtype.base_dtype for v in variables} == {tf.float32}
    ops = graphs[0].get_operations()

    def dtypes(op_type, scope, ops=ops):
      return {op.get_attr("T") for op in ops if op.type == op_type and scope in op.name}
    assert dtypes("Einsum", "fused_global_local_att") == {compute}
    assert dtypes("MatMul", "feed_forward_layer") == {compute}
    assert dtypes("Softmax", "") == {tf.float32}
    assert dtypes("Mean", "layer_norm") == {tf.float32}
    # What layer 0 hands to layer 1 (residual stream, running sums) is float32.
    handed = {t.dtype for op in ops if "fused_att_layer_1/" in op.name for t in op.inputs
              if "/fused_att_layer_0/" in t.name or "/feed_forward_layer_0/" in t.name}
    assert handed == {tf.float32}
    for impl in ("full", "sparse"):
      for name, got_value, want_value in zip(("long", "global"), got[impl], want[impl]):
        assert got_value.dtype == np.float32
        error = np.abs(got_value - want_value).max()
        assert error <= atol, (precision, impl, name, error)
        errors[precision, impl, name] = error
  # The low-precision runs did compute otherwise (float16's 10-bit mantissa beats bfloat16's 7).
  assert min(errors.values()) > 1e-4
  assert max(v for k, v in errors.items() if k[0] == "fp16") < max(
      v for k, v in errors.items() if k[0] == "bf16")


def test_training_call_reuses_variables_and_has_gradients():
  config = etc_modeling.EtcConfig.from_dict(dict(TINY_ETC, num_hidden_layers=1,
                                                 residual_attention="mean"))
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()  # step-seeded dropout
    # A dynamic long length: the blocked (sparse) layout.
    token_ids = tf1.placeholder(tf.int32, [None, None])
    global_ids = tf.ones([2, GLOBAL], tf.int32)
    model = etc_modeling.EtcModel(config)
    train_long, train_global = model(token_ids=token_ids, global_token_ids=global_ids,
                                     training=True)
    count = len(tf1.global_variables())
    eval_long, _ = model(token_ids=token_ids, global_token_ids=global_ids, training=False)
    assert len(tf1.global_variables()) == count
    variables = tf1.trainable_variables()
    grads = tf.gradients(tf.reduce_sum(train_long ** 2) + tf.reduce_sum(train_global ** 2),
                         variables)
    # Without relative ids the relative tables are unused (as in the official model).
    assert [v.name for v, g in zip(variables, grads) if g is None] == [
        v.name for v in variables if "relative_" in v.name]
    with tf1.Session(config=_SESSION_CONFIG) as sess:
      sess.run(tf1.global_variables_initializer())
      feed = {token_ids: np.arange(2 * 11).reshape(2, 11) % TINY_ETC["vocab_size"]}
      train, evaluation, _ = sess.run([train_long, eval_long, [g for g in grads if g is not None]],
                                      feed)
  assert train.shape == evaluation.shape == (2, 11, TINY_ETC["hidden_size"])
  assert np.isfinite(train).all() and np.abs(train - evaluation).max() > 1e-3
  with pytest.raises(ValueError, match="`training` must be None"):
    etc_modeling.EtcModel(config, is_training=False)(token_ids=token_ids,
                                                     global_token_ids=global_ids, training=True)


# (residual_attention, use_pre_activation_order, layout, compute dtype) of the grad-checkpointing
# test: in bfloat16 the groups still hand on float32 running sums.
CHECKPOINTING_CASES = (("sum", False, "sparse", "bf16"), ("none", False, "sparse", None),
                       ("sum", False, "full", None), ("mean", True, "sparse", None))


def _outputs_and_gradients(config_dict, inputs, side, params, layout, compute_dtype=None):
  """Long / global outputs and every gradient of a loss, dropout on (step-seeded).

  Returns:
    ([long_output, global_output, gradient, ...], [variable name, ...], the float tensors of
    the layers' forward ops that the backward pass reads: what it keeps in memory).
  """
  with tf.Graph().as_default() as graph:
    tf1.train.get_or_create_global_step()
    feed = {k: tf.constant(v, tf.int32) for k, v in inputs.items()}
    feed.update({k: tf.constant(v, tf.int32) for k, v in side.items() if v is not None})
    model = etc_modeling.EtcModel(etc_modeling.EtcConfig.from_dict(config_dict),
                                  is_training=True, compute_dtype=compute_dtype)
    long_output, global_output = model(att_implementation=layout, **feed)
    loss = tf.reduce_sum(long_output * params["loss_weights"]) + tf.reduce_sum(
        global_output ** 2)
    grads = tf.gradients(loss, tf1.trainable_variables())
    fetches = [long_output, global_output] + [tf.convert_to_tensor(g) for g in grads
                                              if g is not None]
    kept = {t.name for op in graph.get_operations() if op.name.startswith("gradients")
            for t in op.inputs if t.dtype.is_floating and not t.op.name.startswith("gradients")
            and re.search(r"/(fused_att|\w*feed_forward)_layer_\d+/", t.op.name)}
    variables = tf1.global_variables()
    init_feed = {v.initial_value: params[v.name[:-2]] for v in variables
                 if v.name[:-2] in params}
    with tf1.Session(config=_SESSION_CONFIG) as sess:
      sess.run(tf1.global_variables_initializer(), feed_dict=init_feed)
      return sess.run(fetches), [v.name for v in variables], kept


def test_grad_checkpointing_equals_storing_every_activation():
  # 2 layers in groups of 1: the running sums handed from one recomputed group to the next.
  # Dropout on: the recomputation must draw the forward pass's masks.
  config_dict = dict(TINY_ETC, share_qkv_projections=False, share_feed_forward_params=False)
  rng = np.random.RandomState(7)
  inputs, side = _random_inputs(rng, config_dict)
  params = {"loss_weights": rng.normal(size=[BATCH, LONG, TINY_ETC["hidden_size"]])}
  for name, shape in _variable_shapes(config_dict).items():
    value = rng.normal(0.0, 0.3, shape) + (1.0 if name.endswith("gamma") else 0.0)
    params[name] = value.astype(np.float32)
  for residual, pre_ln, layout, precision in CHECKPOINTING_CASES:
    case = dict(config_dict, residual_attention=residual, use_pre_activation_order=pre_ln)
    want, want_names, want_kept = _outputs_and_gradients(case, inputs, side, params, layout,
                                                         precision)
    got, got_names, got_kept = _outputs_and_gradients(dict(case, grad_checkpointing_period=1),
                                                      inputs, side, params, layout, precision)
    assert got_names == want_names
    # Period 1 keeps no activation inside a layer (period 0 keeps many).
    assert not got_kept and len(want_kept) > 20
    assert len(got) == len(want) > 40
    for got_value, want_value in zip(got, want):
      # bfloat16: the same forward values; the gradients summed in another order, within 1% of
      # their largest value (measured 0.33%; bfloat16 against float32: 4.4%).
      atol, rtol = (1e-2 * np.abs(want_value).max(), 0.0) if precision else (1e-5, 1e-5)
      np.testing.assert_allclose(got_value, want_value, atol=atol, rtol=rtol,
                                 err_msg="%s %s %s" % (residual, layout, precision))
  # Dropout was on: the outputs are not those of the same weights without it.
  plain = numpy_etc.etc_forward(params, case, side=side, **inputs)[0]
  assert np.abs(want[0] - plain).max() > 1e-2
