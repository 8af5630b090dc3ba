"""Helpers shared by the command-line tools: clear errors, atomic writes, progress, input globs.

Every tool in this repository reports a bad input as one line naming the file or flag and the
problem (`UsageError`), writes its outputs under a temporary name and renames them when complete
(`atomic_output`), and shows progress with a rate and the time remaining (`ProgressMeter`).
"""

import atexit
import contextlib
import dis
import errno
import glob
import io
import json
import logging
import os
import re
import signal
import socket
import sys
import time

from absl import flags as absl_flags
from absl import logging as absl_logging
import tensorflow as tf


# The repository (the parent of this package's directory) and the environment variable that
# moves the shared data.
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA_ENV = "REALFORMER_SHARED_DATA"


def shared_data_dir():
  """The shared read-only data directory (corpus, GLUE, vocab, ...): the one place saying where.

  $REALFORMER_SHARED_DATA when set, else `shared/data` beside the repository
  (`<repo>/../shared/data`), so no machine's absolute path is written into code or reports.

  Returns:
    An absolute, normalised path (it may not exist).
  """
  path = os.environ.get(SHARED_DATA_ENV) or os.path.join(os.path.dirname(REPO_DIR), "shared",
                                                         "data")
  return os.path.normpath(os.path.abspath(path))


class UsageError(ValueError):
  """A bad input (file, flag, config key) that the user can fix; printed as one line."""


def fail(message):
  """Raises UsageError with `message` (one line naming the file or flag and the problem)."""
  raise UsageError(message)


def run_main(main_fn, argv):
  """Calls main_fn(argv) and turns a UsageError into a one-line message and exit status 2.

  Also makes TensorFlow log each line once (absl and TF both attach handlers otherwise) and
  hides the frameworks' own INFO / WARNING records unless --verbosity >= 1
  (quiet_framework_logs).

  Args:
    main_fn: the tool's main function.
    argv: command-line arguments as absl passes them.

  Returns:
    Whatever main_fn returns.
  """
  tf.get_logger().propagate = False
  quiet_framework_logs()
  try:
    return main_fn(argv)
  except UsageError as e:
    sys.stderr.write("error: %s\n" % e)
    sys.exit(2)
  except OSError as e:
    # A full disk, a read-only file system or a permission: one line naming the file (the
    # writers' temporaries are already removed, so nothing looks finished).
    sys.stderr.write("error: %s\n" % describe_os_error(e))
    sys.exit(1)
  except tf.errors.OpError as e:
    if not _is_storage_error(str(e)):
      raise
    sys.stderr.write("error: %s\n" % describe_storage_error(str(e.message)))
    sys.exit(1)


def flags_parser(flag_values):
  """app.run's flags_parser for a command's FLAGS: a bad flag is one line and exit status 2.

  absl's own parser prints two lines ("FATAL Flags parsing error: ..." and a hint) and exits 1.

  Args:
    flag_values: the command's absl FlagValues (its FLAGS).

  Returns:
    function(argv) -> the arguments left after the flags (what app.run passes to main).
  """
  def parse(argv):
    try:
      return flag_values(argv)
    except absl_flags.Error as e:
      sys.stderr.write("error: %s (--helpfull lists the flags)\n" % e)
      sys.exit(2)
  return parse


def settings_from_flags(settings_class, flag_values, /, **values):
  """A job's settings: each field the flag of the same name unless given as a keyword.

  Args:
    settings_class: a collections.namedtuple class (a command's JobSettings).
    flag_values: the parsed flags (the command's FLAGS).
    **values: the fields that are not a flag's value as parsed (resolved, derived or named
      otherwise; a field may itself be called flag_values: the first two are positional).

  Returns:
    settings_class instance.

  Raises:
    ValueError: a field is neither given nor a flag, or a keyword is not a field.
  """
  fields = settings_class._fields
  unknown = sorted(set(values) - set(fields))
  missing = [name for name in fields if name not in values and name not in flag_values]
  if unknown or missing:
    raise ValueError("%s: fields neither given nor flags %s, keywords that are not fields %s"
                     % (settings_class.__name__, missing, unknown))
  return settings_class(**{name: values[name] if name in values else getattr(flag_values, name)
                           for name in fields})


def moved_names_getattr(module_name, new_place_of):
  """A module `__getattr__` (PEP 562) saying in one line where a moved name lives now.

  Raised as AttributeError for `module.NAME` (hasattr and getattr with a default keep working),
  as ImportError for `from module import NAME` (Python replaces an AttributeError there by a
  message of its own). Other missing names get the usual error.

  Args:
    module_name: the module's __name__.
    new_place_of: a dict {name: "package.module.name"}, or a module (the helpers defined in it:
      functions and classes whose __module__ it is, UPPER_CASE constants).

  Returns:
    The function to assign to the module's `__getattr__`.
  """
  def module_getattr(name):
    if isinstance(new_place_of, dict):
      new_place = new_place_of.get(name)
    else:
      new_place = _defined_in(new_place_of, name)
    if new_place is None:
      raise AttributeError("module %r has no attribute %r" % (module_name, name))
    message = "%s.%s moved to %s" % (module_name, name, new_place)
    if _called_by_import_from(sys._getframe(1)):  # pylint: disable=protected-access
      raise ImportError(message, name=module_name)
    raise AttributeError(message)
  return module_getattr


def _defined_in(module, name):
  """"module.name" when `module` defines `name` (not a name it merely imports), else None."""
  value = getattr(module, name, None)
  defined_there = (getattr(value, "__module__", None) == module.__name__ or
                   (name.isupper() and value is not None))
  if name.startswith("__") or not defined_there:
    return None
  return "%s.%s" % (module.__name__, name)


def _called_by_import_from(frame):
  """Whether `frame` is executing a `from MODULE import NAME` (CPython's IMPORT_FROM)."""
  try:
    return frame.f_code.co_code[frame.f_lasti] == dis.opmap["IMPORT_FROM"]
  except (AttributeError, IndexError, KeyError):
    return False


# Packages whose own INFO and WARNING records are framework detail for a user of the commands
# (the Estimator's config dump, "Calling model_fn", deprecation notices, graph-building notes).
FRAMEWORK_PACKAGES = ("tensorflow", "tensorflow_estimator", "tf_keras", "keras",
                      "tensorflow_hub", "tensorflow_text")
# The framework's lines that a run's log is read for (by users and by the paper's drivers): the
# training loss every --log_every_n_steps ("loss = 0.69, step = 10"), the final loss, checkpoint
# saves and restores. They stay at every verbosity.
KEPT_FRAMEWORK_MESSAGES = ("loss = ", "Loss for final step", "Saving checkpoints for",
                           "Restoring parameters from")
_FRAMEWORK_PATH = re.compile(r"[\\/](?:site|dist)-packages[\\/](?:%s)[\\/]" %
                             "|".join(FRAMEWORK_PACKAGES))


class FrameworkDetailFilter(logging.Filter):
  """Drops INFO / WARNING records logged from inside the frameworks unless --verbosity >= 1.

  Records the repository's own code logs (through tf.compat.v1.logging or absl) carry its file
  as their pathname and always pass, as do ERROR records from anywhere and the few framework
  lines a log is read for (KEPT_FRAMEWORK_MESSAGES).
  """

  def filter(self, record):
    if record.levelno >= logging.ERROR or not _FRAMEWORK_PATH.search(record.pathname or ""):
      return True
    try:
      message = record.getMessage()
    except Exception:  # pylint: disable=broad-except  (a malformed record: keep it)
      return True
    if message.startswith(KEPT_FRAMEWORK_MESSAGES):
      return True
    try:
      return absl_logging.get_verbosity() >= 1
    except Exception:  # pylint: disable=broad-except  (flags not parsed: keep the record)
      return True


def quiet_framework_logs():
  """Installs FrameworkDetailFilter on TensorFlow's logger and absl's handler (once)."""
  targets = [tf.get_logger(), absl_logging.get_absl_handler()]
  for target in targets:
    if not any(isinstance(f, FrameworkDetailFilter) for f in target.filters):
      target.addFilter(FrameworkDetailFilter())


# What a full or read-only disk (or a directory the user may not write) says, in OSError numbers
# and in TensorFlow's messages.
_STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES)
_STORAGE_MESSAGES = ("No space left on device", "Disk quota exceeded", "File too large",
                     "Read-only file system", "Permission denied")


def _is_storage_error(message):
  return any(m in message for m in _STORAGE_MESSAGES)


def describe_os_error(error):
  """One line for an OSError: the file it concerns and the system's words for the problem.

  Args:
    error: an OSError (its filename may be None for a failing write).

  Returns:
    str such as "out/features.jsonl: No space left on device (errno 28)" (a writer's temporary
    named by the output it stands for).
  """
  what = error.strerror or str(error)
  if error.errno:
    what = "%s (errno %d)" % (what, error.errno)
  if error.filename:
    return "%s: %s" % (final_name(str(error.filename)), what)
  return what


def final_name(path):
  """The output a writer's temporary stands for: `dir/.NAME.tmp-<pid>/...` -> `dir/NAME`.

  The temporary is removed by the time a message is read, and its name says nothing to a user.

  Args:
    path: a path, perhaps inside a temporary (temp_path) directory.

  Returns:
    The final output's path, or `path` when no part of it is a temporary.
  """
  parts = path.split("/")
  for index, part in enumerate(parts):
    if is_temp_path(part):
      name = part.rpartition(TEMP_INFIX)[0]
      return "/".join(parts[:index] + [name[1:] if name.startswith(".") else name])
  return path


def describe_storage_error(message):
  """One line for TensorFlow's message of a full or read-only disk: the output and the problem.

  TensorFlow says "{{function_node ...}} dir/.export.tmp-12/variables/...tempstate123; No space
  left on device [Op:SaveV2]": the line names the output the temporary stands for instead.

  Args:
    message: the OpError's message (a storage error: _is_storage_error).

  Returns:
    str such as "out/export: No space left on device (errno 28)".
  """
  known = [m for m in _STORAGE_MESSAGES if m in message][0]
  number = _STORAGE_ERRNOS[_STORAGE_MESSAGES.index(known)]
  tokens = re.findall(r"[^\s;,'\"]+", message.split(known, 1)[0])
  paths = [t for t in tokens if "/" in t and not t.startswith("{{")]
  temps = [t for t in paths if final_name(t) != t]
  path = final_name(temps[0]) if temps else (paths[-1].rstrip(":") if paths else None)
  if not path:
    return message.strip().splitlines()[0]
  return "%s: %s (errno %d)" % (path, known, number)


def with_file_name(error, path):
  """`error` as an OSError naming `path` when it is a storage error that names no file.

  Args:
    error: OSError or tf.errors.OpError raised while writing `path`.
    path: the output being written.

  Returns:
    The exception to raise (`error` itself when it says nothing about storage).
  """
  if isinstance(error, OSError):
    if error.errno in _STORAGE_ERRNOS and not error.filename:
      return OSError(error.errno, error.strerror, path)
    return error
  message = str(getattr(error, "message", error))
  for known in _STORAGE_MESSAGES:
    if known in message:
      number = _STORAGE_ERRNOS[_STORAGE_MESSAGES.index(known)]
      return OSError(number, known, path)
  return error


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
    A list of file paths (never a writer's temporary, see temp_path). Fails with one line if a
    pattern matches nothing or names a directory (a glob that matches one too: reading a
    directory as a file fails deep inside TensorFlow).
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
      # A killed writer's temporary is never an input (it may be partial).
      finished = [path for path in matches if not is_temp_path(path)]
      if len(finished) < len(matches):
        tf.compat.v1.logging.warning("--%s: %s: skipped %d unfinished temporary file(s)",
                                     flag_name, pattern, len(matches) - len(finished))
      matches = finished
      if not matches:
        fail("--%s: %s matches no file" % (flag_name, pattern))
      for path in matches:
        if tf.io.gfile.isdir(path):
          example = path.rstrip("/") + "/*"
          if path.rstrip("/") == pattern.rstrip("/"):
            fail("--%s=%s: is a directory (give files or a glob like %s)" % (
                flag_name, pattern, example))
          fail("--%s=%s: matches the directory %s (give files or a glob like %s)" % (
              flag_name, pattern, path, example))
      for path in matches:
        if path not in seen:
          seen.add(path)
          files.append(path)
  if not files:
    fail("--%s is empty" % flag_name)
  return files


TEMP_INFIX = ".tmp-"


def temp_path(path):
  """The temporary name a writer of `path` uses: hidden, in the same directory.

  `dir/.NAME.tmp-<pid>` never matches a glob on the final names (`dir/NAME*`), and the rename
  into place stays on one file system.

  Args:
    path: the final file or directory name.

  Returns:
    The temporary path for this process.
  """
  directory, base = os.path.split(path.rstrip("/"))
  return os.path.join(directory, ".%s%s%d" % (base, TEMP_INFIX, os.getpid()))


def is_temp_path(path):
  """True for a name made by temp_path (or the older visible `NAME.tmp-<pid>` form)."""
  base = os.path.basename(path.rstrip("/"))
  head, sep, pid = base.rpartition(TEMP_INFIX)
  return bool(sep) and bool(head) and pid.isdigit()


def pid_alive(pid):
  """Whether a process with this pid exists on this machine."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  except OverflowError:
    return False
  return True


def remove_stale_temps(path):
  """Removes temporaries of `path` left by killed writers (their pid is gone); returns them.

  Args:
    path: a final file or directory name whose writers used temp_path.

  Returns:
    The list of removed paths.
  """
  directory, base = os.path.split(path.rstrip("/"))
  directory = directory or "."
  if not tf.io.gfile.isdir(directory):
    return []
  removed = []
  for name in tf.io.gfile.listdir(directory):
    name = name.rstrip("/")
    for prefix in ("." + base + TEMP_INFIX, base + TEMP_INFIX):
      pid = name[len(prefix):] if name.startswith(prefix) else ""
      if pid.isdigit() and (int(pid) == os.getpid() or not pid_alive(int(pid))):
        stale = os.path.join(directory, name)
        if tf.io.gfile.isdir(stale):
          tf.io.gfile.rmtree(stale)
        else:
          tf.io.gfile.remove(stale)
        removed.append(stale)
  return removed


def check_output_path(path, flag_name):
  """Fails with one line if the output `path` cannot be created: a parent is a regular file.

  Args:
    path: an output file or directory name.
    flag_name: the flag that named it.
  """
  if not path:
    fail("--%s is required" % flag_name)
  parent = os.path.dirname(os.path.abspath(path)) if "://" not in path else None
  while parent and parent != os.path.dirname(parent):
    if os.path.exists(parent) and not os.path.isdir(parent):
      fail("--%s=%s: %s is a file, not a directory" % (flag_name, path, parent))
    parent = os.path.dirname(parent)


def check_output_dir(path, flag_name="output_dir"):
  """Fails with one line if the output directory `path` is a file or lies under a file."""
  check_output_path(path, flag_name)
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    fail("--%s=%s: is a file, expected a directory" % (flag_name, path))


def _real(path):
  return os.path.realpath(path.rstrip("/")) if "://" not in path else path.rstrip("/")


def _is_same_or_inside(path, directory):
  """Whether `path` is `directory` or lies inside it (after resolving links)."""
  path, directory = _real(path), _real(directory)
  return path == directory or path.startswith(directory.rstrip("/") + "/")


def check_not_input(output_path, input_paths, flag_name="output_file"):
  """Fails with one line if an output would replace (or lie inside) one of the inputs.

  Args:
    output_path: the file or directory a tool is about to write.
    input_paths: the files or directories it reads (or checkpoint prefixes).
    flag_name: the flag that named the output.
  """
  for input_path in input_paths or ():
    if not input_path:
      continue
    if _real(output_path) == _real(input_path):
      fail("--%s=%s: is also an input; writing it would replace that input" %
           (flag_name, output_path))


# Written into every SavedModel directory this project exports: a directory that has it may be
# replaced (with --overwrite); any other existing directory is refused.
EXPORT_MARKER = "realformer_export.json"

# Names whose presence shows a directory holds training state that must never be deleted.
_CHECKPOINT_NAMES = ("checkpoint", "graph.pbtxt")


def _holds_checkpoints(directory):
  for root, _, files in tf.io.gfile.walk(directory):
    for name in files:
      if name in _CHECKPOINT_NAMES or name.endswith(".index") and ".ckpt" in name:
        return os.path.join(root, name)
  return None


def check_export_dir(path, flag_name="export_dir", overwrite=False, protected_paths=(),
                     holds_checkpoints=False):
  """Refuses an export target that exists and is not one of our SavedModels (data loss).

  Allowed: a path that does not exist, an empty directory, or (with overwrite) a directory
  that holds our EXPORT_MARKER and no checkpoint. Never: a file, a directory that holds or is
  a parent of one of `protected_paths` (output_dir, checkpoints, inputs), or one with
  checkpoints in it.

  Args:
    path: the export directory.
    flag_name: the flag that named it.
    overwrite: whether replacing an earlier export of ours is allowed.
    protected_paths: directories / files / checkpoint prefixes that must survive.
    holds_checkpoints: the directory is a checkpoint directory we wrote (slim_checkpoint):
      checkpoints in it do not make it untouchable, the marker still decides.
  """
  check_output_path(path, flag_name)
  where = "--%s=%s" % (flag_name, path)
  for protected in protected_paths or ():
    if protected and _is_same_or_inside(protected, path):
      fail("%s: would replace %s, which the job needs; choose a new directory" %
           (where, protected))
  if not tf.io.gfile.exists(path):
    return
  if not tf.io.gfile.isdir(path):
    fail("%s: is a file, not a directory; choose a new directory" % where)
  entries = tf.io.gfile.listdir(path)
  if not entries:
    return
  checkpoint_file = None if holds_checkpoints else _holds_checkpoints(path)
  if checkpoint_file:
    fail("%s: holds checkpoints (%s); an export never replaces them, choose a new directory" %
         (where, checkpoint_file))
  if EXPORT_MARKER not in entries:
    fail("%s: exists and was not written by this project's exporters; choose a new "
         "directory (nothing was deleted)" % where)
  if not overwrite:
    fail("%s: already holds an earlier output of this project; pass --overwrite to replace it" %
         where)


@contextlib.contextmanager
def atomic_output(path, mode="w"):
  """Opens a hidden temporary beside `path` for writing and renames it to `path` on success.

  An interrupted or failing writer leaves no file that looks finished, and its temporary
  (`.NAME.tmp-<pid>`) matches no glob on the final names.

  Args:
    path: final file name (local or any tf.io.gfile path).
    mode: "w" for text, "wb" for bytes.

  Yields:
    A writable file object.
  """
  tmp_path = temp_path(path)
  try:
    with tf.io.gfile.GFile(tmp_path, mode) as f:
      yield f
    tf.io.gfile.rename(tmp_path, path, overwrite=True)
  except (OSError, tf.errors.OpError) as e:
    named = with_file_name(e, path)
    if named is e:
      raise
    raise named from e
  finally:
    if tf.io.gfile.exists(tmp_path):
      tf.io.gfile.remove(tmp_path)


@contextlib.contextmanager
def atomic_directory(path, flag_name="export_dir", overwrite=False, protected_paths=(),
                     holds_checkpoints=False):
  """Yields a temporary directory name that replaces `path` only when the block succeeds.

  The target is checked first (check_export_dir): an existing directory that is not our
  export, or holds checkpoints, is refused before any work; ours is replaced only with
  overwrite. The directory does not exist yet when yielded (SavedModel writers create it); the
  EXPORT_MARKER is added before the rename. An interrupted or failing writer leaves `path` as
  it was and removes the temporary directory.

  Args:
    path: final directory (local or any tf.io.gfile path).
    flag_name: the flag that named it, for messages.
    overwrite: allow replacing an earlier export of ours.
    protected_paths: paths that must survive (see check_export_dir).
    holds_checkpoints: see check_export_dir.

  Yields:
    The temporary directory path, beside `path`.
  """
  path = path.rstrip("/")
  check_export_dir(path, flag_name, overwrite, protected_paths, holds_checkpoints)
  parent = os.path.dirname(path)
  if parent:
    tf.io.gfile.makedirs(parent)
  remove_stale_temps(path)
  tmp_dir = temp_path(path)
  try:
    yield tmp_dir
    with tf.io.gfile.GFile(os.path.join(tmp_dir, EXPORT_MARKER), "w") as f:
      f.write(json.dumps({"written_by": os.path.basename(sys.argv[0] or "python"),
                          "time": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    # Checked again: another process may have put something there meanwhile.
    check_export_dir(path, flag_name, overwrite, protected_paths, holds_checkpoints)
    if tf.io.gfile.exists(path):
      tf.io.gfile.rmtree(path)
    tf.io.gfile.rename(tmp_dir, path)
  finally:
    if tf.io.gfile.exists(tmp_dir):
      tf.io.gfile.rmtree(tmp_dir)


class OutputDirLock(object):
  """A lock file in an output directory: one job at a time writes there.

  The lock (`<output_dir>/.lock-<label>`) holds the holder's pid and host. A second job fails
  with one line naming them; a lock left by a dead process on this host is taken over.
  Acquiring creates the directory (an output directory that is a file, or lies under one, is a
  one-line error naming the flag): take it before anything else a job does there (stale
  temporaries, settings records, resume decisions).

  Usage:
    with common.OutputDirLock(output_dir, flag_name="output_dir"):
      ... train ...
  """

  def __init__(self, output_dir, flag_name="output_dir", label="local"):
    self.output_dir = output_dir
    self.flag_name = flag_name
    self.path = os.path.join(output_dir, ".lock-%s" % label)
    self.held = False
    self.created = False

  def _read_holder(self):
    try:
      with open(self.path) as f:
        return json.load(f)
    except (OSError, ValueError):
      return {}

  def acquire(self):
    """Takes the lock or fails with a one-line error naming the holder."""
    if "://" in self.output_dir:
      return self  # No atomic create on remote file systems: the lock is local-only.
    # A file in the way is one line naming the flag, not "File exists (errno 17)".
    check_output_dir(self.output_dir, self.flag_name)
    # A job that stops before writing anything leaves no empty directory behind (release).
    self.created = not os.path.isdir(self.output_dir)
    os.makedirs(self.output_dir, exist_ok=True)
    host = socket.gethostname()
    for _ in range(3):
      try:
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
      except FileExistsError:
        holder = self._read_holder()
        pid = holder.get("pid")
        if holder.get("host") == host and isinstance(pid, int) and not pid_alive(pid):
          tf.compat.v1.logging.warning("%s: taking over the lock of dead process %d",
                                       self.output_dir, pid)
          try:
            os.remove(self.path)
          except FileNotFoundError:
            pass
          continue
        if not holder:  # Being written right now by its holder.
          time.sleep(0.2)
          continue
        fail("--%s=%s: in use by another job (pid %s on host %s, since %s); wait for it to end "
             "or use another directory (lock file %s)" % (
                 self.flag_name, self.output_dir, pid, holder.get("host"),
                 holder.get("time", "?"), self.path))
      with os.fdopen(fd, "w") as f:
        f.write(json.dumps({"pid": os.getpid(), "host": host,
                            "time": time.strftime("%Y-%m-%dT%H:%M:%S")}))
      self.held = True
      atexit.register(self.release)
      return self
    fail("--%s=%s: could not take the lock file %s" % (self.flag_name, self.output_dir,
                                                         self.path))

  def release(self):
    """Removes the lock if this process holds it, and the directory if acquire made it and
    nothing was written there."""
    if self.held:
      self.held = False
      if self._read_holder().get("pid") == os.getpid():
        try:
          os.remove(self.path)
        except FileNotFoundError:
          pass
        if self.created:
          try:
            os.rmdir(self.output_dir)
          except OSError:
            pass  # Not empty: the job wrote there.

  def __enter__(self):
    return self.acquire()

  def __exit__(self, *unused):
    self.release()


class StopSignals(object):
  """Turns SIGINT / SIGTERM into a request a job polls, so it can stop at a safe point.

  A stopped job saves what it has, writes no final-results file, and exits with
  exit_status() (130 for SIGINT, 143 for SIGTERM), so nothing mistakes it for a finished one.
  A second signal of the same kind stops at once with that status.
  """

  def __init__(self):
    self.signum = None
    self._installed = False

  def install(self):
    """Installs the handlers (only possible from the main thread; otherwise a no-op)."""
    if self._installed:
      return self

    def handler(signum, frame):  # pylint: disable=unused-argument
      if self.signum is not None:
        os._exit(128 + signum)  # pylint: disable=protected-access
      self.signum = signum
      tf.compat.v1.logging.warning("signal %d: stopping at the next safe point", signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
      try:
        signal.signal(sig, handler)
      except ValueError:  # Not the main thread (e.g. under a test runner).
        return self
    self._installed = True
    return self

  @property
  def stopped(self):
    return self.signum is not None

  def exit_status(self):
    """128 + the signal number, or 0 when no signal came."""
    return 128 + self.signum if self.signum is not None else 0

  def exit_if_stopped(self, message="stopped before the end; rerun the same command to resume"):
    """Exits with 130 / 143 (after a one-line message) if a signal came."""
    if self.signum is not None:
      sys.stderr.write("interrupted (signal %d): %s\n" % (self.signum, message))
      sys.stderr.flush()
      sys.exit(self.exit_status())


STOP_SIGNALS = StopSignals()


def write_files(directory, files):
  """Writes {file name: text} into `directory`."""
  for file_name, content in sorted((files or {}).items()):
    with tf.io.gfile.GFile(os.path.join(directory, file_name), "w") as f:
      f.write(content)


def write_figure_png(fig, path, dpi=90):
  """Renders a matplotlib figure to PNG, writes it atomically to `path` and closes the figure.

  Args:
    fig: matplotlib.figure.Figure.
    path: output .png path (local or any tf.io.gfile path).
    dpi: resolution.
  """
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=dpi)
  plt.close(fig)
  with atomic_output(path, "wb") as f:
    f.write(buf.getvalue())


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

  def start(self, done):
    """Counts rates from now and from `done` (e.g. after a resumed job's warm-up step)."""
    self.start_done = done
    self.done = done
    self.start_time = time.time()

  def rate_at(self, done):
    """Units per second between the start and `done` now."""
    elapsed = time.time() - self.start_time
    return (done - (self.start_done or 0)) / elapsed if elapsed > 0 else 0.0

  def rate(self):
    """Units per second since the first update."""
    return self.rate_at(self.done)

  def remaining_s(self):
    """Estimated seconds until `total`, or None when unknown."""
    rate = self.rate()
    if not self.total or rate <= 0:
      return None
    return max(0, self.total - self.done) / rate

  def line(self):
    """A one-line progress summary."""
    remaining = self.remaining_s()
    total = "/%s" % _fmt_num(self.total) if self.total else ""
    eta = ", %s remaining" % format_duration(remaining) if remaining is not None else ""
    return "%s%s %s, %.2f %s/s%s" % (_fmt_num(self.done), total, self.unit, self.rate(),
                                     self.unit, eta)

  def update(self, done, extra="", force=False, prefix=""):
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
      self.log_fn(prefix + self.line() + (" " + extra if extra else ""))


def _fmt_num(x):
  if isinstance(x, float) and not x.is_integer():
    return "%.2f" % x
  return "%d" % x
