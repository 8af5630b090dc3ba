"""subprocess_utils.run_child: logs, exit statuses, forwarding a stop to the child's process
group, the bounded wait then SIGKILL, no left-over processes; and a driver process that exits
130 on SIGINT with its child gone."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import process_alive, REPO_DIR, tool_env
from realformer_tf import common
from realformer_tf import subprocess_utils


def _wait_for(path, timeout=30):
  deadline = time.time() + timeout
  while not os.path.exists(path):
    assert time.time() < deadline, "timed out waiting for %s" % path
    time.sleep(0.05)


def test_output_header_status_and_lines(tmp_path):
  log = str(tmp_path / "run.log")
  lines = []
  result = subprocess_utils.run_child(
      [sys.executable, "-c", "print('one'); print('two'); raise SystemExit(3)"], log,
      header="# the command", line_fn=lines.append, stop_signals=common.StopSignals())
  assert (result.returncode, result.signum, result.ok, result.stopped) == (3, None, False, False)
  assert result.describe() == "exit status 3"
  assert open(log).read() == "# the command\none\ntwo\n"
  assert lines == ["one\n", "two\n"]
  result = subprocess_utils.run_child([str(tmp_path / "missing")], log,
                                      stop_signals=common.StopSignals())
  assert result.returncode is None and result.describe().startswith("cannot start:")


def test_left_over_processes_are_stopped(tmp_path):
  # The child starts a worker in its group and exits without waiting for it.
  code = ("import subprocess, sys; p = subprocess.Popen(['sleep', '60']); "
          "open(sys.argv[1], 'w').write(str(p.pid))")
  pid_file = str(tmp_path / "pid")
  result = subprocess_utils.run_child([sys.executable, "-c", code, pid_file],
                                      str(tmp_path / "log"), stop_signals=common.StopSignals())
  assert result.ok
  assert not process_alive(int(open(pid_file).read()))
  assert "# stopped 1 process(es) the child left running" in open(str(tmp_path / "log")).read()


def test_stop_is_forwarded_to_the_group(tmp_path):
  # The child saves and exits 143 on SIGTERM, like the repository's tools; its worker (same
  # group) dies of the forwarded signal.
  code = """
import os, signal, subprocess, sys, time
worker = subprocess.Popen(["sleep", "60"])
def stop(signum, frame):
  open(sys.argv[1] + "/saved", "w").write(str(worker.pid))
  sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1] + "/started", "w").close()
time.sleep(60)
"""
  stop = common.StopSignals()
  threading.Thread(target=lambda: (_wait_for(str(tmp_path / "started")),
                                   setattr(stop, "signum", signal.SIGTERM))).start()
  start = time.time()
  result = subprocess_utils.run_child([sys.executable, "-c", code, str(tmp_path)],
                                      str(tmp_path / "log"), stop_signals=stop, grace_s=20)
  assert (result.returncode, result.signum, result.stopped) == (143, signal.SIGTERM, True)
  assert time.time() - start < 15
  assert not process_alive(int(open(str(tmp_path / "saved")).read()))
  # Once stopped, nothing new starts.
  result = subprocess_utils.run_child([sys.executable, "-c", "open('x', 'w')"],
                                      str(tmp_path / "log2"), cwd=str(tmp_path),
                                      stop_signals=stop)
  assert result.returncode is None and result.stopped and not (tmp_path / "x").exists()


def test_a_child_that_ignores_the_signal_is_killed_after_the_grace_period(tmp_path):
  code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
          "open(sys.argv[1], 'w').close(); time.sleep(60)")
  stop = common.StopSignals()
  started = str(tmp_path / "started")
  threading.Thread(target=lambda: (_wait_for(started),
                                   setattr(stop, "signum", signal.SIGTERM))).start()
  start = time.time()
  result = subprocess_utils.run_child([sys.executable, "-c", code, started],
                                      str(tmp_path / "log"), stop_signals=stop, grace_s=1.0)
  assert result.returncode == -signal.SIGKILL and result.describe() == "killed by signal 9"
  assert time.time() - start < 15
  assert "# killed (SIGKILL)" in open(str(tmp_path / "log")).read()


DRIVER = """
import sys
from realformer_tf import common, subprocess_utils
subprocess_utils.install_signal_forwarding()
# The child ignores SIGINT: only the second signal (kill now) ends it before the 60 s grace.
result = subprocess_utils.run_child(
    [sys.executable, "-c", "import os, signal, sys, time; signal.signal(signal.SIGINT, "
     "signal.SIG_IGN); open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)",
     sys.argv[1]], sys.argv[2], grace_s=60)
print("child:", result.describe(), flush=True)
common.STOP_SIGNALS.exit_if_stopped("driver stopped")
"""


def test_driver_exits_130_on_sigint_and_its_child_is_gone(tmp_path):
  pid_file = str(tmp_path / "child_pid")
  # A `-c` driver (not a repository tool), so Popen directly; every wait below has a timeout.
  proc = subprocess.Popen([sys.executable, "-c", DRIVER, pid_file, str(tmp_path / "log")],
                          env=tool_env({"PYTHONPATH": REPO_DIR}), cwd=REPO_DIR,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  try:
    deadline = time.time() + 60
    while not (os.path.exists(pid_file) and open(pid_file).read()):
      assert proc.poll() is None and time.time() < deadline, proc.communicate(timeout=30)[0]
      time.sleep(0.05)
    child = int(open(pid_file).read())
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None and process_alive(child)  # waiting for the child to save
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=20)[0]
  finally:
    if proc.poll() is None:
      proc.kill()
      if os.path.exists(pid_file) and open(pid_file).read():
        os.killpg(int(open(pid_file).read()), signal.SIGKILL)  # clean up after a failure
  assert proc.returncode == 130, output
  assert "child: killed by signal 9" in output
  assert "interrupted (signal 2): driver stopped" in output
  assert not process_alive(child)


ORPHANING_DRIVER = """
import sys
sys.path.insert(0, sys.argv[1])
from realformer_tf import common, subprocess_utils
subprocess_utils.run_child([sys.executable, "-c", "import os, time; open(%r, 'w').write(str(os.getpid())); time.sleep(120)" % sys.argv[3]], sys.argv[2], stop_signals=common.StopSignals())
"""


def test_an_orphan_of_a_sigkilled_driver_is_stopped_by_the_rerun(tmp_path):
  log = str(tmp_path / "run.log")
  child_pid_file = str(tmp_path / "child.pid")
  driver = subprocess.Popen([sys.executable, "-c", ORPHANING_DRIVER, REPO_DIR, log, child_pid_file])
  _wait_for(child_pid_file)
  time.sleep(0.2)
  child = int(open(child_pid_file).read())
  driver.kill()  # SIGKILL: no chance to stop its child, which lives in its own group
  driver.wait(timeout=30)
  assert process_alive(child)
  try:
    result = subprocess_utils.run_child([sys.executable, "-c", "print('rerun')"], log,
                                        stop_signals=common.StopSignals(), grace_s=5)
    assert result.ok
    assert not process_alive(child), "the rerun must stop the orphan before it starts"
    assert open(log).read().strip() == "rerun"
    assert not [n for n in os.listdir(str(tmp_path)) if n.endswith(".child.json")]
  finally:
    if process_alive(child):
      os.kill(child, signal.SIGKILL)


def test_the_child_of_a_running_driver_is_never_taken_for_an_orphan(tmp_path):
  """A second job writing the same log while the first driver runs: one line, nothing stopped."""
  log = str(tmp_path / "run.log")
  child_pid_file = str(tmp_path / "child.pid")
  driver = subprocess.Popen([sys.executable, "-c", ORPHANING_DRIVER, REPO_DIR, log,
                             child_pid_file])
  child = None
  try:
    _wait_for(child_pid_file)
    time.sleep(0.2)
    child = int(open(child_pid_file).read())
    record_path = str(tmp_path / ".run.log.child.json")
    record = open(record_path).read()
    assert '"driver_pid": %d' % driver.pid in record
    with pytest.raises(common.UsageError, match=r"^%s: written by a running job \(driver pid %d "
                       r"on host .*one job per output directory" % (log, driver.pid)):
      subprocess_utils.run_child([sys.executable, "-c", "print('second')"], log,
                                 stop_signals=common.StopSignals(), grace_s=5)
    assert process_alive(child) and driver.poll() is None
    assert open(record_path).read() == record and "second" not in open(log).read()
  finally:
    driver.kill()
    driver.wait(timeout=30)
    if child is not None and process_alive(child):
      os.kill(child, signal.SIGKILL)


def test_a_driver_pid_reused_by_another_process_counts_as_dead(tmp_path):
  """The recorded driver's pid now belongs to a process started at another time: the child is
  an orphan (stopped); with the recorded start time it is the live driver's (left alone)."""
  child = subprocess.Popen(["sleep", "60"], start_new_session=True)
  other = subprocess.Popen(["sleep", "60"])   # stands in for the driver's pid
  log = str(tmp_path / "run.log")
  record_path = str(tmp_path / ".run.log.child.json")

  def write_record(driver_start_time):
    with open(record_path, "w") as f:
      json.dump({"driver_pid": other.pid, "driver_host": socket.gethostname(),
                 "driver_start_time": driver_start_time, "pgid": child.pid,
                 "start_time": subprocess_utils.process_start_time(child.pid),
                 "cmd": ["sleep", "60"]}, f)

  try:
    started = subprocess_utils.process_start_time(other.pid)
    assert isinstance(started, int)
    write_record(started)
    with pytest.raises(common.UsageError, match="written by a running job"):
      subprocess_utils.stop_orphan(log, grace_s=5)
    assert child.poll() is None and os.path.exists(record_path)
    write_record(started - 1)
    assert subprocess_utils.stop_orphan(log, grace_s=5) == [child.pid]
    child.wait(timeout=10)
    assert not os.path.exists(record_path)
    # A killed driver not yet reaped by its parent (a zombie) is dead too.
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    other.kill()
    deadline = time.time() + 10
    while subprocess_utils.process_start_time(other.pid) is not None:
      assert time.time() < deadline
      time.sleep(0.05)
    assert common.pid_alive(other.pid)  # unreaped: its pid still answers signal 0
    write_record(started)
    assert subprocess_utils.stop_orphan(log, grace_s=5) == [child.pid]
    child.wait(timeout=10)
  finally:
    for proc in (child, other):
      if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def test_process_start_time_tells_processes_apart():
  assert subprocess_utils.process_start_time(os.getpid()) is not None
  proc = subprocess.Popen(["sleep", "60"])
  try:
    assert subprocess_utils.process_start_time(proc.pid) >= (
        subprocess_utils.process_start_time(os.getpid()))
  finally:
    proc.kill()
    proc.wait(timeout=10)
  assert subprocess_utils.process_start_time(proc.pid) is None  # gone (reaped)
