"""A Python with TensorFlow imported that runs repository tools as forks of itself (tests only).

A tool run that ends in a one-line error spends most of its time importing TensorFlow (about
2 s of CPU); the suite has over a hundred such runs. conftest.run_tool sends those to this
server, started once per test process: each run is a fork of the server (TensorFlow imported,
its runtime not started: no device, session or thread pool yet), which then runs the tool as
`python SCRIPT ARGS` or `python -m MODULE ARGS` would (sys.argv, sys.path[0], the working
directory, __main__), with its standard output and error written to the files the test names,
and exits with the tool's status.

Protocol, one JSON object per line: the test writes {"script" | "module", "args", "cwd",
"stdout", "stderr"}; the server answers {"pid"} when the run started and {"status"} when it
ended (the exit status as subprocess reports it: negative for a signal).
"""

import json
import os
import runpy
import signal
import sys
import traceback

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, REPO_DIR)
# What every repository tool imports first (TensorFlow, quietly), then what most import.
from realformer_tf import tf_startup  # pylint: disable=unused-import,wrong-import-position
import absl.app  # pylint: disable=unused-import,g-import-not-at-top,wrong-import-order
import absl.flags  # pylint: disable=unused-import,g-import-not-at-top,wrong-import-order
import absl.logging  # pylint: disable=unused-import,g-import-not-at-top,wrong-import-order
import numpy  # pylint: disable=unused-import,g-import-not-at-top,wrong-import-order


def exit_status(code):
  """The process exit status of SystemExit(code), as the interpreter maps it."""
  if code is None:
    return 0
  if isinstance(code, int):
    return code & 0xFF
  sys.stderr.write("%s\n" % code)
  return 1


def run_tool(request):
  """In the forked child: runs the request's tool as __main__; never returns."""
  status = 1
  try:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
      out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
      os.dup2(out, fd)
      os.close(out)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    if "module" in request:
      sys.argv = [request["module"]] + request["args"]
      sys.path[0] = request["cwd"]
      run = lambda: runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    else:
      sys.argv = [request["script"]] + request["args"]
      sys.path[0] = os.path.dirname(request["script"])
      run = lambda: runpy.run_path(request["script"], run_name="__main__")
    try:
      run()
      status = 0
    except SystemExit as e:
      status = exit_status(e.code)
    except KeyboardInterrupt:
      traceback.print_exc()
      status = 130
    except BaseException:  # pylint: disable=broad-except  (reported as the interpreter would)
      traceback.print_exc()
      status = 1
    try:
      import atexit  # pylint: disable=g-import-not-at-top
      atexit._run_exitfuncs()  # pylint: disable=protected-access
    except BaseException:  # pylint: disable=broad-except
      traceback.print_exc()
  finally:
    for stream in (sys.stdout, sys.stderr):
      try:
        stream.flush()
      except Exception:  # pylint: disable=broad-except
        pass
    os._exit(status)  # pylint: disable=protected-access


def main():
  channel_in = sys.stdin
  channel_out = os.fdopen(os.dup(1), "w")
  for line in channel_in:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
      os.close(channel_out.fileno())
      run_tool(request)
    channel_out.write(json.dumps({"pid": pid}) + "\n")
    channel_out.flush()
    _, wait_status = os.waitpid(pid, 0)
    status = (-os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status)
              else os.WEXITSTATUS(wait_status))
    channel_out.write(json.dumps({"status": status}) + "\n")
    channel_out.flush()


if __name__ == "__main__":
  main()
