# coding=utf-8
"""The BERT model with RealFormer residual attention and a choice of Post-LN or Pre-LN layers.

The public API, scope names and checkpoint variable names are those of the official BERT
`modeling.py`, so code and checkpoints written for it work unchanged. Two config keys are new:

  residual_attention: "none" (BERT), "sum" (RealFormer running sum) or "mean" (running mean).
    Layer n hands A_n = S_n + A_{n-1} (raw scaled scores, before the mask, before any division)
    to layer n+1; its own softmax input is A_n ("sum") or A_n / (n + 1) ("mean"). The technique
    adds no variables: BERT checkpoints load into a RealFormer and back.
  layer_norm_type: "post" (BERT: x = LN(x + f(x))) or "pre" (GPT-2: x = x + f(LN(x)), one final
    LN `bert/encoder/final_layer_norm`, residual-branch output projections initialised with
    stddev initializer_range / sqrt(2 * num_hidden_layers)).

Everything is written with tf.compat.v1 variables and ops (no tf.contrib, no Keras layers), so
it runs in graph mode under TPUEstimator, tf.distribute and plain Sessions.

Mixed precision (`BertModel(..., compute_dtype=tf.bfloat16 or tf.float16)`): the variables stay
float32 (same names, same checkpoints); the matmuls, the GELU and the dropout of the attention
and feed-forward blocks run in the compute dtype; the residual stream, LayerNorm statistics, the
attention softmax and the residual-attention running sum stay float32, and every tensor the
model hands out (sequence / pooled / layer outputs, scores, probabilities) is float32.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import contextlib
import copy
import itertools
import json
import math
import re
import zlib

import numpy as np
import six
import tensorflow as tf

tf1 = tf.compat.v1

RESIDUAL_ATTENTION_TYPES = ("none", "sum", "mean")


def residual_attention_divisor(residual_attention, layer_index):
  """The divisor of layer `layer_index`'s softmax input under `residual_attention`.

  The paper's running mean divides the running sum A_n = S_0 + ... + S_n by n + 1 before the
  softmax; the sum itself is what is handed on. The one rule for every model of this project
  (BERT, the encoder-decoder's three chains, ETC).

  Args:
    residual_attention: "none", "sum" or "mean".
    layer_index: 0-based index of the layer in its chain.

  Returns:
    layer_index + 1 for "mean", else None (no division).
  """
  return (layer_index + 1) if residual_attention == "mean" else None


def residual_attention_hand_on(residual_attention, scores):
  """What a layer hands to the next layer of its chain: its pre-mask running scores, or None.

  Args:
    residual_attention: "none", "sum" or "mean".
    scores: float32 [batch, heads, from_seq, to_seq], the layer's running scores (before the
      mask and the mean's division).

  Returns:
    `scores`, or None for "none" (plain attention: nothing is handed on).
  """
  return scores if residual_attention != "none" else None
LAYER_NORM_TYPES = ("post", "pre")
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")
# --precision names -> compute dtypes (variables are float32 in all of them).
PRECISIONS = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}

# Keys found in some official BERT configs (e.g. multilingual) that the model does not use.
_IGNORED_OFFICIAL_KEYS = frozenset([
    "directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
    "pooler_size_per_head", "pooler_type"])

def residual_attention_of_running_mean(use_running_mean, residual_attention, source):
  """The residual_attention that the official RealFormer code's `use_running_mean` means.

  The official code always uses residual attention: true is the running mean, false the running
  sum.

  Args:
    use_running_mean: the official switch (must be a bool).
    residual_attention: the residual_attention given beside it, or None when not given.
    source: where the values came from (a file name), for error messages.

  Returns:
    "mean" or "sum".

  Raises:
    ValueError: not a bool, or it contradicts an explicit "sum" / "mean".
  """
  if not isinstance(use_running_mean, bool):
    raise ValueError("%s: key 'use_running_mean' must be true or false, got %r" %
                     (source, use_running_mean))
  implied = "mean" if use_running_mean else "sum"
  if residual_attention not in (None, implied):
    raise ValueError("%s: key 'use_running_mean'=%s contradicts 'residual_attention'=%r" %
                     (source, str(use_running_mean).lower(), residual_attention))
  return implied


# Name of the extra LayerNorm on top of a Pre-LN encoder.
FINAL_LAYER_NORM_SCOPE = "final_layer_norm"


class BertConfig(object):
  """Configuration for `BertModel`."""

  def __init__(self,
               vocab_size,
               hidden_size=768,
               num_hidden_layers=12,
               num_attention_heads=12,
               intermediate_size=3072,
               hidden_act="gelu",
               hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1,
               max_position_embeddings=512,
               type_vocab_size=16,
               initializer_range=0.02,
               residual_attention="none",
               layer_norm_type="post",
               use_running_mean=None):
    """Constructs BertConfig.

    Args:
      vocab_size: Vocabulary size of `inputs_ids` in `BertModel`.
      hidden_size: Size of the encoder layers and the pooler layer.
      num_hidden_layers: Number of hidden layers in the Transformer encoder.
      num_attention_heads: Number of attention heads for each attention layer.
      intermediate_size: The size of the "intermediate" (i.e., feed-forward) layer.
      hidden_act: "gelu" (tanh approximation, as official BERT), "gelu_exact" (erf, as
        Hugging Face "gelu"), "relu", "tanh" or "linear".
      hidden_dropout_prob: Dropout probability for all fully connected layers in the
        embeddings, encoder, and pooler.
      attention_probs_dropout_prob: Dropout ratio for the attention probabilities.
      max_position_embeddings: The maximum sequence length that this model might ever be
        used with.
      type_vocab_size: The vocabulary size of the `token_type_ids` passed into `BertModel`.
      initializer_range: The stdev of the truncated_normal_initializer for initializing all
        weight matrices.
      residual_attention: "none", "sum" or "mean" (see module docstring).
      layer_norm_type: "post" or "pre" (see module docstring).
      use_running_mean: the official RealFormer code's switch, whose residual attention is
        always on: True means residual_attention "mean", False "sum"; None (default) leaves
        `residual_attention` as given. A value that contradicts an explicit non-default
        `residual_attention` is a ValueError.

    Raises:
      ValueError: `use_running_mean` contradicts `residual_attention`.
    """
    if use_running_mean is not None:
      # "none" is the default here, so it cannot tell a given "none" from no value.
      residual_attention = residual_attention_of_running_mean(
          use_running_mean, None if residual_attention == "none" else residual_attention,
          "BertConfig")
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.num_hidden_layers = num_hidden_layers
    self.num_attention_heads = num_attention_heads
    self.hidden_act = hidden_act
    self.intermediate_size = intermediate_size
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range
    self.residual_attention = residual_attention
    self.layer_norm_type = layer_norm_type

  @classmethod
  def from_dict(cls, json_object, source="config dict"):
    """Constructs a validated `BertConfig` from a Python dictionary of parameters.

    A config written for the official RealFormer code (key `use_running_mean`, residual
    attention always on) loads with the same meaning: "mean" if true, else "sum".

    Args:
      json_object: dict of config keys.
      source: where the dict came from (a file name), used in error messages.

    Returns:
      A BertConfig.

    Raises:
      ValueError: an unknown key, a wrong type or an impossible value; the message names the
        key and `source`.
    """
    if not isinstance(json_object, dict):
      raise ValueError("%s: a BERT config must be a JSON object, got %s" %
                       (source, type(json_object).__name__))
    values = dict(json_object)
    for key in _IGNORED_OFFICIAL_KEYS:
      values.pop(key, None)
    if "use_running_mean" in values:
      values["residual_attention"] = residual_attention_of_running_mean(
          values.pop("use_running_mean"), values.get("residual_attention"), source)
    return config_from_checked_dict(cls, values, source)

  @classmethod
  def from_json_file(cls, json_file):
    """Constructs a validated `BertConfig` from a json file of parameters."""
    return cls.from_dict(read_config_json(json_file), source=json_file)

  def validate(self, source="config"):
    """Checks types and values of every field.

    Args:
      source: where the config came from, used in error messages.

    Raises:
      ValueError: naming the key and `source`.
    """
    int_keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size")
    for key in int_keys:
      value = getattr(self, key)
      if isinstance(value, bool) or not isinstance(value, six.integer_types):
        raise ValueError("%s: key '%s' must be an integer, got %r" % (source, key, value))
      if value < 1:
        raise ValueError("%s: key '%s' must be >= 1, got %d" % (source, key, value))
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
    for key, allowed in (("hidden_act", ACTIVATIONS),
                         ("residual_attention", RESIDUAL_ATTENTION_TYPES),
                         ("layer_norm_type", LAYER_NORM_TYPES)):
      value = getattr(self, key)
      if value not in allowed:
        raise ValueError("%s: key '%s' must be one of %s, got %r" %
                         (source, key, ", ".join(allowed), value))
    if self.hidden_size % self.num_attention_heads != 0:
      raise ValueError(
          "%s: key 'hidden_size' (%d) is not a multiple of 'num_attention_heads' (%d)" %
          (source, self.hidden_size, self.num_attention_heads))

  @property
  def use_running_mean(self):
    """The official RealFormer code's switch: True for "mean", False for "sum", None for "none"
    (the official code has no switch for no residual attention)."""
    if self.residual_attention == "none":
      return None
    return self.residual_attention == "mean"

  def to_dict(self):
    """Serializes this instance to a Python dictionary.

    With residual attention on, the dict also holds the official RealFormer code's
    `use_running_mean`, so that code reads a saved "mean" config as mean, not as its default sum.
    """
    output = copy.deepcopy(self.__dict__)
    if self.use_running_mean is not None:
      output["use_running_mean"] = self.use_running_mean
    return output

  def to_json_string(self):
    """Serializes this instance to a JSON string."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"


def read_config_json(json_file):
  """The parsed JSON of a config file; a ValueError naming the file if missing or not JSON.

  Args:
    json_file: path of the file (any tf.io.gfile path).

  Returns:
    The decoded JSON value (a dict for a well-formed config).
  """
  if not tf.io.gfile.exists(json_file):
    raise ValueError("%s: config file does not exist" % json_file)
  with tf.io.gfile.GFile(json_file, "r") as reader:
    text = reader.read()
  try:
    return json.loads(text)
  except ValueError as e:
    raise ValueError("%s: not valid JSON (%s)" % (json_file, e))


def _constructor_defaults():
  """Returns the set of config keys BertConfig accepts."""
  return set(BertConfig(vocab_size=1).__dict__)


def config_from_checked_dict(config_class, values, source, kind="config"):
  """A validated config of `config_class` from a dict: the one reader of every config class.

  Used by BertConfig, the translation NmtConfig and the ETC EtcConfig: each accepts exactly the
  keys its constructor sets, needs `vocab_size`, and checks its values in `validate(source)`.

  Args:
    config_class: a class constructed as config_class(vocab_size=...) with a validate method.
    values: dict of config keys (already cleaned of any ignored or translated keys).
    source: where the dict came from (a file name), used in error messages.
    kind: the config's name in messages ("config", "NMT config", ...).

  Returns:
    The validated config.

  Raises:
    ValueError: an unknown key or no vocab_size (naming `source`), or what validate raises.
  """
  known = set(config_class(vocab_size=1).__dict__)
  for key in values:
    if key not in known:
      raise ValueError("%s: unknown %s key '%s' (known keys: %s)" %
                       (source, kind, key, ", ".join(sorted(known))))
  if "vocab_size" not in values:
    raise ValueError("%s: missing required %s key 'vocab_size'" % (source, kind))
  config = config_class(vocab_size=None)
  for key, value in six.iteritems(values):
    config.__dict__[key] = value
  config.validate(source)
  return config


def get_compute_dtype(value):
  """Resolves a compute dtype: None -> tf.float32; "fp32" / "bf16" / "fp16"; a float DType.

  Args:
    value: None, a --precision name, a dtype name ("bfloat16") or a tf.DType.

  Returns:
    tf.float32, tf.bfloat16 or tf.float16.

  Raises:
    ValueError: anything else.
  """
  if value is None:
    return tf.float32
  if isinstance(value, six.string_types) and value in PRECISIONS:
    return PRECISIONS[value]
  try:
    dtype = tf.as_dtype(value)
  except TypeError:
    dtype = None
  if dtype not in PRECISIONS.values():
    raise ValueError("compute_dtype must be one of %s (or float32, bfloat16, float16), got %r" %
                     (", ".join(PRECISIONS), value))
  return dtype


def _cast_to(tensor, dtype):
  """`tensor` in `dtype` (no op when it already is)."""
  if tensor.dtype.base_dtype == dtype:
    return tensor
  return tf.cast(tensor, dtype)


class BertModel(object):
  """BERT model ("Bidirectional Encoder Representations from Transformers"), with RealFormer.

  Example usage:

  ```python
  # Already been converted into WordPiece token ids
  input_ids = tf.constant([[31, 51, 99], [15, 5, 0]])
  input_mask = tf.constant([[1, 1, 1], [1, 1, 0]])
  token_type_ids = tf.constant([[0, 0, 1], [0, 2, 0]])

  config = modeling.BertConfig(vocab_size=32000, hidden_size=512,
    num_hidden_layers=8, num_attention_heads=6, intermediate_size=1024,
    residual_attention="sum")

  model = modeling.BertModel(config=config, is_training=True,
    input_ids=input_ids, input_mask=input_mask, token_type_ids=token_type_ids)

  label_embeddings = tf.get_variable(...)
  pooled_output = model.get_pooled_output()
  logits = tf.matmul(pooled_output, label_embeddings)
  ...
  ```
  """

  def __init__(self,
               config,
               is_training,
               input_ids,
               input_mask=None,
               token_type_ids=None,
               use_one_hot_embeddings=False,
               scope=None,
               compute_dtype=None,
               skip_padding=False,
               input_embedding_adder=None):
    """Constructor for BertModel.

    Args:
      config: `BertConfig` instance.
      is_training: bool. true for training model, false for eval model. Controls
        whether dropout will be applied.
      input_ids: int32 Tensor of shape [batch_size, seq_length].
      input_mask: (optional) int32 Tensor of shape [batch_size, seq_length].
      token_type_ids: (optional) int32 Tensor of shape [batch_size, seq_length].
      use_one_hot_embeddings: (optional) bool. Whether to use one-hot word
        embeddings or tf.embedding_lookup() for the word embeddings.
      scope: (optional) variable scope. Defaults to "bert".
      compute_dtype: (optional) tf.float32 (default), tf.bfloat16 or tf.float16, or a
        --precision name ("fp32", "bf16", "fp16"): the dtype of the encoder's matmuls (see the
        module docstring). Variables and outputs are float32 in every case.
      skip_padding: (ours) the encoder computes only the real tokens (input_mask's 1s, and
        position 0) instead of the whole padded [batch_size, seq_length]: attention alone runs
        in the padded layout (transformer_model's token_mask). The real positions' outputs
        (pooled output included, except an all-padding example's) equal the padded model's to
        float rounding; the sequence and layer outputs are 0 at padding positions. Dynamic
        shapes: not for TPU or XLA.
      input_embedding_adder: (ours, optional) float32 Tensor [batch_size, seq_length,
        hidden_size] added to the word embeddings, so to the embedding sum before its layer
        norm (as EtcModel's long_embedding_adder: a task's extra input features, e.g. OpenKP's
        visual features). None adds nothing.

    Raises:
      ValueError: The config is invalid or one of the input tensor shapes
        is invalid.
    """
    config = copy.deepcopy(config)
    config.validate("BertConfig")
    compute_dtype = get_compute_dtype(compute_dtype)
    if not is_training:
      config.hidden_dropout_prob = 0.0
      config.attention_probs_dropout_prob = 0.0

    input_shape = get_shape_list(input_ids, expected_rank=2)
    batch_size = input_shape[0]
    seq_length = input_shape[1]

    if input_mask is None:
      input_mask = tf.ones(shape=[batch_size, seq_length], dtype=tf.int32)

    if token_type_ids is None:
      token_type_ids = tf.zeros(shape=[batch_size, seq_length], dtype=tf.int32)

    with tf1.variable_scope(scope, default_name="bert"):
      with tf1.variable_scope("embeddings"):
        # Perform embedding lookup on the word ids.
        (self.embedding_output, self.embedding_table) = embedding_lookup(
            input_ids=input_ids,
            vocab_size=config.vocab_size,
            embedding_size=config.hidden_size,
            initializer_range=config.initializer_range,
            word_embedding_name="word_embeddings",
            use_one_hot_embeddings=use_one_hot_embeddings)
        if input_embedding_adder is not None:
          self.embedding_output += input_embedding_adder

        # Add positional embeddings and token type embeddings, then layer
        # normalize and perform dropout.
        self.embedding_output = embedding_postprocessor(
            input_tensor=self.embedding_output,
            use_token_type=True,
            token_type_ids=token_type_ids,
            token_type_vocab_size=config.type_vocab_size,
            token_type_embedding_name="token_type_embeddings",
            use_position_embeddings=True,
            position_embedding_name="position_embeddings",
            initializer_range=config.initializer_range,
            max_position_embeddings=config.max_position_embeddings,
            dropout_prob=config.hidden_dropout_prob)

      with tf1.variable_scope("encoder"):
        # This converts a 2D mask of shape [batch_size, seq_length] to a 3D
        # mask of shape [batch_size, seq_length, seq_length] which is used
        # for the attention scores.
        attention_mask = create_attention_mask_from_input_mask(input_ids, input_mask)

        (self.all_encoder_layers, self.attention_scores, self.attention_probs) = (
            transformer_model(
                input_tensor=self.embedding_output,
                attention_mask=attention_mask,
                hidden_size=config.hidden_size,
                num_hidden_layers=config.num_hidden_layers,
                num_attention_heads=config.num_attention_heads,
                intermediate_size=config.intermediate_size,
                intermediate_act_fn=get_activation(config.hidden_act),
                hidden_dropout_prob=config.hidden_dropout_prob,
                attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                initializer_range=config.initializer_range,
                do_return_all_layers=True,
                residual_attention=config.residual_attention,
                layer_norm_type=config.layer_norm_type,
                return_attention=True,
                compute_dtype=compute_dtype,
                token_mask=input_mask if skip_padding else None))

      self.sequence_output = self.all_encoder_layers[-1]
      # The "pooler" converts the encoded sequence tensor of shape
      # [batch_size, seq_length, hidden_size] to a tensor of shape
      # [batch_size, hidden_size]. This is necessary for segment-level
      # (or segment-pair-level) classification tasks where we need a fixed
      # dimensional representation of the segment.
      with tf1.variable_scope("pooler"):
        # We "pool" the model by simply taking the hidden state corresponding
        # to the first token. We assume that this has been pre-trained
        first_token_tensor = tf.squeeze(self.sequence_output[:, 0:1, :], axis=1)
        self.pooled_output = dense_layer(
            first_token_tensor,
            config.hidden_size,
            activation=tf.tanh,
            kernel_initializer=create_initializer(config.initializer_range),
            name="dense")

  def get_pooled_output(self):
    """Returns the pooled [CLS] representation, float Tensor [batch_size, hidden_size]."""
    return self.pooled_output

  def get_sequence_output(self):
    """Gets final hidden layer of encoder.

    Returns:
      float Tensor of shape [batch_size, seq_length, hidden_size] corresponding
      to the final hidden of the transformer encoder (after the final LayerNorm for Pre-LN).
    """
    return self.sequence_output

  def get_all_encoder_layers(self):
    """Returns the output of every layer, a list of [batch_size, seq_length, hidden_size].

    For Pre-LN, entry i < L-1 is the residual stream after layer i and the last entry is the
    final LayerNorm's output (equal to the sequence output).
    """
    return self.all_encoder_layers

  def get_embedding_output(self):
    """Gets output of the embedding lookup (i.e., input to the transformer).

    Returns:
      float Tensor of shape [batch_size, seq_length, hidden_size] corresponding
      to the output of the embedding layer, after summing the word
      embeddings with the positional embeddings and the token type embeddings,
      then performing layer normalization. This is the input to the transformer.
    """
    return self.embedding_output

  def get_embedding_table(self):
    """Returns the word embedding table, float Tensor [vocab_size, hidden_size]."""
    return self.embedding_table

  def get_attention_scores(self):
    """Returns, per layer, the attention scores that layer hands to the next one.

    Returns:
      A list (one per layer) of float Tensors [batch, heads, from_seq, to_seq]: the scaled
      dot-product scores S_n for "none", the running sum A_n = S_n + A_{n-1} for "sum" and
      "mean" (before the attention mask and before the mean's division).
    """
    return self.attention_scores

  def get_attention_probs(self):
    """Returns, per layer, the attention probabilities (softmax output before dropout).

    Returns:
      A list (one per layer) of float Tensors [batch, heads, from_seq, to_seq].
    """
    return self.attention_probs


def gelu(x):
  """Gaussian Error Linear Unit, tanh approximation (the official BERT "gelu").

  Original paper: https://arxiv.org/abs/1606.08415

  Args:
    x: float Tensor to perform activation.

  Returns:
    `x` with the GELU activation applied.
  """
  cdf = 0.5 * (1.0 + tf.tanh(
      (np.sqrt(2 / np.pi) * (x + 0.044715 * tf.pow(x, 3)))))
  return x * cdf


def gelu_exact(x):
  """Gaussian Error Linear Unit with the exact erf (Hugging Face's "gelu").

  Args:
    x: float Tensor to perform activation.

  Returns:
    `x` with x * Phi(x) applied.
  """
  return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


def get_activation(activation_string):
  """Maps a string to a Python function, e.g., "relu" => `tf.nn.relu`.

  Args:
    activation_string: String name of the activation function.

  Returns:
    A Python function corresponding to the activation function. If
    `activation_string` is None, empty, or "linear", this will return None.
    If `activation_string` is not a string, it will return `activation_string`.

  Raises:
    ValueError: The `activation_string` does not correspond to a known
      activation.
  """
  # We assume that anything that"s not a string is already an activation
  # function, so we just return it.
  if not isinstance(activation_string, six.string_types):
    return activation_string

  if not activation_string:
    return None

  act = activation_string.lower()
  if act == "linear":
    return None
  elif act == "relu":
    return tf.nn.relu
  elif act == "gelu":
    return gelu
  elif act == "gelu_exact":
    return gelu_exact
  elif act == "tanh":
    return tf.tanh
  else:
    raise ValueError("Unsupported activation: %s (known: %s)" % (act, ", ".join(ACTIVATIONS)))


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
  """Compute the union of the current variables and checkpoint variables.

  Args:
    tvars: list of variables of the current graph.
    init_checkpoint: checkpoint path (prefix) or directory.

  Returns:
    (assignment_map, initialized_variable_names): an OrderedDict checkpoint name -> graph
    name for every variable present in both, and a dict of the graph names that get loaded
    (each name and name + ":0" map to 1, as in the official code).

  Raises:
    ValueError: a variable exists in both with different shapes or dtypes; the message
      names the variable, both shapes (dtypes) and the checkpoint.
  """
  initialized_variable_names = {}

  name_to_variable = collections.OrderedDict()
  for var in tvars:
    name = var.name
    m = re.match("^(.*):\\d+$", name)
    if m is not None:
      name = m.group(1)
    name_to_variable[name] = var

  init_vars = tf.train.list_variables(init_checkpoint)
  ckpt_dtypes = tf.train.load_checkpoint(init_checkpoint).get_variable_to_dtype_map()

  assignment_map = collections.OrderedDict()
  for x in init_vars:
    (name, ckpt_shape) = (x[0], x[1])
    if name not in name_to_variable:
      continue
    graph_shape = name_to_variable[name].shape.as_list()
    if list(ckpt_shape) != graph_shape:
      raise ValueError(
          "checkpoint %s: variable %s has shape %s in the checkpoint but %s in the model" %
          (init_checkpoint, name, list(ckpt_shape), graph_shape))
    graph_dtype = name_to_variable[name].dtype.base_dtype
    if name in ckpt_dtypes and ckpt_dtypes[name] != graph_dtype:
      # A Saver cannot cast on restore (e.g. a `slim_checkpoint.py --fp16` checkpoint).
      raise ValueError(
          "checkpoint %s: variable %s is %s there but %s in the model; convert it first with "
          "`python slim_checkpoint.py --input_checkpoint=%s --output_dir=NEW_DIR --to_fp32`" %
          (init_checkpoint, name, ckpt_dtypes[name].name, graph_dtype.name, init_checkpoint))
    assignment_map[name] = name
    initialized_variable_names[name] = 1
    initialized_variable_names[name + ":0"] = 1

  return (assignment_map, initialized_variable_names)


def init_from_checkpoint(init_checkpoint, tvars=None, log_fn=None):
  """Initializes the graph's variables that exist in `init_checkpoint` from it.

  Variables missing from the checkpoint (e.g. a new classifier head, or the final LayerNorm of
  a Pre-LN model loaded from a Post-LN checkpoint) keep their initializers and are logged.

  Args:
    init_checkpoint: checkpoint path (prefix) or directory.
    tvars: variables to consider; defaults to all trainable variables.
    log_fn: function taking a string, defaults to tf logging.

  Returns:
    The dict of initialized variable names, as get_assignment_map_from_checkpoint.
  """
  log_fn = log_fn or tf1.logging.info
  tvars = tvars if tvars is not None else tf1.trainable_variables()
  assignment_map, initialized = get_assignment_map_from_checkpoint(tvars, init_checkpoint)
  tf1.train.init_from_checkpoint(init_checkpoint, assignment_map)
  missing = [v.name for v in tvars if v.name not in initialized]
  log_fn("init_checkpoint %s: %d variables loaded, %d not in checkpoint%s" %
         (init_checkpoint, len(assignment_map), len(missing),
          (": " + ", ".join(missing)) if missing else ""))
  return initialized


def dropout(input_tensor, dropout_prob, seq_axes=None, seq_length=None, token_rows=None):
  """Perform dropout.

  In a graph with a global step (every Estimator training graph) the mask is a stateless
  function of (graph seed, this op's name, global step): a job resumed from a checkpoint at
  step k draws exactly the masks the uninterrupted job drew from step k on, so a resumed run
  ends with the same weights. Elsewhere (eager code, graphs without a global step) it is
  tf.nn.dropout. A bfloat16 / float16 tensor gets the mask a float32 one would.

  Inside a full_length_dropout(max_seq_length) block, a tensor whose sequence axes are named
  (seq_axes or seq_length) gets the mask of the same tensor padded to max_seq_length on those
  axes, sliced to its own length: a real position's mask does not depend on how far its batch
  is padded (--padding=longest draws a max_length run's masks). Outside such a block, or
  without seq_axes / seq_length, the arguments change nothing.

  Args:
    input_tensor: float Tensor.
    dropout_prob: Python float. The probability of dropping out a value (NOT of
      *keeping* a dimension as in `tf.nn.dropout`).
    seq_axes: (optional) the axes of input_tensor that run over the padded sequence, e.g.
      (1,) for [batch, seq, hidden], (2, 3) for [batch, heads, from_seq, to_seq].
    seq_length: (optional) int or int32 scalar Tensor: input_tensor is [batch * seq, ...]
      with seq == seq_length (transformer_model's 2-D hidden states), seen as [batch, seq, ...].
    token_rows: (optional) TokenRows (with seq_length): input_tensor [num_real, ...] holds only
      these rows of the [batch * seq_length, ...] matrix (skip_padding): it gets the rows of
      that whole matrix's mask, the values the padded computation drops.

  Returns:
    A version of `input_tensor` with dropout applied.
  """
  if dropout_prob is None or dropout_prob == 0.0:
    return input_tensor

  seed_fn = _DROPOUT_SEED_OVERRIDES[-1] if _DROPOUT_SEED_OVERRIDES else step_dropout_seed
  seed = seed_fn(input_tensor)
  if seed is None:
    return tf.nn.dropout(input_tensor, rate=dropout_prob)
  if token_rows is not None:
    if seq_length is None:
      raise ValueError("dropout: token_rows needs seq_length")
    # The padded matrix's mask, at the real rows.
    full_shape = tf.concat([[token_rows.total], tf.shape(input_tensor)[1:]], axis=0)
    with tf.name_scope("stateless_dropout"):
      if _DROPOUT_FULL_LENGTHS:
        keep = _full_length_keep_mask(input_tensor, dropout_prob, seed,
                                      _DROPOUT_FULL_LENGTHS[-1], seq_length=seq_length,
                                      shape=full_shape)
      else:
        keep = _stateless_keep_mask(full_shape, seed, dropout_prob)
      return _apply_keep_mask(input_tensor, tf.gather(keep, token_rows.indices), dropout_prob)
  if _DROPOUT_FULL_LENGTHS and (seq_axes or seq_length is not None):
    # Named scope as stateless_dropout's: the ops after it keep their names (and so the
    # step seeds of later dropouts).
    with tf.name_scope("stateless_dropout"):
      keep = _full_length_keep_mask(input_tensor, dropout_prob, seed, _DROPOUT_FULL_LENGTHS[-1],
                                    seq_axes, seq_length)
      return _apply_keep_mask(input_tensor, keep, dropout_prob)
  if input_tensor.dtype.base_dtype == tf.float32:
    return tf.nn.experimental.stateless_dropout(input_tensor, rate=dropout_prob, seed=seed)
  # bfloat16 / float16: the float32 job's mask (stateless_dropout's own test on a float32
  # uniform draw), so the masks of a job do not depend on its --precision.
  keep = _stateless_keep_mask(tf.shape(input_tensor), seed, dropout_prob)
  return _apply_keep_mask(input_tensor, keep, dropout_prob)


def _stateless_keep_mask(shape, seed, dropout_prob):
  """stateless_dropout's keep mask: bool [shape], its float32 uniform draw >= dropout_prob."""
  return tf.random.stateless_uniform(shape, seed=seed, dtype=tf.float32) >= dropout_prob


def _apply_keep_mask(input_tensor, keep, dropout_prob):
  """stateless_dropout's arithmetic: x * float(1 / (1 - rate)), then 0 where keep is False."""
  scaled = input_tensor * tf.cast(1.0 / (1.0 - dropout_prob), input_tensor.dtype.base_dtype)
  return tf.where(keep, scaled, tf.zeros_like(scaled))


# The seed functions installed by dropout_seed_override, innermost last.
_DROPOUT_SEED_OVERRIDES = []
# The full lengths installed by full_length_dropout, innermost last.
_DROPOUT_FULL_LENGTHS = []


@contextlib.contextmanager
def full_length_dropout(max_seq_length):
  """Within the block, sequence tensors' dropout masks do not depend on the padded length.

  `dropout` of a tensor with named sequence axes (seq_axes / seq_length: BertModel's
  embeddings, hidden states and attention probabilities) draws its stateless uniform at
  max_seq_length on those axes and slices it to the tensor's length S <= max_seq_length.
  Stateless Philox draws fill the flat row-major order, so the mask of a real position is a
  function of (seed, its position) only: a batch padded to its longest example
  (--padding=longest) drops the values a --max_seq_length batch drops, and a training run
  reproduces a max_length run to float rounding. At S == max_seq_length the masks are
  tf.nn.experimental.stateless_dropout's, bit for bit. The draw costs max_seq_length-sized
  random numbers ([batch, heads, max, max] for attention probabilities).

  Args:
    max_seq_length: int, the length the inputs are padded to at most (--max_seq_length).

  Yields:
    Nothing; the previous setting is back on exit.
  """
  if not isinstance(max_seq_length, int) or max_seq_length < 1:
    raise ValueError("max_seq_length=%r: not a positive int" % (max_seq_length,))
  _DROPOUT_FULL_LENGTHS.append(max_seq_length)
  try:
    yield
  finally:
    _DROPOUT_FULL_LENGTHS.pop()


def _full_length_keep_mask(input_tensor, dropout_prob, seed, full_length, seq_axes=None,
                           seq_length=None, shape=None):
  """The keep mask (bool, shape of input_tensor) of full_length_dropout.

  Args:
    input_tensor: float Tensor.
    dropout_prob: Python float.
    seed: int64 Tensor [2], the stateless seed.
    full_length: int, the sequence axes' length of the draw.
    seq_axes: the sequence axes of input_tensor (when seq_length is None).
    seq_length: int or scalar Tensor: input_tensor is [batch * seq_length, ...].
    shape: (optional) int32 Tensor, the shape to draw for instead of input_tensor's (same rank).

  Returns:
    bool Tensor, the shape of input_tensor (or `shape`): the float32 uniform drawn at
    full_length on the sequence axes, sliced to input_tensor's lengths, >= dropout_prob.
  """
  if shape is None:
    shape = tf.shape(input_tensor)
  if seq_length is not None:
    static = [tf.get_static_value(seq_length)]
    seq_length = tf.cast(seq_length, tf.int32)
    view = tf.concat([[shape[0] // seq_length, seq_length], shape[1:]], axis=0)
    seq_axes = (1,)
    rank = input_tensor.shape.rank + 1
  else:
    view = shape
    rank = input_tensor.shape.rank
    seq_axes = sorted(set(a % rank for a in seq_axes))
    static = [input_tensor.shape[a] for a in seq_axes]
  if any(s is not None and s > full_length for s in static):
    raise ValueError("dropout: sequence length %s is longer than full_length_dropout's %d" %
                     (static, full_length))
  full = tf.stack([tf.constant(full_length, tf.int32) if a in seq_axes else view[a]
                   for a in range(rank)])
  checks = [tf.debugging.assert_less_equal(
      view[a], full_length, message="dropout: sequence longer than full_length_dropout's")
            for a, s in zip(seq_axes, static) if s is None]
  with tf.control_dependencies(checks):
    uniform = tf.random.stateless_uniform(full, seed=seed, dtype=tf.float32)
  uniform = tf.slice(uniform, tf.zeros([rank], tf.int32), view)
  return tf.reshape(uniform >= dropout_prob, shape)


@contextlib.contextmanager
def dropout_seed_override(seed_fn):
  """Within the block, `dropout` takes its seed from `seed_fn` instead of step_dropout_seed.

  For code that must draw given masks again: etc_model's gradient checkpointing records the
  seeds of a block's forward pass and replays them when the block is recomputed (the
  recomputed ops have other names, so step_dropout_seed would key other masks).

  Args:
    seed_fn: function(input_tensor) -> int64 Tensor [2] (a stateless seed), or None for
      tf.nn.dropout's stateful draw.

  Yields:
    Nothing; the previous seed function is back on exit.
  """
  _DROPOUT_SEED_OVERRIDES.append(seed_fn)
  try:
    yield
  finally:
    _DROPOUT_SEED_OVERRIDES.pop()


def step_dropout_seed(input_tensor):
  """A [2] int64 stateless seed (global step, hash of graph seed and op name), or None.

  `dropout`'s seed unless a dropout_seed_override is active.

  Args:
    input_tensor: the Tensor about to be dropped out.

  Returns:
    int64 Tensor [2], or None in eager mode or when the graph has no global step.
  """
  if tf.executing_eagerly() or not hasattr(input_tensor, "graph"):
    return None
  graph = input_tensor.graph
  step = tf1.train.get_global_step(graph)
  if step is None:
    return None
  # Op names are unique in a graph and the same in every build of it (each replica of a
  # tf.distribute strategy has its own prefix, so replicas draw different masks).
  # A cast in front (a bfloat16 / float16 model) is looked through: same key in every precision.
  op = input_tensor.op
  while op.type == "Cast" and op.inputs:
    op = op.inputs[0].op
  key = zlib.crc32(("%s:%s:%s" % (graph.seed, graph.get_name_scope(),
                                  op.name)).encode("utf-8"))
  return tf.stack([tf.cast(step.read_value() if hasattr(step, "read_value") else step,
                           tf.int64), tf.constant(key, tf.int64)])


def layer_norm(input_tensor, name=None):
  """Run layer normalization on the last dimension of the tensor.

  Creates `<name>/beta` and `<name>/gamma` (name defaults to "LayerNorm"), epsilon 1e-12, as
  the official BERT code (which used tf.contrib.layers.layer_norm). The statistics are computed
  in float32 for a bfloat16 / float16 input.

  Args:
    input_tensor: float Tensor [..., hidden].
    name: variable scope name.

  Returns:
    Tensor of the same shape and dtype.
  """
  with tf1.variable_scope(name or "LayerNorm"):
    params_shape = [get_shape_list(input_tensor)[-1]]
    beta = tf1.get_variable("beta", params_shape, initializer=tf1.zeros_initializer())
    gamma = tf1.get_variable("gamma", params_shape, initializer=tf1.ones_initializer())
    # Statistics in float32 whatever the compute dtype (a bfloat16 mean of 512 values is off in
    # its third digit; a float16 variance overflows above 256).
    output = _layer_norm_float32(_cast_to(input_tensor, tf.float32),
                                 tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta))
    return _cast_to(output, input_tensor.dtype.base_dtype)


LAYER_NORM_EPSILON = 1e-12


# Numbers the gradients _layer_norm_float32 registers (one per call, as tf.custom_gradient does).
_LAYER_NORM_GRADIENT_IDS = itertools.count()


def register_gradient(grad_fn):
  """Registers grad_fn(op, *output_grads) under a new name (for gradient_override_map).

  Used by layer_norm and by etc_model's recompute_in_backward.

  Args:
    grad_fn: function(op, *output_grads) -> list of input gradients.

  Returns:
    The registered name.
  """
  while True:
    name = "RealFormerLayerNormGrad_%d" % next(_LAYER_NORM_GRADIENT_IDS)
    try:
      tf.RegisterGradient(name)(grad_fn)
      return name
    except KeyError:
      pass  # taken by another copy of modeling.py loaded in this process: the next number


def _layer_norm_float32(x, gamma, beta):
  """LayerNorm over the last axis with its closed-form gradient.

  The math of tf.nn.moments + tf.nn.batch_normalization (what tf.contrib's layer_norm ran):
  (x - mean) / sqrt(variance + 1e-12) * gamma + beta. The hand-written gradient takes two row
  reductions and ~6 element-wise ops where autodiff through moments / batch_normalization takes
  ~15, 1.5x faster forward + backward (bench/bench_training_step.py, docs/benchmarks.md); it is as exact
  (tests/test_modeling.py compares with a float64 NumPy LayerNorm and its gradient).

  The gradient is attached as tf.custom_gradient does it in a graph (an IdentityN over the
  output and the inputs, its gradient overridden by a function registered for this call, which
  a SavedModel also saves), without the unconsumed Identity op tf.custom_gradient leaves behind:
  the official modeling_test.py asserts that every op is reachable from the outputs. Eagerly the
  override does not apply and autodiff through the forward ops gives the same gradient.

  Args:
    x: float32 Tensor [..., hidden].
    gamma: float32 [hidden].
    beta: float32 [hidden].

  Returns:
    float32 Tensor [..., hidden].
  """
  mean = tf.reduce_mean(x, axis=-1, keepdims=True)
  centered = x - mean
  variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
  inv_std = tf.math.rsqrt(variance + LAYER_NORM_EPSILON)
  normalized = centered * inv_std

  def grad(unused_op, dy, *unused_grads):
    """d(loss)/d(output, x, gamma, beta) from d(loss)/d(output) (the IdentityN's inputs).

    None for the output itself, so that autodiff does not also go through the forward ops.
    """
    param_axes = list(range(x.shape.ndims - 1))
    dnormalized = dy * gamma
    mean_dnormalized = tf.reduce_mean(dnormalized, axis=-1, keepdims=True)
    mean_projection = tf.reduce_mean(dnormalized * normalized, axis=-1, keepdims=True)
    dx = inv_std * (dnormalized - mean_dnormalized - normalized * mean_projection)
    return (None, dx, tf.reduce_sum(dy * normalized, axis=param_axes),
            tf.reduce_sum(dy, axis=param_axes))

  output = normalized * gamma + beta
  with tf1.get_default_graph().gradient_override_map({"IdentityN": register_gradient(grad)}):
    return tf.identity_n([output, x, gamma, beta])[0]


def layer_norm_and_dropout(input_tensor, dropout_prob, name=None, seq_axes=None):
  """Runs layer normalization followed by dropout (seq_axes: see `dropout`)."""
  output_tensor = layer_norm(input_tensor, name)
  output_tensor = dropout(output_tensor, dropout_prob, seq_axes=seq_axes)
  return output_tensor


def create_initializer(initializer_range=0.02):
  """Creates a `truncated_normal_initializer` with the given range."""
  return tf1.truncated_normal_initializer(stddev=initializer_range)


def dense_layer(input_tensor, units, activation=None, kernel_initializer=None, name=None):
  """A fully connected layer with the variables `<name>/kernel` and `<name>/bias`.

  Replaces tf.layers.dense with the same variable names and math. The variables are float32;
  for a bfloat16 / float16 input they are cast to it and the layer computes in that dtype.

  Args:
    input_tensor: float Tensor [..., in_dim].
    units: output dimension.
    activation: function or None.
    kernel_initializer: initializer for the [in_dim, units] kernel.
    name: variable scope name.

  Returns:
    float Tensor [..., units].
  """
  with tf1.variable_scope(name, default_name="dense"):
    input_shape = get_shape_list(input_tensor)
    kernel = tf1.get_variable("kernel", [input_shape[-1], units],
                              initializer=kernel_initializer)
    bias = tf1.get_variable("bias", [units], initializer=tf1.zeros_initializer())
    kernel = _cast_to(kernel, input_tensor.dtype.base_dtype)
    bias = _cast_to(bias, input_tensor.dtype.base_dtype)
    if len(input_shape) == 2:
      output = tf.matmul(input_tensor, kernel)
    else:
      output = tf.tensordot(input_tensor, kernel, [[len(input_shape) - 1], [0]])
    output = tf.nn.bias_add(output, bias)
    if activation is not None:
      output = activation(output)
    return output


def embedding_lookup(input_ids,
                     vocab_size,
                     embedding_size=128,
                     initializer_range=0.02,
                     word_embedding_name="word_embeddings",
                     use_one_hot_embeddings=False):
  """Looks up words embeddings for id tensor.

  Args:
    input_ids: int32 Tensor of shape [batch_size, seq_length] containing word
      ids.
    vocab_size: int. Size of the embedding vocabulary.
    embedding_size: int. Width of the word embeddings.
    initializer_range: float. Embedding initialization range.
    word_embedding_name: string. Name of the embedding table.
    use_one_hot_embeddings: bool. If True, use one-hot method for word
      embeddings (faster on TPUs). If False, use `tf.gather()`.

  Returns:
    float Tensor of shape [batch_size, seq_length, embedding_size], and the embedding table
    [vocab_size, embedding_size].
  """
  # This function assumes that the input is of shape [batch_size, seq_length,
  # num_inputs].
  #
  # If the input is a 2D tensor of shape [batch_size, seq_length], we
  # reshape to [batch_size, seq_length, 1].
  if input_ids.shape.ndims == 2:
    input_ids = tf.expand_dims(input_ids, axis=[-1])

  embedding_table = tf1.get_variable(
      name=word_embedding_name,
      shape=[vocab_size, embedding_size],
      initializer=create_initializer(initializer_range))

  flat_input_ids = tf.reshape(input_ids, [-1])
  if use_one_hot_embeddings:
    one_hot_input_ids = tf.one_hot(flat_input_ids, depth=vocab_size)
    output = tf.matmul(one_hot_input_ids, embedding_table)
  else:
    # Gather rows of one read of the table, not of the variable: a gather on the resource
    # variable itself (ResourceGather) switches it to copy-on-read, after which every other
    # read (the tied MLM output weights, the optimizer's) copies the whole table, 3 copies of
    # [vocab, hidden] per training step. Same values and gradient (IndexedSlices).
    output = tf.gather(tf.convert_to_tensor(embedding_table), flat_input_ids)

  input_shape = get_shape_list(input_ids)

  output = tf.reshape(output, input_shape[0:-1] + [input_shape[-1] * embedding_size])
  return (output, embedding_table)


def embedding_postprocessor(input_tensor,
                            use_token_type=False,
                            token_type_ids=None,
                            token_type_vocab_size=16,
                            token_type_embedding_name="token_type_embeddings",
                            use_position_embeddings=True,
                            position_embedding_name="position_embeddings",
                            initializer_range=0.02,
                            max_position_embeddings=512,
                            dropout_prob=0.1):
  """Performs various post-processing on a word embedding tensor.

  Args:
    input_tensor: float Tensor of shape [batch_size, seq_length,
      embedding_size].
    use_token_type: bool. Whether to add embeddings for `token_type_ids`.
    token_type_ids: (optional) int32 Tensor of shape [batch_size, seq_length].
      Must be specified if `use_token_type` is True.
    token_type_vocab_size: int. The vocabulary size of `token_type_ids`.
    token_type_embedding_name: string. The name of the embedding table variable
      for token type ids.
    use_position_embeddings: bool. Whether to add position embeddings for the
      position of each token in the sequence.
    position_embedding_name: string. The name of the embedding table variable
      for positional embeddings.
    initializer_range: float. Range of the weight initialization.
    max_position_embeddings: int. Maximum sequence length that might ever be
      used with this model. This can be longer than the sequence length of
      input_tensor, but cannot be shorter.
    dropout_prob: float. Dropout probability applied to the final output tensor.

  Returns:
    float tensor with same shape as `input_tensor`.

  Raises:
    ValueError: One of the tensor shapes or input values is invalid.
  """
  input_shape = get_shape_list(input_tensor, expected_rank=3)
  batch_size = input_shape[0]
  seq_length = input_shape[1]
  width = input_shape[2]

  output = input_tensor

  if use_token_type:
    if token_type_ids is None:
      raise ValueError("`token_type_ids` must be specified if"
                       "`use_token_type` is True.")
    token_type_table = tf1.get_variable(
        name=token_type_embedding_name,
        shape=[token_type_vocab_size, width],
        initializer=create_initializer(initializer_range))
    # This vocab will be small so we always do one-hot here, since it is always
    # faster for a small vocabulary.
    flat_token_type_ids = tf.reshape(token_type_ids, [-1])
    one_hot_ids = tf.one_hot(flat_token_type_ids, depth=token_type_vocab_size)
    token_type_embeddings = tf.matmul(one_hot_ids, token_type_table)
    token_type_embeddings = tf.reshape(token_type_embeddings,
                                       [batch_size, seq_length, width])
    output += token_type_embeddings

  if use_position_embeddings:
    if isinstance(seq_length, int) and seq_length > max_position_embeddings:
      raise ValueError("sequence length %d is longer than max_position_embeddings %d" %
                       (seq_length, max_position_embeddings))
    full_position_embeddings = tf1.get_variable(
        name=position_embedding_name,
        shape=[max_position_embeddings, width],
        initializer=create_initializer(initializer_range))
    # The position embeddings are learned for all max_position_embeddings
    # positions; this sequence uses the first seq_length of them.
    position_embeddings = tf.slice(full_position_embeddings, [0, 0], [seq_length, -1])
    # Broadcast over the batch: [1, seq_length, width].
    output += tf.expand_dims(position_embeddings, 0)

  # seq_axes: the mask of a position does not depend on the padded length under
  # full_length_dropout (nothing changes outside it).
  output = layer_norm_and_dropout(output, dropout_prob, seq_axes=(1,))
  return output


def create_attention_mask_from_input_mask(from_tensor, to_mask):
  """Create 3D attention mask from a 2D tensor mask.

  Args:
    from_tensor: 2D or 3D Tensor of shape [batch_size, from_seq_length, ...].
    to_mask: int32 Tensor of shape [batch_size, to_seq_length].

  Returns:
    float Tensor of shape [batch_size, from_seq_length, to_seq_length].
  """
  from_shape = get_shape_list(from_tensor, expected_rank=[2, 3])
  batch_size = from_shape[0]
  from_seq_length = from_shape[1]

  to_shape = get_shape_list(to_mask, expected_rank=2)
  to_seq_length = to_shape[1]

  to_mask = tf.cast(tf.reshape(to_mask, [batch_size, 1, to_seq_length]), tf.float32)

  # We don't assume that `from_tensor` is a mask (although it could be). We
  # don't actually care if we attend *from* padding tokens (only *to* padding)
  # tokens so we create a tensor of all ones.
  broadcast_ones = tf.ones(shape=[batch_size, from_seq_length, 1], dtype=tf.float32)

  # Here we broadcast along two dimensions to create the mask.
  mask = broadcast_ones * to_mask

  return mask


# skip_padding: the real tokens' rows of a [batch * seq, ...] matrix (int32 [num_real]) and
# that matrix's number of rows (int32 scalar, batch * seq).
TokenRows = collections.namedtuple("TokenRows", ["indices", "total"])


def real_token_rows(token_mask):
  """The rows of the real tokens in the [batch * seq, width] matrix of a padded batch.

  Position 0 of every sequence counts as real even when masked: the pooled output reads it,
  and it equals the padded batch's as long as the sequence has a real token to attend to (an
  all-padding example's attention sees only zeros, so its pooled output differs).

  Args:
    token_mask: int32 / bool Tensor [batch, seq], 1 at real tokens (BERT's input_mask).

  Returns:
    TokenRows(indices int32 [num_real] in increasing order, total int32 scalar batch * seq).
  """
  # Its own name scope: the model's other op names (and so their dropout seeds) stay the same.
  with tf.name_scope("skip_padding"):
    token_mask = tf.cast(token_mask, tf.bool)
    shape = tf.shape(token_mask)
    first = tf.equal(tf.range(shape[1]), 0)[tf.newaxis, :]
    keep = tf.reshape(tf.logical_or(token_mask, first), [-1])
    indices = tf.cast(tf.reshape(tf.where(keep), [-1]), tf.int32)
    return TokenRows(indices, shape[0] * shape[1])


def scatter_token_rows(rows_tensor, token_rows):
  """[num_real, width] -> [batch * seq, width], zeros at the padding rows."""
  with tf.name_scope("skip_padding"):
    width = tf.shape(rows_tensor)[1:]
    return tf.scatter_nd(token_rows.indices[:, tf.newaxis], rows_tensor,
                         tf.concat([[token_rows.total], width], axis=0))


def gather_token_rows(matrix, token_rows):
  """[batch * seq, width] -> [num_real, width], the real tokens' rows."""
  with tf.name_scope("skip_padding"):
    return tf.gather(matrix, token_rows.indices)


def scaled_dot_product_attention(query, key, value, attention_mask=None,
                                 attention_probs_dropout_prob=0.0,
                                 prev_attention_scores=None,
                                 running_mean_divisor=None):
  """Multi-head attention of projected heads, with RealFormer's residual scores.

  The core of `attention_layer`, shared with the translation model's cached decoding
  (nmt_modeling.py). The scores, their running sum, the mask and the softmax are float32 in
  every precision.

  Args:
    query: float Tensor [batch, heads, from_seq, size_per_head].
    key: float Tensor [batch, heads, to_seq, size_per_head].
    value: float Tensor [batch, heads, to_seq, size_per_head].
    attention_mask: (optional) int32 / float Tensor [batch, from_seq, to_seq] (or with 1 for
      a dimension to broadcast), 1 where attending is allowed, 0 elsewhere.
    attention_probs_dropout_prob: float, dropout on the attention probabilities.
    prev_attention_scores: (optional) float32 [batch, heads, from_seq, to_seq], the running
      scores handed on by the previous layer of the same chain.
    running_mean_divisor: (optional) Python number or scalar Tensor; the softmax input is the
      running scores divided by it.

  Returns:
    (context [batch, heads, from_seq, size_per_head] in the dtype of `value`,
     handed-on scores float32 [batch, heads, from_seq, to_seq] (before mask and division),
     probs float32 [batch, heads, from_seq, to_seq] (softmax output before dropout)).
  """
  size_per_head = get_shape_list(query)[-1]
  # Take the dot product between "query" and "key" to get the raw
  # attention scores.
  # `attention_scores` = [B, N, F, T]
  attention_scores = tf.matmul(query, key, transpose_b=True)
  # The scores, their running sum, the mask and the softmax are float32 in every precision: the
  # sum grows with depth (tests/test_precision.py shows float16 losing it).
  attention_scores = _cast_to(attention_scores, tf.float32)
  attention_scores = tf.multiply(attention_scores,
                                 1.0 / math.sqrt(float(size_per_head)))

  if prev_attention_scores is not None:
    # RealFormer: the skip edge over attention scores, head i to head i.
    attention_scores = attention_scores + prev_attention_scores
  # What the next layer receives: unmasked and undivided, so the mask never accumulates.
  handed_on_scores = attention_scores

  if running_mean_divisor is not None and (
      isinstance(running_mean_divisor, tf.Tensor) or running_mean_divisor != 1):
    attention_scores = attention_scores / tf.cast(running_mean_divisor, tf.float32)

  if attention_mask is not None:
    # `attention_mask` = [B, 1, F, T]
    attention_mask = tf.expand_dims(attention_mask, axis=[1])

    # Since attention_mask is 1.0 for positions we want to attend and 0.0 for
    # masked positions, this operation will create a tensor which is 0.0 for
    # positions we want to attend and -10000.0 for masked positions.
    adder = (1.0 - tf.cast(attention_mask, tf.float32)) * -10000.0

    # Since we are adding it to the raw scores before the softmax, this is
    # effectively the same as removing these entirely.
    attention_scores += adder

  # Normalize the attention scores to probabilities.
  # `attention_probs` = [B, N, F, T]
  attention_probs = tf.nn.softmax(attention_scores)

  # This is actually dropping out entire tokens to attend to, which might
  # seem a bit unusual, but is taken from the original Transformer paper.
  dropped_probs = dropout(_cast_to(attention_probs, value.dtype.base_dtype),
                          attention_probs_dropout_prob, seq_axes=(2, 3))

  # `context_layer` = [B, N, F, H]
  context_layer = tf.matmul(dropped_probs, value)
  return context_layer, handed_on_scores, attention_probs


def transpose_for_scores(input_tensor, batch_size, num_attention_heads, seq_length, width):
  """Splits heads: [batch * seq, heads * width] -> [batch, heads, seq, width]."""
  output_tensor = tf.reshape(
      input_tensor, [batch_size, seq_length, num_attention_heads, width])
  return tf.transpose(a=output_tensor, perm=[0, 2, 1, 3])


def attention_layer(from_tensor,
                    to_tensor,
                    attention_mask=None,
                    num_attention_heads=1,
                    size_per_head=512,
                    query_act=None,
                    key_act=None,
                    value_act=None,
                    attention_probs_dropout_prob=0.0,
                    initializer_range=0.02,
                    do_return_2d_tensor=False,
                    batch_size=None,
                    from_seq_length=None,
                    to_seq_length=None,
                    prev_attention_scores=None,
                    running_mean_divisor=None,
                    return_attention=False,
                    token_rows=None):
  """Performs multi-headed attention from `from_tensor` to `to_tensor`, with residual scores.

  All heads are computed at once with batched matmuls ([batch, heads, seq, size_per_head]).
  With `prev_attention_scores` (RealFormer), the scaled scores of this layer are added to the
  running scores of the previous layer, head i to head i; the sum is what this layer hands on.
  `running_mean_divisor` (layer index + 1) divides only this layer's softmax input.

  Args:
    from_tensor: float Tensor of shape [batch_size, from_seq_length,
      from_width] (or 2D [batch_size * from_seq_length, from_width] with the sizes given).
    to_tensor: float Tensor of shape [batch_size, to_seq_length, to_width].
    attention_mask: (optional) int32 Tensor of shape [batch_size,
      from_seq_length, to_seq_length]. The values should be 1 or 0. The
      attention scores will effectively be set to -infinity for any positions in
      the mask that are 0, and will be unchanged for positions that are 1.
    num_attention_heads: int. Number of attention heads.
    size_per_head: int. Size of each attention head.
    query_act: (optional) Activation function for the query transform.
    key_act: (optional) Activation function for the key transform.
    value_act: (optional) Activation function for the value transform.
    attention_probs_dropout_prob: (optional) float. Dropout probability of the
      attention probabilities.
    initializer_range: float. Range of the weight initializer.
    do_return_2d_tensor: bool. If True, the output will be of shape [batch_size
      * from_seq_length, num_attention_heads * size_per_head]. If False, the
      output will be of shape [batch_size, from_seq_length, num_attention_heads
      * size_per_head].
    batch_size: (Optional) int. If the input is 2D, this might be the batch size
      of the 3D version of the `from_tensor` and `to_tensor`.
    from_seq_length: (Optional) If the input is 2D, this might be the seq length
      of the 3D version of the `from_tensor`.
    to_seq_length: (Optional) If the input is 2D, this might be the seq length
      of the 3D version of the `to_tensor`.
    prev_attention_scores: (optional) float Tensor [batch_size, num_attention_heads,
      from_seq_length, to_seq_length], the running scores of the previous layer.
    running_mean_divisor: (optional) Python number; the softmax input is the running
      scores divided by it.
    return_attention: bool. If True, also return the handed-on scores and the probs.
    token_rows: (optional) TokenRows, self-attention of a batch without its padding rows:
      from_tensor (the same Tensor as to_tensor) is 2D [num_real, width], these rows of the
      [batch_size * from_seq_length, width] matrix. The projections run on the real rows only;
      queries, keys and values are scattered to the padded layout (zeros at padding, which the
      mask removes) for the scores, and the output is the real rows' context [num_real, ...].

  Returns:
    Tensor of shape [batch_size, from_seq_length, num_attention_heads * size_per_head]
    (or 2D, see do_return_2d_tensor), in the dtype of `from_tensor` (the projections compute
    in it). With return_attention, a tuple (context, scores, probs) where scores (the running
    scores to hand on, before mask and division) and probs (softmax output before dropout) are
    float32 [batch_size, num_attention_heads, from_seq_length, to_seq_length].

  Raises:
    ValueError: Any of the arguments or tensor shapes are invalid.
  """

  from_shape = get_shape_list(from_tensor, expected_rank=[2, 3])
  to_shape = get_shape_list(to_tensor, expected_rank=[2, 3])

  if len(from_shape) != len(to_shape):
    raise ValueError(
        "The rank of `from_tensor` must match the rank of `to_tensor`.")

  if len(from_shape) == 3:
    batch_size = from_shape[0]
    from_seq_length = from_shape[1]
    to_seq_length = to_shape[1]
  elif len(from_shape) == 2:
    if (batch_size is None or from_seq_length is None or to_seq_length is None):
      raise ValueError(
          "When passing in rank 2 tensors to attention_layer, the values "
          "for `batch_size`, `from_seq_length`, and `to_seq_length` "
          "must all be specified.")

  # Scalar dimensions referenced here:
  #   B = batch size (number of sequences)
  #   F = `from_tensor` sequence length
  #   T = `to_tensor` sequence length
  #   N = `num_attention_heads`
  #   H = `size_per_head`

  from_tensor_2d = reshape_to_matrix(from_tensor)
  to_tensor_2d = reshape_to_matrix(to_tensor)

  # `query_layer` = [B*F, N*H]
  query_layer = dense_layer(
      from_tensor_2d,
      num_attention_heads * size_per_head,
      activation=query_act,
      name="query",
      kernel_initializer=create_initializer(initializer_range))

  # `key_layer` = [B*T, N*H]
  key_layer = dense_layer(
      to_tensor_2d,
      num_attention_heads * size_per_head,
      activation=key_act,
      name="key",
      kernel_initializer=create_initializer(initializer_range))

  # `value_layer` = [B*T, N*H]
  value_layer = dense_layer(
      to_tensor_2d,
      num_attention_heads * size_per_head,
      activation=value_act,
      name="value",
      kernel_initializer=create_initializer(initializer_range))

  if token_rows is not None:
    # Back to the padded [B*F, N*H] layout the scores need.
    query_layer = scatter_token_rows(query_layer, token_rows)
    key_layer = scatter_token_rows(key_layer, token_rows)
    value_layer = scatter_token_rows(value_layer, token_rows)

  # `query_layer` = [B, N, F, H]
  query_layer = transpose_for_scores(query_layer, batch_size,
                                     num_attention_heads, from_seq_length,
                                     size_per_head)

  # `key_layer` = [B, N, T, H]
  key_layer = transpose_for_scores(key_layer, batch_size, num_attention_heads,
                                   to_seq_length, size_per_head)

  # `value_layer` = [B, N, T, H]
  value_layer = transpose_for_scores(value_layer, batch_size, num_attention_heads,
                                     to_seq_length, size_per_head)

  # `context_layer` = [B, N, F, H]; scores and probs [B, N, F, T]
  context_layer, handed_on_scores, attention_probs = scaled_dot_product_attention(
      query_layer, key_layer, value_layer,
      attention_mask=attention_mask,
      attention_probs_dropout_prob=attention_probs_dropout_prob,
      prev_attention_scores=prev_attention_scores,
      running_mean_divisor=running_mean_divisor)

  # `context_layer` = [B, F, N, H]
  context_layer = tf.transpose(a=context_layer, perm=[0, 2, 1, 3])

  if token_rows is not None:
    # `context_layer` = [num_real, N*H]
    context_layer = gather_token_rows(tf.reshape(
        context_layer,
        [batch_size * from_seq_length, num_attention_heads * size_per_head]), token_rows)
  elif do_return_2d_tensor:
    # `context_layer` = [B*F, N*H]
    context_layer = tf.reshape(
        context_layer,
        [batch_size * from_seq_length, num_attention_heads * size_per_head])
  else:
    # `context_layer` = [B, F, N*H]
    context_layer = tf.reshape(
        context_layer,
        [batch_size, from_seq_length, num_attention_heads * size_per_head])

  if return_attention:
    return context_layer, handed_on_scores, attention_probs
  return context_layer


def transformer_model(input_tensor,
                      attention_mask=None,
                      hidden_size=768,
                      num_hidden_layers=12,
                      num_attention_heads=12,
                      intermediate_size=3072,
                      intermediate_act_fn=gelu,
                      hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1,
                      initializer_range=0.02,
                      do_return_all_layers=False,
                      residual_attention="none",
                      layer_norm_type="post",
                      return_attention=False,
                      compute_dtype=None,
                      token_mask=None):
  """Multi-headed, multi-layer Transformer encoder, Post-LN or Pre-LN, with residual attention.

  Args:
    input_tensor: float Tensor of shape [batch_size, seq_length, hidden_size].
    attention_mask: (optional) int32 Tensor of shape [batch_size, seq_length,
      seq_length], with 1 for positions that can be attended to and 0 in
      positions that should not be.
    hidden_size: int. Hidden size of the Transformer.
    num_hidden_layers: int. Number of layers (blocks) in the Transformer.
    num_attention_heads: int. Number of attention heads in the Transformer.
    intermediate_size: int. The size of the "intermediate" (a.k.a., feed
      forward) layer.
    intermediate_act_fn: function. The non-linear activation function to apply
      to the output of the intermediate/feed-forward layer.
    hidden_dropout_prob: float. Dropout probability for the hidden layers.
    attention_probs_dropout_prob: float. Dropout probability of the attention
      probabilities.
    initializer_range: float. Range of the initializer (stddev of truncated
      normal).
    do_return_all_layers: Whether to also return all layers or just the final
      layer.
    residual_attention: "none", "sum" or "mean".
    layer_norm_type: "post" or "pre".
    return_attention: bool. If True, also return per-layer attention scores and probs.
    compute_dtype: (optional) dtype of the attention and feed-forward blocks (matmuls, GELU,
      dropout), see get_compute_dtype; default: that of `input_tensor`. The residual stream
      and LayerNorms stay in the dtype of `input_tensor`, scores and probs in float32.
    token_mask: (optional) int32 Tensor [batch_size, seq_length], 1 at real tokens: the
      padding is skipped (BertModel's skip_padding). The hidden states hold the real tokens'
      rows only (real_token_rows), so the projections, feed-forward layers, LayerNorms and
      dropouts cost the real tokens, not the padded length; attention scatters them back to
      [batch, heads, seq, seq]. Real positions' outputs equal the padded computation's to
      float rounding (dropout masks included: see dropout's token_rows); the outputs at padding
      positions are 0 (the padded computation leaves values there that the mask hides), and
      the scores and probs of padding query rows differ (their queries are 0). Dynamic shapes:
      not for TPU or XLA.

  Returns:
    float Tensor of shape [batch_size, seq_length, hidden_size], the final
    hidden layer of the Transformer (or the list of all layers with do_return_all_layers).
    With return_attention, a tuple (layers, scores, probs) where scores and probs are lists
    of [batch_size, num_attention_heads, seq_length, seq_length], one per layer.

  Raises:
    ValueError: A Tensor shape or parameter is invalid.
  """
  if hidden_size % num_attention_heads != 0:
    raise ValueError(
        "The hidden size (%d) is not a multiple of the number of attention "
        "heads (%d)" % (hidden_size, num_attention_heads))
  if residual_attention not in RESIDUAL_ATTENTION_TYPES:
    raise ValueError("residual_attention must be one of %s, got %r" %
                     (RESIDUAL_ATTENTION_TYPES, residual_attention))
  if layer_norm_type not in LAYER_NORM_TYPES:
    raise ValueError("layer_norm_type must be one of %s, got %r" %
                     (LAYER_NORM_TYPES, layer_norm_type))
  pre_ln = layer_norm_type == "pre"
  residual_dtype = input_tensor.dtype.base_dtype
  compute_dtype = (residual_dtype if compute_dtype is None
                   else get_compute_dtype(compute_dtype))

  attention_head_size = int(hidden_size / num_attention_heads)
  input_shape = get_shape_list(input_tensor, expected_rank=3)
  batch_size = input_shape[0]
  seq_length = input_shape[1]
  input_width = input_shape[2]

  # The Transformer performs sum residuals on all layers so the input needs
  # to be the same as the hidden size.
  if input_width != hidden_size:
    raise ValueError("The width of the input tensor (%d) != hidden size (%d)" %
                     (input_width, hidden_size))

  # Pre-LN (GPT-2 init): the projections that write into the residual stream start smaller.
  if pre_ln:
    output_initializer = create_initializer(
        initializer_range / math.sqrt(2.0 * num_hidden_layers))
  else:
    output_initializer = create_initializer(initializer_range)

  # We keep the representation as a 2D tensor to avoid re-shaping it back and
  # forth from a 3D tensor to a 2D tensor. Re-shapes are normally free on
  # the GPU/CPU but may not be free on the TPU, so we want to minimize them to
  # help the optimizer.
  prev_output = reshape_to_matrix(input_tensor)
  token_rows = None
  if token_mask is not None:
    token_rows = real_token_rows(token_mask)
    # `prev_output` = [num_real, hidden_size]
    prev_output = gather_token_rows(prev_output, token_rows)

  all_layer_outputs = []
  all_attention_scores = []
  all_attention_probs = []
  prev_scores = None
  for layer_idx in range(num_hidden_layers):
    with tf1.variable_scope("layer_%d" % layer_idx):
      layer_input = prev_output

      with tf1.variable_scope("attention"):
        if pre_ln:
          # Pre-LN keeps the official variable set: the LN before attention is the one
          # Post-LN applies after it.
          with tf1.variable_scope("output"):
            attention_input = layer_norm(layer_input)
        else:
          attention_input = layer_input

        with tf1.variable_scope("self"):
          attention_input = _cast_to(attention_input, compute_dtype)
          attention_output, scores, probs = attention_layer(
              from_tensor=attention_input,
              to_tensor=attention_input,
              attention_mask=attention_mask,
              num_attention_heads=num_attention_heads,
              size_per_head=attention_head_size,
              attention_probs_dropout_prob=attention_probs_dropout_prob,
              initializer_range=initializer_range,
              do_return_2d_tensor=True,
              batch_size=batch_size,
              from_seq_length=seq_length,
              to_seq_length=seq_length,
              prev_attention_scores=prev_scores,
              running_mean_divisor=residual_attention_divisor(residual_attention, layer_idx),
              return_attention=True,
              token_rows=token_rows)
        all_attention_scores.append(scores)
        all_attention_probs.append(probs)
        prev_scores = residual_attention_hand_on(residual_attention, scores)

        # Run a linear projection of `hidden_size` then add a residual
        # with `layer_input`.
        with tf1.variable_scope("output"):
          attention_output = dense_layer(
              attention_output,
              hidden_size,
              kernel_initializer=output_initializer,
              name="dense")
          attention_output = dropout(attention_output, hidden_dropout_prob, seq_length=seq_length,
                                     token_rows=token_rows)
          attention_output = _cast_to(attention_output, residual_dtype)
          if pre_ln:
            attention_output = attention_output + layer_input
          else:
            attention_output = layer_norm(attention_output + layer_input)

      if pre_ln:
        with tf1.variable_scope("output"):
          intermediate_input = layer_norm(attention_output)
      else:
        intermediate_input = attention_output

      # The activation is only applied to the "intermediate" hidden layer.
      with tf1.variable_scope("intermediate"):
        intermediate_output = dense_layer(
            _cast_to(intermediate_input, compute_dtype),
            intermediate_size,
            activation=intermediate_act_fn,
            kernel_initializer=create_initializer(initializer_range),
            name="dense")

      # Down-project back to `hidden_size` then add the residual.
      with tf1.variable_scope("output"):
        layer_output = dense_layer(
            intermediate_output,
            hidden_size,
            kernel_initializer=output_initializer,
            name="dense")
        layer_output = dropout(layer_output, hidden_dropout_prob, seq_length=seq_length,
                               token_rows=token_rows)
        layer_output = _cast_to(layer_output, residual_dtype)
        if pre_ln:
          layer_output = layer_output + attention_output
        else:
          layer_output = layer_norm(layer_output + attention_output)
      prev_output = layer_output
      all_layer_outputs.append(layer_output)

  if pre_ln:
    all_layer_outputs[-1] = layer_norm(all_layer_outputs[-1], name=FINAL_LAYER_NORM_SCOPE)
  if token_rows is not None:
    all_layer_outputs = [scatter_token_rows(layer_output, token_rows)
                         for layer_output in all_layer_outputs]

  if do_return_all_layers:
    final_outputs = [reshape_from_matrix(layer_output, input_shape)
                     for layer_output in all_layer_outputs]
  else:
    final_outputs = reshape_from_matrix(all_layer_outputs[-1], input_shape)
  if return_attention:
    return final_outputs, all_attention_scores, all_attention_probs
  return final_outputs


def gather_indexes(sequence_tensor, positions):
  """Gathers the vectors at the specific positions over a minibatch.

  Args:
    sequence_tensor: float [batch, seq, width].
    positions: int [batch, n].

  Returns:
    float [batch * n, width].
  """
  sequence_shape = get_shape_list(sequence_tensor, expected_rank=3)
  batch_size = sequence_shape[0]
  seq_length = sequence_shape[1]
  width = sequence_shape[2]

  flat_offsets = tf.reshape(tf.range(0, batch_size, dtype=tf.int32) * seq_length, [-1, 1])
  flat_positions = tf.reshape(positions + flat_offsets, [-1])
  flat_sequence_tensor = tf.reshape(sequence_tensor, [batch_size * seq_length, width])
  return tf.gather(flat_sequence_tensor, flat_positions)


def masked_lm_logits(bert_config, sequence_output, output_weights, positions,
                     compute_dtype=None):
  """The BERT masked-LM head (variables `cls/predictions/*`), returning logits.

  Used by run_pretraining.py for the loss and by the exporters for MLM outputs.

  Args:
    bert_config: BertConfig.
    sequence_output: float [batch, seq, hidden].
    output_weights: float [vocab, hidden], the word embedding table (tied output weights).
    positions: int [batch, n], the masked positions.
    compute_dtype: (optional) dtype of the transform and the vocabulary matmul (see
      get_compute_dtype); the LayerNorm statistics and the returned logits are float32.

  Returns:
    float32 [batch * n, vocab] logits before the softmax.
  """
  compute_dtype = get_compute_dtype(compute_dtype)
  input_tensor = _cast_to(gather_indexes(sequence_output, positions), compute_dtype)
  with tf1.variable_scope("cls/predictions"):
    # One more non-linear transformation before the output layer; not used after
    # pre-training.
    with tf1.variable_scope("transform"):
      input_tensor = dense_layer(
          input_tensor,
          units=bert_config.hidden_size,
          activation=get_activation(bert_config.hidden_act),
          kernel_initializer=create_initializer(bert_config.initializer_range),
          name="dense")
      input_tensor = layer_norm(input_tensor)

    # The output weights are the input embeddings; there is an output-only bias per token.
    output_bias = tf1.get_variable(
        "output_bias", shape=[bert_config.vocab_size], initializer=tf1.zeros_initializer())
    logits = tf.matmul(input_tensor, _cast_to(output_weights, compute_dtype), transpose_b=True)
    return tf.nn.bias_add(_cast_to(logits, tf.float32), output_bias)


def get_shape_list(tensor, expected_rank=None, name=None):
  """Returns a list of the shape of tensor, preferring static dimensions.

  Args:
    tensor: A tf.Tensor object to find the shape of.
    expected_rank: (optional) int. The expected rank of `tensor`. If this is
      specified and the `tensor` has a different rank, and exception will be
      thrown.
    name: Optional name of the tensor for the error message.

  Returns:
    A list of dimensions of the shape of tensor. All static dimensions will
    be returned as python integers, and dynamic dimensions will be returned
    as tf.Tensor scalars.
  """
  if name is None:
    name = getattr(tensor, "name", "tensor")

  if expected_rank is not None:
    assert_rank(tensor, expected_rank, name)

  shape = tensor.shape.as_list()

  non_static_indexes = []
  for (index, dim) in enumerate(shape):
    if dim is None:
      non_static_indexes.append(index)

  if not non_static_indexes:
    return shape

  dyn_shape = tf.shape(input=tensor)
  for index in non_static_indexes:
    shape[index] = dyn_shape[index]
  return shape


def reshape_to_matrix(input_tensor):
  """Reshapes a >= rank 2 tensor to a rank 2 tensor (i.e., a matrix)."""
  ndims = input_tensor.shape.ndims
  if ndims < 2:
    raise ValueError("Input tensor must have at least rank 2. Shape = %s" %
                     (input_tensor.shape))
  if ndims == 2:
    return input_tensor

  width = input_tensor.shape[-1]
  output_tensor = tf.reshape(input_tensor, [-1, width])
  return output_tensor


def reshape_from_matrix(output_tensor, orig_shape_list):
  """Reshapes a rank 2 tensor back to its original rank >= 2 tensor."""
  if len(orig_shape_list) == 2:
    return output_tensor

  output_shape = get_shape_list(output_tensor)

  orig_dims = orig_shape_list[0:-1]
  width = output_shape[-1]

  return tf.reshape(output_tensor, orig_dims + [width])


def assert_rank(tensor, expected_rank, name=None):
  """Raises an exception if the tensor rank is not of the expected rank.

  Args:
    tensor: A tf.Tensor to check the rank of.
    expected_rank: Python integer or list of integers, expected rank.
    name: Optional name of the tensor for the error message.

  Raises:
    ValueError: If the expected shape doesn't match the actual shape.
  """
  if name is None:
    name = getattr(tensor, "name", "tensor")

  expected_rank_dict = {}
  if isinstance(expected_rank, six.integer_types):
    expected_rank_dict[expected_rank] = True
  else:
    for x in expected_rank:
      expected_rank_dict[x] = True

  actual_rank = tensor.shape.ndims
  if actual_rank not in expected_rank_dict:
    raise ValueError(
        "For the tensor `%s`, the actual rank "
        "`%d` (shape = %s) is not equal to the expected rank `%s`" %
        (name, actual_rank, str(tensor.shape), str(expected_rank)))
