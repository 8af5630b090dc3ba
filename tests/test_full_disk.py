"""A full disk under the ETC tools: one line naming the output, exit status 1, no output that
looks finished and no temporary left.

The disk fills through the file-size limit (RLIMIT_FSIZE) of the tool's process with SIGXFSZ
ignored: a write past the limit fails with EFBIG ("File too large"), one of the storage errors
common.run_main reports, as a full disk's ENOSPC is, without a small file system (which needs
root to mount).
"""

import errno
import json
import os
import resource
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from conftest import REPO_DIR, tool_env
from etc_model import etc_modeling
from etc_model import export_long_model as export
from etc_model import long_tasks
from realformer_tf import pretraining_data
from test_etc_long_tasks import _corpus, _settings
from test_etc_run_long_tasks import TINY_ETC_CONFIG

pytestmark = pytest.mark.slow
tf1 = tf.compat.v1

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
FULL = "File too large (errno %d)" % errno.EFBIG


def _run_on_a_full_disk(args, limit_bytes, timeout=180):
  """Runs `python ARGS` with files limited to limit_bytes; returns (status, stderr)."""

  def limit_file_size():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

  proc = subprocess.Popen([sys.executable] + [str(a) for a in args], cwd=REPO_DIR, env=tool_env(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=limit_file_size)
  try:
    _, err = proc.communicate(timeout=timeout)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  return proc.returncode, err


def _finished_names(directory):
  """What another program sees in `directory`, and the temporaries left there."""
  names = sorted(os.listdir(str(directory))) if os.path.isdir(str(directory)) else []
  return names, [n for n in names if ".tmp-" in n]


def _last_line(err):
  lines = [line for line in err.strip().splitlines() if line.strip()]
  return lines[-1] if lines else ""


def test_create_pretraining_data(tmp_path):
  (tmp_path / "in").mkdir()
  _corpus(str(tmp_path / "in" / "text.txt"))
  out = tmp_path / "out"
  out.mkdir()
  status, err = _run_on_a_full_disk(
      ["-m", "etc_model.create_pretraining_data", "--input_file=%s" % (tmp_path / "in/text.txt"),
       "--output_file=%s" % (out / "etc.tfrecord"), "--vocab_file=%s" % VOCAB,
       "--max_seq_length=64", "--max_global_seq_length=8", "--max_predictions_per_seq=10"],
      limit_bytes=4096)
  assert status == 1, err[-3000:]
  assert "Traceback" not in err
  assert _last_line(err) == "error: %s: %s" % (out / "etc.tfrecord", FULL)
  assert _finished_names(out) == ([], [])


def test_create_long_tasks(tmp_path):
  (tmp_path / "in").mkdir()
  _corpus(str(tmp_path / "in" / "corpus.txt"))
  out = tmp_path / "out"
  status, err = _run_on_a_full_disk(
      ["-m", "etc_model.create_long_tasks", "--input_file=%s" % (tmp_path / "in/corpus.txt"),
       "--output_dir=%s" % out, "--vocab_file=%s" % VOCAB, "--max_seq_length=64",
       "--max_global_seq_length=12", "--min_context_tokens=0"], limit_bytes=4096)
  assert status == 1, err[-3000:]
  assert "Traceback" not in err
  line = _last_line(err)
  assert line.startswith("error: %s/" % out) and line.endswith(".tfrecord: " + FULL), line
  names, temporaries = _finished_names(out)
  # Record files finished before the disk filled stay (each is whole); the summary, written
  # last, is absent: the directory is not a finished data set (run_long_tasks reads it first).
  assert not temporaries and long_tasks.SUMMARY_NAME not in names, names


def test_export_long_model(tmp_path):
  config = etc_modeling.EtcConfig.from_dict(TINY_ETC_CONFIG)
  settings = _settings(pretraining_data.make_tokenizer(VOCAB, True), max_seq_length=64,
                       max_global_seq_length=12, max_candidates=4)
  run = tmp_path / "run"
  with tf.Graph().as_default():
    export._placeholder_build("cloze", config, settings, None)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      tf1.train.Saver().save(sess, str(run / "model.ckpt"))
  (run / export.CONFIG_NAME).write_text(config.to_json_string())
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / long_tasks.SUMMARY_NAME).write_text(json.dumps({"settings": settings}))
  out = tmp_path / "out"
  out.mkdir()
  # The token table alone is ~4 MB: the variables' file cannot be written.
  status, err = _run_on_a_full_disk(
      ["-m", "etc_model.export_long_model", "--task=cloze", "--checkpoint=%s" % run,
       "--data_dir=%s" % (tmp_path / "data"), "--vocab_file=%s" % VOCAB,
       "--output_dir=%s" % (out / "export")], limit_bytes=1 << 20)
  assert status == 1, err[-3000:]
  assert "Traceback" not in err
  assert _last_line(err) == "error: %s: %s" % (out / "export", FULL)
  assert _finished_names(out) == ([], [])


def _run_in_a_read_only_directory(directory, args, timeout=180):
  """Runs `python ARGS` with `directory` read-only; returns (status, stderr, the system's words).

  Not root: the directory's mode (chmod 555) stops the writes. Root writes whatever the mode
  says: the directory is bound read-only in a private mount namespace (`unshare -m`) instead.
  """
  command = [sys.executable] + [str(a) for a in args]
  if os.geteuid() != 0:
    os.chmod(str(directory), 0o555)
    words = "Permission denied (errno %d)" % errno.EACCES
  else:
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
      pytest.skip("root without `unshare -m`: no read-only directory to write into")
    command = ["unshare", "-m", "sh", "-c",
               'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"',
               str(directory)] + command
    words = "Read-only file system (errno %d)" % errno.EROFS
  try:
    result = subprocess.run(command, cwd=REPO_DIR, env=tool_env(), capture_output=True,
                            text=True, timeout=timeout)
  finally:
    os.chmod(str(directory), 0o755)
  return result.returncode, result.stderr, words


def test_read_only_output_directories(tmp_path):
  """A TFRecord writer (etc_model.create_pretraining_data) and a SavedModel writer
  (export_hub.py) into a directory they may not write: one line naming the output, exit 1."""
  (tmp_path / "in").mkdir()
  _corpus(str(tmp_path / "in" / "text.txt"))
  out = tmp_path / "out"
  out.mkdir()
  status, err, words = _run_in_a_read_only_directory(out, [
      "-m", "etc_model.create_pretraining_data", "--input_file=%s" % (tmp_path / "in/text.txt"),
      "--output_file=%s" % (out / "etc.tfrecord"), "--vocab_file=%s" % VOCAB,
      "--max_seq_length=64", "--max_global_seq_length=8", "--max_predictions_per_seq=10"])
  assert (status, "Traceback" in err) == (1, False), err[-3000:]
  assert _last_line(err) == "error: %s: %s" % (out / "etc.tfrecord", words)
  status, err, words = _run_in_a_read_only_directory(out, [
      os.path.join(REPO_DIR, "export_hub.py"), "--mode=preprocessor", "--vocab_file=%s" % VOCAB,
      "--export_dir=%s" % (out / "preprocessor")])
  assert (status, "Traceback" in err) == (1, False), err[-3000:]
  assert _last_line(err) == "error: %s: %s" % (out / "preprocessor", words)
  assert os.listdir(str(out)) == []
