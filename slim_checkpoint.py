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

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import tensorflow as tf

from realformer_tf import common
from realformer_tf import checkpoint_slimming

tf1 = tf.compat.v1

FLAGS = flags.FLAGS


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


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  report = checkpoint_slimming.slim_checkpoint(
      FLAGS.input_checkpoint, FLAGS.output_dir, FLAGS.fp16, FLAGS.to_fp32, FLAGS.keep_optimizer,
      FLAGS.overwrite)
  before, after = report["bytes_before"], report["bytes_after"]
  print("%s -> %s: kept %d variables, stripped %d; %d -> %d bytes (%.1f MB -> %.1f MB, %.1f%%)%s"
        % (report["input_checkpoint"], report["output_checkpoint"], report["num_kept"],
           report["num_stripped"], before, after, before / 1e6, after / 1e6,
           100.0 * after / max(before, 1), ", float16 storage" if FLAGS.fp16 else ""))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
