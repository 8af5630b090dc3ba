# coding=utf-8
"""Strips optimizer state from a BERT checkpoint, optionally storing the weights as float16.

Removes the Adam slots (`<var>/adam_m`, `<var>/adam_v`), gradient accumulators
(`<var>/grad_accum`), the stock tf.compat.v1 optimizer slots (`<var>/Adam`, `<var>/Adam_1`,
`beta1_power`, `beta2_power`) and `global_step`: what is left is what fine-tuning, export and
inference need (about a third of a training checkpoint). Variable names are unchanged.

  python slim_checkpoint.py --input_checkpoint=pretrain_out --output_dir=slim [--fp16]
  python slim_checkpoint.py --input_checkpoint=slim/model.ckpt-1000 --output_dir=fp32 --to_fp32

--fp16 halves the size again by storing float32 variables as float16. A Saver (run_classifier,
run_pretraining --init_checkpoint, Estimator) cannot restore a float16 value into a float32
variable: convert such a checkpoint back with --to_fp32 (values stay rounded to float16) or
export it directly with export_hub.py (which casts on load). Rounding to float16 (relative error
<= 2^-11, about 5e-4) changes the outputs of a model by about 1e-3 (tests/test_slim_checkpoint.py
bounds a random tiny model's outputs at 5e-3 absolute); values beyond 65504 would overflow and
are refused.

The output directory is written under a temporary name and renamed when complete; the
bert_config.json, vocab.txt, labels.txt and classifier_config.json beside the input checkpoint
are copied along.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import re

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import common
import export_utils

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

# Variables that only training needs.
STRIP_PATTERN = re.compile(
    r"(^|/)(adam_m|adam_v|grad_accum|Adam|Adam_1|beta1_power|beta2_power)$|^global_step$")
COMPANION_FILES = ("bert_config.json", "vocab.txt", "labels.txt", "classifier_config.json")
FP16_MAX = float(np.finfo(np.float16).max)


def define_flags():
  """Defines the tool's flags (not at import time, so tests can import the module)."""
  flags.DEFINE_string("input_checkpoint", None, "Checkpoint prefix or model directory.")
  flags.DEFINE_string("output_dir", None, "Directory for the slim checkpoint (must not exist, "
                      "or be an earlier output of this tool and --overwrite).")
  flags.DEFINE_bool("fp16", False, "Store float32 variables as float16.")
  flags.DEFINE_bool("to_fp32", False, "Store float16 variables as float32 (undoes --fp16).")
  flags.DEFINE_bool("keep_optimizer", False, "Keep optimizer slots and global_step (only "
                    "convert the dtype).")
  flags.DEFINE_bool("overwrite", False, "Replace an earlier output of this tool at --output_dir.")


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


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  report = slim_checkpoint(FLAGS.input_checkpoint, FLAGS.output_dir, FLAGS.fp16, FLAGS.to_fp32,
                           FLAGS.keep_optimizer, FLAGS.overwrite)
  before, after = report["bytes_before"], report["bytes_after"]
  print("%s -> %s: kept %d variables, stripped %d; %d -> %d bytes (%.1f MB -> %.1f MB, %.1f%%)%s"
        % (report["input_checkpoint"], report["output_checkpoint"], report["num_kept"],
           report["num_stripped"], before, after, before / 1e6, after / 1e6,
           100.0 * after / max(before, 1), ", float16 storage" if FLAGS.fp16 else ""))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv))
