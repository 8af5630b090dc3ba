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

# Where the configs shipped with the code live: configs/ in a clone of the repository,
# realformer_tf/configs/ once installed with pip (setup.py maps one onto the other).
SHIPPED_CONFIG_DIRS = (os.path.join(common.REPO_DIR, "configs"),
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs"))


def save_config(config, output_dir, name="bert_config.json"):
  """Saves the BertConfig actually used next to the checkpoints (atomically)."""
  tf1.gfile.MakeDirs(output_dir)
  with common.atomic_output(os.path.join(output_dir, name)) as writer:
    writer.write(config.to_json_string())


def shipped_config_path(path):
  """The shipped config that a path such as `configs/NAME.json` means when it is not there.

  A command pasted from the documentation into another working directory (or run after
  `pip install .`) names the shipped configs by their place in the repository; such a path that
  does not exist where the user stands resolves to the shipped file of that name, and says so.

  Args:
    path: a config path as given on the command line.

  Returns:
    The shipped config's path, or `path` unchanged (it exists, is not of the form
    `[configs/]NAME.json`, or no shipped config has that name).
  """
  if not path or tf.io.gfile.exists(path):
    return path
  folder, name = os.path.split(os.path.normpath(path))
  if folder not in ("", "configs"):
    return path
  for directory in SHIPPED_CONFIG_DIRS:
    candidate = os.path.join(directory, name)
    if os.path.isfile(candidate):
      tf1.logging.info("%s is not in the working directory: using the shipped %s", path,
                       candidate)
      return candidate
  return path


def load_config(bert_config_file, flag_values=None, max_seq_length=None):
  """Reads --bert_config_file, applies --residual_attention / --layer_norm_type overrides.

  Args:
    bert_config_file: path to bert_config.json; `configs/NAME.json` not found in the working
      directory means the shipped config of that name (shipped_config_path).
    flag_values: FLAGS; its residual_attention / layer_norm_type (if defined and set) override.
    max_seq_length: checked against max_position_embeddings when given.

  Returns:
    A validated modeling.BertConfig.
  """
  bert_config_file = shipped_config_path(bert_config_file)
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
