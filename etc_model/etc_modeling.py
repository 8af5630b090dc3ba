# coding=utf-8
"""ETC (Ainslie et al. 2020) with RealFormer residual attention, in tf.compat.v1.

The config keys, the call signature and the checkpoint variable names are those of the official
google-research `etcmodel/models/modeling.py` (`EtcConfig`, `EtcModel`, scope
`etc_document_bert/...`), so an official config file loads as is and an official checkpoint
restores by name. One config key is new:

  residual_attention: "none" (ETC), "sum" (RealFormer running sum) or "mean" (running mean).
    ETC has two attention softmaxes per layer: the long rows over [local long keys ; all global
    keys] and the global rows over [all global keys ; all long keys]. Each is a chain of its
    own: layer n hands its pre-mask scaled logits A_n = S_n + A_{n-1} (long rows and global rows
    separately) to layer n+1, where they are added before the mask; "mean" divides by n + 1
    before the softmax (`modeling.residual_attention_divisor` /
    `modeling.residual_attention_hand_on`, the one rule of every model in this project).

Two layouts of the long-row attention, as the official `QkvRelativeLocalAttention`:
  "full" (the official default for a static long length <= 1024): the local window is skewed
    into dense [batch, heads, long, long + global] logits;
  "sparse": blocks of `local_radius + 1` long tokens, each attending to its own and both
    neighbouring blocks plus all global tokens: [batch, blocks, heads, r + 1, 3 (r + 1) + global]
    logits, memory linear in the long length.
The running sums are kept in the layout's own shape (they are only ever added to logits of the
same layout). The global-row attention is always full ([batch, heads, global, global + long]).

`grad_checkpointing_period` k > 0 recomputes the activations of each group of k layers in the
backward pass (`recompute_in_backward`, in place of the official tf.recompute_grad); the two
running sums are the groups' explicit inputs and outputs.

Everything is tf.compat.v1 variables and ops (no Keras layers): `modeling.dense_layer`,
`modeling.layer_norm` (epsilon 1e-12, as Keras' LayerNormalization in the official code) and the
step-seeded `modeling.dropout`.

Mixed precision (`EtcModel(..., compute_dtype=tf.bfloat16 or tf.float16)`, as BERT's
`modeling.BertModel`): the variables stay float32 (same names, same checkpoints); the
projections, the attention matmuls (content and relative scores, context), the feed-forward
blocks and their dropout run in the compute dtype; the embeddings, the residual stream, the
LayerNorm statistics, the two softmaxes with their masks and the two residual-attention running
sums (long rows and global rows, in either layout and across gradient-checkpointing groups) stay
float32, and the long and global outputs are float32.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import contextlib
import copy
import json
import math

import numpy as np
import six
import tensorflow as tf

import modeling

tf1 = tf.compat.v1

# Besides the 2 * relative_pos_max_distance + 1 relative position ids, the official model
# reserves 3 ids: a global token attending to a long token of its own sentence / of another
# sentence, and a third used by HotpotQA and WikiHop (official `_NUM_OTHER_RELATIVE_IDS`).
NUM_OTHER_RELATIVE_IDS = 3

# Long inputs up to this static length use the dense skewed layout under "auto" (official).
FULL_ATTENTION_MAX_LONG_LENGTH = 1024

ATT_IMPLEMENTATIONS = ("auto", "sparse", "full")

# Stddev of the relative embedding tables' truncated-normal initializer (official
# `QkvRelativeAttention` default, which `FusedGlobalLocalAttention` does not override).
RELATIVE_EMBEDDING_INIT_STDDEV = 0.5

_INT_KEYS = ("vocab_size", "segment_vocab_size", "hidden_size", "num_hidden_layers",
             "num_attention_heads", "local_radius", "intermediate_size")
_OPTIONAL_INT_KEYS = ("embedding_size", "att_size_per_head", "relative_vocab_size")
_NON_NEGATIVE_INT_KEYS = ("relative_pos_max_distance", "max_absolute_position_embeddings",
                          "grad_checkpointing_period")
_BOOL_KEYS = ("share_feed_forward_params", "share_kv_projections", "share_qkv_projections",
              "share_att_output_projection", "use_pre_activation_order", "use_hard_g2l_mask",
              "use_hard_l2g_mask")


class EtcConfig(object):
  """Configuration for `EtcModel` (official keys and defaults, plus `residual_attention`)."""

  def __init__(self,
               vocab_size,
               segment_vocab_size=16,
               embedding_size=None,
               hidden_size=768,
               num_hidden_layers=12,
               num_attention_heads=12,
               local_radius=84,
               att_size_per_head=None,
               relative_pos_max_distance=12,
               relative_vocab_size=32,
               max_absolute_position_embeddings=0,
               intermediate_size=3072,
               hidden_act="gelu",
               hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1,
               initializer_range=0.02,
               share_feed_forward_params=True,
               share_kv_projections=False,
               share_qkv_projections=True,
               share_att_output_projection=False,
               use_pre_activation_order=False,
               use_hard_g2l_mask=False,
               use_hard_l2g_mask=False,
               grad_checkpointing_period=0,
               residual_attention="none"):
    """Constructs EtcConfig.

    Args:
      vocab_size: vocabulary size of `token_ids` and `global_token_ids` (one shared table).
      segment_vocab_size: vocabulary size of `segment_ids` and `global_segment_ids`.
      embedding_size: width of the token embedding table; None means `hidden_size`, a smaller
        value (ALBERT-style) adds a projection to `hidden_size`.
      hidden_size: width of the long and global hidden states.
      num_hidden_layers: number of Transformer layers.
      num_attention_heads: attention heads per layer.
      local_radius: how many long tokens to the left / right each long token attends to.
      att_size_per_head: query / key / value size per head; None means
        hidden_size / num_attention_heads.
      relative_pos_max_distance: relative distances are clipped to this value (0: none).
      relative_vocab_size: size of the relative attention id vocabulary, at least
        2 * relative_pos_max_distance + 1 + 3; None for no relative attention (then
        relative_pos_max_distance must be 0).
      max_absolute_position_embeddings: 0 (no absolute positions, the default) or the size of
        the long and global absolute position tables.
      intermediate_size: feed-forward inner size.
      hidden_act: "gelu" (tanh approximation), "gelu_exact", "relu", "tanh" or "linear".
      hidden_dropout_prob: dropout of the embeddings and of every residual branch.
      attention_probs_dropout_prob: dropout of the attention probabilities.
      initializer_range: stddev of the truncated-normal weight initializer.
      share_feed_forward_params: one feed-forward block for long and global tokens.
      share_kv_projections: l2g keys / values share l2l's, g2l share g2g's (ignored when
        share_qkv_projections is true).
      share_qkv_projections: all four attention directions share the query, key and value
        projections.
      share_att_output_projection: long and global attention share the output projection.
      use_pre_activation_order: x + f(LN(x)) instead of LN(x + f(x)); no final LayerNorm (as
        the official code).
      use_hard_g2l_mask: read by the input utilities (`etc_inputs`): a sentence's global token
        attends only to its own long tokens.
      use_hard_l2g_mask: read by the input utilities: a long token attends only to its
        sentence's global token.
      grad_checkpointing_period: 0 (store every activation) or k > 0: the layers run in groups
        of k whose activations are recomputed in the backward pass (official), the
        residual-attention running sums handed between groups as their inputs / outputs.
      residual_attention: "none", "sum" or "mean" (see the module docstring).
    """
    self.vocab_size = vocab_size
    self.segment_vocab_size = segment_vocab_size
    self.embedding_size = embedding_size
    self.hidden_size = hidden_size
    self.num_hidden_layers = num_hidden_layers
    self.num_attention_heads = num_attention_heads
    self.local_radius = local_radius
    self.att_size_per_head = att_size_per_head
    self.relative_pos_max_distance = relative_pos_max_distance
    self.relative_vocab_size = relative_vocab_size
    self.max_absolute_position_embeddings = max_absolute_position_embeddings
    self.hidden_act = hidden_act
    self.intermediate_size = intermediate_size
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.initializer_range = initializer_range
    self.share_feed_forward_params = share_feed_forward_params
    self.share_kv_projections = share_kv_projections
    self.share_qkv_projections = share_qkv_projections
    self.share_att_output_projection = share_att_output_projection
    self.use_pre_activation_order = use_pre_activation_order
    self.use_hard_g2l_mask = use_hard_g2l_mask
    self.use_hard_l2g_mask = use_hard_l2g_mask
    self.grad_checkpointing_period = grad_checkpointing_period
    self.residual_attention = residual_attention

  @classmethod
  def from_dict(cls, json_object, source="config dict"):
    """Constructs a validated `EtcConfig` from a Python dictionary of parameters.

    Args:
      json_object: dict of config keys.
      source: where the dict came from (a file name), used in error messages.

    Returns:
      An EtcConfig.

    Raises:
      ValueError: an unknown key, a wrong type or an impossible value; the message names the
        key and `source`.
    """
    if not isinstance(json_object, dict):
      raise ValueError("%s: an ETC config must be a JSON object, got %s" %
                       (source, type(json_object).__name__))
    return modeling.config_from_checked_dict(cls, json_object, source)

  @classmethod
  def from_json_file(cls, json_file):
    """Constructs a validated `EtcConfig` from a json file of parameters."""
    return cls.from_dict(modeling.read_config_json(json_file), source=json_file)

  def validate(self, source="config"):
    """Checks types and values of every field.

    Args:
      source: where the config came from, used in error messages.

    Raises:
      ValueError: naming the key and `source`.
    """
    def is_int(value):
      return not isinstance(value, bool) and isinstance(value, six.integer_types)

    for key in _INT_KEYS + _OPTIONAL_INT_KEYS + _NON_NEGATIVE_INT_KEYS:
      value = getattr(self, key)
      if value is None and key in _OPTIONAL_INT_KEYS:
        continue
      if not is_int(value):
        raise ValueError("%s: key '%s' must be an integer%s, got %r" %
                         (source, key, " or null" if key in _OPTIONAL_INT_KEYS else "", value))
      minimum = 0 if key in _NON_NEGATIVE_INT_KEYS else 1
      if value < minimum:
        raise ValueError("%s: key '%s' must be >= %d, got %d" % (source, key, minimum, value))
    for key in _BOOL_KEYS:
      value = getattr(self, key)
      if not isinstance(value, bool):
        raise ValueError("%s: key '%s' must be true or false, got %r" % (source, key, value))
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, key)
      if isinstance(value, bool) or not isinstance(value, (float,) + six.integer_types):
        raise ValueError("%s: key '%s' must be a number, got %r" % (source, key, value))
      if not 0.0 <= value < 1.0:
        raise ValueError("%s: key '%s' must be in [0, 1), got %r" % (source, key, value))
    value = self.initializer_range
    if isinstance(value, bool) or not isinstance(value, (float,) + six.integer_types) or value <= 0:
      raise ValueError("%s: key 'initializer_range' must be a positive number, got %r" %
                       (source, value))
    for key, allowed in (("hidden_act", modeling.ACTIVATIONS),
                         ("residual_attention", modeling.RESIDUAL_ATTENTION_TYPES)):
      value = getattr(self, key)
      if value not in allowed:
        raise ValueError("%s: key '%s' must be one of %s, got %r" %
                         (source, key, ", ".join(allowed), value))
    if self.att_size_per_head is None and self.hidden_size % self.num_attention_heads != 0:
      raise ValueError(
          "%s: key 'hidden_size' (%d) is not a multiple of 'num_attention_heads' (%d) "
          "(or set 'att_size_per_head')" % (source, self.hidden_size, self.num_attention_heads))
    if self.relative_vocab_size is None:
      if self.relative_pos_max_distance != 0:
        raise ValueError("%s: key 'relative_pos_max_distance' must be 0 when "
                         "'relative_vocab_size' is null, got %d" %
                         (source, self.relative_pos_max_distance))
    else:
      needed = 2 * self.relative_pos_max_distance + 1 + NUM_OTHER_RELATIVE_IDS
      if self.relative_vocab_size < needed:
        raise ValueError("%s: key 'relative_vocab_size' (%d) is too small for "
                         "'relative_pos_max_distance' (%d): needs >= 2 * %d + 1 + %d = %d" %
                         (source, self.relative_vocab_size, self.relative_pos_max_distance,
                          self.relative_pos_max_distance, NUM_OTHER_RELATIVE_IDS, needed))

  def to_dict(self):
    """Serializes this instance to a Python dictionary."""
    return copy.deepcopy(self.__dict__)

  def to_json_string(self):
    """Serializes this instance to a JSON string."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


class EtcModel(object):
  """The ETC encoder (official `EtcModel`) with RealFormer residual attention.

  Example usage:

  ```python
  config = EtcConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
                     num_attention_heads=4, intermediate_size=1024, local_radius=16,
                     residual_attention="sum")
  model = EtcModel(config, is_training=False)
  long_output, global_output = model(token_ids=token_ids, global_token_ids=global_token_ids,
                                     **side_inputs)
  ```

  Calling the model again (e.g. on another input) reuses its variables.
  """

  def __init__(self,
               config,
               is_training=None,
               use_one_hot_embeddings=False,
               use_one_hot_relative_embeddings=False,
               name="etc_document_bert",
               compute_dtype=None):
    """Constructor for EtcModel.

    Args:
      config: `EtcConfig` instance.
      is_training: None (dropout follows the `training` argument of each call), True (dropout
        on) or False (dropout off).
      use_one_hot_embeddings: look the token and position embeddings up by one-hot matmul
        (TPU) instead of tf.gather.
      use_one_hot_relative_embeddings: the same for the relative attention scores.
      name: variable scope of the model (official: "etc_document_bert").
      compute_dtype: tf.float32 (default), tf.bfloat16 or tf.float16, or a --precision name
        ("fp32", "bf16", "fp16"; `modeling.get_compute_dtype`): the dtype of the layers'
        matmuls (see the module docstring). Variables and outputs are float32 in every case.

    Raises:
      ValueError: the config or the compute dtype is invalid.
    """
    config = copy.deepcopy(config)
    config.validate("config")
    if is_training is not None and not is_training:
      config.hidden_dropout_prob = 0.0
      config.attention_probs_dropout_prob = 0.0
    if config.embedding_size is None:
      config.embedding_size = config.hidden_size
    self.config = config
    self.is_training = is_training
    self.compute_dtype = modeling.get_compute_dtype(compute_dtype)
    self.use_one_hot_embeddings = use_one_hot_embeddings
    self.use_one_hot_relative_embeddings = use_one_hot_relative_embeddings
    self.name = name
    self.size_per_head = (config.att_size_per_head or
                          config.hidden_size // config.num_attention_heads)
    self._token_embedding_table = None

  def __call__(self,
               token_ids,
               global_token_ids,
               segment_ids=None,
               global_segment_ids=None,
               position_ids=None,
               global_position_ids=None,
               l2l_att_mask=None,
               g2g_att_mask=None,
               l2g_att_mask=None,
               g2l_att_mask=None,
               l2l_relative_att_ids=None,
               g2g_relative_att_ids=None,
               l2g_relative_att_ids=None,
               g2l_relative_att_ids=None,
               long_embedding_adder=None,
               global_embedding_adder=None,
               training=None,
               att_implementation="auto"):
    """Runs the model (official `EtcModel.call` arguments, plus `att_implementation`).

    Args:
      token_ids: int32 [batch, long_seq_len].
      global_token_ids: int32 [batch, global_seq_len].
      segment_ids: int32 [batch, long_seq_len]; default all 1.
      global_segment_ids: int32 [batch, global_seq_len]; default all 0.
      position_ids: int32 [batch, long_seq_len]; only with absolute positions (default
        0..long_seq_len-1).
      global_position_ids: int32 [batch, global_seq_len]; likewise.
      l2l_att_mask: int32 [batch, long_seq_len, 2 * local_radius + 1], 1 where attending is
        allowed; window index k is the key at offset k - local_radius. Default all 1.
      g2g_att_mask: int32 [batch, global_seq_len, global_seq_len]; default all 1.
      l2g_att_mask: int32 [batch, long_seq_len, global_seq_len]; default all 1.
      g2l_att_mask: int32 [batch, global_seq_len, long_seq_len]; default all 1.
      l2l_relative_att_ids: int32 [batch, long_seq_len, 2 * local_radius + 1] or None.
      g2g_relative_att_ids: int32 [batch, global_seq_len, global_seq_len] or None.
      l2g_relative_att_ids: int32 [batch, long_seq_len, global_seq_len] or None (given iff
        `l2l_relative_att_ids` is).
      g2l_relative_att_ids: int32 [batch, global_seq_len, long_seq_len] or None (given iff
        `g2g_relative_att_ids` is).
      long_embedding_adder: float32 [batch, long_seq_len, hidden], added to the long
        embeddings before their LayerNorm.
      global_embedding_adder: float32 [batch, global_seq_len, hidden], likewise.
      training: Python bool or None; must be None when `is_training` was given.
      att_implementation: "auto" (dense skewed layout for a static long length <= 1024,
        else blocked), "full" or "sparse".

    Returns:
      [long_output float32 [batch, long_seq_len, hidden],
       global_output float32 [batch, global_seq_len, hidden]].

    Raises:
      ValueError: inconsistent arguments.
    """
    config = self.config
    if self.is_training is not None:
      if training is not None:
        raise ValueError("`training` must be None when `is_training` is given in `__init__`.")
      training = self.is_training
    training = bool(training)
    if att_implementation not in ATT_IMPLEMENTATIONS:
      raise ValueError("att_implementation must be one of %s, got %r" %
                       (", ".join(ATT_IMPLEMENTATIONS), att_implementation))
    if config.max_absolute_position_embeddings == 0 and (
        position_ids is not None or global_position_ids is not None):
      raise ValueError("Cannot specify `position_ids` or `global_position_ids` arguments "
                       "when `max_absolute_position_embeddings` is 0.")
    _check_relative_ids(config, l2l_relative_att_ids, l2g_relative_att_ids,
                        g2g_relative_att_ids, g2l_relative_att_ids)
    if segment_ids is None:
      segment_ids = tf.ones_like(token_ids)
    if global_segment_ids is None:
      global_segment_ids = tf.zeros_like(global_token_ids)
    hidden_dropout = config.hidden_dropout_prob if training else 0.0

    with tf1.variable_scope(self.name, reuse=tf1.AUTO_REUSE):
      long_input, token_table = _embedding_lookup(
          token_ids, config.vocab_size, config.embedding_size, config.initializer_range,
          self.use_one_hot_embeddings, "token_emb_lookup", projection_size=config.hidden_size)
      self._token_embedding_table = token_table
      long_input += _embedding_lookup(segment_ids, config.segment_vocab_size,
                                      config.hidden_size, config.initializer_range, True,
                                      "segment_emb_lookup")[0]
      if config.max_absolute_position_embeddings:
        long_input += _position_embeddings(long_input, position_ids, config,
                                           self.use_one_hot_embeddings,
                                           "position_emb_lookup_long")
      if long_embedding_adder is not None:
        long_input += long_embedding_adder
      long_input = modeling.dropout(modeling.layer_norm(long_input, "long_emb_layer_norm"),
                                    hidden_dropout)

      # Global tokens share the token embedding table (official).
      global_input = _embedding_lookup(
          global_token_ids, config.vocab_size, config.embedding_size, config.initializer_range,
          self.use_one_hot_embeddings, "token_emb_lookup",
          projection_size=config.hidden_size)[0]
      global_input += _embedding_lookup(global_segment_ids, config.segment_vocab_size,
                                        config.hidden_size, config.initializer_range, True,
                                        "segment_emb_lookup")[0]
      if config.max_absolute_position_embeddings:
        global_input += _position_embeddings(global_input, global_position_ids, config,
                                             self.use_one_hot_embeddings,
                                             "position_emb_lookup_global")
      if global_embedding_adder is not None:
        global_input += global_embedding_adder
      global_input = modeling.dropout(
          modeling.layer_norm(global_input, "global_emb_layer_norm"), hidden_dropout)

      side_inputs = dict(
          l2l_att_mask=l2l_att_mask, g2g_att_mask=g2g_att_mask, l2g_att_mask=l2g_att_mask,
          g2l_att_mask=g2l_att_mask, l2l_relative_att_ids=l2l_relative_att_ids,
          g2g_relative_att_ids=g2g_relative_att_ids,
          l2g_relative_att_ids=l2g_relative_att_ids,
          g2l_relative_att_ids=g2l_relative_att_ids)
      with tf1.variable_scope("global_local_transformer_layers"):
        return global_local_transformer_layers(
            long_input, global_input, config, training=training,
            att_implementation=att_implementation,
            use_one_hot_lookup=self.use_one_hot_relative_embeddings,
            compute_dtype=self.compute_dtype, **side_inputs)

  def get_token_embedding_table(self):
    """The [vocab_size, embedding_size] token table, once the model has been called."""
    if self._token_embedding_table is None:
      raise ValueError("Cannot call `get_token_embedding_table()` until the model has been "
                       "called so that all variables are built.")
    return self._token_embedding_table


def _check_relative_ids(config, l2l_ids, l2g_ids, g2g_ids, g2l_ids):
  """Raises ValueError for relative ids the config or each other cannot go with."""
  given = [ids is not None for ids in (l2l_ids, l2g_ids, g2g_ids, g2l_ids)]
  if any(given) and config.relative_vocab_size is None:
    raise ValueError("Cannot use relative attention ids without 'relative_vocab_size'.")
  if given[0] != given[1]:
    raise ValueError("`l2l_relative_att_ids` and `l2g_relative_att_ids` must be either both "
                     "present or both absent.")
  if given[2] != given[3]:
    raise ValueError("`g2g_relative_att_ids` and `g2l_relative_att_ids` must be either both "
                     "present or both absent.")


def _embedding_lookup(ids, vocab_size, width, initializer_range, use_one_hot, name,
                      projection_size=0):
  """Official `EmbeddingLookup`: `<name>/embedding_table` (+ `<name>/projection`).

  Args:
    ids: int32 [batch, seq].
    vocab_size: rows of the table.
    width: columns of the table.
    initializer_range: stddev of the table's truncated-normal initializer.
    use_one_hot: one-hot matmul instead of tf.gather.
    name: variable scope.
    projection_size: if positive and not `width`, a dense projection to this size (kernel
      stddev 1 / sqrt(width), as ALBERT).

  Returns:
    (float32 [batch, seq, width or projection_size], the table variable).
  """
  with tf1.variable_scope(name):
    table = tf1.get_variable("embedding_table", [vocab_size, width],
                             initializer=modeling.create_initializer(initializer_range))
    if use_one_hot:
      # base_dtype: a reference variable's dtype is float32_ref (TF1 graphs).
      one_hot = tf.one_hot(ids, vocab_size, dtype=table.dtype.base_dtype)
      output = tf.tensordot(one_hot, table, [[-1], [0]])
    else:
      output = tf.gather(table, ids)
    if projection_size > 0 and projection_size != width:
      output = modeling.dense_layer(
          output, projection_size,
          kernel_initializer=modeling.create_initializer(1.0 / math.sqrt(width)),
          name="projection")
  return output, table


def _position_embeddings(embeddings, position_ids, config, use_one_hot, name):
  """Absolute position embeddings [batch, seq, hidden] (default positions 0..seq-1)."""
  if position_ids is not None:
    return _embedding_lookup(position_ids, config.max_absolute_position_embeddings,
                             config.hidden_size, config.initializer_range, use_one_hot, name)[0]
  with tf1.variable_scope(name):
    table = tf1.get_variable("embedding_table",
                             [config.max_absolute_position_embeddings, config.hidden_size],
                             initializer=modeling.create_initializer(config.initializer_range))
  seq_length = modeling.get_shape_list(embeddings)[1]
  return tf.slice(table, [0, 0], [seq_length, -1])[tf.newaxis]


def global_local_transformer_layers(long_input, global_input, config, training=False,
                                    att_implementation="auto", use_one_hot_lookup=False,
                                    l2l_att_mask=None, g2g_att_mask=None, l2g_att_mask=None,
                                    g2l_att_mask=None, l2l_relative_att_ids=None,
                                    g2g_relative_att_ids=None, l2g_relative_att_ids=None,
                                    g2l_relative_att_ids=None, compute_dtype=None):
  """The official `GlobalLocalTransformerLayers` with residual attention.

  Variables are created in the current variable scope (the official
  `.../global_local_transformer_layers`): `fused_att_layer_<i>/...` and
  `feed_forward_layer_<i>/...` (or `long_` / `global_feed_forward_layer_<i>` unshared).

  Args:
    long_input: float32 [batch, long_seq_len, hidden].
    global_input: float32 [batch, global_seq_len, hidden].
    config: `EtcConfig` (its dropout probabilities are used when `training`).
    training: Python bool, dropout on or off.
    att_implementation: "auto", "full" or "sparse" for the long rows.
    use_one_hot_lookup: gather relative scores by one-hot matmul.
    l2l_att_mask: see `EtcModel.__call__` (as the other side inputs).
    g2g_att_mask: see `EtcModel.__call__`.
    l2g_att_mask: see `EtcModel.__call__`.
    g2l_att_mask: see `EtcModel.__call__`.
    l2l_relative_att_ids: see `EtcModel.__call__`.
    g2g_relative_att_ids: see `EtcModel.__call__`.
    l2g_relative_att_ids: see `EtcModel.__call__`.
    g2l_relative_att_ids: see `EtcModel.__call__`.
    compute_dtype: None (float32), tf.bfloat16 / tf.float16 or a --precision name: the dtype
      of the attention and feed-forward blocks; the residual stream (`long_input`,
      `global_input`), LayerNorm statistics, softmaxes and running sums stay float32.

  Returns:
    [long_output float32 [batch, long_seq_len, hidden],
     global_output float32 [batch, global_seq_len, hidden]].
  """
  compute_dtype = modeling.get_compute_dtype(compute_dtype)
  batch_size, long_seq_len, _ = modeling.get_shape_list(long_input, expected_rank=3)
  global_seq_len = modeling.get_shape_list(global_input, expected_rank=3)[1]
  radius = config.local_radius
  if l2l_att_mask is None:
    l2l_att_mask = tf.ones([batch_size, long_seq_len, 2 * radius + 1], tf.int32)
  if l2g_att_mask is None:
    l2g_att_mask = tf.ones([batch_size, long_seq_len, global_seq_len], tf.int32)
  if g2g_att_mask is None:
    g2g_att_mask = tf.ones([batch_size, global_seq_len, global_seq_len], tf.int32)
  if g2l_att_mask is None:
    g2l_att_mask = tf.ones([batch_size, global_seq_len, long_seq_len], tf.int32)

  static_long_len = long_input.shape.as_list()[1]
  use_full = att_implementation == "full" or (
      att_implementation == "auto" and static_long_len is not None and
      static_long_len <= FULL_ATTENTION_MAX_LONG_LENGTH)
  if use_full:
    long_layout = _DenseLongLayout(l2l_att_mask, l2l_relative_att_ids, l2g_att_mask,
                                   l2g_relative_att_ids, radius)
  else:
    long_layout = _BlockedLongLayout(l2l_att_mask, l2l_relative_att_ids, l2g_att_mask,
                                     l2g_relative_att_ids, radius)
  global_mask = tf.concat([g2g_att_mask, g2l_att_mask], axis=-1)
  global_ids = (None if g2g_relative_att_ids is None else
                tf.concat([g2g_relative_att_ids, g2l_relative_att_ids], axis=-1))

  hidden_dropout = config.hidden_dropout_prob if training else 0.0
  intermediate_act_fn = modeling.get_activation(config.hidden_act)
  pre_ln = config.use_pre_activation_order

  def run_layers(first, last, long_output, global_output, prev_long_scores,
                 prev_global_scores):
    """Layers [first, last): (long, global, handed-on long scores, handed-on global scores)."""
    for layer_index in range(first, last):
      with tf1.variable_scope("fused_att_layer_%d" % layer_index):
        if pre_ln:
          long_att_in = modeling.layer_norm(long_output, "layer_norm_0")
          global_att_in = modeling.layer_norm(global_output, "layer_norm_1")
        else:
          long_att_in, global_att_in = long_output, global_output
        with tf1.variable_scope("fused_global_local_att"):
          long_att, global_att, prev_long_scores, prev_global_scores = (
              fused_global_local_attention(
                  tf.cast(long_att_in, compute_dtype), tf.cast(global_att_in, compute_dtype),
                  config, long_layout, global_mask, global_ids,
                  layer_index=layer_index, prev_long_scores=prev_long_scores,
                  prev_global_scores=prev_global_scores, training=training,
                  use_one_hot_lookup=use_one_hot_lookup))
        # The branch (and its dropout) in the compute dtype, the residual stream float32.
        long_output = long_output + tf.cast(modeling.dropout(long_att, hidden_dropout),
                                            long_output.dtype)
        global_output = global_output + tf.cast(modeling.dropout(global_att, hidden_dropout),
                                                global_output.dtype)
        if not pre_ln:
          long_output = modeling.layer_norm(long_output, "layer_norm_0")
          global_output = modeling.layer_norm(global_output, "layer_norm_1")

      if config.share_feed_forward_params:
        long_scope = global_scope = "feed_forward_layer_%d" % layer_index
      else:
        long_scope = "long_feed_forward_layer_%d" % layer_index
        global_scope = "global_feed_forward_layer_%d" % layer_index
      long_output = _feed_forward_block(long_output, config, intermediate_act_fn,
                                        hidden_dropout, long_scope, compute_dtype)
      global_output = _feed_forward_block(global_output, config, intermediate_act_fn,
                                          hidden_dropout, global_scope, compute_dtype)
    return [long_output, global_output, prev_long_scores, prev_global_scores]

  num_layers = config.num_hidden_layers
  period = config.grad_checkpointing_period
  if not period or tf.executing_eagerly():
    return run_layers(0, num_layers, long_input, global_input, None, None)[:2]
  state = [long_input, global_input, None, None]
  for first in range(0, num_layers, period):
    last = min(first + period, num_layers)
    # The last group's handed-on scores are never used: not outputs (no backward zeros).
    state = recompute_in_backward(
        lambda *block_inputs, first=first, last=last: (
            run_layers(first, last, *block_inputs)[:4 if last < num_layers else 2]),
        state)
  return state[:2]


@contextlib.contextmanager
def _dropout_seeds(seeds, replay):
  """Records (replay=False) or replays (replay=True) the seeds of every `modeling.dropout`.

  A recomputed block must draw the masks its forward pass drew, but `modeling.dropout` keys
  its stateless seed on the op's name, and the recomputed ops have other names (under
  `gradients/`): the forward pass records each seed in call order (a random one where the
  graph has no global step, in place of tf.nn.dropout's stateful draw) and the recomputation
  uses them in the same order. The seeds are [2] int64 tensors: all that is kept.

  Args:
    seeds: list, appended to (record) or read in order (replay).
    replay: see above.

  Yields:
    Nothing; `modeling.dropout` is back to normal on exit.
  """
  position = [0]

  def seed_fn(input_tensor):
    if replay:
      position[0] += 1
      return seeds[position[0] - 1]
    seed = modeling.step_dropout_seed(input_tensor)
    if seed is None:
      seed = tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
    seeds.append(seed)
    return seed

  with modeling.dropout_seed_override(seed_fn):
    yield


def recompute_in_backward(block_fn, inputs):
  """Runs `block_fn(*inputs)`, keeping none of its activations for the backward pass.

  What the official code does with tf.recompute_grad, in a form that works in a tf.compat.v1
  graph: the outputs pass through an IdentityN over (outputs, inputs, variables read) whose
  gradient (registered for this call, as `modeling.layer_norm` does) builds `block_fn` again
  on the inputs, under the same variable scope and with the forward pass's dropout seeds
  (`_dropout_seeds`), and differentiates that copy. The copy's inputs depend on the incoming
  gradient, so it runs in the backward pass (and is not merged with the forward ops).
  tf.recompute_grad runs in such a graph, but its recomputation re-draws `modeling.dropout`'s
  masks (keyed on op names, which differ there): wrong gradients with dropout on.

  Args:
    block_fn: function of len(inputs) arguments (Tensors or None) returning a list of
      Tensors or None; it may create variables (tf1.get_variable) on its first call.
    inputs: list of float32 Tensors or None (absent inputs are passed as None).

  Returns:
    The list `block_fn` returns (same values; gradients flow to `inputs` and to the
    variables `block_fn` reads).
  """
  scope = tf1.get_variable_scope()
  variables = []
  seeds = []

  def record_variable(getter, *args, **kwargs):
    variable = getter(*args, **kwargs)
    if all(variable is not seen for seen in variables):
      variables.append(variable)
    return variable

  with tf1.variable_scope(scope, custom_getter=record_variable, auxiliary_name_scope=False):
    with _dropout_seeds(seeds, replay=False):
      outputs = block_fn(*inputs)
  given = [i for i, tensor in enumerate(inputs) if tensor is not None]
  returned = [i for i, tensor in enumerate(outputs) if tensor is not None]

  def grad(op, *output_grads):
    """Gradients of (outputs, inputs, variables): None, recomputed, recomputed."""
    output_grads = list(output_grads[:len(returned)])
    # A data dependency on the incoming gradient (as tf.recompute_grad: XLA ignores control
    # dependencies): zero, but not known to be zero before the gradient exists.
    first = tf.cast(tf.reduce_max(tf.reshape(output_grads[0], [-1])[:1]), tf.bool)
    dependency = tf.where(tf.equal(first, first), 0.0, np.nan)
    block_inputs = [None] * len(inputs)
    for position, tensor in zip(given, op.inputs[len(returned):len(returned) + len(given)]):
      block_inputs[position] = tensor + dependency
    with tf1.variable_scope(scope, reuse=True, auxiliary_name_scope=False):
      with _dropout_seeds(seeds, replay=True):
        recomputed = block_fn(*block_inputs)
    grads = tf.gradients([recomputed[i] for i in returned],
                         [block_inputs[i] for i in given] + variables, grad_ys=output_grads)
    return [None] * len(returned) + grads

  with tf1.get_default_graph().gradient_override_map(
      {"IdentityN": modeling.register_gradient(grad)}):
    passed = tf.identity_n([outputs[i] for i in returned] + [inputs[i] for i in given] +
                           [tf.convert_to_tensor(v) for v in variables])
  result = [None] * len(outputs)
  for position, tensor in zip(returned, passed):
    result[position] = tensor
  return result


def _feed_forward_block(input_tensor, config, activation, dropout_prob, scope,
                        compute_dtype=tf.float32):
  """Official `ResidualBlock` around `DenseLayers([intermediate, hidden])`.

  Args:
    input_tensor: float32 [batch, seq, hidden].
    config: `EtcConfig`.
    activation: the intermediate activation function.
    dropout_prob: dropout of the branch output.
    scope: variable scope (shared by long and global when the config shares it).
    compute_dtype: dtype of the branch's matmuls, activation and dropout.

  Returns:
    float32 [batch, seq, hidden] (the dtype of `input_tensor`).
  """
  initializer = modeling.create_initializer(config.initializer_range)
  with tf1.variable_scope(scope, reuse=tf1.AUTO_REUSE):
    branch_input = (modeling.layer_norm(input_tensor, "layer_norm")
                    if config.use_pre_activation_order else input_tensor)
    with tf1.variable_scope("dense_layers"):
      intermediate = modeling.dense_layer(tf.cast(branch_input, compute_dtype),
                                          config.intermediate_size,
                                          activation=activation,
                                          kernel_initializer=initializer, name="layer_0")
      branch = modeling.dense_layer(intermediate, config.hidden_size,
                                    kernel_initializer=initializer, name="layer_1")
    output = input_tensor + tf.cast(modeling.dropout(branch, dropout_prob),
                                    input_tensor.dtype)
    if not config.use_pre_activation_order:
      output = modeling.layer_norm(output, "layer_norm")
  return output


def projection_names(config):
  """The official variable scope of each projection under the config's sharing flags.

  Args:
    config: `EtcConfig`.

  Returns:
    dict from role ("long_query", "l2l_key", "l2l_value", "l2g_key", "l2g_value",
    "global_query", "g2g_key", "g2g_value", "g2l_key", "g2l_value", "long_output",
    "global_output") to the scope under `fused_global_local_att` (shared roles share a name).
  """
  names = {"long_query": "long_query_projection", "l2l_key": "l2l_key_projection",
           "l2l_value": "l2l_value_projection", "long_output": "long_output_projection"}
  if config.share_qkv_projections or config.share_kv_projections:
    names["l2g_key"], names["l2g_value"] = names["l2l_key"], names["l2l_value"]
  else:
    names["l2g_key"], names["l2g_value"] = "l2g_key_projection", "l2g_value_projection"
  if config.share_qkv_projections:
    names["global_query"] = names["long_query"]
    names["g2g_key"] = names["g2l_key"] = names["l2l_key"]
    names["g2g_value"] = names["g2l_value"] = names["l2l_value"]
  else:
    names["global_query"] = "global_query_projection"
    names["g2g_key"], names["g2g_value"] = "g2g_key_projection", "g2g_value_projection"
    if config.share_kv_projections:
      names["g2l_key"], names["g2l_value"] = names["g2g_key"], names["g2g_value"]
    else:
      names["g2l_key"], names["g2l_value"] = "g2l_key_projection", "g2l_value_projection"
  names["global_output"] = (names["long_output"] if config.share_att_output_projection
                            else "global_output_projection")
  return names


def fused_global_local_attention(long_input, global_input, config, long_layout, global_mask,
                                 global_ids, layer_index, prev_long_scores=None,
                                 prev_global_scores=None, training=False,
                                 use_one_hot_lookup=False):
  """One layer's official `FusedGlobalLocalAttention` with residual scores.

  Variables are created in the current scope (`.../fused_global_local_att`). The projections,
  the score and context matmuls run in the dtype of the inputs (float32, or a mixed-precision
  compute dtype); the scores, their running sums, the masks and the softmaxes are float32.

  Args:
    long_input: float [batch, long_seq_len, hidden] (float32, bfloat16 or float16).
    global_input: float [batch, global_seq_len, hidden], the dtype of `long_input`.
    config: `EtcConfig`.
    long_layout: `_DenseLongLayout` or `_BlockedLongLayout` (masks and ids of the long rows).
    global_mask: int32 [batch, global_seq_len, global_seq_len + long_seq_len].
    global_ids: int32 [batch, global_seq_len, global_seq_len + long_seq_len] or None.
    layer_index: 0-based index of the layer (the running mean's divisor).
    prev_long_scores: the previous layer's handed-on long-row scores (layout's shape) or None.
    prev_global_scores: float32 [batch, heads, global, global + long] or None.
    training: dropout of the attention probabilities on or off.
    use_one_hot_lookup: gather relative scores by one-hot matmul.

  Returns:
    (long_output [batch, long_seq_len, hidden], global_output [batch, global_seq_len, hidden]
     in the dtype of the inputs, float32 handed-on long-row scores or None, float32 handed-on
     global-row scores or None).
  """
  names = projection_names(config)
  num_heads = config.num_attention_heads
  size_per_head = (config.att_size_per_head or config.hidden_size // num_heads)
  initializer = modeling.create_initializer(config.initializer_range)
  projected = {}

  def project(role, input_tensor):
    """[batch, seq, heads, size_per_head] of the role's projection (computed once per input)."""
    key = (names[role], id(input_tensor))
    if key not in projected:
      with tf1.variable_scope(names[role], reuse=tf1.AUTO_REUSE):
        output = modeling.dense_layer(input_tensor, num_heads * size_per_head,
                                      kernel_initializer=initializer, name="linear")
      shape = modeling.get_shape_list(input_tensor)
      projected[key] = tf.reshape(output, shape[:-1] + [num_heads, size_per_head])
    return projected[key]

  def relative_tables(scope):
    if config.relative_vocab_size is None:
      return None
    with tf1.variable_scope(scope):
      emb = tf1.get_variable(
          "relative_emb_table", [config.relative_vocab_size, num_heads, size_per_head],
          initializer=tf1.truncated_normal_initializer(stddev=RELATIVE_EMBEDDING_INIT_STDDEV))
      bias = tf1.get_variable("relative_bias_table", [config.relative_vocab_size, num_heads],
                              initializer=tf1.zeros_initializer())
    # float32 variables, read in the compute dtype (as modeling.dense_layer's).
    return tf.cast(emb, long_input.dtype), tf.cast(bias, long_input.dtype)

  attention_dropout = config.attention_probs_dropout_prob if training else 0.0
  divisor = modeling.residual_attention_divisor(config.residual_attention, layer_index)
  residual_attention = config.residual_attention

  # Long rows: [local long keys ; all global keys] under one softmax.
  long_context, long_scores = long_layout.attend(
      queries=project("long_query", long_input),
      keys=project("l2l_key", long_input), values=project("l2l_value", long_input),
      side_keys=project("l2g_key", global_input),
      side_values=project("l2g_value", global_input),
      tables=relative_tables("long_qkv_attention/qkv_relative_attention"),
      prev_scores=prev_long_scores, divisor=divisor, residual_attention=residual_attention,
      dropout_prob=attention_dropout, use_one_hot_lookup=use_one_hot_lookup)

  # Global rows: [all global keys ; all long keys] under another softmax.
  global_keys = tf.concat([project("g2g_key", global_input), project("g2l_key", long_input)],
                          axis=1)
  global_values = tf.concat([project("g2g_value", global_input),
                             project("g2l_value", long_input)], axis=1)
  global_queries = project("global_query", global_input)
  global_scores = _content_and_relative_scores(
      tf.einsum("bqhd,bkhd->bhqk", global_queries, global_keys), global_queries,
      relative_tables("global_qkv_attention"), global_ids, size_per_head, use_one_hot_lookup)
  global_probs, global_scores = attention_probs(
      global_scores, global_mask, prev_global_scores, divisor, residual_attention,
      attention_dropout, dtype=global_values.dtype)
  global_context = tf.einsum("bhqk,bkhd->bqhd", global_probs, global_values)

  outputs = []
  for role, context in (("long_output", long_context), ("global_output", global_context)):
    shape = modeling.get_shape_list(context)
    flat = tf.reshape(context, shape[:2] + [num_heads * size_per_head])
    with tf1.variable_scope(tf1.get_variable_scope(), reuse=tf1.AUTO_REUSE):
      outputs.append(modeling.dense_layer(flat, config.hidden_size,
                                          kernel_initializer=initializer, name=names[role]))
  return outputs[0], outputs[1], long_scores, global_scores


def _content_and_relative_scores(content_scores, queries, tables, ids, size_per_head,
                                 use_one_hot_lookup):
  """(q.k + q.rel_emb[id] + rel_bias[id]) / sqrt(size_per_head), as the official code.

  The matmuls run in the dtype of `queries`; the sum and the scaling in float32.

  Args:
    content_scores: float [..., heads, query, key], q.k (the dtype of `queries`).
    queries: float [..., query, heads, size_per_head].
    tables: (relative_emb_table [R, heads, size_per_head], relative_bias_table [R, heads]) in
      the dtype of `queries`, or None.
    ids: int32 [..., query, key] or None (no relative part).
    size_per_head: the key size per head.
    use_one_hot_lookup: one-hot matmul instead of tf.gather.

  Returns:
    float32 [..., heads, query, key].
  """
  # float32 from here in every precision: the running sums of residual attention add up the
  # scores of every layer (modeling.scaled_dot_product_attention does the same).
  scores = tf.cast(content_scores, tf.float32)
  if ids is not None and tables is not None:
    emb, bias = tables
    # [..., query, R, heads]
    all_relative = tf.einsum("...qhd,rhd->...qrh", queries, emb) + bias
    batch_dims = ids.shape.rank - 1
    if use_one_hot_lookup:
      relative = tf.einsum("...qkr,...qrh->...qkh",
                           tf.one_hot(ids, emb.shape[0], dtype=all_relative.dtype),
                           all_relative)
    else:
      # In float32: the gather's gradient, a segment sum over [..., query, key, heads], takes 4x
      # as long in bfloat16 on a CPU (and it sums up to 2 * radius + 1 values per entry).
      relative = tf.gather(tf.cast(all_relative, tf.float32), ids, batch_dims=batch_dims)
    # [..., query, key, heads] -> [..., heads, query, key]
    rank = ids.shape.rank + 1
    perm = list(range(rank - 3)) + [rank - 1, rank - 3, rank - 2]
    scores = scores + tf.cast(tf.transpose(relative, perm), tf.float32)
  return scores * (1.0 / math.sqrt(float(size_per_head)))


def attention_probs(scores, mask, prev_scores, divisor, residual_attention, dropout_prob,
                    dtype=tf.float32):
  """Residual scores, mean divisor, mask, softmax, dropout: one softmax of one chain.

  Everything but the dropout is float32 in every precision.

  Args:
    scores: float32 [..., heads, query, key], this layer's scaled logits.
    mask: int32 [..., query, key], 1 where attending is allowed.
    prev_scores: float32 like `scores`, handed on by the previous layer of the chain, or None.
    divisor: None or the running mean's divisor (`modeling.residual_attention_divisor`).
    residual_attention: "none", "sum" or "mean".
    dropout_prob: dropout of the probabilities (0 for none).
    dtype: dtype of the returned probabilities (that of the values they weight): the softmax
      output is cast to it before the dropout.

  Returns:
    (probs `dtype` [..., heads, query, key] after dropout,
     float32 scores to hand on (`modeling.residual_attention_hand_on`): before mask and
     division).
  """
  if prev_scores is not None:
    scores = scores + prev_scores
  handed_on = modeling.residual_attention_hand_on(residual_attention, scores)
  if divisor is not None and divisor != 1:
    scores = scores / float(divisor)
  adder = (1.0 - tf.cast(mask, tf.float32)) * -10000.0
  scores += tf.expand_dims(adder, axis=-3)
  probs = tf.nn.softmax(scores)
  return modeling.dropout(tf.cast(probs, dtype), dropout_prob), handed_on


class _DenseLongLayout(object):
  """Long rows as dense [batch, heads, long, long + global] logits (official "full").

  The local window [batch, long, 2r + 1] is skewed onto [batch, long, long]: key j of query i
  is window index j - i + r; keys outside the window are masked (their relative id is 0).
  """

  def __init__(self, l2l_mask, l2l_ids, l2g_mask, l2g_ids, radius):
    batch_size, long_seq_len, _ = modeling.get_shape_list(l2l_mask, expected_rank=3)
    positions = tf.range(long_seq_len)
    window_index = positions[tf.newaxis, :] - positions[:, tf.newaxis] + radius
    in_window = tf.cast((window_index >= 0) & (window_index <= 2 * radius), tf.int32)
    # [batch, long, long] indices into the window axis.
    gather_index = tf.broadcast_to(tf.clip_by_value(window_index, 0, 2 * radius),
                                   [batch_size, long_seq_len, long_seq_len])

    def skew(local):
      return tf.gather(local, gather_index, batch_dims=2) * in_window

    self.mask = tf.concat([skew(tf.cast(l2l_mask, tf.int32)), tf.cast(l2g_mask, tf.int32)],
                          axis=-1)
    self.ids = (None if l2l_ids is None else
                tf.concat([skew(l2l_ids), l2g_ids], axis=-1))

  def attend(self, queries, keys, values, side_keys, side_values, tables, prev_scores,
             divisor, residual_attention, dropout_prob, use_one_hot_lookup):
    """Long-row attention context [batch, long, heads, size_per_head] and handed-on scores."""
    size_per_head = modeling.get_shape_list(queries)[-1]
    all_keys = tf.concat([keys, side_keys], axis=1)
    all_values = tf.concat([values, side_values], axis=1)
    scores = _content_and_relative_scores(
        tf.einsum("bqhd,bkhd->bhqk", queries, all_keys), queries, tables, self.ids,
        size_per_head, use_one_hot_lookup)
    probs, handed_on = attention_probs(scores, self.mask, prev_scores, divisor,
                                       residual_attention, dropout_prob, dtype=values.dtype)
    return tf.einsum("bhqk,bkhd->bqhd", probs, all_values), handed_on


class _BlockedLongLayout(object):
  """Long rows in blocks of r + 1 (official "sparse"): memory linear in the long length.

  Block n's queries attend to the keys of blocks n-1, n, n+1 (3 (r + 1) columns; column c of
  query row q is window index c - q - 1) and to all global keys:
  [batch, blocks, heads, r + 1, 3 (r + 1) + global] logits.
  """

  def __init__(self, l2l_mask, l2l_ids, l2g_mask, l2g_ids, radius):
    batch_size, long_seq_len, _ = modeling.get_shape_list(l2l_mask, expected_rank=3)
    block_len = radius + 1
    self.block_len = block_len
    self.long_seq_len = long_seq_len
    self.num_blocks = (long_seq_len + block_len - 1) // block_len
    num_blocks = self.num_blocks
    # Static [block_len, 3 * block_len]: window index of each (query row, key column).
    rows = np.arange(block_len)[:, np.newaxis]
    cols = np.arange(3 * block_len)[np.newaxis, :]
    window_index = cols - rows - 1
    in_window = (window_index >= 0) & (window_index <= 2 * radius)
    # [num_blocks, 3 * block_len]: the key position of each column lies inside the sequence.
    key_position = ((tf.range(num_blocks) - 1)[:, tf.newaxis] * block_len +
                    tf.range(3 * block_len)[tf.newaxis, :])
    key_inside = (key_position >= 0) & (key_position < long_seq_len)
    # [1, num_blocks, block_len, 3 * block_len]
    valid = tf.cast(tf.logical_and(tf.constant(in_window)[tf.newaxis, tf.newaxis],
                                   key_inside[tf.newaxis, :, tf.newaxis, :]), tf.int32)
    gather_index = tf.broadcast_to(
        tf.constant(np.clip(window_index, 0, 2 * radius).astype(np.int32)),
        [batch_size, num_blocks, block_len, 3 * block_len])

    def expand(local):
      blocked = self.split_into_blocks(tf.cast(local, tf.int32))
      return tf.gather(blocked, gather_index, batch_dims=3) * valid

    self.mask = tf.concat([expand(l2l_mask), self.split_into_blocks(tf.cast(l2g_mask,
                                                                            tf.int32))],
                          axis=-1)
    self.ids = (None if l2l_ids is None else
                tf.concat([expand(l2l_ids), self.split_into_blocks(l2g_ids)], axis=-1))

  def split_into_blocks(self, tensor):
    """[batch, long, ...] -> [batch, blocks, block_len, ...], zero-padded at the end."""
    shape = modeling.get_shape_list(tensor)
    padding = [[0, 0], [0, self.num_blocks * self.block_len - self.long_seq_len]]
    padding += [[0, 0]] * (len(shape) - 2)
    return tf.reshape(tf.pad(tensor, padding),
                      [shape[0], self.num_blocks, self.block_len] + shape[2:])

  def concat_3_blocks(self, blocked):
    """[batch, blocks, block_len, ...] -> [batch, blocks, 3 * block_len, ...] (n-1, n, n+1)."""
    rank = blocked.shape.rank
    padded = tf.pad(blocked, [[0, 0], [1, 1]] + [[0, 0]] * (rank - 2))
    return tf.concat([padded[:, :-2], padded[:, 1:-1], padded[:, 2:]], axis=2)

  def attend(self, queries, keys, values, side_keys, side_values, tables, prev_scores,
             divisor, residual_attention, dropout_prob, use_one_hot_lookup):
    """Long-row attention context [batch, long, heads, size_per_head] and handed-on scores."""
    batch_size, _, num_heads, size_per_head = modeling.get_shape_list(queries)
    blocked_queries = self.split_into_blocks(queries)
    blocked_keys = self.concat_3_blocks(self.split_into_blocks(keys))
    blocked_values = self.concat_3_blocks(self.split_into_blocks(values))
    content = tf.concat([tf.einsum("bnqhd,bnkhd->bnhqk", blocked_queries, blocked_keys),
                         tf.einsum("bnqhd,bkhd->bnhqk", blocked_queries, side_keys)], axis=-1)
    scores = _content_and_relative_scores(content, blocked_queries, tables, self.ids,
                                          size_per_head, use_one_hot_lookup)
    probs, handed_on = attention_probs(scores, self.mask, prev_scores, divisor,
                                       residual_attention, dropout_prob, dtype=values.dtype)
    local_columns = 3 * self.block_len
    context = (tf.einsum("bnhqk,bnkhd->bnqhd", probs[..., :local_columns], blocked_values) +
               tf.einsum("bnhqk,bkhd->bnqhd", probs[..., local_columns:], side_values))
    context = tf.reshape(context, [batch_size, self.num_blocks * self.block_len, num_heads,
                                   size_per_head])
    return context[:, :self.long_seq_len], handed_on
