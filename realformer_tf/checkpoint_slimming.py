# coding=utf-8
"""Checkpoint slimming: the optimizer state a training checkpoint carries beside its weights
(STRIP_PATTERN), checkpoints rewritten without it and optionally with float16 storage
(slim_checkpoint, slim_values), and the name-based checkpoint writer (write_checkpoint) that
average_checkpoints.py and the benchmarks use too. slim_checkpoint.py is the command; its
docstring says what is stripped and what float16 storage costs.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import re

import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils

tf1 = tf.compat.v1

# Variables that only training needs.
STRIP_PATTERN = re.compile(
    r"(^|/)(adam_m|adam_v|grad_accum|Adam|Adam_1|beta1_power|beta2_power)$|^global_step$")
COMPANION_FILES = ("bert_config.json", "vocab.txt", "labels.txt", "classifier_config.json")
FP16_MAX = float(np.finfo(np.float16).max)


def checkpoint_bytes(prefix):
  """Bytes of a checkpoint: its .index plus all .data-* shards.

  Args:
    prefix: checkpoint prefix.

  Returns:
    int, total size in bytes.
  """
  files = tf.io.gfile.glob(prefix + ".data-*") + [prefix + ".index"]
  return sum(tf.io.gfile.stat(f).length for f in files if tf.io.gfile.exists(f))


def slim_values(checkpoint_path, fp16=False, to_fp32=False, keep_optimizer=False):
  """Reads the variables to keep, with their new dtypes.

  Args:
    checkpoint_path: checkpoint prefix.
    fp16: cast float32 values to float16.
    to_fp32: cast float16 values to float32.
    keep_optimizer: keep the variables STRIP_PATTERN matches.

  Returns:
    (dict name -> numpy value, sorted list of stripped names).
  """
  if fp16 and to_fp32:
    common.fail("--fp16 and --to_fp32 exclude each other")
  reader = tf.train.load_checkpoint(checkpoint_path)
  values, stripped = {}, []
  for name in sorted(reader.get_variable_to_shape_map()):
    if not keep_optimizer and STRIP_PATTERN.search(name):
      stripped.append(name)
      continue
    value = reader.get_tensor(name)
    if fp16 and value.dtype == np.float32:
      if value.size and np.abs(value).max() > FP16_MAX:
        common.fail("--fp16: variable %s of %s has values beyond the float16 range (%g)" %
                    (name, checkpoint_path, float(np.abs(value).max())))
      value = value.astype(np.float16)
    elif to_fp32 and value.dtype == np.float16:
      value = value.astype(np.float32)
    values[name] = value
  return values, stripped


def write_checkpoint(values, prefix):
  """Writes a name-based (tf.compat.v1.train.Saver format) checkpoint of `values`.

  Args:
    values: dict variable name -> numpy value.
    prefix: checkpoint prefix to write; a `checkpoint` state file is written beside it.
  """
  names = sorted(values)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(values[n]) for n in names])
  tf1.train.update_checkpoint_state(os.path.dirname(prefix), prefix,
                                    all_model_checkpoint_paths=[prefix])


def slim_checkpoint(input_checkpoint, output_dir, fp16=False, to_fp32=False,
                    keep_optimizer=False, overwrite=False):
  """Writes the slim checkpoint into output_dir (atomically) and reports the sizes.

  Args:
    input_checkpoint: checkpoint prefix or directory (latest checkpoint).
    output_dir: new directory; the checkpoint keeps the input's file name.
    fp16: store float32 as float16.
    to_fp32: store float16 as float32.
    keep_optimizer: keep optimizer slots.
    overwrite: replace an earlier output of this tool at output_dir (anything else there is
      refused).

  Returns:
    dict with input/output prefixes, bytes before/after, number of variables kept/stripped.
  """
  prefix = export_utils.resolve_checkpoint(input_checkpoint, "input_checkpoint")
  if not output_dir:
    common.fail("--output_dir is required")
  output_dir = output_dir.rstrip("/")
  if os.path.abspath(os.path.dirname(prefix)) == os.path.abspath(output_dir):
    common.fail("--output_dir=%s: is the input checkpoint's directory" % output_dir)
  # Refused before the work: an existing directory that is not an earlier slim output of ours.
  common.check_export_dir(output_dir, "output_dir", overwrite, [prefix], holds_checkpoints=True)
  values, stripped = slim_values(prefix, fp16, to_fp32, keep_optimizer)
  if not values:
    common.fail("--input_checkpoint=%s: nothing left after stripping optimizer state" % prefix)
  with common.atomic_directory(output_dir, "output_dir", overwrite, [prefix],
                               holds_checkpoints=True) as tmp_dir:
    tf.io.gfile.makedirs(tmp_dir)
    name = os.path.basename(prefix)
    write_checkpoint(values, os.path.join(tmp_dir, name))
    # The state file must name the final location.
    tf1.train.update_checkpoint_state(tmp_dir, name, all_model_checkpoint_paths=[name])
    for companion in COMPANION_FILES:
      source = os.path.join(os.path.dirname(prefix), companion)
      if tf.io.gfile.exists(source):
        tf.io.gfile.copy(source, os.path.join(tmp_dir, companion), overwrite=True)
  out_prefix = os.path.join(output_dir, os.path.basename(prefix))
  report = {"input_checkpoint": prefix, "output_checkpoint": out_prefix,
            "bytes_before": checkpoint_bytes(prefix), "bytes_after": checkpoint_bytes(out_prefix),
            "num_kept": len(values), "num_stripped": len(stripped)}
  return report
