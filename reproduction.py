# coding=utf-8
"""What the reproduction drivers share (reproduce_table2.py, translation/reproduce_table7.py,
etc_model/reproduce_table8.py).

Runner (the repository's tools as logged child processes, stopped cleanly with the driver),
how a report names a file without this machine's paths (display_path, portable_text), the
mean / sample std of a result over seeds, the report's image folder, the settings record that
keeps a rerun from mixing flags in one --output_dir (check_settings_record).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os
import re
import sys

import numpy as np
import tensorflow as tf

import common
import subprocess_utils

REPO_DIR = common.REPO_DIR
RESUME_MESSAGE = "reproduction stopped; rerun the same command to resume"


def read_json(path):
  """The JSON in `path`, or None when it does not exist."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def check_settings_record(out_dir, record, record_name, write):
  """Fails when out_dir was made with other settings; writes the record when it has none.

  Args:
    out_dir: the driver's --output_dir.
    record: dict, the settings that must not change between runs into out_dir.
    record_name: the record's file name in out_dir.
    write: write the record if it is missing (not for a plan / report only run).
  """
  path = os.path.join(out_dir, record_name)
  stored = read_json(path)
  if stored is None:
    if write:
      common.write_json_atomic(path, record)
    return
  diff = sorted(k for k in set(stored) | set(record) if stored.get(k) != record.get(k))
  if diff:
    common.fail("--output_dir=%s was made with other settings (%s); use a new --output_dir or "
                "the same flags" % (out_dir, ", ".join(diff)))


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
  """The report's image folder beside it: "reproduction" for REPRODUCTION.md, else <stem>_images."""
  stem = os.path.splitext(os.path.basename(report_path))[0]
  return "reproduction" if stem == "REPRODUCTION" else stem + "_images"


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
