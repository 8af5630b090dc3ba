"""Shared test fixtures: paths to the repo and to ../shared/data (skip when absent)."""

import json
import os
import sys
import time

import pytest

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# google-research/bert's own *_test.py files: run in a TF1-mode process by
# tests/test_official_api.py (official/run_official_tests.py), never collected here.
collect_ignore = ["official"]

# A 2-layer, 32-wide BERT over the real 30,522-entry vocab: fast end-to-end runs of the scripts.
TINY_BERT_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                    "num_attention_heads": 2, "intermediate_size": 64,
                    "max_position_embeddings": 64, "type_vocab_size": 2, "hidden_act": "gelu",
                    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                    "initializer_range": 0.02}

if REPO_DIR not in sys.path:
  sys.path.insert(0, REPO_DIR)
from realformer_tf import tf_startup  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import
from realformer_tf import common  # pylint: disable=g-import-not-at-top,wrong-import-position

SHARED_DATA_DIR = common.shared_data_dir()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def write_random_bert_checkpoint(config_file, checkpoint_path, seed=1):
  """Saves a randomly initialised BERT (bert/* variables only), as a pre-trained one would be.

  Args:
    config_file: bert_config.json path.
    checkpoint_path: checkpoint prefix to write.
    seed: graph-level random seed.

  Returns:
    The checkpoint prefix written.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import modeling  # pylint: disable=g-import-not-at-top
  config = modeling.BertConfig.from_json_file(config_file)
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(seed)
    ids = tf.compat.v1.placeholder(tf.int32, [None, 8])
    modeling.BertModel(config, False, ids)
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return saver.save(sess, checkpoint_path)


# The TF 2.15 interpreter, for tests run by the newest TF that compare the two (`bash run.sh
# test-latest` sets it).
TF215_PYTHON_ENV = "REALFORMER_TF215_PYTHON"


def tf215_python():
  """The TF 2.15 interpreter ($REALFORMER_TF215_PYTHON), or a skip of the test when this process
  is not the newest TF's (TF 2.15 has the Estimator) or the variable is unset."""
  from realformer_tf import estimator_utils  # pylint: disable=g-import-not-at-top
  if estimator_utils.has_estimator():
    pytest.skip("compares TF 2.15 with the newest TF: runs in `bash run.sh test-latest`")
  python = os.environ.get(TF215_PYTHON_ENV)
  if not python or not os.path.exists(python):
    pytest.skip("needs $%s (the TF 2.15 interpreter; run.sh sets it)" % TF215_PYTHON_ENV)
  return python


def shared_path(*parts):
  """Returns a path under ../shared/data, or skips the test with the reason if it is absent."""
  path = os.path.join(SHARED_DATA_DIR, *parts)
  if not os.path.exists(path):
    pytest.skip("needs %s (the shared data beside the repo; set REALFORMER_SHARED_DATA)" % path)
  return path


@pytest.fixture
def vocab_file():
  """The bert-base-uncased vocab from ../shared/data, or the copy shipped in data/."""
  shipped = os.path.join(REPO_DIR, "data", "vocab.txt")
  if os.path.exists(shipped):
    return shipped
  return shared_path("vocab", "bert_uncased_vocab.txt")


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "slow: end-to-end runs of whole jobs (deselect with -m 'not slow')")


# Every subprocess a test starts has a timeout: a hung tool fails its test instead of CI.
DEFAULT_TIMEOUT_S = 300
TOOL_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


def tool_command(script, args=()):
  """A repository tool run with this test's Python: [python, <repo>/script, args...] for a
  top-level command, [python, -m, package.tool, args...] for one in a package folder
  ("paper/sweep.py", "translation/run_translation.py"), as users run them."""
  args = [str(a) for a in args]
  if "/" in script and script.endswith(".py") and not os.path.isabs(script):
    return [sys.executable, "-m", script[:-3].replace("/", ".")] + args
  return [sys.executable, os.path.join(REPO_DIR, script)] + args


def bert_windows_args(etc_args, root, window_length=48, window_stride=24):
  """An ETC run_long_tasks command line made a --model=bert_windows one: --etc_config_file
  replaced by root/bert_config.json over windows of window_length tokens, window_stride apart."""
  return [a for a in etc_args if not a.startswith("--etc_config_file")] + [
      "--model=bert_windows", "--bert_config_file=%s" % (root / "bert_config.json"),
      "--window_length=%d" % window_length, "--window_stride=%d" % window_stride]


def train_bert_windows(etc_args, root, new_variables, **windows):
  """Runs an ETC run_long_tasks command line as --model=bert_windows (bert_windows_args, with
  `windows`' window_length / window_stride) from root/bert.ckpt: 2 training steps, --do_eval and
  --do_predict. Checks that every BERT variable is loaded and that the log's list of variables
  not in the checkpoint starts with `new_variables` ("2 not in checkpoint: cls/...")."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  result = run_tool(None, bert_windows_args(etc_args, root, **windows) + [
      "--init_checkpoint=%s" % (root / "bert.ckpt"), "--do_train", "--do_eval", "--do_predict",
      "--num_train_steps=2"])
  loaded = len(tf.train.list_variables(str(root / "bert.ckpt")))
  assert "%d variables loaded, %s" % (loaded, new_variables) in result.output, (
      result.output[-3000:])


def tool_env(extra=None):
  """The environment tools run with in tests (quiet TensorFlow, no GPU), plus `extra`."""
  env = dict(os.environ, **TOOL_ENV)
  env.update(extra or {})
  return env


class ToolForkServer(object):
  """This test process's tool_fork_server.py: runs a tool as a fork of a Python that has
  TensorFlow imported already (see that module), without the ~2 s import of a new process."""

  def __init__(self):
    import subprocess  # pylint: disable=g-import-not-at-top
    import tempfile  # pylint: disable=g-import-not-at-top
    self.out_dir = tempfile.mkdtemp(prefix="tool-fork-")
    self.proc = subprocess.Popen(
        [sys.executable, os.path.join(REPO_DIR, "tests", "tool_fork_server.py")],
        cwd=REPO_DIR, env=tool_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL)
    self.pending = b""

  def _reply(self, timeout):
    """The server's next JSON line; None when none came within `timeout` seconds."""
    import select  # pylint: disable=g-import-not-at-top
    deadline = None if timeout is None else time.time() + timeout
    while b"\n" not in self.pending:
      wait = None if deadline is None else max(0.0, deadline - time.time())
      if not select.select([self.proc.stdout], [], [], wait)[0]:
        return None
      chunk = os.read(self.proc.stdout.fileno(), 65536)
      if not chunk:
        raise RuntimeError("tool_fork_server.py ended (exit %s)" % self.proc.poll())
      self.pending += chunk
    line, self.pending = self.pending.split(b"\n", 1)
    return json.loads(line)

  def run(self, command, cwd, timeout):
    """Runs `command` (tool_command's list) in `cwd`; returns (status, stdout, stderr)."""
    import subprocess  # pylint: disable=g-import-not-at-top
    request = {"args": command[3:] if command[1] == "-m" else command[2:], "cwd": cwd,
               "stdout": os.path.join(self.out_dir, "stdout"),
               "stderr": os.path.join(self.out_dir, "stderr")}
    if command[1] == "-m":
      request["module"] = command[2]
    else:
      request["script"] = command[1]
    self.proc.stdin.write((json.dumps(request) + "\n").encode("utf-8"))
    self.proc.stdin.flush()
    pid = self._reply(60)["pid"]
    reply = self._reply(timeout)
    if reply is None:
      os.kill(pid, 9)
      self._reply(60)
      raise subprocess.TimeoutExpired(command, timeout)
    outputs = []
    for name in ("stdout", "stderr"):
      with open(request[name], encoding="utf-8", errors="replace") as f:
        outputs.append(f.read())
    return reply["status"], outputs[0], outputs[1]


_FORK_SERVER = []


def fork_server():
  """This test process's ToolForkServer, started on first use."""
  if not _FORK_SERVER:
    _FORK_SERVER.append(ToolForkServer())
  return _FORK_SERVER[0]


def run_tool(script, args=(), expect_rc=0, timeout=DEFAULT_TIMEOUT_S, env=None, cwd=REPO_DIR):
  """Runs a repository tool to completion and checks its exit status.

  A run expected to fail (expect_rc other than 0 or None) with the default environment is a
  fork of fork_server(): the tool's behaviour and outputs are those of a new process, without
  its TensorFlow import.

  Args:
    script: file name under the repository ("run_classifier.py"), or None to run `args` as
      the whole command after the Python executable (e.g. ["-c", code]).
    args: its command-line arguments.
    expect_rc: the exit status the test expects (None: do not check).
    timeout: seconds before the test fails with subprocess.TimeoutExpired.
    env: extra environment variables.
    cwd: working directory.

  Returns:
    subprocess.CompletedProcess with text stdout / stderr; `.output` is both together.
  """
  import subprocess  # pylint: disable=g-import-not-at-top
  cmd = tool_command(script, args) if script else [sys.executable] + [str(a) for a in args]
  if script and expect_rc not in (0, None) and env is None:
    status, stdout, stderr = fork_server().run(cmd, str(cwd), timeout)
    proc = subprocess.CompletedProcess(cmd, status, stdout, stderr)
  else:
    proc = subprocess.run(cmd, cwd=cwd, env=tool_env(env), capture_output=True, text=True,
                          timeout=timeout)
  proc.output = proc.stdout + proc.stderr
  if expect_rc is not None:
    assert proc.returncode == expect_rc, "exit %d, expected %d:\n%s" % (
        proc.returncode, expect_rc, proc.output[-4000:])
  return proc


def start_tool(script, args=(), env=None, cwd=REPO_DIR, **popen_kwargs):
  """Starts a repository tool in the background (subprocess.Popen); the test must wait on it
  with a timeout (proc.communicate(timeout=...) or proc.wait(timeout=...))."""
  import subprocess  # pylint: disable=g-import-not-at-top
  popen_kwargs.setdefault("stdout", subprocess.DEVNULL)
  popen_kwargs.setdefault("stderr", subprocess.PIPE)
  popen_kwargs.setdefault("text", True)
  return subprocess.Popen(tool_command(script, args), cwd=cwd, env=tool_env(env),
                          **popen_kwargs)


def last_error_line(proc):
  """The last non-empty line of a finished tool's stderr (where a one-line error goes)."""
  lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
  return lines[-1] if lines else ""


def process_alive(pid):
  """Whether `pid` is a running process (a zombie has ended), from /proc."""
  try:
    with open("/proc/%d/stat" % pid) as f:
      # "pid (comm) state ...": comm may hold spaces and parentheses.
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except (OSError, IndexError):
    return False


def kill_when(script, args, ready, sig, timeout=180, check_visible=None):
  """Starts the job, waits until ready() is true, sends `sig`, waits; returns (status, stderr).

  check_visible (if given) is called while waiting, to assert what other programs may see.
  """
  proc = start_tool(script, args)
  deadline = time.time() + timeout
  try:
    while not ready():
      if check_visible:
        check_visible()
      assert proc.poll() is None, "the job ended before it could be killed: %s" % (
          proc.communicate(timeout=60)[1][-2000:])
      assert time.time() < deadline, "timed out waiting for the kill point"
      time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait(timeout=60)
  return proc.returncode, err
