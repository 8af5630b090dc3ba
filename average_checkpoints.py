# coding=utf-8
r"""Averages the weights of several checkpoints of one model (checkpoint averaging, Vaswani 2017).

  python average_checkpoints.py --checkpoint_dir=output/nmt --num_last=5 \
      --output_dir=output/nmt_avg5
  python average_checkpoints.py --checkpoints=out/model.ckpt-8000,out/model.ckpt-9000 \
      --output_dir=output/avg

Every float variable that is not optimizer state is replaced by its element-wise mean over the
checkpoints (summed in float64, stored in its own dtype). Optimizer state (Adam slots
`<var>/adam_m`, `<var>/adam_v`, `<var>/Adam`, `<var>/Adam_1`, gradient accumulators
`<var>/grad_accum`, `beta1_power`, `beta2_power` and the dynamic loss scale `loss_scale`,
`loss_scale_good_steps`) is left out, unless --include_optimizer: then the Adam slots are averaged
too and the step-dependent state (beta powers, loss scale, accumulators) is taken from the newest
checkpoint. `global_step` and any other non-float variable come from the newest checkpoint
(highest global step).

--checkpoint_dir with --num_last=N takes the N checkpoints with the highest global steps among
those the `checkpoint` state file lists and the `*.index` files in the directory. All checkpoints
must have the same variable names, shapes and dtypes (a difference is a one-line error naming the
variable and the checkpoint). Nothing builds the model: the values are read with
tf.train.load_checkpoint and written with the name-based Saver format.

The output directory gets `model.ckpt-STEP` (STEP: the newest checkpoint's global step), a
`checkpoint` state file, the model's config / vocabulary / SentencePiece files found beside the
newest checkpoint, and `average_checkpoints.json` (what was averaged). It is usable as
--init_checkpoint by every script and as a model directory for prediction. It is written under a
temporary name and renamed when complete; an existing directory is replaced only when it is an
earlier output of ours and --overwrite is given, and never when it holds an input checkpoint.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os
import re

from absl import app
from absl import flags
from absl import logging
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import checkpoint_slimming

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

# Optimizer slots: averaged only with --include_optimizer.
SLOT_PATTERN = re.compile(r"/(adam_m|adam_v|Adam|Adam_1)$")
# Step-dependent optimizer state: taken from the newest checkpoint with --include_optimizer.
STEP_STATE_PATTERN = re.compile(
    r"(^|/)(grad_accum|beta1_power|beta2_power|loss_scale|loss_scale_good_steps)$")
GLOBAL_STEP = "global_step"
# Files beside the newest checkpoint that a model directory needs (configs, vocabularies).
COMPANION_PATTERNS = ("*config*.json", "vocab.txt", "labels.txt", "*.model", "*.vocab")
REPORT_NAME = "average_checkpoints.json"
_STEP_SUFFIX = re.compile(r"-(\d+)$")


def define_flags():
  """Defines the tool's flags (not at import time, so tests can import the module)."""
  flags.DEFINE_string("checkpoints", None, "Comma-separated checkpoint prefixes to average.")
  flags.DEFINE_string("checkpoint_dir", None, "Average the last --num_last checkpoints of this "
                      "directory (by global step).")
  flags.DEFINE_integer("num_last", None, "With --checkpoint_dir: how many checkpoints.")
  flags.DEFINE_string("output_dir", None, "Directory for the averaged checkpoint (must not "
                      "exist, or be an earlier output of this tool and --overwrite).")
  flags.DEFINE_bool("include_optimizer", False, "Keep the optimizer state (Adam slots "
                    "averaged, the rest from the newest checkpoint).")
  flags.DEFINE_bool("overwrite", False, "Replace an earlier output of this tool at --output_dir.")


def is_optimizer_state(name):
  """Whether variable `name` is optimizer state (an Adam slot or step-dependent state)."""
  return bool(SLOT_PATTERN.search(name) or STEP_STATE_PATTERN.search(name))


def checkpoint_step(prefix):
  """The global step of a checkpoint: its global_step variable, else its `-N` name suffix.

  Args:
    prefix: checkpoint prefix.

  Returns:
    int, or None when neither is there.
  """
  reader = tf.train.load_checkpoint(prefix)
  if reader.has_tensor(GLOBAL_STEP):
    return int(reader.get_tensor(GLOBAL_STEP))
  match = _STEP_SUFFIX.search(prefix)
  return int(match.group(1)) if match else None


def checkpoints_by_step(checkpoint_dir, flag_name="checkpoint_dir"):
  """The checkpoints of a directory, oldest first.

  They are those its `checkpoint` state file lists and those with a `.index` file there
  (a state file keeps only the last few; files may have been copied in).

  Args:
    checkpoint_dir: a model directory.
    flag_name: the flag that named it, for messages.

  Returns:
    List of (global step, prefix), sorted by step (ties by name). Fails with one line when the
    directory has none, or when a checkpoint has no step.
  """
  if not tf.io.gfile.isdir(checkpoint_dir):
    common.fail("--%s=%s: not a directory" % (flag_name, checkpoint_dir))
  prefixes = set()
  state = tf1.train.get_checkpoint_state(checkpoint_dir)
  if state is not None:
    for path in state.all_model_checkpoint_paths:
      if not os.path.isabs(path) and "://" not in path:
        path = os.path.join(checkpoint_dir, path)
      if tf.io.gfile.exists(path + ".index"):
        prefixes.add(os.path.normpath(path))
  for index in tf.io.gfile.glob(os.path.join(checkpoint_dir, "*.index")):
    if not common.is_temp_path(index[:-len(".index")]):
      prefixes.add(os.path.normpath(index[:-len(".index")]))
  if not prefixes:
    common.fail("--%s=%s: holds no checkpoint" % (flag_name, checkpoint_dir))
  found = []
  for prefix in prefixes:
    step = checkpoint_step(prefix)
    if step is None:
      common.fail("--%s=%s: %s has no global_step and no -STEP suffix; list the checkpoints "
                  "with --checkpoints" % (flag_name, checkpoint_dir, prefix))
    found.append((step, prefix))
  return sorted(found)


def last_checkpoints(checkpoint_dir, num_last, flag_name="checkpoint_dir"):
  """The prefixes of the num_last checkpoints with the highest global steps, oldest first.

  Args:
    checkpoint_dir: a model directory.
    num_last: int >= 1.
    flag_name: the flag that named the directory.

  Returns:
    List of num_last prefixes. Fails with one line when the directory has fewer.
  """
  found = checkpoints_by_step(checkpoint_dir, flag_name)
  if len(found) < num_last:
    common.fail("--num_last=%d: --%s=%s holds only %d checkpoint(s) (steps %s)" % (
        num_last, flag_name, checkpoint_dir, len(found), ", ".join(str(s) for s, _ in found)))
  return [prefix for _, prefix in found[-num_last:]]


def _check_same_variables(prefixes, maps):
  """Fails with one line naming the variable and the checkpoint where names, shapes or dtypes
  differ from the first checkpoint's."""
  (first, (shapes0, dtypes0)) = prefixes[0], maps[0]
  for prefix, (shapes, dtypes) in zip(prefixes[1:], maps[1:]):
    for name in sorted(set(shapes0) | set(shapes)):
      if name not in shapes:
        common.fail("variable %s: in %s but missing from %s" % (name, first, prefix))
      if name not in shapes0:
        common.fail("variable %s: in %s but missing from %s" % (name, prefix, first))
      if list(shapes[name]) != list(shapes0[name]):
        common.fail("variable %s: shape %s in %s but %s in %s" % (
            name, list(shapes0[name]), first, list(shapes[name]), prefix))
      if dtypes[name] != dtypes0[name]:
        common.fail("variable %s: dtype %s in %s but %s in %s" % (
            name, dtypes0[name].name, first, dtypes[name].name, prefix))


def average_checkpoints(prefixes, include_optimizer=False):
  """Averages the checkpoints' float variables (see the module docstring).

  Args:
    prefixes: list of checkpoint prefixes (at least one, no duplicates).
    include_optimizer: keep optimizer state (slots averaged, step state from the newest).

  Returns:
    (values, step, newest, report): dict name -> numpy value; the newest checkpoint's global
    step (None when it has none); the newest prefix; dict with "averaged", "copied",
    "dropped" name lists.
  """
  if not prefixes:
    common.fail("no checkpoints to average")
  if len(set(os.path.normpath(p) for p in prefixes)) != len(prefixes):
    common.fail("--checkpoints=%s: lists a checkpoint twice" % ",".join(prefixes))
  readers = [tf.train.load_checkpoint(p) for p in prefixes]
  maps = [(r.get_variable_to_shape_map(), r.get_variable_to_dtype_map()) for r in readers]
  _check_same_variables(prefixes, maps)
  steps = [checkpoint_step(p) for p in prefixes]
  # The newest: the highest step (the last listed among equals, or when steps are unknown).
  newest = max(range(len(prefixes)), key=lambda i: (steps[i] if steps[i] is not None else -1, i))
  shapes, dtypes = maps[0]
  values = {}
  report = {"averaged": [], "copied": [], "dropped": []}
  for name in sorted(shapes):
    optimizer = is_optimizer_state(name)
    if optimizer and not include_optimizer:
      report["dropped"].append(name)
      continue
    if dtypes[name].is_floating and name != GLOBAL_STEP and not STEP_STATE_PATTERN.search(name):
      total = np.zeros(shapes[name], np.float64)
      for reader in readers:
        total += reader.get_tensor(name).astype(np.float64)
      values[name] = (total / len(readers)).astype(dtypes[name].as_numpy_dtype)
      report["averaged"].append(name)
    else:
      values[name] = readers[newest].get_tensor(name)
      report["copied"].append(name)
  return values, steps[newest], prefixes[newest], report


def _copy_companions(source_dir, target_dir):
  """Copies the config / vocabulary files beside the newest checkpoint; returns their names."""
  copied = []
  for pattern in COMPANION_PATTERNS:
    for path in sorted(tf.io.gfile.glob(os.path.join(source_dir, pattern))):
      name = os.path.basename(path)
      if name in copied or common.is_temp_path(path) or name == common.EXPORT_MARKER or \
          tf.io.gfile.isdir(path):
        continue
      tf.io.gfile.copy(path, os.path.join(target_dir, name), overwrite=True)
      copied.append(name)
  return copied


def write_averaged_checkpoint(prefixes, output_dir, include_optimizer=False, overwrite=False,
                              log_fn=None):
  """Averages `prefixes` and writes output_dir/model.ckpt-STEP (atomically), with its state file.

  Args:
    prefixes: checkpoint prefixes.
    output_dir: the new directory.
    include_optimizer: see average_checkpoints.
    overwrite: replace an earlier output of this tool at output_dir.
    log_fn: function(str) for progress lines.

  Returns:
    The report dict (also written as output_dir/average_checkpoints.json): "checkpoints",
    "steps", "output_checkpoint", "global_step", "num_averaged", "num_copied", "num_dropped",
    "companion_files".
  """
  log_fn = log_fn or logging.info
  if not output_dir:
    common.fail("--output_dir is required")
  output_dir = output_dir.rstrip("/")
  # Refused before the work: a directory that is not an earlier output of ours, or holds inputs.
  common.check_export_dir(output_dir, "output_dir", overwrite, prefixes, holds_checkpoints=True)
  log_fn("averaging %d checkpoints: %s" % (len(prefixes), ", ".join(prefixes)))
  values, step, newest, report = average_checkpoints(prefixes, include_optimizer)
  name = "model.ckpt-%d" % (step or 0)
  with common.atomic_directory(output_dir, "output_dir", overwrite, prefixes,
                               holds_checkpoints=True) as tmp_dir:
    tf.io.gfile.makedirs(tmp_dir)
    checkpoint_slimming.write_checkpoint(values, os.path.join(tmp_dir, name))
    # The state file must name the final location: relative names do. TensorFlow rewrites a
    # relative name against a relative save_dir (giving "../../model.ckpt-N" for out/avg), so
    # the directory is made absolute and the name stays as it is.
    tf1.train.update_checkpoint_state(os.path.abspath(tmp_dir), name,
                                      all_model_checkpoint_paths=[name])
    companions = _copy_companions(os.path.dirname(newest), tmp_dir)
    summary = {
        "checkpoints": list(prefixes),
        "steps": [checkpoint_step(p) for p in prefixes],
        "output_checkpoint": os.path.join(output_dir, name),
        "global_step": step,
        "include_optimizer": include_optimizer,
        "num_averaged": len(report["averaged"]),
        "num_copied": len(report["copied"]),
        "num_dropped": len(report["dropped"]),
        "copied_from_newest": report["copied"],
        "companion_files": companions,
    }
    with tf.io.gfile.GFile(os.path.join(tmp_dir, REPORT_NAME), "w") as f:
      f.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
  return summary


def _checkpoint_prefixes(checkpoints, checkpoint_dir, num_last):
  """The checkpoint prefixes named by --checkpoints or --checkpoint_dir/--num_last.

  Args:
    checkpoints: --checkpoints (comma-separated prefixes or directories), or None.
    checkpoint_dir: --checkpoint_dir, or None.
    num_last: --num_last, or None.

  Returns:
    list of checkpoint prefixes (one-line errors for a bad combination or name).
  """
  if bool(checkpoints) == bool(checkpoint_dir):
    common.fail("give exactly one of --checkpoints and --checkpoint_dir")
  if checkpoint_dir:
    if num_last is None:
      common.fail("--num_last is required with --checkpoint_dir")
    if num_last < 1:
      common.fail("--num_last=%d: must be >= 1" % num_last)
    return last_checkpoints(checkpoint_dir, num_last)
  if num_last is not None:
    common.fail("--num_last goes with --checkpoint_dir, not --checkpoints")
  names = [p.strip() for p in checkpoints.split(",") if p.strip()]
  if not names:
    common.fail("--checkpoints is empty")
  for name in names:
    if tf.io.gfile.isdir(name):
      common.fail("--checkpoints: %s is a directory; name checkpoint prefixes "
                  "(or use --checkpoint_dir with --num_last)" % name)
  return [export_utils.resolve_checkpoint(name, "checkpoints") for name in names]


def main(_):
  tf1.logging.set_verbosity(tf1.logging.INFO)
  common.check_output_dir(FLAGS.output_dir or "", "output_dir")
  prefixes = _checkpoint_prefixes(FLAGS.checkpoints, FLAGS.checkpoint_dir, FLAGS.num_last)
  if len(prefixes) == 1:
    logging.warning("only one checkpoint: the output is a copy of its weights")
  summary = write_averaged_checkpoint(prefixes, FLAGS.output_dir, FLAGS.include_optimizer,
                                      FLAGS.overwrite)
  print("averaged %d checkpoints (steps %s) -> %s: %d variables averaged, %d copied from the "
        "newest, %d optimizer variables left out" % (
            len(prefixes), ", ".join(str(s) for s in summary["steps"]),
            summary["output_checkpoint"], summary["num_averaged"], summary["num_copied"],
            summary["num_dropped"]))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
