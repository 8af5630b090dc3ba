"""Mixed precision (--precision=bf16 / fp16): float32 variables and outputs, float32 statistics,
training close to float32, dynamic loss scaling, checkpoints across precisions, and what a
float16 running sum of residual attention scores would do to a 24-layer model. The fine-tuning
scripts (run_classifier, run_squad, run_ner): float32 heads, and whole jobs in every precision.
ETC's scripts: etc_model.run_long_tasks' model_fn here, the rest in tests/test_etc_*.py."""

import functools
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool
from conftest import write_random_bert_checkpoint
from realformer_tf import estimator_utils
import modeling
import optimization
import run_classifier
import run_ner
import run_pretraining
import run_squad
from etc_model import etc_estimator
from etc_model import etc_modeling
from etc_model import long_task_heads
from etc_model import run_long_tasks

tf1 = tf.compat.v1

CONFIG = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.1,
              attention_probs_dropout_prob=0.1, max_position_embeddings=40, type_vocab_size=2,
              initializer_range=0.02, residual_attention="sum", layer_norm_type="post")
BATCH, SEQ, PREDS = 8, 16, 4


def _config(**overrides):
  return modeling.BertConfig.from_dict(dict(CONFIG, **overrides))


def _features(seed=0):
  """A fixed pre-training batch with a learnable pattern (MLM label = a function of the ids)."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, CONFIG["vocab_size"], (BATCH, SEQ)).astype(np.int32)
  positions = np.stack([rng.choice(np.arange(1, SEQ), PREDS, replace=False)
                        for _ in range(BATCH)]).astype(np.int32)
  labels = np.take_along_axis(ids, positions, axis=1)
  masked = ids.copy()
  np.put_along_axis(masked, positions, 3, axis=1)
  return {
      "input_ids": masked, "input_mask": np.ones((BATCH, SEQ), np.int32),
      "segment_ids": np.repeat([[0] * (SEQ // 2) + [1] * (SEQ // 2)], BATCH, 0).astype(np.int32),
      "masked_lm_positions": positions, "masked_lm_ids": labels.astype(np.int32),
      "masked_lm_weights": np.ones((BATCH, PREDS), np.float32),
      "next_sentence_labels": (np.arange(BATCH) % 2).reshape(BATCH, 1).astype(np.int32),
  }


def _train_graph(precision, config=None, learning_rate=2e-3, steps=100):
  """run_pretraining's TRAIN model_fn on the fixed batch; returns (train_op, loss)."""
  tf1.set_random_seed(3)
  tf1.train.get_or_create_global_step()
  features = {k: tf.constant(v) for k, v in _features().items()}
  model_fn = run_pretraining.model_fn_builder(
      config or _config(), None, learning_rate, steps, 5, use_tpu=False,
      use_one_hot_embeddings=False, total_steps=steps, train_batch_size=BATCH,
      precision=precision)
  spec = model_fn(features, None, tf1.estimator.ModeKeys.TRAIN, {})
  return spec.train_op, spec.loss


def _train(precision, steps=60, save_to=None, restore_from=None, config=None):
  """Trains `steps` steps; returns (losses, {variable name: (dtype, value)})."""
  with tf.Graph().as_default():
    train_op, loss = _train_graph(precision, config=config, steps=max(steps, 1))
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      if restore_from:
        tf1.train.Saver().restore(sess, restore_from)
      losses = [sess.run([train_op, loss])[1] for _ in range(steps)]
      if save_to:
        tf1.train.Saver().save(sess, save_to)
      # One run for every variable (a run per variable costs ~35 ms each).
      fetched = sess.run({v.op.name: v for v in tf1.global_variables()})
      values = {v.op.name: (v.dtype.base_dtype.name, fetched[v.op.name])
                for v in tf1.global_variables()}
  return np.array(losses), values


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_variables_float32_and_matmuls_in_compute_dtype(precision):
  compute = modeling.PRECISIONS[precision]
  graphs = {}
  for p in ("fp32", precision):
    with tf.Graph().as_default() as graph:
      _train_graph(p)
      graphs[p] = ({v.op.name: v.dtype.base_dtype for v in tf1.global_variables()}, graph)
  fp32_vars, _ = graphs["fp32"]
  vars_, graph = graphs[precision]
  extra = {optimization.LOSS_SCALE_VARIABLE: tf.float32,
           optimization.LOSS_SCALE_GOOD_STEPS_VARIABLE: tf.int64}
  want = dict(fp32_vars, **(extra if precision == "fp16" else {}))
  assert vars_ == want  # same names, float32 weights and Adam slots
  ops = graph.get_operations()

  def dtypes(op_types, scope=""):
    return {op.get_attr("T") for op in ops if op.type in op_types and scope in op.name
            and not op.name.startswith("gradients")}
  # Every dense layer and attention matmul of the encoder and the MLM head computes in the
  # compute dtype; the NSP head (on the float32 pooled output) stays float32.
  assert dtypes(("MatMul",), "bert/encoder") == {compute}
  assert dtypes(("BatchMatMulV2",), "bert/encoder") == {compute}
  assert dtypes(("MatMul",), "cls/predictions") == {compute}
  # Softmax, LayerNorm statistics and the residual-attention sum are float32.
  assert dtypes(("Softmax",)) == {tf.float32}
  assert dtypes(("Mean",), "LayerNorm") == {tf.float32}
  assert dtypes(("Rsqrt",), "LayerNorm") == {tf.float32}


@pytest.mark.parametrize("precision,atol", [("bf16", 0.1), ("fp16", 0.01)])
def test_forward_outputs_float32_and_close(precision, atol):
  rng = np.random.RandomState(0)
  ids = rng.randint(0, 97, (3, 11)).astype(np.int32)
  mask = np.ones((3, 11), np.int32)
  mask[1, 7:] = 0
  outputs = {}
  for p in ("fp32", precision):
    with tf.Graph().as_default():
      tf1.set_random_seed(1)
      model = modeling.BertModel(_config(num_hidden_layers=4), False, tf.constant(ids),
                                 tf.constant(mask), compute_dtype=p)
      tensors = {"sequence": model.get_sequence_output(), "pooled": model.get_pooled_output(),
                 "scores": model.get_attention_scores()[-1],
                 "probs": model.get_attention_probs()[-1],
                 "layer0": model.get_all_encoder_layers()[0]}
      for name, t in tensors.items():
        assert t.dtype == tf.float32, name
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        outputs[p] = sess.run(tensors)
  for name in outputs["fp32"]:
    np.testing.assert_allclose(outputs[precision][name], outputs["fp32"][name], atol=atol,
                               rtol=0, err_msg=name)


@functools.lru_cache(maxsize=None)
def _fp32_losses():
  return _train("fp32")[0]


@pytest.mark.parametrize("precision,rel", [("bf16", 0.05), ("fp16", 0.01)])
def test_training_loss_close_to_fp32(precision, rel):
  """60 steps on a fixed batch (same dropout masks in every precision): the loss goes from 5.09
  to 0.297 in float32; measured: bfloat16 ends 0.7% away (at most 1.1% on the way), float16
  0.03% (at most 0.3%)."""
  fp32 = _fp32_losses()
  mixed, values = _train(precision)
  assert np.isfinite(mixed).all()
  assert mixed[-5:].mean() < 0.1 * mixed[:5].mean()  # it learns
  assert abs(mixed[-5:].mean() - fp32[-5:].mean()) < rel / 2 * fp32[-5:].mean()
  assert np.max(np.abs(mixed - fp32) / fp32) < rel
  if precision == "fp16":
    scale = values[optimization.LOSS_SCALE_VARIABLE][1]
    assert 1.0 <= scale <= optimization.LOSS_SCALE_INITIAL


@pytest.mark.parametrize("trained,loaded", [("fp16", "fp32"), ("fp32", "bf16")])
def test_checkpoint_of_one_precision_resumes_in_another(tmp_path, trained, loaded):
  prefix = str(tmp_path / "model.ckpt")
  _, saved = _train(trained, steps=3, save_to=prefix)
  # Same names and dtypes as a float32 job's (the fp16 job adds only its loss scale).
  names = {n: d for n, d in tf.train.load_checkpoint(prefix).get_variable_to_dtype_map().items()}
  assert all(d == tf.float32 for n, d in names.items()
             if n not in ("global_step", optimization.LOSS_SCALE_GOOD_STEPS_VARIABLE))
  with tf.Graph().as_default():
    _train_graph(loaded)
    with tf1.Session() as sess:
      tf1.train.Saver().restore(sess, prefix)
      restored = sess.run({v.op.name: v for v in tf1.global_variables()})
      for name, value in restored.items():
        np.testing.assert_array_equal(value, saved[name][1], err_msg=name)


@pytest.mark.parametrize("trained", ["bf16"])  # a fp32 job saves the same variables
def test_fp16_job_resumes_checkpoint_without_loss_scale(tmp_path, trained):
  """The fp16 job's saver (the one Estimator uses) restores a fp32 / bf16 job's checkpoint."""
  prefix = str(tmp_path / "model.ckpt")
  _, saved = _train(trained, steps=3, save_to=prefix)
  with tf.Graph().as_default():
    train_op, loss = _train_graph("fp16")
    saver = tf1.get_collection(tf1.GraphKeys.SAVERS)[0]
    assert isinstance(saver, run_pretraining.LossScaleOptionalSaver)
    saver.build()
    scale = [v for v in tf1.global_variables() if v.op.name == "loss_scale"][0]
    with tf1.Session() as sess:
      saver.restore(sess, prefix)
      restored = sess.run({v.op.name: v for v in tf1.global_variables()
                           if v.op.name in saved})
      for name, value in restored.items():
        np.testing.assert_array_equal(value, saved[name][1], err_msg=name)
      assert sess.run(scale) == optimization.LOSS_SCALE_INITIAL
      assert np.isfinite(sess.run([train_op, loss])[1])
      # Its own checkpoints keep the loss scale, and restore it.
      sess.run(scale.assign(8.0))
      own = saver.save(sess, str(tmp_path / "fp16.ckpt"))
      sess.run(scale.assign(2.0))
      saver.restore(sess, own)
      assert sess.run(scale) == 8.0


def test_init_checkpoint_of_fp32_model_into_fp16_job(tmp_path):
  """What fine-tuning does: the bert/* weights of one precision initialise a job in another."""
  prefix = str(tmp_path / "model.ckpt")
  _, saved = _train("fp32", steps=2, save_to=prefix)
  with tf.Graph().as_default():
    _train_graph("fp16")
    modeling.init_from_checkpoint(prefix, tf1.trainable_variables())
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      initialised = sess.run({v.op.name: v for v in tf1.trainable_variables()})
      for name, value in initialised.items():
        np.testing.assert_array_equal(value, saved[name][1], err_msg=name)


def _loss_scale_graph(values, growth_steps):
  """A one-variable float16 'model' whose gradient is fed: returns (train_op, var, feeds)."""
  tf1.train.get_or_create_global_step()
  w = tf1.get_variable("w", initializer=tf.constant(values))
  upstream = tf1.placeholder(tf.float16, values.shape)
  # d(loss)/d(w) = upstream (computed in float16, like a float16 model's backward pass).
  loss = tf.reduce_sum(tf.cast(tf.cast(w, tf.float16) * upstream, tf.float32))
  optimization.LOSS_SCALE_GROWTH_STEPS, old = growth_steps, optimization.LOSS_SCALE_GROWTH_STEPS
  try:
    train_op = optimization.create_optimizer(loss, 0.1, 100, 0, False, loss_scale="dynamic")
  finally:
    optimization.LOSS_SCALE_GROWTH_STEPS = old
  return train_op, w, upstream


def test_dynamic_loss_scale_skips_overflow_halves_and_grows():
  values = np.array([0.5, -0.25, 1.0], np.float32)
  with tf.Graph().as_default():
    train_op, w, upstream = _loss_scale_graph(values, growth_steps=3)
    scale = [v for v in tf1.global_variables() if v.op.name == "loss_scale"][0]
    step = tf1.train.get_global_step()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      assert sess.run(scale) == optimization.LOSS_SCALE_INITIAL
      # 4.0 * 2^15 overflows float16 (max 65504): the step is skipped, the scale halves.
      sess.run(train_op, {upstream: np.array([4.0, 1.0, 1.0], np.float16)})
      np.testing.assert_array_equal(sess.run(w), values)
      assert sess.run(scale) == optimization.LOSS_SCALE_INITIAL / 2
      assert sess.run(step) == 1
      # Finite steps update the weights; after 3 in a row the scale doubles.
      small = np.array([0.01, 0.02, -0.01], np.float16)
      for i in range(3):
        sess.run(train_op, {upstream: small})
        assert sess.run(scale) == optimization.LOSS_SCALE_INITIAL / (2 if i < 2 else 1)
      assert np.abs(sess.run(w) - values).max() > 1e-3


def test_fp16_update_equals_fp32_update_when_finite():
  """Scaling and unscaling by a power of two is exact: same update as without a scale."""
  values = np.array([0.5, -0.25, 1.0], np.float32)
  got = {}
  for loss_scale in (None, "dynamic"):
    with tf.Graph().as_default():
      tf1.train.get_or_create_global_step()
      w = tf1.get_variable("w", initializer=tf.constant(values))
      loss = tf.reduce_sum(w * tf.constant([0.01, 0.02, -0.01]))
      train_op = optimization.create_optimizer(loss, 0.1, 100, 0, False, loss_scale=loss_scale)
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        for _ in range(3):
          sess.run(train_op)
        got[loss_scale] = sess.run(w)
  np.testing.assert_array_equal(got["dynamic"], got[None])


def test_float16_running_sum_of_24_layers_loses_the_scores():
  """Why the residual-attention running sum stays float32.

  A 24-layer `sum` model hands on A_n = S_n + A_{n-1}: the sum grows with depth, and so does the
  rounding error of a float16 accumulator (10-bit mantissa: 0.008 apart at 16). Here (float16
  compute, initializer_range 0.2 for scores of trained size) the float16 sum is off by 17x more
  at layer 24 than at layer 1 (0.03 vs 0.002) and the softmax it feeds by 26x more (0.008 vs
  0.0003 in probability), while the model's float32 sum adds no error of its own.
  """
  config = _config(num_hidden_layers=24, hidden_size=64, num_attention_heads=2,
                   intermediate_size=64, initializer_range=0.2)
  ids = np.random.RandomState(0).randint(0, 97, (2, 12)).astype(np.int32)
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    model = modeling.BertModel(config, False, tf.constant(ids), compute_dtype="fp16")
    handed_on = model.get_attention_scores()  # the float32 running sums A_1 .. A_24
    assert all(a.dtype == tf.float32 for a in handed_on)
    # The same sum accumulated in float16 from each layer's own scores S_n = A_n - A_{n-1}.
    acc16, score_errors, prob_errors = None, [], []
    for n, a in enumerate(handed_on):
      own = a if n == 0 else a - handed_on[n - 1]
      acc16 = tf.cast(own, tf.float16) if acc16 is None else acc16 + tf.cast(own, tf.float16)
      score_errors.append(tf.reduce_max(tf.abs(tf.cast(acc16, tf.float32) - a)))
      prob_errors.append(tf.reduce_max(tf.abs(tf.nn.softmax(tf.cast(acc16, tf.float32)) -
                                              tf.nn.softmax(a))))
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      sums, score_err, prob_err = sess.run([handed_on, score_errors, prob_errors])
  magnitude = [np.abs(s).max() for s in sums]
  assert magnitude[-1] > 2 * magnitude[0]          # the sum grows with depth
  assert score_err[-1] > 5 * score_err[0]          # so does a float16 sum's error
  assert prob_err[-1] > 5 * prob_err[0] and prob_err[-1] > 2e-3


def test_unsupported_script_flags_fail_in_one_line(tmp_path):
  """A script whose model_fn does not implement --precision says so instead of ignoring it."""
  code = ("import sys; sys.argv = ['run_other.py']; from realformer_tf import estimator_utils, common\n"
          "from absl import flags\nestimator_utils.define_estimator_flags()\n"
          "flags.FLAGS(['run_other.py', '--precision=bf16'])\n"
          "common.run_main(lambda argv: estimator_utils.check_supported(flags.FLAGS, ()), [])\n")
  proc = run_tool(None, ["-c", code], expect_rc=2)
  assert last_error_line(proc).endswith(
      "--precision=bf16: not supported by run_other.py yet (it is by run_classifier.py, "
      "run_ner.py, run_pretraining.py, run_squad.py, etc_model.run_long_tasks, "
      "etc_model.run_pretraining)")


def test_supporting_tools_table_matches_their_declarations():
  """The tools an unsupported-flag error names are exactly those whose model_fn declares the
  flag in SUPPORTED_MODEL_FN_FLAGS (every command at the root and in the model families)."""
  import ast  # pylint: disable=g-import-not-at-top
  import glob  # pylint: disable=g-import-not-at-top
  declared = {name: set() for name in estimator_utils.MODEL_FN_FLAGS}
  paths = glob.glob(os.path.join(REPO_DIR, "*.py")) + glob.glob(
      os.path.join(REPO_DIR, "*", "*.py"))
  for path in paths:
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in tree.body:
      if (isinstance(node, ast.Assign) and len(node.targets) == 1 and
          getattr(node.targets[0], "id", None) == "SUPPORTED_MODEL_FN_FLAGS"):
        package = os.path.basename(os.path.dirname(path))
        module = os.path.splitext(os.path.basename(path))[0]
        tool = os.path.basename(path) if os.path.dirname(path) == REPO_DIR else (
            "%s.%s" % (package, module))
        for flag in ast.literal_eval(node.value):
          declared[flag].add(tool)
  assert {name: set(tools) for name, tools in estimator_utils.TOOLS_SUPPORTING.items()} == declared
  assert "run_classifier.py" in declared["precision"]
  assert not any("run_translation" in name for name in declared["fused_optimizer"])


def test_etc_long_tasks_encoder_in_compute_dtype_variables_and_loss_float32():
  """etc_model.run_long_tasks' model_fn passes --precision to EtcModel (etc_model.run_pretraining
  and the model itself: tests/test_etc_pretraining.py, tests/test_etc_modeling.py)."""
  config = etc_modeling.EtcConfig.from_dict(
      {"vocab_size": 50, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
       "intermediate_size": 24, "local_radius": 3, "relative_pos_max_distance": 2,
       "relative_vocab_size": 9, "residual_attention": "sum"})
  extra = {name: (tf.int32, [1, length]) for name, length in long_task_heads.feature_lengths(
      "supporting", 16, 4, 2).items() if name not in long_task_heads.COMMON_FEATURES}
  with tf.Graph().as_default() as graph:
    tf1.train.get_or_create_global_step()
    features = etc_estimator.placeholder_features(config, 16, 4, extra=extra)
    model_fn = run_long_tasks.model_fn_builder("supporting", config, None, 1e-3, 10, 1, False,
                                               train_batch_size=1, precision="bf16")
    spec = model_fn(features, None, tf1.estimator.ModeKeys.TRAIN, {})
    assert spec.loss.dtype == tf.float32
    assert {v.dtype.base_dtype for v in tf1.global_variables()} == {tf.float32, tf.int64}
    einsums = {op.get_attr("T") for op in graph.get_operations()
               if op.type == "Einsum" and op.name.startswith("etc_document_bert")}
    assert einsums == {tf.bfloat16}


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_dropout_masks_do_not_depend_on_precision(precision):
  x = np.linspace(1.0, 2.0, 64 * 33).reshape(64, 33).astype(np.float32)
  kept = {}
  for p in ("fp32", precision):
    with tf.Graph().as_default():
      tf1.train.get_or_create_global_step()
      out = modeling.dropout(tf.cast(tf.constant(x), modeling.PRECISIONS[p]), 0.3)
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        kept[p] = sess.run(tf.cast(out, tf.float32)) != 0
  assert 0.6 < kept["fp32"].mean() < 0.8
  np.testing.assert_array_equal(kept[precision], kept["fp32"])


# --use_xla: TensorFlow reads TF_XLA_FLAGS once per process, so these run in a fresh one.
XLA_CODE = r"""
import sys
sys.path.insert(0, "tests")
from realformer_tf import estimator_utils
estimator_utils.set_xla_cpu_flags()  # what define_estimator_flags does before app.run
import numpy as np, tensorflow as tf
import test_precision as T
tf1 = tf.compat.v1

class Flags(object):
  def __init__(self, use_xla):
    self.use_xla = use_xla

out = {}
for xla in (False, True):
  with tf.Graph().as_default():
    train_op, loss = T._train_graph("fp32", steps=30)
    config = estimator_utils.session_config(Flags(xla)) or tf1.ConfigProto()
    with tf1.Session(config=config) as sess:
      sess.run(tf1.global_variables_initializer())
      metadata = tf1.RunMetadata()
      losses = [sess.run([train_op, loss], run_metadata=metadata,
                         options=tf1.RunOptions(output_partition_graphs=True))[1]
                for _ in range(30)]
      compiled = sum(n.op == "_XlaCompile" for g in metadata.partition_graphs for n in g.node)
      weights = sess.run({v.op.name: v for v in tf1.trainable_variables()})
  out[xla] = (np.array(losses), weights, compiled)
(base, w_base, c_base), (xla, w_xla, c_xla) = out[False], out[True]
print("CLUSTERS %d %d" % (c_base, c_xla))
print("LOSS %.4f %.4f" % (base[0], base[-1]))
print("LOSS_DEV %.3e" % np.max(np.abs(xla - base) / base))
print("WEIGHT_DEV %.3e" % max(np.abs(w_base[k] - w_xla[k]).max() for k in w_base))
"""


@pytest.mark.slow
def test_use_xla_clusters_and_trains_like_without():
  """Measured: 23 XLA clusters; after 30 steps losses within 2.2e-7 relative and weights within
  7.9e-7 of the unclustered run (XLA's own float rounding)."""
  proc = run_tool(None, ["-c", XLA_CODE], env={"TF_XLA_FLAGS": ""})
  found = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
  c_base, c_xla = map(int, found["CLUSTERS"].split())
  assert c_base == 0 and c_xla > 5
  first, last = map(float, found["LOSS"].split())
  assert last < 0.5 * first
  assert float(found["LOSS_DEV"]) < 1e-5
  assert float(found["WEIGHT_DEV"]) < 1e-5


def test_use_xla_fails_when_tensorflow_read_its_flags_before():
  code = ("import sys; sys.argv = ['x.py']; from realformer_tf import estimator_utils, common\n"
          "import tensorflow as tf\n"
          "with tf.Graph().as_default(), tf.compat.v1.Session() as s: s.run(tf.constant(1))\n"
          "class F: use_xla = True\n"
          "common.run_main(lambda argv: estimator_utils.session_config(F()), [])\n")
  proc = run_tool(None, ["-c", code], expect_rc=2, env={"TF_XLA_FLAGS": ""})
  assert "--use_xla: XLA auto-clustering is off for the CPU in this process" in \
      last_error_line(proc)


@pytest.mark.parametrize("flags_given,message", [
    (["--use_tpu", "--tpu_name=x", "--use_xla"], "--use_xla is for CPU/GPU"),
    (["--use_tpu", "--tpu_name=x", "--precision=fp16"], "--precision=fp16 is not supported on TPU"),
    (["--use_tpu", "--tpu_name=x", "--fused_optimizer"], "--fused_optimizer is for CPU/GPU"),
    (["--precision=fp16", "--distribution_strategy=mirrored"],
     "--precision=fp16 (dynamic loss scaling) is not supported with"),
])
def test_flag_combinations_refused_in_one_line(flags_given, message):
  code = ("import sys; sys.argv = ['x.py']; from realformer_tf import estimator_utils, common\n"
          "from absl import flags\nestimator_utils.define_estimator_flags()\n"
          "flags.FLAGS(['x.py'] + %r)\n"
          "check = lambda argv: estimator_utils.validate_estimator_flags(flags.FLAGS)\n"
          "common.run_main(check, [])\n" % (flags_given,))
  proc = run_tool(None, ["-c", code], expect_rc=2)
  assert message in last_error_line(proc)


def test_session_config_unchanged_without_use_xla():
  class Flags(object):
    use_xla = False
  assert estimator_utils.session_config(Flags()) is None


def _write_tfrecord(path, num_examples=64):
  """num_examples pre-training examples in create_pretraining_data's format."""
  with tf.io.TFRecordWriter(str(path)) as writer:
    for i in range(num_examples):
      f = _features(seed=i)
      feature = {}
      for name, values in f.items():
        row = values[0].reshape(-1)
        kind = "float_list" if row.dtype == np.float32 else "int64_list"
        cls = tf.train.FloatList if kind == "float_list" else tf.train.Int64List
        feature[name] = tf.train.Feature(**{kind: cls(value=row)})
      writer.write(tf.train.Example(features=tf.train.Features(feature=feature))
                   .SerializeToString())


@pytest.mark.slow
def test_run_pretraining_with_speed_flags_then_resume_in_other_precisions(tmp_path):
  """run_pretraining: fp16 + --use_xla + --fused_optimizer, then the same output_dir resumed in
  bf16 and fp32 (float32 checkpoints; a fp16 job resuming a checkpoint without the loss scale
  is test_fp16_job_resumes_checkpoint_without_loss_scale)."""
  import json  # pylint: disable=g-import-not-at-top
  _write_tfrecord(tmp_path / "data.tfrecord")
  (tmp_path / "bert_config.json").write_text(json.dumps(CONFIG))
  common_args = ["--input_file=%s" % (tmp_path / "data.tfrecord"),
                 "--bert_config_file=%s" % (tmp_path / "bert_config.json"),
                 "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % PREDS,
                 "--train_batch_size=8", "--num_warmup_steps=1", "--learning_rate=1e-3",
                 "--save_checkpoints_steps=3", "--do_train"]
  out = tmp_path / "out"
  runs = [("fp16", 3, ["--use_xla", "--fused_optimizer"]), ("bf16", 6, []), ("fp32", 8, [])]
  for precision, steps, extra in runs:
    run_tool("run_pretraining.py", common_args + [
        "--output_dir=%s" % out, "--precision=%s" % precision,
        "--num_train_steps=%d" % steps] + extra)
    summary = json.loads((out / "train_summary_local.json").read_text())
    assert (summary["global_step"], summary["precision"]) == (steps, precision)
    # Read now: the next job's first save rewrites the checkpoint of the step it resumes at.
    dtypes = tf.train.load_checkpoint(str(out / ("model.ckpt-%d" % steps))
                                      ).get_variable_to_dtype_map()
    assert dtypes["bert/encoder/layer_0/attention/self/query/kernel"] == tf.float32
    assert dtypes["bert/encoder/layer_0/attention/self/query/kernel/adam_m"] == tf.float32
    assert (optimization.LOSS_SCALE_VARIABLE in dtypes) == (precision == "fp16")


# ----------------------------------------------------------------------------------------------
# The fine-tuning scripts: the same --precision / --fused_optimizer as run_pretraining.

FINE_TUNING_LABELS = 5


def _fine_tuning_features(script):
  """A fixed batch of `script`'s TRAIN features (tiny CONFIG ids)."""
  rng = np.random.RandomState(0)
  features = {
      "input_ids": rng.randint(5, CONFIG["vocab_size"], (BATCH, SEQ)).astype(np.int32),
      "input_mask": np.ones((BATCH, SEQ), np.int32),
      "segment_ids": np.repeat([[0] * (SEQ // 2) + [1] * (SEQ // 2)], BATCH, 0).astype(np.int32),
  }
  if script == "run_classifier":
    features["label_ids"] = (np.arange(BATCH) % FINE_TUNING_LABELS).astype(np.int32)
  elif script == "run_squad":
    features["unique_ids"] = np.arange(BATCH).astype(np.int32)
    features["start_positions"] = rng.randint(1, SEQ // 2, BATCH).astype(np.int32)
    features["end_positions"] = features["start_positions"] + 1
  else:
    features["label_ids"] = rng.randint(0, FINE_TUNING_LABELS, (BATCH, SEQ)).astype(np.int32)
    features["label_weights"] = (rng.rand(BATCH, SEQ) < 0.5).astype(np.float32)
  return features


def _fine_tuning_spec(script, precision, mode):
  """`script`'s model_fn (tiny CONFIG, no init checkpoint) in `mode` on the fixed batch."""
  tf1.set_random_seed(3)
  tf1.train.get_or_create_global_step()
  features = {k: tf.constant(v) for k, v in _fine_tuning_features(script).items()}
  args = dict(init_checkpoint=None, learning_rate=1e-3, num_train_steps=10, num_warmup_steps=1,
              use_tpu=False, use_one_hot_embeddings=False, precision=precision)
  if script == "run_squad":
    model_fn = run_squad.model_fn_builder(_config(), **args)
  else:
    module = run_classifier if script == "run_classifier" else run_ner
    model_fn = module.model_fn_builder(_config(), FINE_TUNING_LABELS, **args)
  return model_fn(features, None, mode, {})


@functools.lru_cache(maxsize=None)
def _fine_tuning_fp32_variables(script):
  with tf.Graph().as_default():
    _fine_tuning_spec(script, "fp32", tf1.estimator.ModeKeys.TRAIN)
    assert tf1.get_collection(tf1.GraphKeys.SAVERS) == []
    return {v.op.name: v.dtype.base_dtype for v in tf1.global_variables()}


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("script", ["run_classifier", "run_squad", "run_ner"])
def test_fine_tuning_encoder_in_compute_dtype_head_and_loss_float32(script, precision):
  compute = modeling.PRECISIONS[precision]
  with tf.Graph().as_default() as graph:
    spec = _fine_tuning_spec(script, precision, tf1.estimator.ModeKeys.TRAIN)
    variables = {v.op.name: v.dtype.base_dtype for v in tf1.global_variables()}
    savers = tf1.get_collection(tf1.GraphKeys.SAVERS)
  extra = {optimization.LOSS_SCALE_VARIABLE: tf.float32,
           optimization.LOSS_SCALE_GOOD_STEPS_VARIABLE: tf.int64}
  # Same float32 variables as the fp32 job (the checkpoints load across precisions).
  assert variables == dict(_fine_tuning_fp32_variables(script),
                           **(extra if precision == "fp16" else {}))
  assert spec.loss.dtype == tf.float32
  # fp16: the saver that also resumes a checkpoint without loss scale (an fp32 / bf16 job's).
  if precision == "fp16":
    assert [type(s) for s in savers] == [estimator_utils.LossScaleOptionalSaver]
  else:
    assert savers == []
  forward = [op for op in graph.get_operations()
             if op.type in ("MatMul", "BatchMatMulV2") and not op.name.startswith("gradients")]
  encoder = {op.get_attr("T") for op in forward if op.name.startswith("bert/encoder/")}
  others = {op.name: op.get_attr("T") for op in forward if not op.name.startswith("bert/encoder/")}
  assert encoder == {compute}
  # The pooler and the task head (classification, span or tagging layer) compute in float32.
  assert len(others) >= 1 and set(others.values()) == {tf.float32}, others
  with tf.Graph().as_default():
    spec = _fine_tuning_spec(script, precision, tf1.estimator.ModeKeys.PREDICT)
    for name, t in spec.predictions.items():
      assert t.dtype in (tf.float32, tf.int32), name


def test_loss_scale_saver_moved_to_estimator_utils():
  assert run_pretraining.LossScaleOptionalSaver is estimator_utils.LossScaleOptionalSaver
  assert estimator_utils.loss_scale_for("fp16") == "dynamic"
  assert estimator_utils.loss_scale_for("bf16") is None
  assert estimator_utils.loss_scale_for(tf.float32) is None


def _refusal_args(script, tmp_path):
  """Flags with which `script` gets past its own checks (nothing is read before the refusal)."""
  vocab = os.path.join(REPO_DIR, "data", "vocab.txt")
  config = os.path.join(REPO_DIR, "configs", "bert_tiny_post_ln.json")
  args = ["--vocab_file=%s" % vocab, "--bert_config_file=%s" % config,
          "--output_dir=%s" % (tmp_path / "out")]
  if script == "run_classifier.py":
    return args + ["--task_name=sst-2", "--do_eval",
                   "--data_dir=%s" % os.path.join(REPO_DIR, "tests", "fixtures", "glue", "SST-2")]
  if script == "run_squad.py":
    return args + ["--do_predict", "--predict_file=%s" % os.path.join(
        REPO_DIR, "tests", "fixtures", "squad", "tiny-v1.1.json")]
  return args + ["--do_eval", "--dev_file=%s" % os.path.join(
      REPO_DIR, "tests", "fixtures", "ner", "bio_tab.conll")]


@pytest.mark.parametrize("script", ["run_classifier.py", "run_squad.py", "run_ner.py"])
def test_fine_tuning_refuses_fp16_with_distribution_strategy(script, tmp_path):
  proc = run_tool(script, _refusal_args(script, tmp_path) + [
      "--precision=fp16", "--distribution_strategy=mirrored"], expect_rc=2, timeout=120)
  assert last_error_line(proc) == (
      "error: --precision=fp16 (dynamic loss scaling) is not supported with "
      "--distribution_strategy=mirrored yet (use bf16, or one device)")
  assert not (tmp_path / "out").exists()  # refused before anything is written


def _write_ner_data(data_dir, seed=0):
  """Learnable CoNLL files: `[yesterday ,] Name verb prep City .` with B-PER / B-LOC tags."""
  names = ["John", "Mary", "Peter", "Anna", "David", "Sarah", "James", "Laura"]
  cities = ["Paris", "London", "Berlin", "Tokyo", "Madrid", "Rome", "Vienna", "Dublin"]
  verbs = [("lives", "in"), ("works", "in"), ("travels", "to"), ("moved", "to")]
  rng = np.random.RandomState(seed)
  data_dir.mkdir()
  for split, count in (("train", 24), ("dev", 6), ("test", 6)):
    lines = []
    for _ in range(count):
      verb, prep = verbs[rng.randint(len(verbs))]
      words = [(names[rng.randint(len(names))], "B-PER"), (verb, "O"), (prep, "O"),
               (cities[rng.randint(len(cities))], "B-LOC"), (".", "O")]
      if rng.rand() < 0.5:
        words = [("yesterday", "O"), (",", "O")] + words
      lines += ["%s\t%s" % w for w in words] + [""]
    (data_dir / ("%s.conll" % split)).write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
  """TINY_BERT_CONFIG (the real vocab's size) and a random BERT checkpoint of it."""
  root = tmp_path_factory.mktemp("tiny_bert_precision")
  config_file = str(root / "bert_config.json")
  with open(config_file, "w") as f:
    json.dump(TINY_BERT_CONFIG, f)
  return config_file, write_random_bert_checkpoint(config_file, str(root / "bert_model.ckpt"))


def _job(script, tmp_path, tiny_bert):
  """(flags of every run, training flags, inference flags, chance loss, reader of the
  inference outputs of an output_dir) of a ~20-step fine-tuning job of `script`."""
  config_file, checkpoint = tiny_bert
  vocab = os.path.join(REPO_DIR, "data", "vocab.txt")
  base = ["--vocab_file=%s" % vocab, "--bert_config_file=%s" % config_file,
          "--learning_rate=3e-3", "--save_checkpoints_steps=1000"]
  train = ["--init_checkpoint=%s" % checkpoint, "--do_train"]
  if script == "run_classifier.py":
    data = os.path.join(REPO_DIR, "tests", "fixtures", "glue", "SST-2")
    base += ["--task_name=sst-2", "--data_dir=%s" % data, "--max_seq_length=32",
             "--train_batch_size=4", "--eval_batch_size=3", "--predict_batch_size=2",
             "--num_train_epochs=10"]  # 8 examples: 20 steps

    def outputs(out):
      probs = np.loadtxt(str(out / "test_results.tsv"), delimiter="\t")
      return json.loads((out / "eval_results.json").read_text())["eval_loss"], probs
    return base, train + ["--do_eval"], ["--do_eval", "--do_predict"], np.log(2), outputs
  if script == "run_squad.py":
    squad = os.path.join(REPO_DIR, "tests", "fixtures", "squad", "tiny-v2.0.json")
    base += ["--predict_file=%s" % squad, "--version_2_with_negative", "--max_seq_length=64",
             "--doc_stride=32", "--max_query_length=16", "--train_batch_size=2",
             "--num_train_epochs=8", "--output_raw_logits"]  # 5 examples: 20 steps

    def outputs(out):
      raw = np.load(str(out / "raw_logits.npz"))
      return None, np.concatenate([raw["start_logits"], raw["end_logits"]], axis=1)
    return (base, train + ["--train_file=%s" % squad, "--do_predict"], ["--do_predict"],
            np.log(64), outputs)
  data = tmp_path / "ner"
  _write_ner_data(data)
  base += ["--data_dir=%s" % data, "--max_seq_length=16", "--train_batch_size=4",
           "--num_train_epochs=3", "--eval_batch_size=8", "--predict_batch_size=8"]

  def outputs(out):  # 24 sentences: 18 steps
    return json.loads((out / "eval_results.json").read_text())["eval_loss"], None
  return base, train + ["--do_eval"], ["--do_eval", "--do_predict"], np.log(5), outputs


def _final_loss(log):
  """The loss of the last training step, as Estimator logs it."""
  found = re.findall(r"Loss for final step: (\S+)\.", log)
  assert found, log[-3000:]
  return float(found[-1])


@pytest.mark.slow
@pytest.mark.parametrize("script,precisions", [
    ("run_classifier.py", ("bf16", "fp16")), ("run_squad.py", ("fp16",)),
    ("run_ner.py", ("bf16",))])
def test_fine_tuning_in_every_precision(script, precisions, tmp_path, tiny_bert):
  """The same ~20-step fine-tuning job (same data, seed, init checkpoint) in fp32 and in the
  other precisions (bf16 with --fused_optimizer) ends at nearly the same loss; a bf16 checkpoint
  is evaluated / predicted in fp32 like the fp32 job's. Every precision is run end to end for
  run_classifier; run_squad and run_ner (same create_train_op, their heads' dtypes are checked
  by the graph tests above) each run one, to keep the suite short."""
  base, train, infer, chance, outputs = _job(script, tmp_path, tiny_bert)
  runs = {}
  for name in ("fp32",) + tuple(precisions):
    flags_given = train + infer + (["--fused_optimizer"] if name == "bf16" else [])
    out = tmp_path / name
    log = run_tool(script, base + flags_given + ["--output_dir=%s" % out,
                                                 "--precision=%s" % name]).output
    runs[name] = (_final_loss(log), outputs(out), out)
  fp32_loss = runs["fp32"][0]
  assert fp32_loss < 0.2 * chance  # it learns
  for name, rel in (("bf16", 0.05), ("fp16", 0.01)):
    if name in runs:
      # Measured: within 0.4% (bf16) and 0.04% (fp16) of fp32's; not equal (the flag is used).
      assert 0 < abs(runs[name][0] - fp32_loss) < rel * fp32_loss, (name, runs[name][0], fp32_loss)
  # Float32 checkpoints with the fp32 job's variables (fp16: plus its loss scale).
  dtypes = {name: tf.train.load_checkpoint(str(run[2])).get_variable_to_dtype_map()
            for name, run in runs.items()}
  assert all(d == tf.float32 for n, d in dtypes["fp32"].items() if n != "global_step")
  if "bf16" in runs:
    assert dtypes["bf16"] == dtypes["fp32"]
  if "fp16" in runs:
    extra = {optimization.LOSS_SCALE_VARIABLE: tf.float32,
             optimization.LOSS_SCALE_GOOD_STEPS_VARIABLE: tf.int64}
    assert dtypes["fp16"] == dict(dtypes["fp32"], **extra)
  # Inference (eval loss, probabilities, span logits) close to the fp32 job's. Measured: at most
  # 0.1% of the outputs' largest magnitude.
  comparisons = [(runs[name][1], runs["fp32"][1], 0.02 if name == "fp16" else 0.05)
                 for name in precisions]
  if "bf16" in runs:
    # The bf16 job's checkpoint, evaluated / predicted again in fp32.
    run_tool(script, base + infer + ["--output_dir=%s" % runs["bf16"][2], "--precision=fp32"])
    bf16_in_fp32 = outputs(runs["bf16"][2])
    comparisons += [(bf16_in_fp32, runs["bf16"][1], 0.02), (bf16_in_fp32, runs["fp32"][1], 0.05)]
  for got, want, rtol in comparisons:
    for g, w in zip(got, want):
      if w is not None:
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * np.max(np.abs(w)))