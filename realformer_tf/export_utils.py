# coding=utf-8
"""Exports a model from a checkpoint as a SavedModel with a `serving_default` signature.

Shared by every tool that reads a checkpoint (`resolve_checkpoint`) or exports an id-based
SavedModel (`export_saved_model`); the TF2 SavedModels of export_hub.py, run_ner.py and
translation/export_translation.py learn their model's variables (`collect_variable_specs`),
read them from a checkpoint (`variables_from_checkpoint`; seeded `random_variables` for
--allow_random_eval; `model_variables` either), build their graphs over them (`in_variables`),
tokenise with the official BasicTokenizer's character classes (`PUNCT_PATTERN`,
`SPACE_PATTERN`, `CJK_PATTERN`) and are written by `save_atomically`. The id-based graph is
built with tf.compat.v1 placeholders in a fresh tf.Graph, the checkpoint is restored with a
Saver, and the result is written with tf.compat.v1.saved_model.Builder (tags ["serve"]). Both
kinds load with plain `tf.saved_model.load(path)` in TF2 eager mode:

    loaded = tf.saved_model.load(export_dir)
    outputs = loaded.signatures["serving_default"](input_ids=..., input_mask=..., segment_ids=...)

The SavedModel is written under a temporary name and renamed when complete, so an interrupted
export never leaves a directory that looks finished.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import os
import re

import numpy as np
import tensorflow as tf

from realformer_tf import common

tf1 = tf.compat.v1

SIGNATURE_NAME = "serving_default"

# The official BasicTokenizer's character classes as RE2 patterns (for tf.strings /
# tensorflow-text ops in serving graphs: export_hub's preprocessor, run_ner's tagger).
# _is_punctuation: all non-alphanumeric printable ASCII, or Unicode category P*.
PUNCT_PATTERN = r"[!-/:-@\[-`{-~]|\p{P}"
# Separators left after cleaning (which maps \t \n \r and Zs to " "): Python's str.split()
# also splits on U+2028 / U+2029 (Zl, Zp); every other whitespace char is Cc and was dropped.
SPACE_PATTERN = r"[ \p{Zs}\x{2028}\x{2029}]"
# _is_chinese_char: the CJK ideograph blocks the official code pads with spaces.
CJK_PATTERN = (r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
               r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]")


def resolve_checkpoint(checkpoint_path, flag_name="init_checkpoint"):
  """Turns a checkpoint prefix or a model directory into a checkpoint prefix.

  Args:
    checkpoint_path: a checkpoint prefix (".../model.ckpt-1000"), a directory with a
      `checkpoint` state file (its latest checkpoint), or a directory without one that holds
      exactly one checkpoint (one `*.index`: the layout of Google's BERT releases,
      bert_model.ckpt.index / .data-*, or a converted model).
    flag_name: the flag the path came from, for error messages.

  Returns:
    The checkpoint prefix. Fails with a one-line error when there is none (or, in a directory
    without a state file, more than one).
  """
  if not checkpoint_path:
    common.fail("--%s: no checkpoint to export" % flag_name)
  if tf.io.gfile.isdir(checkpoint_path):
    latest = tf1.train.latest_checkpoint(checkpoint_path)
    if latest:
      return _readable(latest, checkpoint_path, flag_name)
    if tf.io.gfile.exists(os.path.join(checkpoint_path, "checkpoint")):
      # Not another checkpoint of the directory in place of the one the state file names.
      common.fail("--%s=%s: its `checkpoint` state file names no checkpoint that exists" % (
          flag_name, checkpoint_path))
    return _readable(_only_checkpoint_in(checkpoint_path, flag_name), checkpoint_path, flag_name)
  prefix = _prefix_of_checkpoint_file(checkpoint_path)
  if not (tf.io.gfile.exists(prefix + ".index") or tf.io.gfile.exists(prefix)):
    common.fail("--%s=%s: no checkpoint there" % (flag_name, checkpoint_path))
  return _readable(prefix, checkpoint_path, flag_name)


_CHECKPOINT_FILE = re.compile(r"^(.*)\.(index|meta|data-\d+-of-\d+)$")


def _prefix_of_checkpoint_file(path):
  """A checkpoint's own file name (model.ckpt.index, .meta, .data-00000-of-00001) -> its prefix."""
  match = _CHECKPOINT_FILE.match(path)
  if match and tf.io.gfile.exists(match.group(1) + ".index"):
    return match.group(1)
  return path


def _readable(prefix, given, flag_name):
  """`prefix` when its index opens; else one line naming the flag (a file of another format)."""
  try:
    tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError) as e:
    common.fail("--%s=%s: not a readable TensorFlow checkpoint (%s)" % (
        flag_name, given, first_line(e)))
  return prefix


def first_line(error):
  """The first line of an exception's message (a TensorFlow error's without its op context)."""
  message = str(getattr(error, "message", None) or error).strip()
  return message.splitlines()[0] if message else type(error).__name__


def read_tensor(reader, name, checkpoint_path):
  """reader.get_tensor(name), or one line naming the checkpoint when its data cannot be read.

  A data file cut short (a copy that stopped, a full disk while saving) opens (its index is
  whole) and fails only when a variable is read.

  Args:
    reader: tf.train.load_checkpoint(checkpoint_path).
    name: the variable.
    checkpoint_path: the checkpoint prefix, for the message.

  Returns:
    The numpy value.
  """
  try:
    return reader.get_tensor(name)
  except (tf.errors.OpError, IndexError, ValueError) as e:
    common.fail("checkpoint %s: variable %s cannot be read (%s); the data file is cut short or "
                "damaged" % (checkpoint_path, name, first_line(e)))


def _only_checkpoint_in(directory, flag_name):
  """The one checkpoint prefix of a directory without a `checkpoint` state file."""
  prefixes = sorted(path[:-len(".index")] for path in
                    tf.io.gfile.glob(os.path.join(directory, "*.index")))
  if len(prefixes) == 1:
    return prefixes[0]
  if not prefixes:
    common.fail("--%s=%s: directory has no checkpoint" % (flag_name, directory))
  common.fail("--%s=%s: directory has %d checkpoints (%s) and no `checkpoint` state file naming "
              "one; pass the prefix of the one to use" % (
                  flag_name, directory, len(prefixes),
                  ", ".join(os.path.basename(p) for p in prefixes[:4]) +
                  (", ..." if len(prefixes) > 4 else "")))


def range_checked(inputs, bert_config):
  """The id inputs, with the token and token-type ids passed through range assertions.

  A request whose ids lie outside the model's tables fails with an InvalidArgumentError naming
  the input (a segment id >= type_vocab_size would otherwise select no embedding at all), and
  one longer than max_position_embeddings with one naming the length (instead of an error
  deep inside the embedding lookup). Used by export_saved_model's graph, by
  serving.BertClassifier's `serving_ids` signature and by serving.encoder_graph (the TF-Hub
  encoder's `input_word_ids` / `input_type_ids`).

  Args:
    inputs: dict name -> int tensor (placeholders, or a tf.function's arguments): input_ids or
      input_word_ids, segment_ids or input_type_ids [batch, seq], others passed through.
    bert_config: modeling.BertConfig or None (no checks).

  Returns:
    dict name -> tensor, to give to the model builder (signature inputs stay the originals).
  """
  if bert_config is None:
    return inputs
  limits = {"input_ids": ("vocab_size", bert_config.vocab_size),
            "input_word_ids": ("vocab_size", bert_config.vocab_size),
            "segment_ids": ("type_vocab_size", bert_config.type_vocab_size),
            "input_type_ids": ("type_vocab_size", bert_config.type_vocab_size)}
  checked = dict(inputs)
  for name, (limit_name, limit) in sorted(limits.items()):
    if name not in inputs:
      continue
    tensor = inputs[name]
    message = "%s must be in [0, %s=%d)" % (name, limit_name, limit)
    asserts = [tf1.debugging.assert_non_negative(tensor, message=message),
               tf1.debugging.assert_less(tensor, tf.cast(limit, tensor.dtype), message=message)]
    if limit_name == "vocab_size":
      asserts.append(tf1.debugging.assert_less_equal(
          tf.shape(tensor)[-1], bert_config.max_position_embeddings,
          message="%s: the sequence length must be <= max_position_embeddings=%d" % (
              name, bert_config.max_position_embeddings)))
    with tf.control_dependencies(asserts):
      checked[name] = tf.identity(tensor)
  return checked


def export_saved_model(build_fn, checkpoint_path, export_dir, input_specs, extra_files=None,
                       signature_name=SIGNATURE_NAME, allow_missing=False, overwrite=False,
                       protected_paths=(), flag_name="export_dir", bert_config=None):
  """Builds the serving graph, restores `checkpoint_path` and writes a SavedModel.

  Args:
    build_fn: function(placeholders) -> dict of output name -> tensor. `placeholders` is a dict
      name -> tf.compat.v1.placeholder built from `input_specs`. It must build the model in
      inference mode (no dropout); every variable it creates must be in the checkpoint (unless
      allow_missing).
    checkpoint_path: checkpoint prefix or directory (its latest checkpoint is used).
    export_dir: the SavedModel directory to write. An existing one is replaced only when it is
      an earlier export of ours and overwrite is set (common.check_export_dir).
    input_specs: dict name -> (dtype, shape), e.g. {"input_ids": (tf.int32, [None, 128])}.
    extra_files: optional dict file name -> str content written into export_dir beside the
      SavedModel (e.g. labels.txt, bert_config.json).
    signature_name: the signature key ("serving_default").
    allow_missing: if True, variables not in the checkpoint keep their initial values
      (logged); otherwise a missing variable is a one-line error.

  Returns:
    The checkpoint prefix that was exported.
  """
  checkpoint_path = resolve_checkpoint(checkpoint_path)
  protected_paths = list(protected_paths) + [checkpoint_path]
  # Checked before the (slow) graph build, and again by atomic_directory before the rename.
  common.check_export_dir(export_dir, flag_name, overwrite, protected_paths)
  if not input_specs:
    common.fail("export_saved_model: input_specs is empty")
  export_dir = export_dir.rstrip("/")
  reader = tf1.train.NewCheckpointReader(checkpoint_path)
  ckpt_shapes = reader.get_variable_to_shape_map()

  graph = tf.Graph()
  with graph.as_default():
    placeholders = {}
    for name in sorted(input_specs):
      dtype, shape = input_specs[name]
      placeholders[name] = tf1.placeholder(dtype, shape=shape, name=name)
    outputs = build_fn(range_checked(placeholders, bert_config))
    if not outputs:
      common.fail("export_saved_model: build_fn returned no outputs")

    variables = tf1.global_variables()
    restore_vars = {}
    missing = []
    for var in variables:
      name = var.op.name
      if name in ckpt_shapes:
        if list(ckpt_shapes[name]) != var.shape.as_list():
          common.fail("checkpoint %s: variable %s has shape %s there but %s in the model" %
                      (checkpoint_path, name, list(ckpt_shapes[name]), var.shape.as_list()))
        restore_vars[name] = var
      else:
        missing.append(name)
    if missing and not allow_missing:
      common.fail("checkpoint %s: lacks %d variable(s) the exported model needs: %s" %
                  (checkpoint_path, len(missing), ", ".join(missing[:5])))
    if missing:
      tf1.logging.warning("export: %d variables not in %s keep their initial values: %s",
                          len(missing), checkpoint_path, ", ".join(missing))

    saver = tf1.train.Saver(var_list=restore_vars)
    with tf1.Session(graph=graph) as sess, common.atomic_directory(
        export_dir, flag_name, overwrite, protected_paths) as tmp_dir:
      sess.run(tf1.global_variables_initializer())
      saver.restore(sess, checkpoint_path)
      signature = tf1.saved_model.signature_def_utils.predict_signature_def(
          inputs=placeholders, outputs=outputs)
      builder = tf1.saved_model.Builder(tmp_dir)
      builder.add_meta_graph_and_variables(
          sess, [tf1.saved_model.tag_constants.SERVING],
          signature_def_map={signature_name: signature},
          strip_default_attrs=True)
      builder.save()
      common.write_files(tmp_dir, extra_files)

  tf1.logging.info("Exported %s to SavedModel %s (signature %s: inputs %s, outputs %s)",
                   checkpoint_path, export_dir, signature_name,
                   ", ".join(sorted(input_specs)), ", ".join(sorted(outputs)))
  return checkpoint_path


class _VariableGetter(object):
  """A tf.compat.v1 custom getter that returns existing tf.Variables by name."""

  def __init__(self, variables):
    self.variables = variables

  def __call__(self, getter, name, *args, **kwargs):
    del getter, args, kwargs  # Never creates: every variable exists already.
    if name not in self.variables:
      raise ValueError("export: the model asks for variable %s that was not created" % name)
    return self.variables[name]


def in_variables(variables):
  """A variable scope in which tf.compat.v1.get_variable returns existing variables.

  A model built inside it (tf.function of a tf.Module, TF2 SavedModels) uses the given
  tf.Variables by name instead of creating its own: export_hub's encoder / classifier,
  run_ner's tagger, translation/export_translation's translator.

  Args:
    variables: dict name -> tf.Variable with every variable the model asks for
      (variables_from_checkpoint).

  Returns:
    A tf.compat.v1.variable_scope context manager; asking for a missing name raises ValueError.
  """
  return tf1.variable_scope(tf1.get_variable_scope(), custom_getter=_VariableGetter(variables),
                            auxiliary_name_scope=False)


# ----------------------------------------------------------------------------------------------
# TF2 SavedModels over tf.Variables read from a checkpoint (export_hub's encoder / classifier,
# run_ner's tagger, translation/export_translation's translator).

# The graph-level seed of --allow_random_eval weights (the same random model on every run).
RANDOM_WEIGHTS_SEED = 12345


def collect_variable_specs(build_fn):
  """Builds `build_fn` in a scratch graph to learn which variables the model creates.

  Args:
    build_fn: function() that builds the model with tf.compat.v1 variables (graph mode).

  Returns:
    dict variable name -> (shape list, trainable bool), in creation order.
  """
  specs = {}
  with tf.Graph().as_default():
    build_fn()
    trainable = set(v.op.name for v in tf1.trainable_variables())
    for var in tf1.global_variables():
      specs[var.op.name] = (var.shape.as_list(), var.op.name in trainable)
  return specs


def variables_from_checkpoint(specs, checkpoint_path, flag_name=None):
  """Creates one float32 tf.Variable per spec, initialised from the checkpoint.

  A float16 checkpoint (slim_checkpoint.py --fp16) is read and cast to float32.

  Args:
    specs: dict name -> (shape, trainable), as collect_variable_specs.
    checkpoint_path: checkpoint prefix.
    flag_name: the flag that named the checkpoint, for the message when it supplies none of
      the variables (None: "checkpoint PATH").

  Returns:
    dict name -> tf.Variable (eager, named like the checkpoint variable).
  """
  reader = tf.train.load_checkpoint(checkpoint_path)
  shapes = reader.get_variable_to_shape_map()
  if specs and not any(name in shapes for name in specs):
    where = ("--%s=%s" % (flag_name, checkpoint_path) if flag_name
             else "checkpoint %s" % checkpoint_path)
    common.fail("%s: supplies none of the model's %d variables (a checkpoint of another "
                "model?), so there are no trained weights to export; give a checkpoint of this "
                "model (random weights only deliberately: --allow_random_eval and no "
                "--init_checkpoint)" % (where, len(specs)))
  missing = [name for name in specs if name not in shapes]
  if missing:
    common.fail("checkpoint %s: lacks %d variable(s) the exported model needs: %s" %
                (checkpoint_path, len(missing), ", ".join(missing[:5])))
  variables = {}
  for name, (shape, trainable) in specs.items():
    if list(shapes[name]) != list(shape):
      common.fail("checkpoint %s: variable %s has shape %s there but %s in the model (check "
                  "--bert_config_file)" % (checkpoint_path, name, list(shapes[name]), shape))
    value = read_tensor(reader, name, checkpoint_path)
    if value.dtype != np.float32:
      value = value.astype(np.float32)
    variables[name] = tf.Variable(value, name=name, trainable=trainable)
  return variables


def random_variables(build_fn, specs, seed=RANDOM_WEIGHTS_SEED):
  """Creates one float32 tf.Variable per spec with the model's own (seeded) initialisation.

  For --allow_random_eval exports: the values are what a fresh tf.compat.v1 graph of
  `build_fn` initialises with graph seed `seed` (the same on every run).

  Args:
    build_fn: the function given to collect_variable_specs.
    specs: dict name -> (shape, trainable), as collect_variable_specs.
    seed: graph-level random seed.

  Returns:
    dict name -> tf.Variable, as variables_from_checkpoint.
  """
  with tf.Graph().as_default():
    tf1.set_random_seed(seed)
    build_fn()
    by_name = {v.op.name: v for v in tf1.global_variables()}
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      values = sess.run({name: by_name[name] for name in specs})
  return {name: tf.Variable(np.asarray(values[name], np.float32), name=name,
                            trainable=trainable)
          for name, (_, trainable) in specs.items()}


def model_variables(build_fn, checkpoint_path, flag_name="init_checkpoint"):
  """The variables `build_fn` creates: from `checkpoint_path`, or random ones when it is None.

  Args:
    build_fn: function() building the model in graph mode.
    checkpoint_path: checkpoint prefix, or None (--allow_random_eval).
    flag_name: the flag that named the checkpoint (for variables_from_checkpoint's message).

  Returns:
    dict name -> tf.Variable.
  """
  specs = collect_variable_specs(build_fn)
  if checkpoint_path is None:
    return random_variables(build_fn, specs)
  return variables_from_checkpoint(specs, checkpoint_path, flag_name=flag_name)


def save_atomically(module, export_dir, signatures, extra_files=None, overwrite=False,
                    protected_paths=(), flag_name="export_dir"):
  """tf.saved_model.save to a temporary directory, then rename to export_dir.

  Args:
    module: the tf.Module to save.
    export_dir: final directory: new, or an earlier export of ours (with overwrite).
    signatures: dict signature name -> concrete function.
    extra_files: dict file name -> text written beside saved_model.pb.
    overwrite: replace an earlier export of ours.
    protected_paths: paths the export must never replace (checkpoint, vocab, ...).
    flag_name: the flag that named export_dir, for messages.
  """
  with common.atomic_directory(export_dir, flag_name, overwrite, protected_paths) as tmp_dir:
    tf.saved_model.save(module, tmp_dir, signatures=signatures)
    common.write_files(tmp_dir, extra_files)
