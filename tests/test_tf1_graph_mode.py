"""The model builders under TF1 graph mode (`tf.compat.v1.disable_v2_behavior()`).

In that mode tf.compat.v1.get_variable makes reference variables (dtype float32_ref) instead of
resource variables; a model must build there and compute what it computes in the default graph.
Each model is built here (resource variables) with random weights, saved, and built again in a
fresh process after `disable_v2_behavior()` (this file run as a script), which restores the
checkpoint: the outputs and the gradients of a loss over them must be equal.

Run as a script: `python tests/test_tf1_graph_mode.py WORK_DIR` (the repository on PYTHONPATH).
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(TESTS_DIR)

BATCH, LONG, GLOBAL = 2, 13, 3

TINY_ETC = {"vocab_size": 40, "segment_vocab_size": 4, "hidden_size": 16,
            "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 24,
            "local_radius": 3, "relative_pos_max_distance": 2, "relative_vocab_size": 9,
            "max_absolute_position_embeddings": 20}

TINY_BERT = {"vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 24, "max_position_embeddings": 16,
             "type_vocab_size": 2, "residual_attention": "sum"}

TINY_NMT = {"vocab_size": 23, "hidden_size": 16, "num_encoder_layers": 2,
            "num_decoder_layers": 2, "num_attention_heads": 4, "intermediate_size": 24,
            "hidden_act": "relu", "residual_attention": "mean", "layer_norm_type": "admin"}

# Grappler's graph rewrites cost more than these small graphs' runs.
SESSION_CONFIG = tf1.ConfigProto()
SESSION_CONFIG.graph_options.rewrite_options.disable_meta_optimizer = True


def _etc_fetches(residual_attention, layout, one_hot, grad_checkpointing_period=0):
  """ETC's long and global outputs on packed sentences (hard g2l mask, relative ids).

  Args:
    residual_attention: "none", "sum" or "mean".
    layout: the long rows' layout, "full" or "sparse".
    one_hot: one-hot matmuls for the token and relative lookups (the segment lookup is one-hot
      in either case).
    grad_checkpointing_period: the config's.

  Returns:
    {name: Tensor}.
  """
  from etc_model import etc_inputs  # pylint: disable=g-import-not-at-top
  from etc_model import etc_modeling  # pylint: disable=g-import-not-at-top
  config = etc_modeling.EtcConfig.from_dict(
      dict(TINY_ETC, residual_attention=residual_attention,
           grad_checkpointing_period=grad_checkpointing_period))
  rng = np.random.RandomState(7)
  rows = []
  for _ in range(BATCH):
    examples = [[list(rng.randint(5, 40, rng.randint(2, 5))) for _ in range(2)]
                for _ in range(2)]
    rows.append(etc_inputs.make_sentence_global_inputs(examples, LONG, GLOBAL,
                                                       global_token_id=1))
  features = {key: np.stack([row[key] for row in rows]) for key in rows[0]}
  side = etc_inputs.make_global_local_transformer_side_inputs(
      features["long_breakpoints"], features["global_breakpoints"], features["sentence_ids"],
      config.local_radius, config.relative_pos_max_distance, use_hard_g2l_mask=True)
  model = etc_modeling.EtcModel(config, is_training=False, use_one_hot_embeddings=one_hot,
                                use_one_hot_relative_embeddings=one_hot)
  long_output, global_output = model(
      token_ids=tf.constant(features["token_ids"], tf.int32),
      global_token_ids=tf.constant(features["global_token_ids"], tf.int32),
      att_implementation=layout,
      **{key: tf.constant(value, tf.int32) for key, value in side.items()})
  return {"long_output": long_output, "global_output": global_output}


def _bert_fetches():
  """BertModel's sequence and pooled outputs (residual attention `sum`, one-hot lookups)."""
  import modeling  # pylint: disable=g-import-not-at-top
  config = modeling.BertConfig.from_dict(TINY_BERT)
  rng = np.random.RandomState(8)
  model = modeling.BertModel(
      config, is_training=False,
      input_ids=tf.constant(rng.randint(0, 40, [BATCH, 9]), tf.int32),
      input_mask=tf.constant([[1] * 9, [1] * 6 + [0] * 3], tf.int32),
      token_type_ids=tf.constant(rng.randint(0, 2, [BATCH, 9]), tf.int32),
      use_one_hot_embeddings=True)
  return {"sequence_output": model.get_sequence_output(),
          "pooled_output": model.get_pooled_output()}


def _nmt_fetches():
  """The encoder-decoder's logits (ADMIN layer norm at omega 1, residual attention `mean`)."""
  from translation import nmt_modeling  # pylint: disable=g-import-not-at-top
  config = nmt_modeling.NmtConfig.from_dict(TINY_NMT)
  source = tf.constant([[5, 9, 12, 7, 3, 0, 0], [8, 4, 6, 11, 19, 21, 3]], tf.int32)
  target_input = tf.constant([[2, 6, 13, 17, 9, 0], [2, 10, 4, 22, 15, 8]], tf.int32)
  model = nmt_modeling.NmtModel(config, False, source, target_input)
  return {"logits": model.logits}


MODELS = {
    "etc_none": lambda: _etc_fetches("none", "full", one_hot=True),
    # Recomputed layers read the variables again in the backward pass.
    "etc_sum": lambda: _etc_fetches("sum", "sparse", one_hot=False,
                                    grad_checkpointing_period=1),
    "bert_sum": _bert_fetches,
    "nmt_mean": _nmt_fetches,
}


def _with_gradients(fetches):
  """`fetches` plus the gradient of a fixed random projection of them for every variable."""
  rng = np.random.RandomState(9)
  loss = tf.add_n([tf.reduce_sum(value * rng.normal(size=value.shape.as_list()))
                   for _, value in sorted(fetches.items())])
  variables = tf1.trainable_variables()
  gradients = tf.gradients(loss, variables)
  result = dict(fetches)
  for variable, gradient in zip(variables, gradients):
    if gradient is not None:
      result["gradient:" + variable.op.name] = tf.convert_to_tensor(gradient)
  return result


def _variable_kinds():
  """{"resource": n, "reference": m} over the graph's variables."""
  kinds = {"resource": 0, "reference": 0}
  for variable in tf1.global_variables():
    # A reference variable's dtype is float32_ref, whose base dtype is float32.
    is_reference = variable.dtype != variable.dtype.base_dtype
    kinds["reference" if is_reference else "resource"] += 1
  return kinds


def build_and_run(model_name, checkpoint, save_random_weights):
  """Builds a model in a new graph and evaluates its outputs and gradients.

  Args:
    model_name: a key of MODELS.
    checkpoint: checkpoint prefix written (`save_random_weights`) or restored.
    save_random_weights: draw random weights (stddev 0.3; LayerNorm gammas around 1) and save
      them, instead of restoring.

  Returns:
    ({fetch name: value}, the variable kinds).
  """
  with tf.Graph().as_default():
    fetches = _with_gradients(MODELS[model_name]())
    saver = tf1.train.Saver()
    with tf1.Session(config=SESSION_CONFIG) as session:
      if save_random_weights:
        rng = np.random.RandomState(10)
        # Every variable starts from its random value (fed into the initializers: one run).
        values = {}
        for variable in tf1.global_variables():
          value = rng.normal(0.0, 0.3, variable.shape.as_list())
          if variable.op.name.endswith("gamma"):
            value += 1.0
          values[variable.initial_value] = value.astype(np.float32)
        session.run(tf1.global_variables_initializer(), feed_dict=values)
        saver.save(session, checkpoint)
      else:
        saver.restore(session, checkpoint)
      return session.run(fetches), _variable_kinds()


def test_models_build_in_tf1_graph_mode_and_match_the_default_graph(tmp_path):
  import conftest  # pylint: disable=g-import-not-at-top
  expected = {}
  for name in MODELS:
    os.makedirs(str(tmp_path / name))
    expected[name], kinds = build_and_run(name, str(tmp_path / name / "model.ckpt"), True)
    assert kinds["reference"] == 0 and kinds["resource"] > 0, (name, kinds)
  conftest.run_tool(None, [__file__, str(tmp_path)], env={"PYTHONPATH": REPO_DIR},
                    timeout=240)
  for name in MODELS:
    with open(str(tmp_path / name / "kinds.json")) as f:
      kinds = json.load(f)
    # The child really built reference variables (the TF1 mode under test).
    assert kinds["resource"] == 0 and kinds["reference"] > 0, (name, kinds)
    got = dict(np.load(str(tmp_path / name / "outputs.npz")))
    assert sorted(got) == sorted(expected[name]), name
    assert any(key.startswith("gradient:") for key in got), name
    for key, value in expected[name].items():
      np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6,
                                 err_msg="%s %s" % (name, key))


def _main(work_dir):
  tf1.disable_v2_behavior()
  for name in MODELS:
    outputs, kinds = build_and_run(name, os.path.join(work_dir, name, "model.ckpt"), False)
    np.savez(os.path.join(work_dir, name, "outputs.npz"), **outputs)
    with open(os.path.join(work_dir, name, "kinds.json"), "w") as f:
      json.dump(kinds, f)


if __name__ == "__main__":
  _main(sys.argv[1])
