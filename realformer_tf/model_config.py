# coding=utf-8
"""A job's model config: --bert_config_file read and checked, with the flag overrides.

Every BERT-family tool reads its config through load_config (one-line errors naming the file;
--residual_attention / --layer_norm_type override the file's values, defined by
define_model_override_flags; --max_seq_length checked against max_position_embeddings) and saves
the config it actually used beside its checkpoints with save_config.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os

from absl import flags
import tensorflow as tf

from realformer_tf import common
import modeling

tf1 = tf.compat.v1


def save_config(config, output_dir, name="bert_config.json"):
  """Saves the BertConfig actually used next to the checkpoints (atomically)."""
  tf1.gfile.MakeDirs(output_dir)
  with common.atomic_output(os.path.join(output_dir, name)) as writer:
    writer.write(config.to_json_string())


def load_config(bert_config_file, flag_values=None, max_seq_length=None):
  """Reads --bert_config_file, applies --residual_attention / --layer_norm_type overrides.

  Args:
    bert_config_file: path to bert_config.json.
    flag_values: FLAGS; its residual_attention / layer_norm_type (if defined and set) override.
    max_seq_length: checked against max_position_embeddings when given.

  Returns:
    A validated modeling.BertConfig.
  """
  common.require_file(bert_config_file, "bert_config_file")
  try:
    config = modeling.BertConfig.from_json_file(bert_config_file)
  except ValueError as e:
    common.fail("--bert_config_file: %s" % e)
  for key in ("residual_attention", "layer_norm_type"):
    value = getattr(flag_values, key, None) if flag_values is not None else None
    if value:
      setattr(config, key, value)
  try:
    config.validate("--bert_config_file=%s with flag overrides" % bert_config_file)
  except ValueError as e:
    common.fail(str(e))
  if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
    common.fail("--max_seq_length=%d is longer than max_position_embeddings=%d in %s" %
                (max_seq_length, config.max_position_embeddings, bert_config_file))
  return config


def define_model_override_flags():
  """Defines --residual_attention and --layer_norm_type (override the config file)."""
  flags.DEFINE_enum("residual_attention", None, list(modeling.RESIDUAL_ATTENTION_TYPES),
                    "Overrides residual_attention in --bert_config_file (none | sum | mean).")
  flags.DEFINE_enum("layer_norm_type", None, list(modeling.LAYER_NORM_TYPES),
                    "Overrides layer_norm_type in --bert_config_file (post | pre).")
