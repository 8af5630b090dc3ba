"""Tests for optimization.py against hand-computed schedules and a NumPy AdamW."""

import numpy as np
import pytest
import tensorflow as tf

import optimization

tf1 = tf.compat.v1


def _lr_values(init_lr, num_train_steps, num_warmup_steps, steps):
  with tf.Graph().as_default():
    step = tf1.placeholder(tf.int64, [])
    lr = optimization.learning_rate_schedule(step, init_lr, num_train_steps, num_warmup_steps)
    with tf1.Session() as sess:
      return [sess.run(lr, {step: s}) for s in steps]


def test_schedule_warmup_then_linear_decay_to_zero():
  steps = [0, 1, 5, 9, 10, 11, 55, 99, 100, 150]
  got = _lr_values(1e-4, 100, 10, steps)
  want = [0.0, 1e-5, 5e-5, 9e-5, 1e-4 * 0.9, 1e-4 * 0.89, 1e-4 * 0.45, 1e-6, 0.0, 0.0]
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12)


def test_schedule_without_warmup():
  got = _lr_values(2e-5, 10, 0, [0, 5, 10])
  np.testing.assert_allclose(got, [2e-5, 1e-5, 0.0], rtol=1e-5, atol=1e-12)


def _numpy_adamw(param, grads, lrs, decay):
  """AdamW as official BERT: no bias correction, decoupled decay added to the update."""
  m = np.zeros_like(param)
  v = np.zeros_like(param)
  for grad, lr in zip(grads, lrs):
    m = 0.9 * m + 0.1 * grad
    v = 0.999 * v + 0.001 * grad * grad
    update = m / (np.sqrt(v) + 1e-6)
    if decay:
      update = update + 0.01 * param
    param = param - lr * update
  return param


def _train(grads_per_step, init_values, accumulation_steps=1, num_train_steps=10,
           num_warmup_steps=0, init_lr=0.1, **optimizer_kwargs):
  """Runs create_optimizer on loss = sum(g * var) with fed gradients g; returns final values."""
  with tf.Graph().as_default():
    variables, feeds = {}, {}
    loss = 0.0
    for name, value in init_values.items():
      variables[name] = tf1.get_variable(name, initializer=tf.constant(value))
      feeds[name] = tf1.placeholder(tf.float32, value.shape)
      loss += tf.reduce_sum(feeds[name] * variables[name])
    train_op = optimization.create_optimizer(
        loss, init_lr, num_train_steps, num_warmup_steps, use_tpu=False,
        gradient_accumulation_steps=accumulation_steps, **optimizer_kwargs)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      for step_grads in grads_per_step:
        sess.run(train_op, {feeds[n]: g for n, g in step_grads.items()})
      names = [v.op.name for v in tf1.global_variables()]
      step = sess.run(tf1.train.get_global_step())
      return sess.run(variables), names, step


def test_adamw_matches_numpy_and_excludes_layer_norm_and_bias():
  rng = np.random.RandomState(0)
  init = {"layer/dense/kernel": rng.randn(3, 2).astype(np.float32),
          "layer/dense/bias": rng.randn(2).astype(np.float32),
          "layer/LayerNorm/gamma": rng.randn(2).astype(np.float32)}
  # Small gradients so clipping at global norm 1.0 does not trigger.
  grads = [{n: 0.05 * rng.randn(*v.shape).astype(np.float32) for n, v in init.items()}
           for _ in range(4)]
  got, names, step = _train(grads, init, num_train_steps=10)
  lrs = [0.1 * (1 - s / 10.0) for s in range(4)]
  for name, value in init.items():
    want = _numpy_adamw(value.astype(np.float64), [g[name] for g in grads], lrs,
                        decay=name.endswith("kernel"))
    np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-6, err_msg=name)
  assert step == 4
  for name in init:
    assert name + "/adam_m" in names and name + "/adam_v" in names


def test_global_norm_clipping():
  init = {"w": np.zeros(4, np.float32)}
  big = {"w": np.array([30.0, 40.0, 0.0, 0.0], np.float32)}  # norm 50 -> clipped to 1
  got, _, _ = _train([big], init, num_train_steps=10)
  clipped = big["w"] / 50.0
  want = _numpy_adamw(init["w"].astype(np.float64), [clipped], [0.1], decay=True)
  np.testing.assert_allclose(got["w"], want, rtol=1e-5, atol=1e-7)


def test_gradient_accumulation_equals_mean_of_micro_batches():
  rng = np.random.RandomState(1)
  init = {"w": rng.randn(5).astype(np.float32), "b/bias": rng.randn(3).astype(np.float32)}
  micro = [{n: 0.05 * rng.randn(*v.shape).astype(np.float32) for n, v in init.items()}
           for _ in range(6)]
  merged = [{n: (micro[2 * i][n] + micro[2 * i + 1][n]) / 2.0 for n in init} for i in range(3)]
  accumulated, names, step = _train(micro, init, accumulation_steps=2, num_train_steps=3)
  direct, _, _ = _train(merged, init, accumulation_steps=1, num_train_steps=3)
  assert step == 6
  for name in init:
    np.testing.assert_allclose(accumulated[name], direct[name], rtol=1e-5, atol=1e-6)
    assert name + "/grad_accum" in names
  # After an odd number of micro-batches the variables have not moved yet.
  half, _, _ = _train(micro[:1], init, accumulation_steps=2, num_train_steps=3)
  for name in init:
    np.testing.assert_array_equal(half[name], init[name])


def test_bad_accumulation_steps():
  with tf.Graph().as_default():
    w = tf1.get_variable("w", initializer=tf.ones([2]))
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
      optimization.create_optimizer(tf.reduce_sum(w), 0.1, 10, 0, False,
                                    gradient_accumulation_steps=0)


def test_embedding_gradients_update_only_used_rows_with_decay():
  """IndexedSlices gradients (tf.gather) are applied densely, as in the official optimizer."""
  with tf.Graph().as_default():
    table = tf1.get_variable("word_embeddings", initializer=tf.ones([4, 2]))
    loss = tf.reduce_sum(tf.gather(table, [1, 1, 3]) * 0.01)
    train_op = optimization.create_optimizer(loss, 0.1, 10, 0, False)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      sess.run(train_op)
      got = sess.run(table)
  grads = np.zeros((4, 2))
  grads[1] = 0.02
  grads[3] = 0.01
  want = _numpy_adamw(np.ones((4, 2)), [grads], [0.1], decay=True)
  np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("accumulation_steps", [1, 2])
def test_fused_adamw_matches_numpy_and_the_unfused_update(accumulation_steps):
  """fused=True (ResourceApplyAdam + a decay op): the same AdamW up to float32 rounding."""
  rng = np.random.RandomState(2)
  init = {"layer/dense/kernel": rng.randn(30, 20).astype(np.float32),
          "layer/dense/bias": rng.randn(20).astype(np.float32),
          "layer/LayerNorm/gamma": rng.randn(20).astype(np.float32)}
  # Global norm below 1: no clipping.
  grads = [{n: 0.02 * rng.randn(*v.shape).astype(np.float32) for n, v in init.items()}
           for _ in range(6 * accumulation_steps)]
  fused, names, step = _train(grads, init, accumulation_steps, fused=True)
  unfused, _, _ = _train(grads, init, accumulation_steps)
  assert step == 6 * accumulation_steps
  lrs = [0.1 * (1 - s / 10.0) for s in range(6)]
  for name, value in init.items():
    merged = [np.mean([g[name] for g in grads[i:i + accumulation_steps]], axis=0)
              for i in range(0, len(grads), accumulation_steps)]
    want = _numpy_adamw(value.astype(np.float64), merged, lrs, decay=name.endswith("kernel"))
    np.testing.assert_allclose(fused[name], want, rtol=1e-4, atol=1e-5, err_msg=name)
    # Measured: 1.4e-5 apart after 6 updates of about 0.3 (the unfused update: 6.5e-7 from
    # float64). The kernel computes 1 - beta_2 in float32, 0.00099998713 instead of 0.001: v is
    # 1.3e-5 smaller and each update 6.4e-6 larger.
    np.testing.assert_allclose(fused[name], unfused[name], rtol=0, atol=5e-5, err_msg=name)
    assert name + "/adam_m" in names and name + "/adam_v" in names


def _ancestors(op):
  """Every op that op waits for, through data and control edges."""
  seen, todo = set(), [op]
  while todo:
    current = todo.pop()
    for parent in [t.op for t in current.inputs] + list(current.control_inputs):
      if parent not in seen:
        seen.add(parent)
        todo.append(parent)
  return seen


def test_fused_weight_decay_waits_for_the_forward_pass():
  """The decay op of fused=True runs after the step's forward pass has read the weights.

  Without that ordering the decay could run first in some steps and last in others, and the
  same job gave other weights from run to run (bench/bench_demo_step.py: two workers of the
  same variant with other losses). With gradient accumulation the update is a tf.cond branch
  (a function here, not ops of this graph); the same dependency is made inside it."""
  with tf.Graph().as_default():
    x = tf.constant(np.random.RandomState(0).randn(4, 3).astype(np.float32))
    kernel = tf1.get_variable("layer/dense/kernel", initializer=tf.ones([3, 2]))
    forward = tf.matmul(x, kernel)
    optimization.create_optimizer(tf.reduce_sum(tf.square(forward)), 0.1, 10, 0, False,
                                  fused=True)
    decays = [op for op in tf1.get_default_graph().get_operations()
              if op.type == "AssignSubVariableOp" and op.inputs[0].op is kernel.op]
    assert decays
    for decay in decays:
      assert forward.op in _ancestors(decay), decay.name


def test_bad_loss_scale():
  with tf.Graph().as_default():
    w = tf1.get_variable("w", initializer=tf.ones([2]))
    for bad in ("static", 0, -1.0):
      with pytest.raises(ValueError, match="loss_scale must be None, 'dynamic' or a positive"):
        optimization.create_optimizer(tf.reduce_sum(w), 0.1, 10, 0, False, loss_scale=bad)
