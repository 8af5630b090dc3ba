# coding=utf-8
"""Optimization for BERT and RealFormer: AdamW with linear warm-up and linear decay.

Same math, hyper-parameters and slot names (`<var>/adam_m`, `<var>/adam_v`) as the official
BERT `optimization.py`, so official checkpoints (with optimizer slots) resume here. Additions:
- the optimizer is a proper `tf.compat.v1.train.Optimizer` subclass, so TPU
  CrossShardOptimizer and tf.distribute strategies (through Estimator's train_distribute)
  aggregate gradients across replicas;
- each replica (TPU core or tf.distribute device) clips its own gradient to global norm 1.0, as
  the official code does on TPU, then the gradients are averaged (the official TPU code summed);
- `gradient_accumulation_steps` averages the gradients of k micro-batches per update, so the
  paper's batch of 512 fits on few devices;
- `loss_scale="dynamic"` (for float16 compute): the loss is multiplied by a scale before the
  gradients and they are divided by it after; a step whose gradients are not finite is skipped
  and halves the scale, 2000 finite steps in a row double it (variables `loss_scale`,
  `loss_scale_good_steps`);
- `fused=True` applies AdamW with one TensorFlow Adam kernel per variable (plus one decay op)
  instead of ~14 element-wise ops: faster, but not bit-equal: the kernel computes 1 - beta_2 in
  float32 (0.00099998713, not 0.001), so each update is ~6e-6 relatively larger (measured in
  tests/test_optimization.py; docs/operations.md).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import re

import tensorflow as tf

tf1 = tf.compat.v1

# Parameters whose name matches one of these get no weight decay.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ["LayerNorm", "layer_norm", "bias"]

# Dynamic loss scaling (float16): start, growth interval, factor, floor.
LOSS_SCALE_INITIAL = 2.0 ** 15
LOSS_SCALE_GROWTH_STEPS = 2000
LOSS_SCALE_FACTOR = 2.0
LOSS_SCALE_MIN = 1.0
LOSS_SCALE_VARIABLE = "loss_scale"
LOSS_SCALE_GOOD_STEPS_VARIABLE = "loss_scale_good_steps"


LEARNING_RATE_SCHEDULES = ("linear", "inverse_sqrt")


def learning_rate_schedule(global_step, init_lr, num_train_steps, num_warmup_steps,
                           schedule="linear"):
  """Linear warm-up from 0 to init_lr over num_warmup_steps, then a decay.

  Args:
    global_step: int Tensor, the number of optimizer updates done so far.
    init_lr: peak learning rate.
    num_train_steps: total number of updates (the linear decay reaches 0 there).
    num_warmup_steps: number of warm-up updates (0 for none).
    schedule: "linear" (BERT's, and the RealFormer paper's NMT: linear decay to 0 at
      num_train_steps) or "inverse_sqrt" (the Transformer's / fairseq's and ADMIN's:
      init_lr * sqrt(num_warmup_steps / step) after warm-up).

  Returns:
    float32 scalar Tensor, the learning rate for this update.
  """
  if schedule not in LEARNING_RATE_SCHEDULES:
    raise ValueError("schedule must be one of %s, got %r" % (LEARNING_RATE_SCHEDULES, schedule))
  if schedule == "inverse_sqrt":
    step = tf.cast(global_step, tf.float32)
    warmup = float(max(num_warmup_steps, 1))
    return init_lr * tf.minimum(step / warmup, tf.math.rsqrt(tf.maximum(step, 1.0) / warmup))
  global_step = tf.cast(global_step, tf.int64)
  learning_rate = tf1.train.polynomial_decay(
      tf.constant(value=init_lr, shape=[], dtype=tf.float32),
      global_step,
      num_train_steps,
      end_learning_rate=0.0,
      power=1.0,
      cycle=False)

  if num_warmup_steps:
    global_steps_float = tf.cast(global_step, tf.float32)
    warmup_steps_float = tf.constant(num_warmup_steps, dtype=tf.float32)
    warmup_learning_rate = init_lr * global_steps_float / warmup_steps_float
    is_warmup = tf.cast(global_steps_float < warmup_steps_float, tf.float32)
    learning_rate = (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate
  return learning_rate


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu,
                     gradient_accumulation_steps=1, clip_norm=1.0, tvars=None,
                     loss_scale=None, fused=False, schedule="linear", beta_2=0.999,
                     epsilon=1e-6, weight_decay_rate=0.01):
  """Creates the training op: AdamW, warm-up + linear decay, global-norm clipping.

  Args:
    loss: float scalar Tensor (the mean loss of this replica's batch).
    init_lr: peak learning rate.
    num_train_steps: number of optimizer updates. With gradient accumulation the global step
      counts micro-batches, so training runs num_train_steps * gradient_accumulation_steps
      global steps.
    num_warmup_steps: number of warm-up updates.
    use_tpu: wrap in CrossShardOptimizer (gradients averaged over TPU cores).
    gradient_accumulation_steps: micro-batches averaged per update (1 = none).
    clip_norm: global-norm clipping threshold.
    tvars: variables to train; defaults to all trainable variables.
    loss_scale: None (no scaling), "dynamic" (float16 training, see the module docstring) or
      a positive number (a fixed scale; non-finite steps are still skipped).
    fused: apply AdamW with TensorFlow's fused Adam kernel (see the module docstring).
    schedule: "linear" or "inverse_sqrt" (see learning_rate_schedule).
    beta_2: Adam's second-moment decay (0.98 for translation, as the Transformer and ADMIN).
    epsilon: Adam's epsilon.
    weight_decay_rate: decoupled weight decay (BERT's 0.01; 0 for translation).

  Returns:
    The train op (which also increments the global step).
  """
  if gradient_accumulation_steps < 1:
    raise ValueError("gradient_accumulation_steps must be >= 1, got %d" %
                     gradient_accumulation_steps)
  check_loss_scale(loss_scale)
  global_step = tf1.train.get_or_create_global_step()
  update_step = global_step // gradient_accumulation_steps
  learning_rate = learning_rate_schedule(update_step, init_lr, num_train_steps,
                                         num_warmup_steps, schedule=schedule)
  if not use_tpu:  # Summaries inside a TPU computation are not written.
    tf1.summary.scalar("learning_rate", learning_rate)

  # It is recommended that you use this optimizer for fine tuning, since this
  # is how the model was trained (note that the Adam m/v variables are NOT
  # loaded from init_checkpoint.)
  optimizer = AdamWeightDecayOptimizer(
      learning_rate=learning_rate,
      weight_decay_rate=weight_decay_rate,
      beta_1=0.9,
      beta_2=beta_2,
      epsilon=epsilon,
      exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
      fused=fused)

  if tvars is None:
    tvars = tf1.trainable_variables()
  scale, scale_update = None, None
  if loss_scale is not None:
    scale, scale_update = loss_scale_and_update(loss_scale)
    if not use_tpu:
      tf1.summary.scalar("loss_scale", scale)
  grads = scaled_gradients(loss, tvars, scale)

  apply_now = None
  if gradient_accumulation_steps > 1:
    grads, apply_now = _accumulate(grads, tvars, global_step, gradient_accumulation_steps)
    optimizer.set_apply_condition(apply_now)

  grads, finite = clip_gradients(grads, clip_norm, skip_non_finite=scale is not None)
  if finite is not None:
    optimizer.set_apply_condition(finite if apply_now is None
                                  else tf.logical_and(apply_now, finite))

  if use_tpu:
    # The gradients are already averaged: CrossShardOptimizer sums, so pre-divide.
    optimizer = tf1.tpu.CrossShardOptimizer(optimizer)
    num_shards = _num_tpu_shards()
    grads = [None if g is None else g / float(num_shards) for g in grads]
  else:
    grads = _prescale_for_distribute_sum(grads)

  train_op = optimizer.apply_gradients(zip(grads, tvars))
  # The global step is incremented here, not by apply_gradients, as in the official code.
  with tf.control_dependencies([train_op]):
    updates = [global_step.assign_add(1)]
    if scale_update is not None:
      updates.append(scale_update(finite, apply_now))
    train_op = tf.group(train_op, *updates)
  return train_op


def check_loss_scale(loss_scale):
  """Raises ValueError unless loss_scale is create_optimizer's: None, "dynamic" or a number > 0."""
  if loss_scale is not None and loss_scale != "dynamic" and not (
      isinstance(loss_scale, (int, float)) and loss_scale > 0):
    raise ValueError("loss_scale must be None, 'dynamic' or a positive number, got %r" %
                     (loss_scale,))


def loss_scale_and_update(loss_scale):
  """The loss scale of a training step and a function making its update op.

  A dynamic scale lives in the variables LOSS_SCALE_VARIABLE (float32 [], starts at
  LOSS_SCALE_INITIAL) and LOSS_SCALE_GOOD_STEPS_VARIABLE (int64 [], starts at 0), made with
  tf.compat.v1.get_variable (the TF2 engine answers the call with its own tf.Variables).

  Args:
    loss_scale: "dynamic" or a positive number.

  Returns:
    (scale, update_fn): float32 scalar Tensor (the scale of this step, read before its update);
    update_fn(finite, apply_now) returns the op that adapts a dynamic scale after this step:
    finite is the bool scalar of clip_gradients, apply_now None or gradient accumulation's bool
    scalar (None for a fixed scale).
  """
  if loss_scale != "dynamic":
    return tf.constant(float(loss_scale), tf.float32), None
  scale_var = tf1.get_variable(
      LOSS_SCALE_VARIABLE, shape=[], dtype=tf.float32, trainable=False,
      initializer=tf1.constant_initializer(LOSS_SCALE_INITIAL))
  good_steps = tf1.get_variable(
      LOSS_SCALE_GOOD_STEPS_VARIABLE, shape=[], dtype=tf.int64, trainable=False,
      initializer=tf1.zeros_initializer())
  scale = scale_var.read_value()

  def update_fn(finite, apply_now):
    """Halves the scale after an overflow; doubles it after LOSS_SCALE_GROWTH_STEPS good ones."""
    good = tf.where(finite, good_steps + 1, tf.zeros_like(good_steps))
    grow = good >= LOSS_SCALE_GROWTH_STEPS
    new_scale = tf.where(finite,
                         tf.where(grow, scale * LOSS_SCALE_FACTOR, scale),
                         tf.maximum(scale / LOSS_SCALE_FACTOR, LOSS_SCALE_MIN))
    good = tf.where(grow, tf.zeros_like(good), good)
    if apply_now is not None:  # Only the update steps of gradient accumulation count.
      new_scale = tf.where(apply_now, new_scale, scale)
      good = tf.where(apply_now, good, good_steps.read_value())
    return tf.group(scale_var.assign(new_scale), good_steps.assign(good))

  return scale, update_fn


def scaled_gradients(loss, tvars, scale=None):
  """The gradients of loss, through a loss scale: those of loss * scale divided by scale.

  Args:
    loss: float32 scalar Tensor.
    tvars: the variables to differentiate by.
    scale: None (no scaling) or a float32 scalar Tensor, a power of two (loss_scale_and_update;
      the division is then exact).

  Returns:
    list of dense gradients (IndexedSlices made dense), None for a variable the loss does not
    depend on; inf / nan where the scaled gradient overflowed.
  """
  if scale is not None:
    loss = loss * scale
  grads = [_densify(g) for g in tf.gradients(ys=loss, xs=tvars)]
  if scale is not None:
    grads = [None if g is None else g / scale for g in grads]
  return grads


def clip_gradients(grads, clip_norm, skip_non_finite=False):
  """Clips gradients to a global norm; with skip_non_finite also says whether they are finite.

  Args:
    grads: list of dense gradients (or None).
    clip_norm: the global-norm threshold.
    skip_non_finite: also return whether the global norm is finite (loss scaling skips the
      update of a step whose gradients overflowed: inf / nan anywhere makes the norm non-finite).

  Returns:
    (clipped gradients, finite): finite is a bool scalar Tensor, or None without
    skip_non_finite.
  """
  if not skip_non_finite:
    (grads, _) = tf.clip_by_global_norm(grads, clip_norm=clip_norm)
    return grads, None
  global_norm = tf.linalg.global_norm(grads)
  finite = tf.math.is_finite(global_norm)
  (grads, _) = tf.clip_by_global_norm(grads, clip_norm=clip_norm, use_norm=global_norm)
  return grads, finite


def _densify(grad):
  """Turns IndexedSlices (embedding gradients) into a dense Tensor; keeps None."""
  if isinstance(grad, tf.IndexedSlices):
    return tf.convert_to_tensor(grad)
  return grad


def _num_tpu_shards():
  """Number of TPU cores the model function is replicated over (1 outside a TPU context)."""
  from tensorflow.python.tpu import tpu_function  # pylint: disable=g-import-not-at-top
  return tpu_function.get_tpu_context().number_of_shards or 1


def _num_replicas():
  """Number of tf.distribute replicas in sync (1 without a strategy)."""
  return tf.distribute.get_strategy().num_replicas_in_sync


def _prescale_for_distribute_sum(grads):
  """The tf1 Optimizer under a strategy SUMs replica gradients; pass mean / N so it sums to mean."""
  num_replicas = _num_replicas()
  if num_replicas == 1:
    return grads
  return [None if g is None else g / float(num_replicas) for g in grads]


def _accumulate(grads, tvars, global_step, accumulation_steps):
  """Adds this micro-batch's gradients to per-variable accumulators.

  Args:
    grads: list of dense gradients (or None), one per variable in tvars.
    tvars: the trained variables.
    global_step: the micro-batch counter.
    accumulation_steps: micro-batches per update.

  Returns:
    (mean_grads, apply_now): the accumulated mean (valid when apply_now) and a bool scalar
    that is True on the last micro-batch of each group; the accumulators reset after it.
  """
  apply_now = tf.equal((global_step + 1) % accumulation_steps, 0)
  mean_grads = []
  for grad, var in zip(grads, tvars):
    if grad is None:
      mean_grads.append(None)
      continue
    accumulator = tf1.get_variable(
        name=_variable_name(var.name) + "/grad_accum",
        shape=var.shape.as_list(),
        dtype=tf.float32,
        trainable=False,
        initializer=tf1.zeros_initializer(),
        synchronization=tf.VariableSynchronization.ON_READ,
        aggregation=tf.VariableAggregation.SUM)
    total = accumulator.read_value() + grad
    assign = accumulator.assign(tf.where(apply_now, tf.zeros_like(total), total))
    # Using the mean runs the accumulator update first.
    with tf.control_dependencies([assign]):
      mean_grads.append(total / float(accumulation_steps))
  return mean_grads, apply_now


class AdamWeightDecayOptimizer(tf1.train.Optimizer):
  """A basic Adam optimizer that includes "correct" L2 weight decay (AdamW), as official BERT.

  No bias correction; weight decay is added to the update (not the loss), so it does not
  interact with the m/v estimates. Slots are `<var>/adam_m` and `<var>/adam_v`.
  """

  def __init__(self,
               learning_rate,
               weight_decay_rate=0.0,
               beta_1=0.9,
               beta_2=0.999,
               epsilon=1e-6,
               exclude_from_weight_decay=None,
               name="AdamWeightDecayOptimizer",
               fused=False):
    """Constructs a AdamWeightDecayOptimizer.

    Args:
      learning_rate: float or scalar Tensor.
      weight_decay_rate: decoupled weight decay (0.01 in BERT).
      beta_1: decay of the first moment.
      beta_2: decay of the second moment.
      epsilon: added to sqrt(v).
      exclude_from_weight_decay: regexes; matching parameter names get no decay.
      name: optimizer name.
      fused: update resource variables with TensorFlow's Adam kernel (ResourceApplyAdam with
        bias correction off) after a separate decay op: one pass over the variable and its
        slots instead of ~14 element-wise ops. Its float32 1 - beta_2 makes each update ~6e-6
        relatively larger than the official one (see the module docstring).
    """
    super(AdamWeightDecayOptimizer, self).__init__(False, name)

    self.learning_rate = learning_rate
    self.weight_decay_rate = weight_decay_rate
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon
    self.exclude_from_weight_decay = exclude_from_weight_decay
    self.fused = fused
    self._apply_condition = None

  def set_apply_condition(self, apply_now):
    """Makes every update conditional on the bool scalar `apply_now` (gradient accumulation)."""
    self._apply_condition = apply_now

  def _create_slots(self, var_list):
    for v in var_list:
      self._zeros_slot(v, "adam_m", "adam_m")
      self._zeros_slot(v, "adam_v", "adam_v")

  def _apply_update(self, grad, var):
    """Returns the op updating `var` and its slots from `grad` [var shape]."""
    m = self.get_slot(var, "adam_m")
    v = self.get_slot(var, "adam_v")
    grad = tf.cast(grad, var.dtype.base_dtype)
    if self.fused and all(hasattr(x, "handle") for x in (var, m, v)):
      if self._apply_condition is None:
        return self._fused_update(grad, var, m, v)
      return tf.cond(self._apply_condition, lambda: self._fused_update(grad, var, m, v),
                     tf.no_op)

    # Standard Adam update, without bias correction.
    next_m = tf.multiply(self.beta_1, m) + tf.multiply(1.0 - self.beta_1, grad)
    next_v = (tf.multiply(self.beta_2, v) + tf.multiply(1.0 - self.beta_2, tf.square(grad)))
    update = next_m / (tf.sqrt(next_v) + self.epsilon)

    # Just adding the square of the weights to the loss function is *not*
    # the correct way of using L2 regularization/weight decay with Adam,
    # since that will interact with the m and v parameters in strange ways.
    # Instead we add the decay to the update, as the AdamW paper does.
    if self._do_use_weight_decay(_variable_name(var.name)):
      update += self.weight_decay_rate * var

    next_param = var - self.learning_rate * update
    if self._apply_condition is not None:
      next_m = tf.where(self._apply_condition, next_m, m)
      next_v = tf.where(self._apply_condition, next_v, v)
      next_param = tf.where(self._apply_condition, next_param, var)
    return tf.group(var.assign(next_param), m.assign(next_m), v.assign(next_v))

  def _fused_update(self, grad, var, m, v):
    """AdamW through ResourceApplyAdam: decay first (var -= lr * rate * var), then Adam."""
    dtype = var.dtype.base_dtype
    learning_rate = tf.cast(self.learning_rate, dtype)
    decay = []
    if self._do_use_weight_decay(_variable_name(var.name)):
      # After the gradient, which comes after the step's forward pass read var (as the unfused
      # assign does): without this dependency the decay may run first, and the step's forward
      # pass reads decayed weights in some runs and not in others. (tf.identity: in a tf.cond
      # branch, gradient accumulation's, a control dependency on an outside tensor is dropped.)
      grad = tf.identity(grad)
      with tf.control_dependencies([grad]):
        decay = [var.assign_sub(learning_rate * self.weight_decay_rate * var.read_value(),
                                read_value=False)]
    with tf.control_dependencies(decay):
      # beta powers 0: no bias correction, as the official optimizer.
      zero = tf.constant(0.0, dtype)
      apply_adam = tf.raw_ops.ResourceApplyAdam(
          var=var.handle, m=m.handle, v=v.handle, beta1_power=zero, beta2_power=zero,
          lr=learning_rate, beta1=tf.constant(self.beta_1, dtype),
          beta2=tf.constant(self.beta_2, dtype), epsilon=tf.constant(self.epsilon, dtype),
          grad=grad)
    return tf.group(apply_adam)

  def _apply_dense(self, grad, var):
    return self._apply_update(grad, var)

  def _resource_apply_dense(self, grad, handle):
    return self._apply_update(grad, handle)

  def _apply_sparse(self, grad, var):
    return self._apply_update(tf.convert_to_tensor(grad), var)

  def _resource_apply_sparse(self, grad, handle, indices):
    dense = tf.math.unsorted_segment_sum(grad, indices, tf.shape(handle)[0])
    return self._apply_update(dense, handle)

  def _do_use_weight_decay(self, param_name):
    """Whether to use L2 weight decay for `param_name`."""
    if not self.weight_decay_rate:
      return False
    if self.exclude_from_weight_decay:
      for r in self.exclude_from_weight_decay:
        if re.search(r, param_name) is not None:
          return False
    return True


def _variable_name(param_name):
  """Get the variable name from the tensor name ("a/b:0" -> "a/b")."""
  m = re.match("^(.*):\\d+$", param_name)
  if m is not None:
    param_name = m.group(1)
  return param_name
