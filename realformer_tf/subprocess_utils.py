# coding=utf-8
"""Runs the repository's tools as child processes that stop cleanly with their parent.

The drivers (paper/sweep.py, paper/reproduce_table2.py, run_demo.py) run long jobs as subprocesses. Each
child gets its own process group (so a terminal's Ctrl-C or a `kill` of the driver does not hit
it half-way through a checkpoint write, and so the driver can stop everything the child started).
On SIGINT / SIGTERM the driver forwards the signal once to every running child's group, waits a
bounded time for it to save and exit (the tools then exit 130 / 143 without writing their final
results), kills what is left with SIGKILL, and finally exits 130 / 143 itself: an orphaned child
racing with the rerun, or a stopped run recorded as finished, is what this prevents. A child
left running by a SIGKILLed driver is stopped by the rerun only once that driver is verifiably
dead (its pid, host and process start time are recorded beside the log): the child of a job
that still runs is never touched.

Usage (main thread of a driver):

  subprocess_utils.install_signal_forwarding()
  result = subprocess_utils.run_child(cmd, log_path)   # from any thread
  common.STOP_SIGNALS.exit_if_stopped()                 # exits 130 / 143 after a signal
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import json
import os
import signal
import socket
import subprocess
import threading
import time

from realformer_tf import common

# Seconds a child may take to save and exit after the forwarded signal before SIGKILL: a
# checkpoint of a large model takes a while, an endless wait must not happen.
DEFAULT_GRACE_S = 60.0

# Set by a second signal: kill the children now instead of waiting for them.
_KILL_NOW = threading.Event()


class ChildResult(collections.namedtuple("ChildResult",
                                         ["returncode", "seconds", "signum", "error"])):
  """What run_child observed.

  returncode: the child's exit status (negative: killed by that signal; None: never started).
  seconds: wall time. signum: the signal forwarded to it (None: no stop was requested while it
  ran). error: why it could not start ("" otherwise).
  """

  @property
  def ok(self):
    return self.returncode == 0

  @property
  def stopped(self):
    """Whether the parent asked the child to stop (its result must not count as finished)."""
    return self.signum is not None

  def describe(self):
    """One phrase for messages: "exit status 3", "killed by signal 9", "cannot start: ..."."""
    if self.error:
      return self.error
    if self.returncode is not None and self.returncode < 0:
      return "killed by signal %d" % -self.returncode
    return "exit status %s" % self.returncode


def _stderr(message):
  # os.write: a signal handler must not re-enter a buffered sys.stderr mid-write.
  try:
    os.write(2, message.encode("utf-8", "replace"))
  except OSError:
    pass


def install_signal_forwarding(stop_signals=None):
  """Makes SIGINT / SIGTERM stop the driver's children cleanly; main thread only.

  The first signal is recorded in `stop_signals` (its .signum; exit_if_stopped() then exits
  128 + signum) and run_child forwards it to the children; a second one kills them at once.
  Unlike StopSignals.install, a second signal never exits the driver before its children are
  gone.

  Args:
    stop_signals: a common.StopSignals (default common.STOP_SIGNALS).

  Returns:
    True if installed, False when called outside the main thread (then signals keep their
    default action).
  """
  stop_signals = stop_signals or common.STOP_SIGNALS

  def handler(signum, frame):  # pylint: disable=unused-argument
    if stop_signals.signum is None:
      stop_signals.signum = signum
      _stderr("signal %d: stopping the running child process(es) (they save and exit); send "
              "it again to kill them now\n" % signum)
    else:
      _stderr("signal %d again: killing the child process(es)\n" % signum)
      _KILL_NOW.set()

  try:
    for sig in (signal.SIGTERM, signal.SIGINT):
      signal.signal(sig, handler)
  except ValueError:  # Not the main thread.
    return False
  return True


def _group_members(pgid):
  """Live (non-zombie) processes of a process group; [pgid] if /proc cannot tell."""
  if not os.path.isdir("/proc/self"):
    try:
      os.killpg(pgid, 0)
      return [pgid]
    except (ProcessLookupError, PermissionError):
      return []
  members = []
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open("/proc/%s/stat" % name) as f:
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
      continue
    if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
      members.append(int(name))
  return members


def _signal_group(pgid, signum):
  try:
    os.killpg(pgid, signum)
  except (ProcessLookupError, PermissionError):
    pass


def _stop_group(pgid, grace_s, poll_s):
  """Stops what is left of a process group: SIGTERM, up to grace_s, then SIGKILL.

  Returns:
    The pids that were still running when the leader had exited.
  """
  left = _group_members(pgid)
  if not left:
    return []
  _signal_group(pgid, signal.SIGTERM)
  deadline = time.time() + grace_s
  while _group_members(pgid) and time.time() < deadline and not _KILL_NOW.is_set():
    time.sleep(poll_s)
  if _group_members(pgid):
    _signal_group(pgid, signal.SIGKILL)
    deadline = time.time() + 5.0
    while _group_members(pgid) and time.time() < deadline:
      time.sleep(poll_s)
  return left


def _child_record_path(log_path):
  """Where run_child notes the running child's process group (beside its log, hidden)."""
  directory, base = os.path.split(os.path.abspath(log_path))
  return os.path.join(directory, ".%s.child.json" % base)


def _cmdline(pid):
  try:
    with open("/proc/%d/cmdline" % pid, "rb") as f:
      return [part.decode("utf-8", "replace") for part in f.read().split(b"\0") if part]
  except OSError:
    return None


def _proc_stat(pid):
  """The fields of /proc/<pid>/stat from field 3 (state) on, or None when there is none."""
  try:
    with open("/proc/%d/stat" % pid) as f:
      # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
      return f.read().rsplit(")", 1)[1].split()
  except (OSError, IndexError, OverflowError):
    return None


def process_start_time(pid):
  """A process's start time (/proc/<pid>/stat field 22, clock ticks after boot), or None.

  With the pid it tells a process from a later one that reused its pid. None when the process
  does not exist (or is a zombie) or /proc cannot tell.
  """
  fields = _proc_stat(pid)
  if not fields or len(fields) < 20 or fields[0] == "Z":
    return None
  return int(fields[19])  # field 3 (state) is the first after comm, so field 22 is the 20th


def _driver_record():
  """This process as a child record names its driver: pid, host and start time."""
  return {"driver_pid": os.getpid(), "driver_host": socket.gethostname(),
          "driver_start_time": process_start_time(os.getpid())}


def driver_state(record):
  """Whether the driver that wrote a child record is gone, alive, or cannot be told.

  Args:
    record: a child record (run_child's .<log>.child.json).

  Returns:
    "dead" (no process of that pid, or one started at another time: the pid was reused),
    "alive", "self" (this very process), "elsewhere" (another host: nothing to check here) or
    "unknown" (a record of an earlier version, without the driver).
  """
  pid = record.get("driver_pid")
  if not isinstance(pid, int):
    return "unknown"
  if record.get("driver_host") != socket.gethostname():
    return "elsewhere"
  started = process_start_time(pid)
  if started is None and (os.path.isdir("/proc/self") or not common.pid_alive(pid)):
    return "dead"  # gone, or a zombie (killed, not yet reaped by its parent)
  recorded = record.get("driver_start_time")
  if started is not None and recorded is not None and started != recorded:
    return "dead"  # another process has the pid now
  if pid == os.getpid():
    return "self"
  return "alive"


def stop_orphan(log_path, grace_s=DEFAULT_GRACE_S, poll_s=0.1):
  """Stops a child that a killed (SIGKILL) driver left running for this log, if any.

  run_child records each child's process group beside its log while it runs, with the driver
  that started it (pid, host, process start time). A record still there while its driver is
  verifiably dead means the driver died without cleaning up; if that group still runs the same
  command, it would race with the rerun (two trainings in one directory), so it is stopped
  first. A record of a driver that is alive (another job writing this log) or that cannot be
  checked (another host) is left alone: the call fails in one line instead (run_child starts
  nothing then). A record of an earlier version names no driver: its child is stopped as before.

  Args:
    log_path: the log path the rerun will use.
    grace_s: seconds to wait after SIGTERM before SIGKILL.
    poll_s: polling interval.

  Returns:
    The pids stopped ([] when there was no orphan).
  """
  record_path = _child_record_path(log_path)
  try:
    with open(record_path) as f:
      record = json.load(f)
  except (OSError, ValueError):
    return []
  if not isinstance(record, dict):
    record = {}
  state = driver_state(record)
  if state in ("alive", "elsewhere"):
    common.fail("%s: written by a running job (driver pid %s on host %s, child process group "
                "%s); one job per output directory: wait for it to end or use another "
                "directory" % (log_path, record.get("driver_pid"), record.get("driver_host"),
                               record.get("pgid")))
  stopped = []
  pgid = record.get("pgid")
  # The same pid running the same command (since the same time): not an unrelated process that
  # reused the pid.
  if (isinstance(pgid, int) and _cmdline(pgid) == record.get("cmd") and
      record.get("start_time") in (None, process_start_time(pgid))):
    _stderr("stopping process group %d (%s) left running by a killed earlier run\n" %
            (pgid, " ".join(record.get("cmd", []))[:200]))
    stopped = _stop_group(pgid, grace_s, poll_s)
  try:
    os.remove(record_path)
  except OSError:
    pass
  return stopped


def run_child(cmd, log_path, header=None, cwd=None, env=None, line_fn=None,
              grace_s=DEFAULT_GRACE_S, stop_signals=None, poll_s=0.1):
  """Runs `cmd` in a new process group with its output in `log_path`; stops it on a signal.

  While the child runs, a stop recorded in `stop_signals` (see install_signal_forwarding) is
  forwarded once to the child's whole group; after grace_s seconds (or a second signal) the
  group is killed. Whatever the child left running in its group when it exited is stopped too,
  so no process of this run outlives the call. Nothing is started once a stop was requested.
  A child that a killed driver left running for this log is stopped first; a child of a
  driver that still runs (another job writing this log) is a one-line error (stop_orphan).

  Args:
    cmd: list of arguments.
    log_path: local file that receives stdout and stderr (truncated first).
    header: a line written to the log before the child's output (e.g. the command).
    cwd: working directory of the child.
    env: environment of the child (default: this process's).
    line_fn: called with each output line (then the output passes through a pipe; the lines
      still go to the log).
    grace_s: seconds to wait for the child after forwarding the signal.
    stop_signals: a common.StopSignals (default common.STOP_SIGNALS).
    poll_s: how often the stop flag is checked.

  Returns:
    A ChildResult.
  """
  stop_signals = stop_signals or common.STOP_SIGNALS
  start = time.time()
  # Before the log is truncated: an orphan of a killed driver may still be writing it.
  stop_orphan(log_path, grace_s, poll_s)
  record_path = _child_record_path(log_path)
  with open(log_path, "w") as log:
    if header:
      log.write(header.rstrip("\n") + "\n")
      log.flush()
    if stop_signals.stopped:
      return ChildResult(None, 0.0, stop_signals.signum, "not started: stopping")
    try:
      proc = subprocess.Popen(
          cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
          stdout=subprocess.PIPE if line_fn else log, stderr=subprocess.STDOUT,
          start_new_session=True,
          **(dict(text=True, errors="replace", bufsize=1) if line_fn else {}))
    except OSError as e:
      log.write("cannot start: %s\n" % e)
      return ChildResult(None, time.time() - start, None, "cannot start: %s" % e)

    with open(record_path, "w") as f:
      json.dump(dict(_driver_record(), pgid=proc.pid, start_time=process_start_time(proc.pid),
                     cmd=[str(part) for part in cmd]), f)
    reader = None
    if line_fn:
      def read_lines():
        for line in proc.stdout:
          log.write(line)
          log.flush()
          line_fn(line)
      # A thread, so the stop flag is still polled while the child prints nothing.
      reader = threading.Thread(target=read_lines, daemon=True)
      reader.start()

    forwarded, forwarded_at, killed = None, None, False
    while True:
      try:
        returncode = proc.wait(timeout=poll_s)
        break
      except subprocess.TimeoutExpired:
        pass
      if stop_signals.stopped and forwarded is None:
        forwarded, forwarded_at = stop_signals.signum, time.time()
        _signal_group(proc.pid, forwarded)
      if forwarded is not None and not killed and (
          _KILL_NOW.is_set() or time.time() - forwarded_at > grace_s):
        _signal_group(proc.pid, signal.SIGKILL)
        killed = True
    # The child's own children (data workers, ...) must not outlive it; they had the
    # forwarded signal already, so a short wait before SIGKILL is enough.
    left = _stop_group(proc.pid, min(5.0, grace_s), poll_s)
    if reader:
      reader.join(5.0)
      proc.stdout.close()
    if left:
      log.write("# stopped %d process(es) the child left running: %s\n" % (
          len(left), " ".join(str(pid) for pid in left)))
    if killed:
      log.write("# killed (SIGKILL) %.0f s after forwarding signal %d\n" % (
          time.time() - forwarded_at, forwarded))
  try:
    os.remove(record_path)
  except OSError:
    pass
  return ChildResult(returncode, time.time() - start, forwarded, "")
