"""nmt_modeling.py against the float64 NumPy reference (numpy_nmt.py beside it) and its invariants."""

import itertools
import json

import numpy as np
import pytest
import tensorflow as tf

import numpy_nmt
from translation import nmt_modeling

tf1 = tf.compat.v1

LAYER_NORM_TYPES = ("post", "pre", "admin")
RESIDUALS = ("none", "sum", "mean")

SOURCE_IDS = np.array([[5, 9, 12, 7, 3, 0, 0],
                       [8, 4, 6, 11, 19, 21, 3]], np.int32)
TARGET_INPUT_IDS = np.array([[2, 6, 13, 17, 9, 0],
                             [2, 10, 4, 22, 15, 8]], np.int32)
TARGET_IDS = np.array([[6, 13, 17, 9, 3, 0],
                       [10, 4, 22, 15, 8, 3]], np.int32)


def tiny_config(layer_norm_type="admin", residual_attention="mean", **overrides):
  fields = dict(vocab_size=23, hidden_size=16, num_encoder_layers=2, num_decoder_layers=3,
                num_attention_heads=4, intermediate_size=24, hidden_act="relu",
                hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                activation_dropout_prob=0.1, residual_attention=residual_attention,
                layer_norm_type=layer_norm_type)
  fields.update(overrides)
  return nmt_modeling.NmtConfig.from_dict(fields)


def _assign_all(session, weights):
  """Loads a NumPy name -> array dict into the graph's variables.

  The names must be exactly those of the NumPy reference (docs/translation.md's table) and every
  shape must fit: this is where the variable contract is checked.
  """
  variables = {v.op.name: v for v in tf1.global_variables()}
  assert sorted(variables) == sorted(weights), set(variables) ^ set(weights)
  # Variable.load's feed of each initializer's value, in one run (a run per variable costs
  # ~15 ms, about 1.5 s a model).
  session.run([v.initializer for v in variables.values()],
              feed_dict={v.initializer.inputs[1]: weights[name] for name, v in variables.items()})


def _numpy_config(config):
  return config.to_dict()


def _run_tf(config, weights, fetch_builder):
  """Builds fetches in a fresh graph, loads `weights`, returns the evaluated fetches."""
  with tf.Graph().as_default():
    fetches = fetch_builder()
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      _assign_all(session, weights)
      return session.run(fetches)


def _full_and_incremental(config):
  """Teacher-forced logits [B, T, V] and step-by-step logits from the same weights.

  The cached steps run in a tf.while_loop (one decode_step in the graph, as in beam search).
  """
  source = tf.constant(SOURCE_IDS)
  target_input = tf.constant(TARGET_INPUT_IDS)
  model = nmt_modeling.NmtModel(config, False, source, target_input)
  length = TARGET_INPUT_IDS.shape[1]
  cache = nmt_modeling.init_decoder_cache(config, model.encoder_output, length + 2)

  def step_fn(step, cache, logits_array):
    logits, cache = nmt_modeling.decode_step(config, target_input[:, step], step, cache)
    return step + 1, cache, logits_array.write(step, logits)

  _, _, logits_array = tf.while_loop(
      lambda step, *_: step < length, step_fn,
      (tf.constant(0), cache, tf.TensorArray(tf.float32, size=length)))
  return model.logits, tf.transpose(logits_array.stack(), [1, 0, 2])


@pytest.mark.parametrize("layer_norm_type,residual",
                         list(itertools.product(LAYER_NORM_TYPES, RESIDUALS)))
def test_matches_numpy_reference_and_incremental_decoding(layer_norm_type, residual):
  config = tiny_config(layer_norm_type, residual)
  weights = numpy_nmt.random_weights(_numpy_config(config), seed=3)
  full, incremental = _run_tf(config, weights, lambda: _full_and_incremental(config))
  expected = numpy_nmt.forward(weights, _numpy_config(config), SOURCE_IDS, TARGET_INPUT_IDS)
  np.testing.assert_allclose(full, expected, atol=2e-5, rtol=1e-5)
  # Cached decoding gives the teacher-forced logits at every real position.
  real = TARGET_INPUT_IDS != 0
  np.testing.assert_allclose(incremental[real], full[real], atol=1e-5, rtol=1e-5)


def test_admin_profile_matches_numpy_reference():
  config = tiny_config("admin", "mean")
  weights = numpy_nmt.random_weights(config.to_dict(), seed=5)
  weights = {k: v for k, v in weights.items() if not k.endswith("/omega")}
  profile = _run_tf(config, weights, lambda: nmt_modeling.admin_profile_tensors(
      config, tf.constant(SOURCE_IDS), tf.constant(TARGET_INPUT_IDS)))
  expected = numpy_nmt.admin_profile(weights, config.to_dict(), SOURCE_IDS, TARGET_INPUT_IDS)
  assert len(profile["encoder"]) == 4 and len(profile["decoder"]) == 9
  assert profile["encoder"][0] == 1.0 and profile["decoder"][0] == 1.0
  np.testing.assert_allclose(profile["encoder"], expected["encoder"], rtol=1e-5)
  np.testing.assert_allclose(profile["decoder"], expected["decoder"], rtol=1e-5)


def test_profile_initialises_omega_and_model_starts_where_profiled():
  config = tiny_config("admin", "sum")
  profile = {"encoder": [1.0, 1.5, 2.0, 2.5], "decoder": [1.0 + 0.25 * i for i in range(9)]}
  with tf.Graph().as_default():
    nmt_modeling.NmtModel(config, True, tf.constant(SOURCE_IDS), tf.constant(TARGET_INPUT_IDS),
                          admin_profile=profile)
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      values = {v.op.name: session.run(v) for v in tf1.global_variables()
                if v.op.name.endswith("/omega")}
  names = numpy_nmt.omega_names(config.to_dict())
  assert sorted(values) == sorted(names["encoder"] + names["decoder"])
  for stack in ("encoder", "decoder"):
    for name, omega in zip(names[stack], profile[stack]):
      np.testing.assert_array_equal(values[name], np.full([16], omega, np.float32))


def test_initial_weights_depend_on_names_not_graph_order():
  """The profiling graph and the training graph start from the same weights (same seed)."""
  config = tiny_config("admin", "mean")

  def initial_weights(build_extra_first):
    with tf.Graph().as_default():
      tf1.set_random_seed(7)
      if build_extra_first:
        tf.random.uniform([3])  # shifts every later op id
      nmt_modeling.NmtModel(config, True, tf.constant(SOURCE_IDS), tf.constant(TARGET_INPUT_IDS))
      with tf1.Session() as session:
        session.run(tf1.global_variables_initializer())
        return session.run({v.op.name: v for v in tf1.global_variables()})

  first, second = initial_weights(False), initial_weights(True)
  for name in first:
    np.testing.assert_array_equal(first[name], second[name], err_msg=name)


@pytest.mark.parametrize("residual", ["sum", "mean"])
def test_no_information_from_future_target_tokens(residual):
  """Changing target token j changes no logits before position j (causal mask in every chain)."""
  config = tiny_config("post", residual)
  weights = numpy_nmt.random_weights(config.to_dict(), seed=9)
  changed = TARGET_INPUT_IDS.copy()
  changed[:, 3:] = (changed[:, 3:] + 5) % 23

  def build():
    outputs = []
    for target in (TARGET_INPUT_IDS, changed):
      with tf1.variable_scope("", reuse=tf1.AUTO_REUSE):
        outputs.append(nmt_modeling.NmtModel(config, False, tf.constant(SOURCE_IDS),
                                             tf.constant(target)).logits)
    return outputs

  original, perturbed = _run_tf(config, weights, build)
  np.testing.assert_allclose(original[:, :3], perturbed[:, :3], atol=1e-6)
  assert np.abs(original[:, 3:] - perturbed[:, 3:]).max() > 1e-3


def test_handed_on_scores_never_carry_the_mask():
  config = tiny_config("post", "sum")
  weights = numpy_nmt.random_weights(config.to_dict(), seed=2)

  def build():
    model = nmt_modeling.NmtModel(config, False, tf.constant(SOURCE_IDS),
                                  tf.constant(TARGET_INPUT_IDS))
    _, self_scores, cross_scores = nmt_modeling.decode(
        config, model.encoder_output, tf.constant(TARGET_INPUT_IDS), False,
        return_attention=True)
    return model.encoder_output.attention_scores, self_scores, cross_scores

  for chain in _run_tf(config, weights, build):
    for scores in chain:
      assert np.abs(scores).max() < 100.0  # a -10000 adder would show


def test_padding_the_source_changes_nothing():
  config = tiny_config("pre", "mean")
  weights = numpy_nmt.random_weights(config.to_dict(), seed=4)
  padded = np.concatenate([SOURCE_IDS, np.zeros([2, 3], np.int32)], axis=1)

  def build():
    outputs = []
    for source in (SOURCE_IDS, padded):
      with tf1.variable_scope("", reuse=tf1.AUTO_REUSE):
        outputs.append(nmt_modeling.NmtModel(config, False, tf.constant(source),
                                             tf.constant(TARGET_INPUT_IDS)).logits)
    return outputs

  original, with_padding = _run_tf(config, weights, build)
  np.testing.assert_allclose(original, with_padding, atol=1e-5)


def test_label_smoothed_loss_matches_numpy():
  rng = np.random.RandomState(0)
  logits = rng.randn(2, 6, 23).astype(np.float32)
  with tf.Graph().as_default(), tf1.Session() as session:
    loss, nll, count = session.run(nmt_modeling.label_smoothed_loss(
        tf.constant(logits), tf.constant(TARGET_IDS), 0.1))
  assert count == 11
  np.testing.assert_allclose(loss, numpy_nmt.label_smoothed_loss(logits, TARGET_IDS, 0.1),
                             rtol=1e-5)
  expected_nll = numpy_nmt.label_smoothed_loss(logits, TARGET_IDS, 0.0) * 11
  np.testing.assert_allclose(nll, expected_nll, rtol=1e-5)


def test_training_graph_has_dropout_and_runs():
  config = tiny_config("admin", "mean")
  with tf.Graph().as_default():
    tf1.train.create_global_step()
    model = nmt_modeling.NmtModel(config, True, tf.constant(SOURCE_IDS),
                                  tf.constant(TARGET_INPUT_IDS))
    loss = nmt_modeling.label_smoothed_loss(model.logits, tf.constant(TARGET_IDS), 0.1)[0]
    grads = tf1.gradients(loss, tf1.trainable_variables())
    assert all(g is not None for g in grads)
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      assert np.isfinite(session.run(loss))


def test_config_file_errors_name_the_file(tmp_path):
  with pytest.raises(ValueError, match="nope.json: config file does not exist"):
    nmt_modeling.NmtConfig.from_json_file(str(tmp_path / "nope.json"))
  bad = tmp_path / "bad.json"
  bad.write_text("{vocab_size: 10")
  with pytest.raises(ValueError, match="bad.json: not valid JSON"):
    nmt_modeling.NmtConfig.from_json_file(str(bad))
  bad.write_text("[10]")
  with pytest.raises(ValueError, match="bad.json: an NMT config must be a JSON object"):
    nmt_modeling.NmtConfig.from_json_file(str(bad))
  good = tmp_path / "good.json"
  good.write_text('{"vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2}')
  assert nmt_modeling.NmtConfig.from_json_file(str(good)).hidden_size == 8


def test_config_errors_name_the_field():
  with pytest.raises(ValueError, match="unknown NMT config key.*hiden_size"):
    nmt_modeling.NmtConfig.from_dict({"vocab_size": 10, "hiden_size": 8})
  with pytest.raises(ValueError, match="hidden_size=18 is not a multiple"):
    nmt_modeling.NmtConfig.from_dict({"vocab_size": 10, "hidden_size": 18,
                                      "num_attention_heads": 4})
  with pytest.raises(ValueError, match="layer_norm_type='sandwich'"):
    nmt_modeling.NmtConfig.from_dict({"vocab_size": 10, "layer_norm_type": "sandwich"})


def test_mismatched_profile_is_an_error(tmp_path):
  config = tiny_config("admin", "mean")
  document = nmt_modeling.profile_document(
      config, {"encoder": [1.0] * 4, "decoder": [1.0] * 9}, seed=1)
  path = tmp_path / "admin_profile.json"
  path.write_text(json.dumps(document))
  assert nmt_modeling.read_admin_profile(str(path), config, seed=1)["decoder"] == [1.0] * 9
  deeper = tiny_config("admin", "mean", num_decoder_layers=4)
  with pytest.raises(ValueError, match="num_decoder_layers=3, the model has 4"):
    nmt_modeling.read_admin_profile(str(path), deeper)
  with pytest.raises(ValueError, match="residual_attention='mean', the model has 'sum'"):
    nmt_modeling.read_admin_profile(str(path), tiny_config("admin", "sum"))
  with pytest.raises(ValueError, match="seed 1, this run uses seed 2"):
    nmt_modeling.read_admin_profile(str(path), config, seed=2)
  document["decoder"] = [1.0] * 8
  path.write_text(json.dumps(document))
  with pytest.raises(ValueError, match="decoder needs 9 omegas, found 8"):
    nmt_modeling.read_admin_profile(str(path), config)
