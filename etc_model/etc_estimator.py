# coding=utf-8
"""What ETC's Estimator scripts share (etc_model.run_pretraining, etc_model.run_long_tasks).

The side inputs computed in the input pipeline from the stored breakpoints and sentence ids
(add_side_inputs), the --etc_config_file with the --residual_attention override (load_config),
placeholder features for building a model without data (placeholder_features), the resume
check against a checkpoint with variables this job's model lacks (check_resume), and the
vocabulary check of the records' ids (check_vocab_ids).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os

import tensorflow as tf

from realformer_tf import common
from realformer_tf import estimator_utils
from etc_model import etc_inputs
from etc_model import etc_modeling
from etc_model import etc_records

tf1 = tf.compat.v1

# The features every ETC record stores: [L] long ones and [G] global ones.
LONG_FEATURES = etc_records.LONG_FEATURES
GLOBAL_FEATURES = etc_records.GLOBAL_FEATURES
# The token types a record may store (WikiHop's), passed to the model by encode.
SEGMENT_FEATURES = ("segment_ids", "global_segment_ids")
# Variable scopes of the model and its heads (a checkpoint variable under them that this job's
# model lacks belongs to another model).
MODEL_SCOPES = ("etc_document_bert", "cls")


def add_side_inputs(features, config, long_seq_len, global_seq_len):
  """Adds the 8 side inputs (the None ones left out) computed from breakpoints and sentence ids.

  Args:
    features: dict of batched int32 features of one record batch [batch, ...].
    config: EtcConfig (local_radius, relative_pos_max_distance, hard masks).
    long_seq_len: L (None: the batch's own, a batch cut by --padding=longest).
    global_seq_len: G (or None, likewise).

  Returns:
    The dict with l2l / g2g / l2g / g2l masks and relative ids, static shapes set.
  """
  side = etc_inputs.make_global_local_transformer_side_inputs_tf(
      features["long_breakpoints"], features["global_breakpoints"], features["sentence_ids"],
      config.local_radius, config.relative_pos_max_distance,
      use_hard_g2l_mask=config.use_hard_g2l_mask, use_hard_l2g_mask=config.use_hard_l2g_mask)
  return etc_inputs.with_side_inputs(features, side, config.local_radius, long_seq_len,
                                     global_seq_len)


def encode(model, features, token_ids=None, att_implementation="auto",
           long_embedding_adder=None, global_embedding_adder=None):
  """Runs an EtcModel on a feature dict: its token ids, global token ids and side inputs.

  Args:
    model: etc_modeling.EtcModel.
    features: dict with token_ids, global_token_ids, the side inputs it has (add_side_inputs)
      and, when the records store token types, segment_ids [batch, L] and global_segment_ids
      [batch, G] (else the model's defaults, 1 for long and 0 for global tokens); other keys,
      e.g. breakpoints or labels, are not passed.
    token_ids: int32 [batch, L] to run instead of features["token_ids"] (CPC's masked input).
    att_implementation: "auto", "full" or "sparse".
    long_embedding_adder: float32 [batch, L, hidden] added to the long input embeddings
      (EtcModel's; OpenKP's visual features), or None.
    global_embedding_adder: float32 [batch, G, hidden], likewise for the global ones.

  Returns:
    [long_output [batch, L, hidden], global_output [batch, G, hidden]].
  """
  side = {name: features[name] for name in etc_inputs.SIDE_INPUT_NAMES + SEGMENT_FEATURES
          if name in features}
  return model(token_ids=features["token_ids"] if token_ids is None else token_ids,
               global_token_ids=features["global_token_ids"],
               att_implementation=att_implementation,
               long_embedding_adder=long_embedding_adder,
               global_embedding_adder=global_embedding_adder, **side)


def placeholder_features(config, long_seq_len, global_seq_len, extra=None):
  """Batch-1 placeholders of the five stored features, the side inputs and `extra`.

  Args:
    config: EtcConfig.
    long_seq_len: L.
    global_seq_len: G.
    extra: dict name -> (dtype, shape) of further placeholders (a head's inputs).

  Returns:
    dict of tensors, to build a model in a graph without data (variable_shapes).
  """
  features = {name: tf1.placeholder(tf.int32, [1, long_seq_len]) for name in LONG_FEATURES}
  features.update({name: tf1.placeholder(tf.int32, [1, global_seq_len])
                   for name in GLOBAL_FEATURES})
  for name, (dtype, shape) in (extra or {}).items():
    features[name] = tf1.placeholder(dtype, shape)
  return add_side_inputs(features, config, long_seq_len, global_seq_len)


def load_config(config_file, residual_attention=None, max_seq_length=None,
                flag_name="etc_config_file", use_hard_g2l_mask=None):
  """The ETC config with the --residual_attention / --use_hard_g2l_mask overrides, validated
  (one-line errors).

  Args:
    config_file: the --etc_config_file path.
    residual_attention: the --residual_attention override, or None.
    max_seq_length: --max_seq_length, checked against max_absolute_position_embeddings.
    flag_name: the flag naming the file.
    use_hard_g2l_mask: the --use_hard_g2l_mask override (bool), or None: the file's.

  Returns:
    EtcConfig.
  """
  common.require_file(config_file, flag_name)
  try:
    config = etc_modeling.EtcConfig.from_json_file(config_file)
    if residual_attention:
      config.residual_attention = residual_attention
    if use_hard_g2l_mask is not None:
      config.use_hard_g2l_mask = bool(use_hard_g2l_mask)
    config.validate("--%s=%s with flag overrides" % (flag_name, config_file))
  except ValueError as e:
    common.fail(str(e) if str(e).startswith("--") else "--%s: %s" % (flag_name, e))
  if (max_seq_length and config.max_absolute_position_embeddings and
      max_seq_length > config.max_absolute_position_embeddings):
    common.fail("--max_seq_length=%d is longer than max_absolute_position_embeddings=%d in %s" %
                (max_seq_length, config.max_absolute_position_embeddings, config_file))
  return config


def check_resume(output_dir, want_shapes_fn, restore="train"):
  """check_resume_shapes, and a checkpoint with model variables this job lacks (more layers).

  Args:
    output_dir: the job's model directory.
    want_shapes_fn: returns {variable name: shape} of this job's model (called only when
      output_dir holds a checkpoint: it builds a graph).
    restore: what the job restores (estimator_utils.check_resumable: "train" needs the
      global_step and optimizer slots a checkpoint made for initialising lacks, e.g.
      etc_model.lift_bert_checkpoint's; "estimator" the global_step).

  Returns:
    The global step of the checkpoint in output_dir, or None.
  """
  latest = (tf1.train.latest_checkpoint(output_dir) if tf.io.gfile.isdir(output_dir)
            else None)
  if not latest:
    return None
  want_shapes = want_shapes_fn()
  step = estimator_utils.check_resume_shapes(output_dir, want_shapes, restore=restore)
  names = tf1.train.NewCheckpointReader(latest).get_variable_to_shape_map()
  # Not a slot of a variable of ours (<var>/adam_m, <var>/grad_accum): another model's.
  extra = sorted(n for n in names if n.split("/")[0] in MODEL_SCOPES and
                 n not in want_shapes and n.rsplit("/", 1)[0] not in want_shapes)
  if extra:
    common.fail("--output_dir=%s: its checkpoint %s has %s, which this job's model lacks; use "
                "a new --output_dir or the config it was trained with" % (
                    output_dir, os.path.basename(latest), extra[0]))
  return step


def check_vocab_ids(input_files, config, keys, flag_name="input_file", records_per_file=16):
  """One line when the records hold token ids >= the config's vocab_size (first records).

  Args:
    input_files: TFRecord paths.
    config: EtcConfig.
    keys: the id features to check ("token_ids", "global_token_ids", ...).
    flag_name: the flag naming the files.
    records_per_file: how many records of each file are read.
  """
  for path in input_files:
    for i, record in enumerate(tf1.io.tf_record_iterator(path)):
      if i >= records_per_file:
        break
      features = tf.train.Example.FromString(record).features.feature
      for key in keys:
        ids = features[key].int64_list.value
        if ids and max(ids) >= config.vocab_size:
          common.fail("--%s: %s has %s up to %d but vocab_size=%d in "
                      "--etc_config_file; it was made with a bigger vocab than the model's" %
                      (flag_name, path, key, max(ids), config.vocab_size))
