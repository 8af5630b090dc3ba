"""Helpers shared by the command-line tools: clear errors, atomic writes, progress, input globs.

Every tool in this repository reports a bad input as one line naming the file or flag and the
problem (`UsageError`), writes its outputs under a temporary name and renames them when complete
(`atomic_output`), and shows progress with a rate and the time remaining (`ProgressMeter`).
"""

import contextlib
import glob
import json
import os
import sys
import time

import tensorflow as tf


class UsageError(ValueError):
  """A bad input (file, flag, config key) that the user can fix; printed as one line."""


def fail(message):
  """Raises UsageError with `message` (one line naming the file or flag and the problem)."""
  raise UsageError(message)


def run_main(main_fn, argv):
  """Calls main_fn(argv) and turns a UsageError into a one-line message and exit status 2.

  Also makes TensorFlow log each line once (absl and TF both attach handlers otherwise).

  Args:
    main_fn: the tool's main function.
    argv: command-line arguments as absl passes them.

  Returns:
    Whatever main_fn returns.
  """
  tf.get_logger().propagate = False
  try:
    return main_fn(argv)
  except UsageError as e:
    sys.stderr.write("error: %s\n" % e)
    sys.exit(2)


def require_file(path, flag_name):
  """Fails with a one-line error if `path` (given by flag `flag_name`) is not an existing file."""
  if not path:
    fail("--%s is required" % flag_name)
  if not tf.io.gfile.exists(path):
    fail("--%s=%s: file does not exist" % (flag_name, path))
  if tf.io.gfile.isdir(path):
    fail("--%s=%s: is a directory, expected a file" % (flag_name, path))


def expand_input_files(patterns, flag_name="input_file"):
  """Expands a comma-separated list of file names and globs, in order, without duplicates.

  Args:
    patterns: string like "a.txt,dir/*.txt" (or a list of such strings).
    flag_name: the flag the patterns came from, for error messages.

  Returns:
    A list of file paths. Fails if a pattern matches nothing.
  """
  if isinstance(patterns, str):
    patterns = [patterns]
  files = []
  seen = set()
  for pattern_list in patterns:
    for pattern in pattern_list.split(","):
      pattern = pattern.strip()
      if not pattern:
        continue
      matches = sorted(tf.io.gfile.glob(pattern))
      if not matches:
        fail("--%s: %s matches no file" % (flag_name, pattern))
      for path in matches:
        if path not in seen:
          seen.add(path)
          files.append(path)
  if not files:
    fail("--%s is empty" % flag_name)
  return files


@contextlib.contextmanager
def atomic_output(path, mode="w"):
  """Opens `path + '.tmp-<pid>'` for writing and renames it to `path` only on success.

  An interrupted or failing writer leaves no file that looks finished.

  Args:
    path: final file name (local or any tf.io.gfile path).
    mode: "w" for text, "wb" for bytes.

  Yields:
    A writable file object.
  """
  tmp_path = "%s.tmp-%d" % (path, os.getpid())
  try:
    with tf.io.gfile.GFile(tmp_path, mode) as f:
      yield f
    tf.io.gfile.rename(tmp_path, path, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_path):
      tf.io.gfile.remove(tmp_path)


@contextlib.contextmanager
def atomic_directory(path):
  """Yields a temporary directory name that replaces `path` only when the block succeeds.

  The directory does not exist yet when yielded (SavedModel writers create it). An interrupted
  or failing writer leaves `path` as it was and removes the temporary directory.

  Args:
    path: final directory (local or any tf.io.gfile path).

  Yields:
    The temporary directory path, beside `path`.
  """
  path = path.rstrip("/")
  parent = os.path.dirname(path)
  if parent:
    tf.io.gfile.makedirs(parent)
  tmp_dir = "%s.tmp-%d" % (path, os.getpid())
  if tf.io.gfile.exists(tmp_dir):
    tf.io.gfile.rmtree(tmp_dir)
  try:
    yield tmp_dir
    if tf.io.gfile.exists(path):
      tf.io.gfile.rmtree(path)
    tf.io.gfile.rename(tmp_dir, path)
  finally:
    if tf.io.gfile.exists(tmp_dir):
      tf.io.gfile.rmtree(tmp_dir)


def write_files(directory, files):
  """Writes {file name: text} into `directory`."""
  for file_name, content in sorted((files or {}).items()):
    with tf.io.gfile.GFile(os.path.join(directory, file_name), "w") as f:
      f.write(content)


def write_json_atomic(path, obj):
  """Writes `obj` as indented JSON to `path` atomically."""
  with atomic_output(path) as f:
    f.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def format_duration(seconds):
  """Formats seconds as H:MM:SS (or M:SS under an hour)."""
  seconds = max(0, int(round(seconds)))
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  if hours:
    return "%d:%02d:%02d" % (hours, minutes, secs)
  return "%d:%02d" % (minutes, secs)


class ProgressMeter(object):
  """Reports progress of a long job: done/total, rate, and estimated time remaining.

  Usage: meter = ProgressMeter(total, unit="MB"); meter.update(done) ... ; meter.line()
  """

  def __init__(self, total, unit="steps", min_interval_s=5.0, log_fn=None):
    self.total = total
    self.unit = unit
    self.min_interval_s = min_interval_s
    self.log_fn = log_fn or (lambda s: tf.compat.v1.logging.info(s))
    self.start_time = time.time()
    self.start_done = None
    self.done = 0
    self._last_log = 0.0

  def rate(self):
    """Units per second since the first update."""
    elapsed = time.time() - self.start_time
    base = self.start_done or 0
    return (self.done - base) / elapsed if elapsed > 0 else 0.0

  def remaining_s(self):
    """Estimated seconds until `total`, or None when unknown."""
    rate = self.rate()
    if not self.total or rate <= 0:
      return None
    return (self.total - self.done) / rate

  def line(self):
    """A one-line progress summary."""
    remaining = self.remaining_s()
    total = "/%s" % _fmt_num(self.total) if self.total else ""
    eta = ", %s remaining" % format_duration(remaining) if remaining is not None else ""
    return "%s%s %s, %.2f %s/s%s" % (_fmt_num(self.done), total, self.unit, self.rate(),
                                     self.unit, eta)

  def update(self, done, extra="", force=False):
    """Records progress `done` and logs a line at most every min_interval_s seconds."""
    if self.start_done is None:
      self.start_done = done
      if done:
        # Resumed job: rate counts only the work done in this process.
        self.start_time = time.time()
    self.done = done
    now = time.time()
    if force or now - self._last_log >= self.min_interval_s:
      self._last_log = now
      self.log_fn(self.line() + (" " + extra if extra else ""))


def _fmt_num(x):
  if isinstance(x, float) and not x.is_integer():
    return "%.2f" % x
  return "%d" % x
