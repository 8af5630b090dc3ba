# coding=utf-8
"""What the drivers that resume share (paper/reproduce_table2.py, paper/reproduce_table7.py,
paper/reproduce_table8.py, paper/sweep.py, run_demo.py).

Runner (the repository's tools as logged child processes, stopped cleanly with the driver),
how a report names a file without this machine's paths (display_path, portable_text), the
mean / sample std of a result over seeds, the report's image folder, independent runs a few at
a time (run_in_parallel: a failure or a stop starts no further run), and the settings record
that keeps a rerun from mixing flags or input contents in one --output_dir
(check_settings_record: the settings, and the sha256 and size of every input file, so that a
file edited in place between two runs is noticed; input_identities / record_changes /
refuse_changes for a driver that keeps the record in a file of its own).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import concurrent.futures
import hashlib
import json
import os
import re
import sys

import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import subprocess_utils

REPO_DIR = common.REPO_DIR
RESUME_MESSAGE = "reproduction stopped; rerun the same command to resume"


def read_json(path):
  """The JSON in `path`, or None when it does not exist."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


# One input file of a driver as its settings record knows it.
#   label: its key in the record: the flag ("vocab_file"), or "flag/name" for one of the files a
#     directory, list or glob flag names ("corpus/wiki_00.txt"); no absolute path, so the same
#     data elsewhere is the same run.
#   path: where it is now. flag: the flag named in messages.
#   kind: "file" (sha256 and size of its bytes), "checkpoint" (a TensorFlow checkpoint prefix,
#     see checkpoint_identity) or "weights" (a large weights file: size and mtime).
InputFile = collections.namedtuple("InputFile", ["label", "path", "flag", "kind"])

# Hashing reads this much at a time (a corpus of tens of MB takes well under a second).
_HASH_BLOCK = 1 << 20


def input_file(flag, path, name=None, kind="file"):
  """The InputFile of one file of a flag.

  Args:
    flag: the flag that names it (without "--").
    path: the file (or checkpoint prefix).
    name: its name among several files of the flag (label "flag/name"); None: the flag's one
      file (label "flag").
    kind: "file", "checkpoint" or "weights" (see InputFile).

  Returns:
    InputFile.
  """
  return InputFile(flag if name is None else "%s/%s" % (flag, name), path, flag, kind)


def input_files(flag, paths, kind="file"):
  """The InputFiles of the files a directory, list or glob flag names, labelled by name.

  Args:
    flag: the flag.
    paths: the files it names (a directory's files the driver reads, a glob's matches).
    kind: see InputFile.

  Returns:
    list of InputFile, labelled "flag/<path relative to the files' common directory>".
  """
  paths = list(collections.OrderedDict.fromkeys(paths))
  if not paths:
    return []
  local = all("://" not in p for p in paths)
  if local:
    base = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])
    names = [os.path.relpath(os.path.abspath(p), base) for p in paths]
  else:
    names = [p.rsplit("/", 1)[-1] for p in paths]
    if len(set(names)) < len(names):
      names = list(paths)
  return [input_file(flag, path, name, kind) for path, name in zip(paths, names)]


def _open_binary(path):
  return tf.io.gfile.GFile(path, "rb") if "://" in path else open(path, "rb")


def _size(path):
  return tf.io.gfile.stat(path).length if "://" in path else os.path.getsize(path)


def file_identity(path):
  """{"sha256": hex digest, "size": bytes} of a file's contents."""
  digest = hashlib.sha256()
  with _open_binary(path) as f:
    for block in iter(lambda: f.read(_HASH_BLOCK), b""):
      digest.update(block)
  return {"sha256": digest.hexdigest(), "size": _size(path)}


def checkpoint_identity(prefix):
  """A cheap identity of a TensorFlow checkpoint: its .index's sha256 and its data files' sizes.

  The data files can be many GB and a driver rechecks its inputs on every rerun, so they are not
  read. The .index (small) holds every tensor's dtype, shape, offset and crc32c of its bytes
  (the tensor bundle format), so other weights under the same prefix change its digest; the
  data files' sizes catch a shard replaced without its index.

  Args:
    prefix: the checkpoint prefix (".../model.ckpt-1000").

  Returns:
    {"index_sha256": hex, "data_sizes": {data file suffix: bytes}}.
  """
  data = tf.io.gfile.glob(prefix + ".data-*")
  return {"index_sha256": file_identity(prefix + ".index")["sha256"],
          "data_sizes": {p[len(prefix):]: _size(p) for p in sorted(data)}}


def weights_identity(path):
  """A cheap identity of a large weights file (e.g. model.safetensors): its size and mtime.

  Such a file has no checksum of its own, and hashing GBs on every rerun is what this avoids; a
  copied file (a new mtime) is therefore taken as another one.
  """
  if "://" in path:
    stat = tf.io.gfile.stat(path)
    return {"size": stat.length, "mtime_ns": int(stat.mtime_nsec)}
  stat = os.stat(path)
  return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


_IDENTITIES = {"file": file_identity, "checkpoint": checkpoint_identity,
               "weights": weights_identity}


def input_identities(inputs):
  """{label: identity} of the InputFiles (see file_identity and the other identities)."""
  identities = {}
  for item in inputs:
    try:
      identities[item.label] = _IDENTITIES[item.kind](item.path)
    except (OSError, tf.errors.OpError) as e:
      common.fail("--%s=%s: cannot read it (%s)" % (item.flag, item.path,
                                                    getattr(e, "strerror", None) or e))
  return identities


def _short(value):
  text = json.dumps(value, sort_keys=True)
  return text if len(text) <= 40 else None


def settings_changes(recorded, settings):
  """What differs between two settings dicts: ["learning_rate 0.001 -> 0.0005", "config", ...]."""
  changes = []
  for key in sorted(set(recorded) | set(settings)):
    old, new = recorded.get(key), settings.get(key)
    if old != new:
      shown = (_short(old), _short(new))
      changes.append("%s %s -> %s" % ((key,) + shown) if None not in shown else key)
  return changes


def _describe_input(item):
  what = {"checkpoint": "checkpoint", "weights": "weights file"}.get(item.kind, "file")
  return "--%s %s %s" % (item.flag, what, item.path)


def _identity_change(old, new):
  """How an input's identity changed, in a few words."""
  if "sha256" in new and "sha256" in old:
    if old.get("size") not in (None, new["size"]):
      return "other contents (%s bytes, was %s)" % (new["size"], old["size"])
    return "other contents (sha256 differs)"
  if "index_sha256" in new and "index_sha256" in old:
    if old["index_sha256"] != new["index_sha256"]:
      return "other weights (its .index differs)"
    return "other data files (sizes differ)"
  if "mtime_ns" in new:
    return "another file (size or modification time differs)"
  return "other contents"


def input_changes(recorded, current, inputs, partial=False):
  """What differs between the recorded input identities and the current ones.

  Args:
    recorded: {label: identity} of the record.
    current: input_identities(inputs).
    inputs: the InputFiles of this run (named in the messages).
    partial: only inputs of both count (a sweep over other tasks reads other files).

  Returns:
    list of str, one per input that differs, e.g. "--corpus file data/a.txt: other contents
    (12 bytes, was 10)".
  """
  by_label = {item.label: item for item in inputs}
  changes = []
  for label in sorted(set(recorded) | set(current)):
    old, new = recorded.get(label), current.get(label)
    if old == new or (partial and (old is None or new is None)):
      continue
    if new is None:
      changes.append("input %s: not read by this run" % label)
    elif old is None:
      changes.append("%s: not an input of the recorded run" % _describe_input(by_label[label]))
    else:
      changes.append("%s: %s" % (_describe_input(by_label[label]), _identity_change(old, new)))
  return changes


def refuse_changes(out_dir, changes, flag_name="output_dir"):
  """Fails with one line naming what differs from the run recorded in out_dir (if anything)."""
  if changes:
    common.fail("--%s=%s holds a run of other settings or input files: %s; use a new --%s, or "
                "rerun with the flags and input files it was made with (restore an edited "
                "file)" % (flag_name, out_dir, ", ".join(changes), flag_name))


def _split_record(stored, settings):
  """(settings, input identities or None) of a stored record.

  A record of this version is {"settings": ..., "inputs": ...}. An earlier version's record is
  one flat dict: the settings and, in run_demo's, each input file's sha256 under its label (the
  keys that are no setting); the input identities of one without any (the reproduction
  drivers') are unknown: None.
  """
  if set(stored) == {"settings", "inputs"} and isinstance(stored["inputs"], dict):
    return stored["settings"], stored["inputs"]
  recorded = {k: v for k, v in stored.items() if k in settings}
  digests = {k: v for k, v in stored.items() if k not in settings}
  if not any(isinstance(v, str) for v in digests.values()):
    return dict(recorded, **{k: v for k, v in digests.items() if v is not None}), None
  return recorded, {k: {"sha256": v} for k, v in digests.items() if v is not None}


def _same_digests(recorded, current):
  """`recorded` with each sha256-only entry (an earlier version's) compared by sha256 alone."""
  return {label: (current[label] if label in current and set(old) == {"sha256"} and
                  old["sha256"] == current[label].get("sha256") else old)
          for label, old in recorded.items()}


def check_settings_record(out_dir, record, record_name, write, inputs=(), partial_inputs=False,
                          flag_name="output_dir"):
  """Fails when out_dir was made with other settings or input contents; records them if new.

  The record (<out_dir>/<record_name>) holds the settings and the identity of every input file
  (sha256 and size; cheap identities of checkpoints and large weights files): a rerun with other
  flags, or after an input file was edited in place, is refused in one line naming the flag or
  file, before it reuses any finished stage. An earlier version's record without input
  identities is taken as it is, and the inputs as they are now are added to it (a warning says
  so).

  Args:
    out_dir: the driver's --output_dir.
    record: dict, the settings that must not change between runs into out_dir.
    record_name: the record's file name in out_dir.
    write: write the record if it is missing or lacks inputs (not for a plan / report only run).
    inputs: the InputFiles the run reads.
    partial_inputs: compare only inputs both runs read, and add new ones to the record.
    flag_name: the output directory's flag.

  Returns:
    The identities of the inputs ({label: identity}).
  """
  path = os.path.join(out_dir, record_name)
  stored = read_json(path)
  if stored is None and not write:
    return {}
  current = input_identities(inputs)
  if stored is None:
    common.write_json_atomic(path, {"settings": record, "inputs": current})
    return current
  recorded, recorded_inputs = _split_record(stored, record)
  changes = settings_changes(recorded, record)
  if recorded_inputs is None:
    sys.stderr.write("warning: %s records no input file contents (an earlier version): the "
                     "input files as they are now are taken as the run's\n" % path)
  else:
    recorded_inputs = _same_digests(recorded_inputs, current)
    changes += input_changes(recorded_inputs, current, inputs, partial_inputs)
  refuse_changes(out_dir, changes, flag_name)
  merged = dict(recorded_inputs or {}, **current)
  if write and ({"settings": record, "inputs": merged} != stored):
    common.write_json_atomic(path, {"settings": record, "inputs": merged})
  return current


def is_inside(path, directory):
  """Whether `path` is `directory` or inside it (normalised paths, no file system access)."""
  path, directory = os.path.normpath(path), os.path.normpath(directory)
  return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def display_path(path, flag_name=None, output_dir=None):
  """How a report names a file: relative to the repository or by flag, never absolute.

  Args:
    path: a local path.
    flag_name: the flag that gave it (named when no relative form exists).
    output_dir: --output_dir; paths inside it are shown as "<output_dir>/...".

  Returns:
    "data/vocab.txt", "../shared/data/corpus" (default shared data),
    "$REALFORMER_SHARED_DATA/corpus" (set elsewhere), "<output_dir>/runs/...", or
    "--corpus (<base name>)" for any other place.
  """
  if "://" in path:
    return path  # A bucket URL names no machine.
  path = os.path.normpath(os.path.abspath(path))
  if output_dir and is_inside(path, os.path.abspath(output_dir)):
    rel = os.path.relpath(path, os.path.abspath(output_dir))
    return "<output_dir>" if rel == "." else "<output_dir>/" + rel
  if is_inside(path, REPO_DIR):
    return os.path.relpath(path, REPO_DIR)
  shared = common.shared_data_dir()
  if is_inside(path, shared):
    rel = os.path.relpath(path, shared)
    if os.environ.get(common.SHARED_DATA_ENV):
      return "$%s" % common.SHARED_DATA_ENV + ("" if rel == "." else "/" + rel)
    return os.path.relpath(path, REPO_DIR)
  if is_inside(path, os.path.dirname(REPO_DIR)):
    return os.path.relpath(path, REPO_DIR)  # a sibling of the repository, e.g. ../data
  return "--%s (%s)" % (flag_name, os.path.basename(path)) if flag_name else os.path.basename(
      path)


def portable_text(text, output_dir):
  """Replaces the machine's absolute paths in `text` (e.g. an analysis report) by display forms.

  Args:
    text: markdown that may name files under output_dir, the repository or the shared data.
    output_dir: --output_dir.

  Returns:
    The text with "<output_dir>/...", repository-relative and shared-data forms.
  """
  roots = [os.path.abspath(output_dir), REPO_DIR, common.shared_data_dir()]
  # Longest first, so a root inside another is replaced by its own form.
  for root in sorted(set(roots), key=len, reverse=True):
    form = display_path(root, output_dir=output_dir)
    text = text.replace(root + os.sep, ("" if form == "." else form + "/"))
    text = re.sub(re.escape(root) + r"(?=[\s`'\",;:)\]]|$)", form.replace("\\", "\\\\"), text)
  return text


def mean_std(values):
  """(mean, sample std or None for one value) of a list of floats; (None, None) when empty."""
  values = [v for v in values if v is not None]
  if not values:
    return None, None
  mean = float(np.mean(values))
  std = float(np.std(values, ddof=1)) if len(values) > 1 else None
  return mean, std


def image_dir_name(report_path):
  """The report's image folder beside it: <stem>_images (paper/table2.md -> table2_images)."""
  return os.path.splitext(os.path.basename(report_path))[0] + "_images"


def _checkpoint_step(name):
  """The global step of a checkpoint name ("model.ckpt-20" -> 20), or None."""
  try:
    return int(os.path.basename(name).rsplit("-", 1)[1])
  except (IndexError, ValueError):
    return None


def rewind_to_checkpoint(run_dir, keep_step):
  """Makes a stopped training run resume from its last checkpoint at a step the driver keeps.

  A training process stopped by a signal saves the step it reached (the TF2 engine does), and a
  process resumed there saves every save_checkpoints_steps counted from it: the checkpoints a
  driver reads at fixed steps (a learning curve's, one per epoch to average) would be missing
  or others. The run resumes instead from its last checkpoint at a kept step (the commands
  resume exactly, so it ends with the uninterrupted run's weights and checkpoints); the later
  checkpoints are deleted.

  Args:
    run_dir: the training run's output directory (a `checkpoint` state file).
    keep_step: step -> whether the uninterrupted run saves a checkpoint there (step 0, where a
      run starts, always counts).

  Returns:
    The step it now resumes from, or None when nothing was changed.
  """
  state = tf.compat.v1.train.get_checkpoint_state(run_dir)
  if state is None:
    return None
  latest = _checkpoint_step(state.model_checkpoint_path)
  if latest is None or keep_step(latest):
    return None
  names = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
  earlier = [n for n in names if _checkpoint_step(n) is not None and _checkpoint_step(n) < latest]
  kept_steps = [_checkpoint_step(n) for n in earlier
                if _checkpoint_step(n) == 0 or keep_step(_checkpoint_step(n))]
  if not kept_steps:
    return None
  target = max(kept_steps)
  kept = [n for n in earlier if _checkpoint_step(n) <= target]
  tf.compat.v1.train.update_checkpoint_state(run_dir, "model.ckpt-%d" % target,
                                             all_model_checkpoint_paths=kept)
  for name in names:
    if _checkpoint_step(name) is not None and _checkpoint_step(name) > target:
      for path in tf.io.gfile.glob(os.path.join(run_dir, name) + ".*"):
        tf.io.gfile.remove(path)
  return target


def tool_command(script, args=()):
  """The command line of a repository tool, run with this process's Python from the repository.

  Args:
    script: "run_pretraining.py" (a top-level script, run as a file), "translation/
      run_translation.py" (a tool in a package folder, run as `-m translation.run_translation`
      so that it needs nothing on the path but the repository root, the child's working
      directory), or an absolute path.
    args: its flags.

  Returns:
    list of str.
  """
  if not os.path.isabs(script) and "/" in script and script.endswith(".py"):
    return [sys.executable, "-m", script[:-3].replace("/", ".")] + list(args)
  return [sys.executable, os.path.join(REPO_DIR, script)] + list(args)


class Runner(object):
  """Runs the repository's tools as subprocesses, logging their output to files.

  Each child runs in its own process group (subprocess_utils.run_child): a SIGINT / SIGTERM of
  this process is forwarded to it, it is waited for (bounded), and this process then exits
  130 / 143 instead of treating the stopped child's outputs as finished.
  """

  def __init__(self, log_dir):
    self.log_dir = log_dir
    tf.io.gfile.makedirs(log_dir)

  def run(self, name, script, args):
    """Runs `python script args`; fails with the log's tail when it exits non-zero.

    Args:
      name: log file stem (<log_dir>/<name>.log).
      script: a script of the repository ("run_pretraining.py", "translation/
        run_translation.py"; see tool_command) or an absolute path.
      args: its flags.

    Returns:
      Wall seconds.
    """
    cmd = tool_command(script, args)
    log_path = os.path.join(self.log_dir, name + ".log")
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    result = subprocess_utils.run_child(cmd, log_path, header=" ".join(cmd), cwd=REPO_DIR,
                                        env=env)
    common.STOP_SIGNALS.exit_if_stopped(RESUME_MESSAGE)
    if not result.ok:
      with open(log_path, errors="replace") as f:
        tail = f.read()[-1500:]
      common.fail("%s failed (%s, log %s): %s" % (script, result.describe(), log_path,
                                                  tail.strip().splitlines()[-1:]))
    return result.seconds


def run_in_parallel(items, run_fn, max_workers, on_done=None):
  """Runs run_fn(item) for every item, at most max_workers at a time, started in items' order.

  A failed run (any exception; a stop's SystemExit is one too) or a failed on_done starts no
  further run: the runs already going are waited for, each of them that finishes still gets
  its on_done (a driver keeps its done marker), and then the first failure is raised again.

  Args:
    items: the runs, in the order they start.
    run_fn: item -> result, called in a worker thread.
    max_workers: runs at a time (>= 1).
    on_done: (item, result) -> None, called in this thread as each run finishes (in the order
      they finish), e.g. to write its marker or a progress line; None: nothing.

  Returns:
    The results, in items' order.
  """
  items = list(items)
  results = [None] * len(items)
  workers = max(1, min(max_workers, len(items)))
  pending, running, failure = list(range(len(items))), {}, None
  with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    while True:
      # A new run starts only from here: none after a failure or a stop.
      while pending and len(running) < workers and failure is None:
        index = pending.pop(0)
        running[pool.submit(run_fn, items[index])] = index
      if not running:
        break
      done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
      for future in sorted(done, key=running.get):   # runs done together: in items' order
        index = running.pop(future)
        try:
          results[index] = future.result()
          if on_done is not None:
            on_done(items[index], results[index])
        except BaseException as e:  # pylint: disable=broad-except  (a stop is one too)
          failure = failure or e
  if failure is not None:
    raise failure
  return results
