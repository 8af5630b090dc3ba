# coding=utf-8
"""How batches are padded (--padding) and which jobs skip the padding rows.

The one padding policy of every tool: `longest` pads a batch to its longest example rounded up
to a multiple of 8, `max_length` to --max_seq_length (official), `bucket` to a few fixed lengths
(XLA compiles once per shape). `effective_padding` says what a job's input gets by default (TPU:
max_length; --use_xla: bucket), `skips_padding` whether BERT then computes only the real tokens
(modeling.BertModel's skip_padding). Needs no Estimator: the TF 2.21 tools use it too.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

from absl import flags
import tensorflow as tf

from realformer_tf import common

PADDING_CHOICES = ("longest", "max_length")
# Every --padding of the scripts that define it through define_padding_flag: bucket is longest
# rounded up to padding_buckets (few shapes: XLA compiles once per shape).
PADDING_MODES = PADDING_CHOICES + ("bucket",)
# --padding=longest rounds a batch's length up to a multiple of this: few distinct shapes (XLA
# recompiles per shape), tensor-core friendly widths.
PADDING_MULTIPLE = 8
# --padding=bucket: the smallest bucket length (then powers of two up to max_seq_length).
PADDING_SMALLEST_BUCKET = 32
# Raw-text SavedModels: a request is often one short text, so smaller buckets pay there.
SERVING_SMALLEST_BUCKET = 16


def padding_buckets(max_length, smallest=PADDING_SMALLEST_BUCKET):
  """The bucket lengths of --padding=bucket: powers of two from `smallest`, and max_length.

  Args:
    max_length: the features' fixed length (max_seq_length), always the last bucket.
    smallest: the first bucket (a power of two).

  Returns:
    sorted list of ints, e.g. [32, 64, 128] for 128, [32, 64, 128, 256, 384] for 384, [24]
    for 24.
  """
  buckets = []
  length = smallest
  while length < max_length:
    buckets.append(length)
    length *= 2
  return buckets + [max_length]


def padded_length(longest, max_length, multiple=PADDING_MULTIPLE, buckets=None):
  """The length a batch is padded to, from the length of its longest member.

  Args:
    longest: int scalar Tensor, the longest member's length (at least 1 is used).
    max_length: the fixed length (max_seq_length): never more.
    multiple: round up to a multiple of this (--padding=longest).
    buckets: sorted lengths, the last max_length (padding_buckets): round up to the smallest
      that holds `longest` instead (--padding=bucket).

  Returns:
    int32 scalar Tensor.
  """
  longest = tf.maximum(tf.cast(longest, tf.int32), 1)
  if buckets:
    lengths = tf.constant(list(buckets), tf.int32)
    length = tf.reduce_min(tf.where(lengths >= longest, lengths, max_length))
  else:
    length = (longest + multiple - 1) // multiple * multiple
  return tf.minimum(length, max_length)


def trim_batch_to_longest(batch, max_length, mask_name="input_mask",
                          seq_names=("input_ids", "input_mask", "segment_ids"),
                          multiple=PADDING_MULTIPLE, buckets=None):
  """Slices a batch of fixed-length features to its longest member (--padding=longest).

  The length is the last real position (mask 1) of any example, plus one, rounded up to a
  multiple of `multiple` (or to the smallest of `buckets` that holds it) and at most
  max_length. Only padding is cut: the attention mask already excludes it, and position / token
  type embeddings and the [CLS] pooler read only the kept positions, so every real token's
  output equals the fixed-length one to float rounding.

  Args:
    batch: dict feature name -> Tensor; seq_names are [batch, max_length].
    max_length: the features' fixed length (max_seq_length).
    mask_name: the [batch, max_length] 0/1 mask that marks real tokens.
    seq_names: the features to slice along axis 1 (those absent from batch are skipped).
    multiple: round the length up to a multiple of this.
    buckets: (--padding=bucket) sorted lengths, the last max_length (padding_buckets): round
      up to one of these instead.

  Returns:
    dict like batch, the seq_names features [batch, length], length <= max_length.
  """
  mask = batch[mask_name]
  positions = tf.range(1, tf.shape(mask)[1] + 1, dtype=mask.dtype)
  longest = tf.reduce_max(tf.cast(tf.not_equal(mask, 0), mask.dtype) * positions)
  length = padded_length(longest, max_length, multiple, buckets)
  trimmed = dict(batch)
  for name in seq_names:
    if name in trimmed:
      trimmed[name] = trimmed[name][:, :length]
  return trimmed


# --padding's help, the same in every script that has the flag (define_padding_flag).
PADDING_CHOICES_HELP = (
    "longest: each batch is padded to its longest example rounded up to a multiple of 8 "
    "(same batches and order; outputs equal to float rounding, less compute on padding; "
    "in training, run_classifier and run_ner draw dropout masks at --max_seq_length, so "
    "the weights equal a max_length run's to float rounding, other scripts draw their masks "
    "over the shorter batch); max_length: every batch to --max_seq_length (official); "
    "bucket: longest, rounded up to a power of two from 32 or to --max_seq_length (few shapes: "
    "XLA compiles once per shape).")
PADDING_DEFAULT_HELP = (
    "Default: longest for training, evaluation and prediction (bucket with --use_xla), "
    "max_length on TPU (TPUEstimator takes only static shapes).")


def define_padding_flag(default_help=PADDING_DEFAULT_HELP, extra_help=""):
  """Defines --padding (PADDING_CHOICES; see effective_padding), its help PADDING_CHOICES_HELP.

  Args:
    default_help: the sentence on the default (effective_padding's `default` of the script).
    extra_help: appended to the help (what is particular to the script).
  """
  flags.DEFINE_enum("padding", None, list(PADDING_MODES), " ".join(
      x for x in (PADDING_CHOICES_HELP, default_help, extra_help) if x))


def check_padding_flag(flag_values):
  """One line for a --padding the job cannot run with (longest or bucket on TPU: TPUEstimator
  refuses an input_fn whose features lack a static shape)."""
  if getattr(flag_values, "use_tpu", False) and flag_values.padding in ("longest", "bucket"):
    common.fail("--padding=%s: not with --use_tpu (TPUEstimator takes only features of a static "
                "shape; use --padding=max_length)" % flag_values.padding)


def skips_padding(flag_values):
  """Whether the job's BERT computes only the real tokens (modeling.BertModel's skip_padding).

  With --padding=longest (or left to its default) on CPU / GPU: the encoder's dense layers
  then cost the batch's real tokens, not its padded length, with the same outputs to float
  rounding. Not on TPU or with --use_xla (the real tokens' count is a dynamic shape), nor with
  --padding=max_length or bucket (the fixed-shape computations they ask for).

  Args:
    flag_values: the parsed flags (padding, use_tpu, use_xla).

  Returns:
    bool.
  """
  # The padding in effect (max_length on TPU, bucket with --use_xla unless asked otherwise).
  return (not getattr(flag_values, "use_xla", False) and
          effective_padding(flag_values) == "longest")


def effective_padding(flag_values, training=False, default="longest",
                      full_length_dropout=False):
  """--padding for a training or an evaluation / prediction input.

  By default evaluation and prediction batches are padded to their longest example (no dropout
  there: the same outputs to float rounding). Training batches too when the script's model
  draws its dropout masks at --max_seq_length (modeling.full_length_dropout: a real position's
  mask does not depend on the padding, so a run reproduces a max_length run to float
  rounding); otherwise to --max_seq_length (masks drawn over the batch's shape would differ).
  On TPU always max_length (TPUEstimator takes only static shapes). A default of longest
  becomes bucket with --use_xla (XLA compiles once per shape: padding_buckets bounds them to a
  few).

  Args:
    flag_values: the parsed flags (padding, use_tpu, use_xla).
    training: whether the input feeds training.
    default: the evaluation / prediction default of the script (training's too with
      full_length_dropout).
    full_length_dropout: the script's training model_fn draws dropout masks under
      modeling.full_length_dropout(--max_seq_length).

  Returns:
    one of PADDING_MODES.
  """
  if flag_values.padding:
    return flag_values.padding
  if getattr(flag_values, "use_tpu", False) or (training and not full_length_dropout):
    return "max_length"
  if default == "longest" and getattr(flag_values, "use_xla", False):
    return "bucket"
  return default
