"""checkpoint_utils: trained-weights checks, unmatched init checkpoints, protected checkpoint files."""

import errno
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from conftest import REPO_DIR
import checkpoint_utils
import common


def _save_checkpoint(directory, step, names=("bert/w",)):
  """A checkpoint at `directory`/model.ckpt-`step` with a global_step; returns its prefix."""
  with tf.Graph().as_default():
    for name in names:
      tf.compat.v1.get_variable(name, [2], initializer=tf.compat.v1.zeros_initializer())
    step_var = tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(step_var.assign(step))
      return tf.compat.v1.train.Saver().save(sess, os.path.join(str(directory), "model.ckpt"),
                                             global_step=step)


def test_require_trained_weights(tmp_path):
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(common.UsageError) as e:
    checkpoint_utils.require_trained_weights(
        "--do_eval", [("output_dir", str(empty)), ("init_checkpoint", None)],
        allow_random_eval=False, give_flag="init_checkpoint")
  assert "--do_eval" in str(e.value) and "--init_checkpoint" in str(e.value)
  assert "--allow_random_eval" in str(e.value) and str(empty) in str(e.value)
  assert checkpoint_utils.require_trained_weights(
      "--do_eval", [("output_dir", str(empty))], allow_random_eval=True) is None
  prefix = _save_checkpoint(tmp_path / "run", 7)
  assert checkpoint_utils.require_trained_weights(
      "--do_eval", [("output_dir", str(empty)), ("init_checkpoint", prefix)],
      allow_random_eval=False) == ("init_checkpoint", prefix)
  assert checkpoint_utils.require_trained_weights(
      "--do_eval", [("output_dir", str(tmp_path / "run"))],
      allow_random_eval=False) == ("output_dir", str(tmp_path / "run"))
  assert checkpoint_utils.checkpoint_record(prefix) == {"checkpoint": prefix, "global_step": 7}
  assert checkpoint_utils.checkpoint_record(None)["checkpoint"] is None


def test_check_init_matches():
  checkpoint_utils.check_init_matches("ck", {"a": "a"}, 3, allow_unmatched=False)
  checkpoint_utils.check_init_matches("ck", {}, 3, allow_unmatched=True)
  with pytest.raises(common.UsageError) as e:
    checkpoint_utils.check_init_matches("ck", {}, 3, allow_unmatched=False)
  assert str(e.value).startswith("--init_checkpoint=ck: supplies none of the model's 3")
  assert "--allow_unmatched_init" in str(e.value)


def test_checkpoint_files_protect_state_and_every_shard(tmp_path):
  run = tmp_path / "run"
  first = _save_checkpoint(run, 5)
  _save_checkpoint(run, 9)
  (run / "features.jsonl").write_text("x")
  files = {os.path.basename(p) for p in checkpoint_utils.checkpoint_files(str(run))}
  assert "checkpoint" in files and "model.ckpt-5.index" in files
  assert "model.ckpt-9.data-00000-of-00001" in files and "features.jsonl" not in files
  # Reading the newest checkpoint still protects the older one's shards and the state file.
  inputs = checkpoint_utils.checkpoint_files(first)
  for name in ("checkpoint", "model.ckpt-9.index"):
    with pytest.raises(common.UsageError):
      common.check_not_input(str(run / name), inputs)
  common.check_not_input(str(run / "new.jsonl"), inputs)
  assert checkpoint_utils.checkpoint_files(None) == []


def test_storage_errors_are_one_line_naming_the_file(tmp_path):
  """ENOSPC while writing: the tool prints one line with the file name, exit 1, no temporary."""
  out = tmp_path / "out.txt"
  script = (
      "import errno, sys\n"
      "sys.path.insert(0, %r)\n"
      "import common\n"
      "def main(argv):\n"
      "  with common.atomic_output(%r) as f:\n"
      "    f.write('x')\n"
      "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
      "common.run_main(main, [])\n" % (REPO_DIR, str(out)))
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 1, result.stderr
  last = result.stderr.strip().splitlines()[-1]
  assert last == "error: %s: No space left on device (errno %d)" % (out, errno.ENOSPC), last
  assert "Traceback" not in result.stderr
  assert os.listdir(tmp_path) == []
