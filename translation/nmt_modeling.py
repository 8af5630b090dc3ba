# coding=utf-8
"""The translation model: an encoder-decoder Transformer with RealFormer's residual attention.

The paper's second system (Section 4.2, Table 7): ADMIN (Liu et al. 2020) as the Post-LN backbone
with three independent skip paths over attention scores: encoder self-attention ([batch, heads,
src, src]), decoder self-attention ([batch, heads, tgt, tgt]) and encoder-decoder attention
([batch, heads, tgt, src]); each hands its raw scores to the same kind of attention in the next
layer. The exact math and every variable name are in docs/translation.md;
tests/translation/numpy_nmt.py is an independent float64 reference of it.

Built from modeling.py's pieces (dense_layer, layer_norm, dropout, scaled_dot_product_attention,
transpose_for_scores); tf.compat.v1 variables, shared source / target / softmax embeddings
(fairseq's --share-all-embeddings, as ADMIN), sinusoidal positions.

Incremental decoding (beam search) keeps per-layer key / value caches of a fixed length and hands
each layer's score row for the new position to the next layer, so a step-by-step decode gives the
teacher-forced pass's logits (tests/translation/test_nmt_modeling.py).
"""

import collections
import copy
import json
import math
import zlib

import tensorflow as tf

import modeling

tf1 = tf.compat.v1

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

LAYER_NORM_TYPES = ("post", "pre", "admin")
# The encoder-decoders of the paper's Table 7: name -> (label, layer_norm_type,
# residual_attention). paper.reproduce_table7 trains them, bench/bench_translation_step times
# them.
TABLE7_VARIANTS = collections.OrderedDict([
    ("admin", ("ADMIN", "admin", "none")),
    ("realformer_mean", ("RealFormer (mean)", "admin", "mean")),
    ("realformer_sum", ("RealFormer (sum)", "admin", "sum")),
    ("pre_ln", ("Pre-LN", "pre", "none")),
    ("post_ln", ("Post-LN", "post", "none")),
])
PROFILE_FORMAT = "realformer-admin-profile"
# The config fields an ADMIN profile depends on: a profile made for other values is refused.
PROFILE_CONFIG_FIELDS = ("vocab_size", "hidden_size", "num_encoder_layers", "num_decoder_layers",
                         "num_attention_heads", "intermediate_size", "hidden_act",
                         "residual_attention", "layer_norm_type", "initializer_range")
_ACTIVATIONS = ("relu", "gelu")


class NmtConfig(object):
  """Configuration of the translation Transformer (docs/translation.md)."""

  def __init__(self,
               vocab_size,
               hidden_size=512,
               num_encoder_layers=6,
               num_decoder_layers=6,
               num_attention_heads=8,
               intermediate_size=2048,
               hidden_act="relu",
               hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1,
               activation_dropout_prob=0.0,
               residual_attention="none",
               layer_norm_type="admin",
               initializer_range=0.0):
    """Constructs NmtConfig.

    Args:
      vocab_size: size of the joint source / target vocabulary.
      hidden_size: model width D.
      num_encoder_layers: encoder depth.
      num_decoder_layers: decoder depth.
      num_attention_heads: heads per attention (D must be a multiple).
      intermediate_size: feed-forward width.
      hidden_act: "relu" (the Transformer's and ADMIN's) or "gelu".
      hidden_dropout_prob: dropout on embeddings and every sub-layer output.
      attention_probs_dropout_prob: dropout on attention probabilities.
      activation_dropout_prob: dropout after the feed-forward activation.
      residual_attention: "none", "sum" or "mean" for all three attention chains.
      layer_norm_type: "post", "pre" or "admin".
      initializer_range: stddev of the embeddings' normal initializer; 0 means D ** -0.5.
    """
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.num_encoder_layers = num_encoder_layers
    self.num_decoder_layers = num_decoder_layers
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.hidden_act = hidden_act
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.activation_dropout_prob = activation_dropout_prob
    self.residual_attention = residual_attention
    self.layer_norm_type = layer_norm_type
    self.initializer_range = initializer_range

  @classmethod
  def from_dict(cls, json_object, source="config dict"):
    """Builds a config from a dict; an unknown key is a ValueError naming it and `source`."""
    if not isinstance(json_object, dict):
      raise ValueError("%s: an NMT config must be a JSON object, got %s" % (
          source, type(json_object).__name__))
    return modeling.config_from_checked_dict(cls, json_object, source, kind="NMT config")

  @classmethod
  def from_json_file(cls, json_file):
    """Reads a config JSON file (errors name the file)."""
    return cls.from_dict(modeling.read_config_json(json_file), source=json_file)

  def validate(self, source="config"):
    """Raises ValueError (naming `source` and the field) for a value out of range."""
    def bad(field, why):
      raise ValueError("%s: %s=%r %s" % (source, field, getattr(self, field), why))
    for field in ("vocab_size", "hidden_size", "num_encoder_layers", "num_decoder_layers",
                  "num_attention_heads", "intermediate_size"):
      value = getattr(self, field)
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        bad(field, "must be a positive integer")
    if self.vocab_size <= EOS_ID:
      bad("vocab_size", "must hold pad, unk, bos and eos (ids 0-3)")
    if self.hidden_size % self.num_attention_heads:
      bad("hidden_size", "is not a multiple of num_attention_heads=%d" % self.num_attention_heads)
    if self.hidden_size % 2:
      bad("hidden_size", "must be even (sinusoidal positions)")
    for field in ("hidden_dropout_prob", "attention_probs_dropout_prob",
                  "activation_dropout_prob"):
      value = getattr(self, field)
      if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        bad(field, "must be in [0, 1)")
    if self.hidden_act not in _ACTIVATIONS:
      bad("hidden_act", "must be one of %s" % (_ACTIVATIONS,))
    if self.residual_attention not in modeling.RESIDUAL_ATTENTION_TYPES:
      bad("residual_attention", "must be one of %s" % (modeling.RESIDUAL_ATTENTION_TYPES,))
    if self.layer_norm_type not in LAYER_NORM_TYPES:
      bad("layer_norm_type", "must be one of %s" % (LAYER_NORM_TYPES,))
    if not isinstance(self.initializer_range, (int, float)) or self.initializer_range < 0:
      bad("initializer_range", "must be >= 0")

  def to_dict(self):
    """A deep copy of the fields."""
    return copy.deepcopy(self.__dict__)

  def to_json_string(self):
    """The config as indented JSON."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  @property
  def size_per_head(self):
    return self.hidden_size // self.num_attention_heads

  @property
  def embedding_stddev(self):
    return self.initializer_range or self.hidden_size ** -0.5


EncoderOutput = collections.namedtuple(
    "EncoderOutput", ["outputs", "source_mask", "attention_scores"])


# ----------------------------------------------------------------------------- initialisers
def _variable_seed(name):
  """An op-level seed from the variable's full name.

  With the graph seed, it makes a variable's initial value depend on its name only, not on how
  many ops the graph built before it: the ADMIN profiling graph and the training graph start from
  the same weights.
  """
  return zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF


def _glorot(scope_name):
  return tf1.glorot_uniform_initializer(seed=_variable_seed(scope_name))


def _dense(input_tensor, units, name, activation=None):
  """modeling.dense_layer with a name-seeded Glorot-uniform kernel. [rows, in] -> [rows, units]."""
  full_name = "%s/%s/kernel" % (tf1.get_variable_scope().name, name)
  return modeling.dense_layer(input_tensor, units, activation=activation,
                              kernel_initializer=_glorot(full_name), name=name)


# ----------------------------------------------------------------------------- embeddings
def sinusoid_positions(positions, hidden_size):
  """Sinusoidal position encodings (sin half, then cos half).

  Args:
    positions: int Tensor [length] (absolute positions, 0-based).
    hidden_size: even int D.

  Returns:
    float32 Tensor [length, hidden_size].
  """
  half = hidden_size // 2
  scale = math.log(10000.0) / max(half - 1, 1)
  inv_freq = tf.exp(tf.range(half, dtype=tf.float32) * -scale)
  angles = tf.cast(positions, tf.float32)[:, None] * inv_freq[None, :]
  return tf.concat([tf.sin(angles), tf.cos(angles)], axis=1)


def get_embedding_table(config):
  """The shared [vocab_size, hidden_size] table `embeddings/word_embeddings`."""
  with tf1.variable_scope("embeddings", reuse=tf1.AUTO_REUSE):
    name = tf1.get_variable_scope().name + "/word_embeddings"
    return tf1.get_variable(
        "word_embeddings", [config.vocab_size, config.hidden_size],
        initializer=tf1.random_normal_initializer(stddev=config.embedding_stddev,
                                                  seed=_variable_seed(name)))


def embed(config, ids, is_training, first_position=0):
  """Token embeddings * sqrt(D) + positions, then dropout.

  Args:
    config: NmtConfig.
    ids: int32 Tensor [batch, length].
    is_training: bool (dropout on).
    first_position: int or int32 scalar Tensor, the position of ids[:, 0].

  Returns:
    float32 Tensor [batch, length, hidden_size].
  """
  table = get_embedding_table(config)
  length = modeling.get_shape_list(ids, expected_rank=2)[1]
  positions = tf.range(length) + first_position
  output = (tf.gather(table, ids) * math.sqrt(config.hidden_size)
            + sinusoid_positions(positions, config.hidden_size)[None])
  return modeling.dropout(output, config.hidden_dropout_prob if is_training else 0.0)


def output_logits(config, hidden):
  """Tied softmax projection h E^T.

  Args:
    config: NmtConfig.
    hidden: float32 [..., hidden_size].

  Returns:
    float32 [..., vocab_size].
  """
  table = get_embedding_table(config)
  return tf.tensordot(hidden, table, [[hidden.shape.ndims - 1], [1]])


# ----------------------------------------------------------------------------- ADMIN
class AdminProfiler(object):
  """Computes ADMIN's omegas in-graph during one forward pass (docs/translation.md).

  `omega()` gives the current r for the next sub-layer; `update(x, omega, fx)` sets
  r = sqrt(Var[x * omega] + Var[f(x)]) over the elements of the non-padding positions.
  """

  def __init__(self, position_mask):
    """position_mask: float32 [rows] (1 for a real position) matching the 2D sub-layer rows."""
    self._mask = position_mask[:, None]
    self._r = tf.constant(1.0)
    self.omegas = []

  def omega(self):
    self.omegas.append(self._r)
    return self._r

  def _variance(self, x):
    count = tf.reduce_sum(self._mask) * tf.cast(tf.shape(x)[-1], tf.float32)
    mean = tf.reduce_sum(x * self._mask) / count
    return tf.reduce_sum(tf.square(x - mean) * self._mask) / count

  def update(self, x, omega, fx):
    self._r = tf.sqrt(self._variance(x * omega) + self._variance(fx))


def _omega_variable(config, index, stack, admin_profile):
  """The trainable [hidden_size] omega of sub-layer `index` of `stack`, profile-initialised."""
  value = 1.0
  if admin_profile is not None:
    value = float(admin_profile[stack][index])
  return tf1.get_variable("omega", [config.hidden_size],
                          initializer=tf1.constant_initializer(value))


class _SubLayerContext(object):
  """What every sub-layer of one stack (encoder or decoder) shares."""

  def __init__(self, config, is_training, stack, admin_profile=None, profiler=None):
    self.config = config
    self.is_training = is_training
    self.stack = stack
    self.admin_profile = admin_profile
    self.profiler = profiler
    self.index = 0

  def dropout(self, x, prob):
    return modeling.dropout(x, prob if self.is_training else 0.0)


def _sublayer(x, function, ctx):
  """One residual sub-layer, Post-LN, Pre-LN or ADMIN, with its norm in scope `output`.

  Args:
    x: float32 [rows, hidden_size], the sub-layer input.
    function: callable(input [rows, hidden]) -> f(input) [rows, hidden] (before dropout).
    ctx: _SubLayerContext (its index advances by one).

  Returns:
    float32 [rows, hidden_size].
  """
  config = ctx.config
  index = ctx.index
  ctx.index += 1
  if config.layer_norm_type == "pre":
    with tf1.variable_scope("output"):
      normed = modeling.layer_norm(x)
    return x + ctx.dropout(function(normed), config.hidden_dropout_prob)
  fx = function(x)
  residual = x
  if config.layer_norm_type == "admin":
    if ctx.profiler is not None:
      omega = ctx.profiler.omega()
      ctx.profiler.update(x, omega, fx)
    else:
      with tf1.variable_scope("output"):
        omega = _omega_variable(config, index, ctx.stack, ctx.admin_profile)
    residual = x * omega
  with tf1.variable_scope("output"):
    return modeling.layer_norm(residual + ctx.dropout(fx, config.hidden_dropout_prob))


def _final_norm(x, config):
  """Pre-LN's final LayerNorm of a stack (identity otherwise)."""
  if config.layer_norm_type != "pre":
    return x
  return modeling.layer_norm(x, name=modeling.FINAL_LAYER_NORM_SCOPE)


def _feed_forward(x, ctx):
  """relu(x W1 + b1) -> activation dropout -> W2 + b2. [rows, D] -> [rows, D]."""
  config = ctx.config
  activation = tf.nn.relu if config.hidden_act == "relu" else modeling.gelu
  with tf1.variable_scope("intermediate"):
    hidden = _dense(x, config.intermediate_size, "dense", activation=activation)
  hidden = ctx.dropout(hidden, config.activation_dropout_prob)
  with tf1.variable_scope("output"):
    return _dense(hidden, config.hidden_size, "dense")


def _project_heads(x, batch_size, length, name, config):
  """A query / key / value projection split into heads. [batch*length, D] -> [batch, N, length, H]."""
  projected = _dense(x, config.hidden_size, name)
  return modeling.transpose_for_scores(projected, batch_size, config.num_attention_heads,
                                       length, config.size_per_head)


def _heads_of_input(batch_size, length, name, config):
  """Self-attention keys or values: a function of the (normed) sub-layer input.

  Returns:
    callable([batch*length, D]) -> [batch, N, length, H].
  """
  return lambda normed: _project_heads(normed, batch_size, length, name, config)


def _merge_heads(context, batch_size, length, config):
  """[batch, N, length, H] -> [batch*length, D]."""
  context = tf.transpose(context, [0, 2, 1, 3])
  return tf.reshape(context, [batch_size * length, config.hidden_size])


def _attention_sublayer(x, key, value, mask, prev_scores, layer_index, head_scope, ctx,
                        batch_size, from_length):
  """Attention as a residual sub-layer; returns (output [rows, D], handed-on scores).

  Args:
    x: float32 [batch*from, D], the sub-layer input (the residual); queries come from it (after
      the Pre-LN norm).
    key: callable(normed_input) -> key heads [batch, N, to, H] (self-attention), or a Tensor.
    value: like key.
    mask: [batch or 1, from, to] (1 = visible).
    prev_scores: None or float32 [batch, N, from, to], the chain's previous scores.
    layer_index: 0-based index in the chain (the mean's divisor is layer_index + 1).
    head_scope: "self" or "source", the scope of query / key / value.
    ctx: _SubLayerContext.
    batch_size: int or scalar Tensor.
    from_length: int or scalar Tensor.
  """
  config = ctx.config
  scores_out = []

  def attend(normed):
    with tf1.variable_scope(head_scope):
      query = _project_heads(normed, batch_size, from_length, "query", config)
      keys = key(normed) if callable(key) else key
      values = value(normed) if callable(value) else value
      context, scores, _ = modeling.scaled_dot_product_attention(
          query, keys, values, attention_mask=mask,
          attention_probs_dropout_prob=(config.attention_probs_dropout_prob
                                        if ctx.is_training else 0.0),
          prev_attention_scores=prev_scores,
          running_mean_divisor=modeling.residual_attention_divisor(config.residual_attention,
                                                                   layer_index))
    scores_out.append(scores)
    with tf1.variable_scope("output"):
      return _dense(_merge_heads(context, batch_size, from_length, config),
                    config.hidden_size, "dense")

  output = _sublayer(x, attend, ctx)
  return output, scores_out[0]


# ----------------------------------------------------------------------------- encoder
def get_source_mask(source_ids):
  """int32 [batch, src] with 1 for real tokens (id != pad)."""
  return tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32)


def encode(config, source_ids, is_training, admin_profile=None, profiler=None):
  """The encoder.

  Args:
    config: NmtConfig.
    source_ids: int32 Tensor [batch, src] (pieces + eos, 0-padded).
    is_training: bool.
    admin_profile: (optional) dict from read_admin_profile (omega initial values).
    profiler: (optional) AdminProfiler, for the profiling pass.

  Returns:
    EncoderOutput(outputs float32 [batch, src, D], source_mask int32 [batch, src],
    attention_scores: list of float32 [batch, N, src, src], the handed-on scores per layer).
  """
  batch_size, source_length = modeling.get_shape_list(source_ids, expected_rank=2)
  source_mask = get_source_mask(source_ids)
  attention_mask = source_mask[:, None, :]  # [batch, 1, src]: broadcast over queries
  ctx = _SubLayerContext(config, is_training, "encoder", admin_profile, profiler)
  # The shared table lives outside the stacks' scopes: `embeddings/word_embeddings`.
  x = tf.reshape(embed(config, source_ids, is_training),
                 [batch_size * source_length, config.hidden_size])
  with tf1.variable_scope("encoder", reuse=tf1.AUTO_REUSE):
    prev_scores = None
    all_scores = []
    for layer_index in range(config.num_encoder_layers):
      with tf1.variable_scope("layer_%d" % layer_index):
        with tf1.variable_scope("attention"):
          x, scores = _attention_sublayer(
              x, _heads_of_input(batch_size, source_length, "key", config),
              _heads_of_input(batch_size, source_length, "value", config), attention_mask,
              prev_scores, layer_index, "self", ctx, batch_size, source_length)
        all_scores.append(scores)
        prev_scores = modeling.residual_attention_hand_on(config.residual_attention, scores)
        x = _sublayer(x, lambda h: _feed_forward(h, ctx), ctx)
    x = _final_norm(x, config)
  outputs = tf.reshape(x, [batch_size, source_length, config.hidden_size])
  return EncoderOutput(outputs, source_mask, all_scores)


# ----------------------------------------------------------------------------- decoder
def causal_mask(length):
  """int32 [1, length, length]: key j visible to query i iff j <= i."""
  return tf.cast(tf.linalg.band_part(tf.ones([length, length]), -1, 0), tf.int32)[None]


def _source_heads(encoder_output, name, config):
  """Cross-attention keys or values from the encoder output: [batch, N, src, H]."""
  batch_size, source_length, _ = modeling.get_shape_list(encoder_output.outputs, expected_rank=3)
  flat = tf.reshape(encoder_output.outputs, [batch_size * source_length, config.hidden_size])
  return _project_heads(flat, batch_size, source_length, name, config)


def decode(config, encoder_output, target_input_ids, is_training, admin_profile=None,
           profiler=None, return_attention=False):
  """The decoder, teacher-forced: every target position at once under the causal mask.

  Args:
    config: NmtConfig.
    encoder_output: EncoderOutput of `encode`.
    target_input_ids: int32 [batch, tgt] (bos + pieces, 0-padded).
    is_training: bool.
    admin_profile: (optional) dict from read_admin_profile.
    profiler: (optional) AdminProfiler for the decoder's profiling pass.
    return_attention: bool; also return the handed-on scores of both chains.

  Returns:
    float32 [batch, tgt, D], the final decoder states (with return_attention, a tuple
    (states, self_scores list of [batch, N, tgt, tgt], cross_scores list of
    [batch, N, tgt, src])).
  """
  batch_size, target_length = modeling.get_shape_list(target_input_ids, expected_rank=2)
  self_mask = causal_mask(target_length)
  cross_mask = encoder_output.source_mask[:, None, :]
  ctx = _SubLayerContext(config, is_training, "decoder", admin_profile, profiler)
  x = tf.reshape(embed(config, target_input_ids, is_training),
                 [batch_size * target_length, config.hidden_size])
  with tf1.variable_scope("decoder", reuse=tf1.AUTO_REUSE):
    prev_self = prev_cross = None
    self_scores, cross_scores = [], []
    for layer_index in range(config.num_decoder_layers):
      with tf1.variable_scope("layer_%d" % layer_index):
        with tf1.variable_scope("self_attention"):
          x, scores = _attention_sublayer(
              x, _heads_of_input(batch_size, target_length, "key", config),
              _heads_of_input(batch_size, target_length, "value", config), self_mask, prev_self,
              layer_index, "self", ctx, batch_size, target_length)
        self_scores.append(scores)
        prev_self = modeling.residual_attention_hand_on(config.residual_attention, scores)
        with tf1.variable_scope("cross_attention"):
          with tf1.variable_scope("source"):
            source_key = _source_heads(encoder_output, "key", config)
            source_value = _source_heads(encoder_output, "value", config)
          x, scores = _attention_sublayer(
              x, source_key, source_value, cross_mask, prev_cross, layer_index,
              "source", ctx, batch_size, target_length)
        cross_scores.append(scores)
        prev_cross = modeling.residual_attention_hand_on(config.residual_attention, scores)
        x = _sublayer(x, lambda h: _feed_forward(h, ctx), ctx)
    x = _final_norm(x, config)
  states = tf.reshape(x, [batch_size, target_length, config.hidden_size])
  if return_attention:
    return states, self_scores, cross_scores
  return states


def init_decoder_cache(config, encoder_output, max_decode_length):
  """The fixed-shape state of incremental decoding.

  Args:
    config: NmtConfig.
    encoder_output: EncoderOutput (batch B).
    max_decode_length: int, the number of target positions the cache holds.

  Returns:
    dict of Tensors with leading dim B: "source_mask" int32 [B, src]; per layer L
    "layer_L/self_key" and "layer_L/self_value" zeros [B, N, max_decode_length, H],
    "layer_L/source_key" and "layer_L/source_value" [B, N, src, H] (computed once).
  """
  batch_size = modeling.get_shape_list(encoder_output.outputs, expected_rank=3)[0]
  cache = {"source_mask": encoder_output.source_mask}
  zeros = tf.zeros([batch_size, config.num_attention_heads, max_decode_length,
                    config.size_per_head])
  with tf1.variable_scope("decoder", reuse=tf1.AUTO_REUSE):
    for layer_index in range(config.num_decoder_layers):
      prefix = "layer_%d" % layer_index
      cache[prefix + "/self_key"] = zeros
      cache[prefix + "/self_value"] = zeros
      with tf1.variable_scope(prefix + "/cross_attention/source"):
        cache[prefix + "/source_key"] = _source_heads(encoder_output, "key", config)
        cache[prefix + "/source_value"] = _source_heads(encoder_output, "value", config)
  return cache


def _write_position(cache_tensor, new_rows, step):
  """Writes new_rows [B, N, 1, H] at position `step` of cache_tensor [B, N, T, H]."""
  length = modeling.get_shape_list(cache_tensor, expected_rank=4)[2]
  at_step = tf.cast(tf.equal(tf.range(length), step), cache_tensor.dtype)[None, None, :, None]
  return cache_tensor * (1.0 - at_step) + new_rows * at_step


def decode_step(config, last_ids, step, cache):
  """One step of incremental decoding (no dropout).

  Args:
    config: NmtConfig.
    last_ids: int32 [B], the token at position `step` (bos at step 0).
    step: int32 scalar Tensor, the position being decoded.
    cache: dict from init_decoder_cache (or the previous step).

  Returns:
    (logits float32 [B, vocab_size] for position step + 1's token, the updated cache).
  """
  batch_size = modeling.get_shape_list(last_ids, expected_rank=1)[0]
  max_length = modeling.get_shape_list(cache["layer_0/self_key"], expected_rank=4)[2]
  new_cache = dict(cache)
  # Keys at positions <= step are visible: [1, 1, max_length].
  self_mask = tf.cast(tf.range(max_length) <= step, tf.int32)[None, None, :]
  cross_mask = cache["source_mask"][:, None, :]
  ctx = _SubLayerContext(config, False, "decoder")
  x = tf.reshape(embed(config, last_ids[:, None], False, first_position=step),
                 [batch_size, config.hidden_size])
  with tf1.variable_scope("decoder", reuse=tf1.AUTO_REUSE):
    prev_self = prev_cross = None
    for layer_index in range(config.num_decoder_layers):
      prefix = "layer_%d" % layer_index
      with tf1.variable_scope(prefix):
        with tf1.variable_scope("self_attention"):
          def cached_heads(name):
            def heads(normed):
              rows = _project_heads(normed, batch_size, 1, name, config)
              updated = _write_position(cache["%s/self_%s" % (prefix, name)], rows, step)
              new_cache["%s/self_%s" % (prefix, name)] = updated
              return updated
            return heads
          x, scores = _attention_sublayer(
              x, cached_heads("key"), cached_heads("value"), self_mask, prev_self,
              layer_index, "self", ctx, batch_size, 1)
        prev_self = modeling.residual_attention_hand_on(config.residual_attention, scores)
        with tf1.variable_scope("cross_attention"):
          x, scores = _attention_sublayer(
              x, cache[prefix + "/source_key"], cache[prefix + "/source_value"],
              cross_mask, prev_cross, layer_index, "source", ctx, batch_size, 1)
        prev_cross = modeling.residual_attention_hand_on(config.residual_attention, scores)
        x = _sublayer(x, lambda h: _feed_forward(h, ctx), ctx)
    x = _final_norm(x, config)
  return output_logits(config, x), new_cache


# ----------------------------------------------------------------------------- model + loss
class NmtModel(object):
  """The teacher-forced model: encoder, decoder and tied softmax.

  Example:
    model = NmtModel(config, is_training=True, source_ids=src, target_input_ids=tgt_in)
    loss = label_smoothed_loss(model.logits, tgt_out, 0.1)[0]
  """

  def __init__(self, config, is_training, source_ids, target_input_ids, admin_profile=None):
    """Builds the graph.

    Args:
      config: NmtConfig.
      is_training: bool (dropout on).
      source_ids: int32 [batch, src].
      target_input_ids: int32 [batch, tgt].
      admin_profile: dict from read_admin_profile, required for layer_norm_type "admin" in
        training (None leaves omega at 1: the Post-LN start).
    """
    config = copy.deepcopy(config)
    if not is_training:
      config.hidden_dropout_prob = 0.0
      config.attention_probs_dropout_prob = 0.0
      config.activation_dropout_prob = 0.0
    self.config = config
    self.encoder_output = encode(config, source_ids, is_training, admin_profile)
    self.decoder_states = decode(config, self.encoder_output, target_input_ids, is_training,
                                 admin_profile)
    self.logits = output_logits(config, self.decoder_states)


def label_smoothed_loss(logits, target_ids, epsilon):
  """Label-smoothed cross-entropy over the non-pad target tokens.

  Per token: -(1 - eps) log p(y) - eps / V * sum_v log p(v) (the smoothing mass spread over all
  V classes, the gold one included, as fairseq and tensor2tensor do).

  Args:
    logits: float32 [batch, tgt, V].
    target_ids: int32 [batch, tgt] (pieces + eos, 0-padded).
    epsilon: float label smoothing.

  Returns:
    (mean smoothed loss over real tokens (scalar), summed NLL of the gold tokens (scalar),
    number of real tokens (float32 scalar)).
  """
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
  weights = tf.cast(tf.not_equal(target_ids, PAD_ID), tf.float32)
  nll = -tf.reduce_sum(log_probs * tf.one_hot(target_ids, tf.shape(logits)[-1]), axis=-1)
  smooth = -tf.reduce_mean(log_probs, axis=-1)
  per_token = (1.0 - epsilon) * nll + epsilon * smooth
  num_tokens = tf.reduce_sum(weights)
  safe_count = tf.maximum(num_tokens, 1.0)
  return (tf.reduce_sum(per_token * weights) / safe_count,
          tf.reduce_sum(nll * weights), num_tokens)


# ----------------------------------------------------------------------------- profiles
def admin_profile_tensors(config, source_ids, target_input_ids):
  """The in-graph ADMIN profiling pass (no dropout).

  Call it in a graph of its own (with the training graph seed): it creates the model's
  variables, minus omega. Run it once on a real batch after initialising the variables.

  Args:
    config: NmtConfig with layer_norm_type "admin".
    source_ids: int32 [batch, src].
    target_input_ids: int32 [batch, tgt].

  Returns:
    {"encoder": [scalar Tensor] * 2 * encoder layers, "decoder": [...] * 3 * decoder layers}.
  """
  if config.layer_norm_type != "admin":
    raise ValueError("ADMIN profiling needs layer_norm_type=admin, got %r" %
                     config.layer_norm_type)
  encoder_profiler = AdminProfiler(tf.reshape(
      tf.cast(get_source_mask(source_ids), tf.float32), [-1]))
  encoder_output = encode(config, source_ids, False, profiler=encoder_profiler)
  decoder_profiler = AdminProfiler(tf.reshape(
      tf.cast(tf.not_equal(target_input_ids, PAD_ID), tf.float32), [-1]))
  decode(config, encoder_output, target_input_ids, False, profiler=decoder_profiler)
  return {"encoder": encoder_profiler.omegas, "decoder": decoder_profiler.omegas}


def profile_document(config, omegas, seed=None):
  """The JSON document of a profile (docs/translation.md).

  Args:
    config: NmtConfig.
    omegas: {"encoder": [float], "decoder": [float]}.
    seed: (optional) the graph seed the weights were initialised with.

  Returns:
    dict ready for json.dump.
  """
  return {"format": PROFILE_FORMAT, "version": 1,
          "config": {k: getattr(config, k) for k in PROFILE_CONFIG_FIELDS},
          "seed": seed,
          "encoder": [float(v) for v in omegas["encoder"]],
          "decoder": [float(v) for v in omegas["decoder"]]}


def check_admin_profile(document, config, source="ADMIN profile", seed=None):
  """Validates a profile document against a config; ValueError naming `source` and the field.

  Args:
    document: dict (parsed JSON).
    config: NmtConfig the model is built with.
    source: name of the file for messages.
    seed: (optional) the training graph seed; a profile made with another one is refused.

  Returns:
    {"encoder": [float], "decoder": [float]}.
  """
  if not isinstance(document, dict) or document.get("format") != PROFILE_FORMAT:
    raise ValueError("%s: not a %s file" % (source, PROFILE_FORMAT))
  made_for = document.get("config", {})
  for field in PROFILE_CONFIG_FIELDS:
    if made_for.get(field) != getattr(config, field):
      raise ValueError("%s: made for %s=%r, the model has %r (delete it to profile again)" %
                       (source, field, made_for.get(field), getattr(config, field)))
  if seed is not None and document.get("seed") is not None and document["seed"] != seed:
    raise ValueError("%s: made with the weights of seed %s, this run uses seed %s (delete it to "
                     "profile again)" % (source, document["seed"], seed))
  expected = {"encoder": 2 * config.num_encoder_layers, "decoder": 3 * config.num_decoder_layers}
  for stack, count in expected.items():
    values = document.get(stack)
    if not isinstance(values, list) or len(values) != count:
      raise ValueError("%s: %s needs %d omegas, found %s" %
                       (source, stack, count, len(values) if isinstance(values, list) else 0))
    for value in values:
      if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError("%s: %s omega %r is not a positive number" % (source, stack, value))
  return {"encoder": list(document["encoder"]), "decoder": list(document["decoder"])}


def read_admin_profile(path, config, seed=None):
  """Reads and checks a profile file (see check_admin_profile)."""
  with tf.io.gfile.GFile(path, "r") as f:
    text = f.read()
  try:
    document = json.loads(text)
  except ValueError as e:
    raise ValueError("%s: not valid JSON (%s)" % (path, e))
  return check_admin_profile(document, config, source=path, seed=seed)
