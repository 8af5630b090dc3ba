# coding=utf-8
"""Which trained weights a job reads, and what it must never overwrite.

Shared by every tool that evaluates, predicts, extracts, exports or fine-tunes from a checkpoint:

- `define_trained_weights_flags` / `require_trained_weights`: evaluation, prediction, feature
  extraction and export from no trained weights stop before any work with one line, unless
  `--allow_random_eval` says it is deliberate (one flag name in every tool).
- `check_init_matches`: an `--init_checkpoint` that leaves any encoder variable of the model
  uninitialised (a checkpoint of another model, e.g. a BERT checkpoint given to ETC) is one
  line, unless `--allow_unmatched_init`; task heads and optimizer slots may start fresh. What
  the encoder is, per model family: `ENCODER_SCOPES`.
- `checkpoint_files`: the files a checkpoint prefix or directory resolves to (the `checkpoint`
  state file, every checkpoint's shards in that directory), for `common.check_not_input`.
- `checkpoint_record`: {"checkpoint": path, "global_step": N}, written beside results so a result
  file says which weights produced it; `write_sidecar` / `remove_sidecar` for result files of a
  fixed format (`<file>.checkpoint.json`).
- `require_eval_weights`: the checkpoint an evaluation / prediction / export without training
  reads (output_dir's latest, else a matching --init_checkpoint), or one line.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import os
import re

from absl import flags
import tensorflow as tf

from realformer_tf import common

tf1 = tf.compat.v1

ALLOW_RANDOM_EVAL_FLAG = "allow_random_eval"
ALLOW_UNMATCHED_INIT_FLAG = "allow_unmatched_init"

# Per model family, the variable scopes of its encoder: the variables an --init_checkpoint must
# supply. Everything else (task heads such as cls/..., output_weights, the long-task, NER and
# SQuAD heads) may start fresh. Translation initialises the whole encoder-decoder.
ENCODER_SCOPES = {
    "bert": ("bert/",),  # BertModel: run_pretraining, run_classifier / ner / squad, bert_windows
    "etc": ("etc_document_bert/",),  # etc_modeling.EtcModel's default name
    "translation": ("embeddings/", "encoder/", "decoder/"),  # nmt_modeling.NmtModel
}
# Encoder scopes a checkpoint may leave out as a whole: BERT's pooler (a Hugging Face model
# converted without one, convert_hf_checkpoint.py warns; SQuAD and NER build it but never use
# it). A checkpoint holding part of one must supply all of it.
OPTIONAL_ENCODER_SCOPES = ("bert/pooler/",)
# How many missing names a message lists.
_NAMES_SHOWN = 3

# Files of a checkpoint directory that training state lives in: the state file, the graph, and
# every checkpoint's shards (prefix.index, prefix.meta, prefix.data-00000-of-00001).
_STATE_FILE = "checkpoint"
_SHARD_RE = re.compile(r"^.+\.(index|meta|data-\d{5}-of-\d{5})$")


def define_trained_weights_flags(random_eval=True, unmatched_init=True):
  """Defines --allow_random_eval and --allow_unmatched_init (call once per tool).

  Args:
    random_eval: define --allow_random_eval (tools that evaluate, predict, extract or export).
    unmatched_init: define --allow_unmatched_init (tools that take --init_checkpoint).
  """
  if random_eval:
    flags.DEFINE_bool(
        ALLOW_RANDOM_EVAL_FLAG, False,
        "Evaluate / predict / extract / export even when no trained weights are given (no "
        "checkpoint in the output directory, no --init_checkpoint / --checkpoint): the results "
        "are those of a randomly initialised model. Without it such a job stops before any work.")
  if unmatched_init:
    flags.DEFINE_bool(
        ALLOW_UNMATCHED_INIT_FLAG, False,
        "Accept an --init_checkpoint that leaves some of the model's encoder variables "
        "uninitialised (normally an error: it is a checkpoint of another model or config, and "
        "those variables would start from random weights).")


def is_checkpoint(path):
  """Whether `path` is a checkpoint prefix or a directory whose state file names one."""
  if not path:
    return False
  if tf.io.gfile.isdir(path):
    return tf1.train.latest_checkpoint(path) is not None
  return tf.io.gfile.exists(path + ".index") or tf1.train.checkpoint_exists(path)


def require_trained_weights(action, weight_sources, allow_random_eval=False, give_flag=None):
  """Stops with one line unless one of `weight_sources` holds a checkpoint.

  Args:
    action: what would run, as the user typed it (e.g. "--do_eval", "extract_features").
    weight_sources: list of (flag_name, path) pairs the job would take weights from, in order;
      a path counts when it is a checkpoint prefix or a directory with a checkpoint.
    allow_random_eval: True to allow it anyway (the command passes --allow_random_eval).
    give_flag: the flag to name in the message (default: the first source's flag).

  Returns:
    (flag_name, path) of the first source holding a checkpoint, or None when allowed without.
  """
  for flag_name, path in weight_sources:
    if is_checkpoint(path):
      return flag_name, path
  if allow_random_eval:
    tf1.logging.warning("%s from randomly initialised weights (--allow_random_eval)", action)
    return None
  looked = ", ".join("--%s=%s" % (name, path) for name, path in weight_sources if path)
  flag_name = give_flag or (weight_sources[0][0] if weight_sources else "init_checkpoint")
  common.fail("%s: no trained weights (%s), so it would score a randomly initialised model; "
              "give --%s, or pass --allow_random_eval to do that deliberately" %
              (action, ("no checkpoint in " + looked) if looked else "no checkpoint given",
               flag_name))
  return None


def _variable_names(names):
  """`names` without `:0` output suffixes (tf.Variable.name -> checkpoint name), once each.

  The order is kept (a graph's creation order: embeddings first); a set comes out sorted.
  """
  if isinstance(names, (set, frozenset)):
    names = sorted(names)
  return list(collections.OrderedDict((re.sub(r":\d+$", "", n), None) for n in names))


def _in_scopes(name, scopes):
  return any(name.startswith(scope) for scope in scopes)


def _listed(names):
  """The first names of `names`, and ", ..." when there are more."""
  return ", ".join(names[:_NAMES_SHOWN]) + (", ..." if len(names) > _NAMES_SHOWN else "")


def encoder_variables(model_variable_names, loaded_names, encoder_scopes=None):
  """The model's encoder variables an init checkpoint must supply, and the optional ones it lacks.

  Args:
    model_variable_names: the names of the job's model variables (`:0` suffixes allowed): only
      variables the job's graph holds count.
    loaded_names: the model variables the checkpoint supplies.
    encoder_scopes: the scope prefixes of the model's encoder (an ENCODER_SCOPES entry); None
      takes every family's (a graph holds one family's encoder).

  Returns:
    (required, optional_absent): the names the checkpoint must supply, and the names under an
    OPTIONAL_ENCODER_SCOPES scope the checkpoint holds nothing of (they start from random
    weights), both in the order of model_variable_names.
  """
  if encoder_scopes is None:
    encoder_scopes = tuple(scope for scopes in ENCODER_SCOPES.values() for scope in scopes)
  loaded = set(_variable_names(loaded_names))
  encoder = [n for n in _variable_names(model_variable_names) if _in_scopes(n, encoder_scopes)]
  absent = tuple(scope for scope in OPTIONAL_ENCODER_SCOPES
                 if not any(n.startswith(scope) for n in loaded))
  required = [n for n in encoder if not _in_scopes(n, absent)]
  optional_absent = [n for n in encoder if _in_scopes(n, absent)]
  return required, optional_absent


def check_init_matches(init_checkpoint, loaded_names, model_variable_names, encoder_scopes=None,
                       allow_unmatched=False, flag_name="init_checkpoint"):
  """Fails with one line when `init_checkpoint` leaves an encoder variable of the model fresh.

  The encoder (ENCODER_SCOPES: embeddings and layers, the pooler when the checkpoint has one;
  translation's whole encoder-decoder) must come from the checkpoint; task heads and optimizer
  slots may start from random weights. A model with no variable in an encoder scope (a library
  caller's own model) only needs the checkpoint to supply some of its variables.

  Args:
    init_checkpoint: the checkpoint path given.
    loaded_names: the model variables it supplies (an assignment map or any collection).
    model_variable_names: the names of the model's variables (`:0` suffixes allowed).
    encoder_scopes: the encoder's scope prefixes (an ENCODER_SCOPES entry); None: every
      family's.
    allow_unmatched: True to accept missing encoder variables (a WARNING says how many start
      from random weights; the command passes --allow_unmatched_init).
    flag_name: the flag that named the checkpoint.

  Returns:
    The names of the encoder variables that start from random weights (optional ones the
    checkpoint has none of, and with allow_unmatched the missing ones).
  """
  names = _variable_names(model_variable_names)
  loaded = set(_variable_names(loaded_names)) & set(names)
  where = "--%s=%s" % (flag_name, init_checkpoint)
  required, optional_absent = encoder_variables(names, loaded, encoder_scopes)
  missing = [n for n in required if n not in loaded]
  if not required:
    # No known encoder in the graph: only a checkpoint supplying nothing is another model's.
    missing = [] if loaded else names
  if not loaded:
    problem = "supplies none of the model's %d variables (missing: %s)" % (len(names),
                                                                           _listed(missing))
  else:
    supplied = len(required) - len(missing)
    problem = ("supplies %d of the model's %d variables but %s of its %d encoder variables "
               "(missing: %s)" % (len(loaded), len(names),
                                  "only %d" % supplied if supplied else "none", len(required),
                                  _listed(missing)))
  if missing:
    if not allow_unmatched:
      common.fail("%s: %s; a checkpoint of another model or config? pass --allow_unmatched_init "
                  "to train the missing ones from random weights" % (where, problem))
    tf1.logging.warning("%s: %s; %d %svariables start from random weights "
                        "(--allow_unmatched_init)", where, problem, len(missing),
                        "encoder " if required else "")
  if optional_absent:
    scopes = [s.rstrip("/") for s in OPTIONAL_ENCODER_SCOPES
              if any(n.startswith(s) for n in optional_absent)]
    tf1.logging.warning("%s: has no %s variables: the model's %d start from random weights (%s)",
                        where, " or ".join(scopes), len(optional_absent),
                        _listed(optional_absent))
  return missing + optional_absent


def checkpoint_files(path):
  """The existing files that checkpoint `path` resolves to, which no output may replace.

  For a prefix or a directory: the directory's `checkpoint` state file, `graph.pbtxt` and the
  shards of every checkpoint in that directory (an output named `model.ckpt-500.index` next to
  the `model.ckpt-1000` being read would still break the directory's state).

  Args:
    path: a checkpoint prefix or a model directory (None / "" gives []).

  Returns:
    List of file paths.
  """
  if not path or "://" in path:
    return []
  directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
  if not os.path.isdir(directory):
    return []
  names = [n for n in os.listdir(directory)
           if n in (_STATE_FILE, "graph.pbtxt") or _SHARD_RE.match(n)]
  return [os.path.join(directory, n) for n in sorted(names)]


def checkpoint_step(prefix):
  """The global step of checkpoint `prefix`: its `global_step` variable, else its `-N` suffix.

  Returns:
    int, or None when neither says.
  """
  try:
    reader = tf.train.load_checkpoint(prefix)
    if reader.has_tensor("global_step"):
      return int(reader.get_tensor("global_step"))
  except (tf.errors.OpError, ValueError):
    pass
  match = re.search(r"-(\d+)$", prefix or "")
  return int(match.group(1)) if match else None


def checkpoint_record(prefix):
  """{"checkpoint": prefix, "global_step": N}: which weights produced a result.

  Args:
    prefix: checkpoint prefix, or None for randomly initialised weights.

  Returns:
    dict (checkpoint None and global_step None for random weights).
  """
  if not prefix:
    return {"checkpoint": None, "global_step": None}
  return {"checkpoint": prefix, "global_step": checkpoint_step(prefix)}


def require_eval_weights(action, output_dir, init_checkpoint, model_variable_names,
                         allow_random_eval=False, allow_unmatched=False, encoder_scopes=None):
  """Before an evaluation / prediction / export without training: the weights it will read.

  The latest checkpoint in `output_dir` (the Estimator restores it, whatever --init_checkpoint
  says); else `init_checkpoint` when it supplies every encoder variable of the model (the rule of
  check_init_matches; else one line, unless --allow_unmatched_init: then it is read when it
  supplies any variable); else one line (require_trained_weights) unless --allow_random_eval.

  Args:
    action: what would run, as the user typed it ("--do_eval", "--do_predict/--export_dir").
    output_dir: the job's model directory.
    init_checkpoint: --init_checkpoint (prefix or directory), or None.
    model_variable_names: the names of the model's variables (BERT and its head).
    allow_random_eval: True to allow no weights (--allow_random_eval).
    allow_unmatched: True to accept an init checkpoint lacking encoder variables (instead of an
      error; one supplying none of the variables counts as no weights; --allow_unmatched_init).
    encoder_scopes: the encoder's scope prefixes (an ENCODER_SCOPES entry); None: every
      family's.

  Returns:
    The checkpoint prefix the job will read, or None (randomly initialised, allowed).
  """
  latest = tf1.train.latest_checkpoint(output_dir) if tf.io.gfile.isdir(output_dir) else None
  if latest:
    return latest
  if init_checkpoint:
    if not is_checkpoint(init_checkpoint):
      common.fail("--init_checkpoint=%s: no checkpoint there" % init_checkpoint)
    prefix = (tf1.train.latest_checkpoint(init_checkpoint)
              if tf.io.gfile.isdir(init_checkpoint) else init_checkpoint)
    names = _variable_names(model_variable_names)
    wanted = set(names)
    matched = [n for n, _ in tf.train.list_variables(prefix) if n in wanted]
    check_init_matches(init_checkpoint, matched, names, encoder_scopes=encoder_scopes,
                       allow_unmatched=allow_unmatched)
    if matched:
      return prefix
  require_trained_weights(action, [("output_dir", output_dir)],
                          allow_random_eval=allow_random_eval, give_flag="init_checkpoint")
  return None


def sidecar_path(result_path):
  """`<result_path>.checkpoint.json`: which checkpoint produced a result file of fixed format."""
  return result_path + ".checkpoint.json"


def remove_sidecar(result_path):
  """Removes the sidecar of `result_path` (call before rewriting the result file, so that a job
  killed between the two writes leaves no sidecar naming other weights)."""
  path = sidecar_path(result_path)
  if tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)


def write_sidecar(result_path, record):
  """Writes `record` (checkpoint_record) as the sidecar of `result_path`, atomically."""
  common.write_json_atomic(sidecar_path(result_path), record)
