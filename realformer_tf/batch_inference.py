# coding=utf-8
"""Batch inference over a checkpoint in a TF1 graph: what extract_features.py and
predict_masked.py share.

Padding a batch of id lists (`pad_batch`) and trimming fixed-length inputs to the batch's
padded length (`trimmed_inputs`, --padding), loading the weights into a session (restored with
every graph variable checked, or a seeded random initialisation: `weights_loader`), finding the
config beside a checkpoint (`resolve_config_file`), and writing a group of output files that
appear together or not at all (`atomic_outputs`, `check_outputs`).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import contextlib
import errno
import os

import numpy as np
import tensorflow as tf

from realformer_tf import checkpoint_utils
from realformer_tf import common
import modeling
from realformer_tf import batch_padding

tf1 = tf.compat.v1

# The graph-level seed of a --allow_random_eval model (same random weights on every run).
RANDOM_WEIGHTS_SEED = 12345


def pad_batch(ids_list, type_ids_list, length=None):
  """Pads a batch to `length` (or to its longest example).

  Args:
    ids_list: list of B lists of word piece ids.
    type_ids_list: list of B lists of segment ids (same lengths).
    length: the padded length S (at least the longest example's), or None: the longest.

  Returns:
    (input_ids, input_mask, input_type_ids): int32 arrays [B, S]; padding has id 0, mask 0 and
    segment 0 (as the official zero-padding).
  """
  seq = length or max(len(ids) for ids in ids_list)
  input_ids = np.zeros([len(ids_list), seq], np.int32)
  input_mask = np.zeros([len(ids_list), seq], np.int32)
  input_type_ids = np.zeros([len(ids_list), seq], np.int32)
  for i, (ids, type_ids) in enumerate(zip(ids_list, type_ids_list)):
    input_ids[i, :len(ids)] = ids
    input_mask[i, :len(ids)] = 1
    input_type_ids[i, :len(ids)] = type_ids
  return input_ids, input_mask, input_type_ids


def trimmed_inputs(inputs, padding, max_seq_length):
  """The model's inputs under --padding: `inputs` sliced to the batch's padded length.

  Args:
    inputs: dict input_ids / input_mask / input_type_ids -> int32 [batch, max_seq_length]
      Tensors (zero-padded), graph or eager.
    padding: "longest", "max_length" or "bucket" (resolve_padding).
    max_seq_length: their length.

  Returns:
    dict like inputs, [batch, S]: S = max_seq_length for max_length, else the longest
    example's length rounded up (batch_padding.trim_batch_to_longest; padding_buckets for
    bucket).
  """
  if padding == "max_length":
    return dict(inputs)
  buckets = batch_padding.padding_buckets(max_seq_length) if padding == "bucket" else None
  return batch_padding.trim_batch_to_longest(
      inputs, max_seq_length, seq_names=("input_ids", "input_mask", "input_type_ids"),
      buckets=buckets)


def checkpoint_saver(checkpoint, flag_name="init_checkpoint"):
  """A Saver that restores every global variable of the default graph from `checkpoint`.

  Variables of the checkpoint that the graph lacks (classifier heads, optimizer slots,
  global_step) are ignored; a graph variable the checkpoint lacks, or one with another shape
  or dtype there, is a one-line error (before any input is read). A checkpoint that supplies
  none of them (another model's, e.g. a translation checkpoint) says so: it holds no trained
  weights for this model.

  Args:
    checkpoint: checkpoint prefix.
    flag_name: the flag that named it, for messages.

  Returns:
    tf.compat.v1.train.Saver; call .restore(sess, checkpoint).
  """
  variables = tf1.global_variables()
  try:
    assignment_map, loaded = modeling.get_assignment_map_from_checkpoint(variables, checkpoint)
  except ValueError as e:
    common.fail(str(e))
  if variables and not loaded:
    common.fail("--%s=%s: supplies none of the model's %d variables (a checkpoint of another "
                "model?), so there are no trained weights to use; give a checkpoint of this "
                "model (random weights only deliberately: --allow_random_eval and no --%s)" %
                (flag_name, checkpoint, len(variables), flag_name))
  missing = [v.op.name for v in variables if v.op.name not in loaded]
  if missing:
    common.fail("--%s=%s: lacks %d variable(s) the model needs (wrong "
                "--bert_config_file or --layer_norm_type?): %s" %
                (flag_name, checkpoint, len(missing), ", ".join(missing[:5])))
  by_name = {v.op.name: v for v in variables}
  return tf1.train.Saver(var_list={name: by_name[name] for name in assignment_map})


def weights_loader(checkpoint):
  """How a Session of the default graph gets its weights: restored, or a random initialisation.

  Call in the graph after the model is built. For random weights (--allow_random_eval) the
  graph's seed should be set before the model (tf1.set_random_seed(RANDOM_WEIGHTS_SEED)), so
  every run draws the same weights.

  Args:
    checkpoint: checkpoint prefix, or None for random weights.

  Returns:
    function(sess) that loads the weights.
  """
  if checkpoint is None:
    init = tf1.global_variables_initializer()
    return lambda sess: sess.run(init)
  saver = checkpoint_saver(checkpoint)
  return lambda sess: saver.restore(sess, checkpoint)


def _named_error(error, path):
  """`error` (raised while writing `path`) as an OSError naming `path` (common.run_main prints
  it as one line), unless it already names a file."""
  named = common.with_file_name(error, path)
  if named is not error or (isinstance(error, OSError) and error.filename):
    return named
  if isinstance(error, OSError):
    return OSError(error.errno, error.strerror or str(error), path)
  # A tf.io.gfile error that is no storage error (permission, missing directory, ...).
  codes = {tf.errors.PermissionDeniedError: errno.EACCES, tf.errors.NotFoundError: errno.ENOENT}
  message = str(getattr(error, "message", error)).splitlines()[0]
  return OSError(codes.get(type(error), 0), message, path)


class _NamedWriter(object):
  """A file object whose write errors name the final output path."""

  def __init__(self, f, path):
    self._f = f
    self.path = path

  def write(self, data):
    try:
      return self._f.write(data)
    except (OSError, tf.errors.OpError) as e:
      raise _named_error(e, self.path) from e

  def close(self):
    try:
      self._f.close()
    except (OSError, tf.errors.OpError) as e:
      raise _named_error(e, self.path) from e


@contextlib.contextmanager
def atomic_outputs(outputs):
  """Writes several files under temporary names; renames them all only when all are complete.

  common.atomic_output for a group of outputs that belong together (features and embeddings,
  a result and its checkpoint sidecar): on any error (or Ctrl-C) inside the block, every
  temporary is removed and no final name appears; one output is never renamed into place while
  another failed. Errors name the output file (one line through common.run_main).

  Args:
    outputs: list of (path, mode) pairs, mode "w" or "wb"; a None path is skipped.

  Yields:
    List of writable file objects (None for a None path), in the order of `outputs`.
  """
  entries = []
  try:
    for path, mode in outputs:
      if not path:
        entries.append(None)
        continue
      common.remove_stale_temps(path)
      parent = os.path.dirname(path)
      tmp = common.temp_path(path)
      try:
        if parent:
          tf.io.gfile.makedirs(parent)
        f = tf.io.gfile.GFile(tmp, mode)
        entries.append((path, tmp, _NamedWriter(f, path)))
        f.write("" if "b" not in mode else b"")   # the file exists even when nothing follows
      except (OSError, tf.errors.OpError) as e:
        raise _named_error(e, path) from e
    yield [entry[2] if entry else None for entry in entries]
    for entry in entries:
      if entry:
        entry[2].close()
    renamed = []
    try:
      for entry in entries:
        if entry:
          path, tmp, _ = entry
          try:
            tf.io.gfile.rename(tmp, path, overwrite=True)
          except (OSError, tf.errors.OpError) as e:
            raise _named_error(e, path) from e
          renamed.append(path)
    except BaseException:
      # All or nothing: a group that could not be completed is not left half in place.
      for path in renamed:
        if tf.io.gfile.exists(path):
          tf.io.gfile.remove(path)
      raise
  finally:
    for entry in entries:
      if entry:
        path, tmp, writer = entry
        try:
          writer._f.close()  # pylint: disable=protected-access
        except (OSError, tf.errors.OpError):
          pass
        if tf.io.gfile.exists(tmp):
          tf.io.gfile.remove(tmp)


def resolve_config_file(bert_config_file, init_checkpoint, checkpoint):
  """--bert_config_file, or bert_config.json in the checkpoint's directory.

  Args:
    bert_config_file: the flag (may be empty).
    init_checkpoint: the --init_checkpoint flag (a prefix or a directory), or None (random
      weights: then --bert_config_file is required).
    checkpoint: the resolved checkpoint prefix (None with init_checkpoint None).

  Returns:
    The config file path (existence is checked by model_config.load_config).
  """
  if bert_config_file:
    return bert_config_file
  if not init_checkpoint:
    common.fail("--bert_config_file is required (no --init_checkpoint to find it beside)")
  directory = (init_checkpoint if tf.io.gfile.isdir(init_checkpoint)
               else os.path.dirname(checkpoint))
  candidate = os.path.join(directory, "bert_config.json")
  if not tf.io.gfile.exists(candidate):
    common.fail("--bert_config_file is required: there is no bert_config.json beside "
                "--init_checkpoint=%s" % init_checkpoint)
  return candidate


def check_outputs(outputs, inputs):
  """Fails with one line if an output (or its .checkpoint.json sidecar) would replace an input,
  is a directory, lies under a file, or is another output.

  Args:
    outputs: list of (path or None, flag name).
    inputs: every file the job reads (checkpoint_utils.checkpoint_files included).
  """
  seen = {}
  for path, flag_name in outputs:
    if not path:
      continue
    for target in (path, checkpoint_utils.sidecar_path(path)):
      common.check_output_path(target, flag_name)
      if tf.io.gfile.isdir(target):
        common.fail("--%s=%s: %s is a directory, expected a file name" %
                    (flag_name, path, target))
      common.check_not_input(target, inputs, flag_name)
      what = "--%s" % flag_name if target == path else "the sidecar of --%s" % flag_name
      real = os.path.realpath(target)
      if real in seen:
        common.fail("--%s=%s: %sis also %s; give different files" %
                    (flag_name, path, "" if target == path else "its sidecar %s " % target,
                     seen[real]))
      seen[real] = what
