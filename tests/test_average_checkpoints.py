"""Tests for average_checkpoints.py: NumPy means, the --num_last choice, mismatches, the output."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import last_error_line, run_tool
import average_checkpoints
from realformer_tf import common

tf1 = tf.compat.v1

SHAPES = {"embeddings/word_embeddings": [11, 4], "encoder/layer_0/output/dense/kernel": [4, 3],
          "encoder/layer_0/output/dense/bias": [3]}


def _write_checkpoint(model_dir, step, seed, shapes=None, name="model.ckpt", extra=None):
  """A checkpoint with random float variables, their Adam slots, global_step and a loss scale.

  Returns:
    (prefix, {variable name: value}).
  """
  shapes = dict(shapes or SHAPES, **(extra or {}))
  rng = np.random.RandomState(seed)
  values = {}
  with tf.Graph().as_default():
    for var_name, shape in sorted(shapes.items()):
      for full in (var_name, var_name + "/adam_m", var_name + "/adam_v"):
        values[full] = rng.normal(size=shape).astype(np.float32)
        tf1.get_variable(full, initializer=values[full])
    values["global_step"] = np.int64(step)
    tf1.get_variable("global_step", initializer=tf.constant(step, tf.int64))
    values["loss_scale"] = np.float32(2.0 ** (seed % 7))
    tf1.get_variable("loss_scale", initializer=values["loss_scale"])
    saver = tf1.train.Saver()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      prefix = saver.save(sess, os.path.join(model_dir, name), global_step=step)
  return prefix, values


def _read(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_average_of_three_equals_numpy_mean(tmp_path):
  model_dir = str(tmp_path / "model")
  written = [_write_checkpoint(model_dir, step, seed)
             for step, seed in ((100, 1), (200, 2), (300, 3))]
  with open(os.path.join(model_dir, "nmt_config.json"), "w") as f:
    f.write('{"vocab_size": 11}\n')
  output_dir = str(tmp_path / "avg")
  proc = run_tool("average_checkpoints.py", ["--checkpoints=" + ",".join(p for p, _ in written),
                                             "--output_dir=" + output_dir])
  assert "averaged 3 checkpoints (steps 100, 200, 300)" in proc.stdout
  prefix = tf.train.latest_checkpoint(output_dir)
  assert prefix == os.path.join(output_dir, "model.ckpt-300")
  averaged = _read(prefix)
  # Weights averaged, optimizer state (Adam slots, loss scale) left out, global_step newest.
  assert sorted(averaged) == sorted(list(SHAPES) + ["global_step"])
  for name in SHAPES:
    expected = np.mean([values[name].astype(np.float64) for _, values in written], axis=0)
    assert averaged[name].dtype == np.float32
    np.testing.assert_allclose(averaged[name], expected, rtol=0, atol=1e-7)
  assert int(averaged["global_step"]) == 300
  # Usable by a plain Saver (as --init_checkpoint / a prediction model_dir is restored).
  with tf.Graph().as_default():
    variables = [tf1.get_variable(n, shape=s) for n, s in SHAPES.items()]
    tf1.train.get_or_create_global_step()
    with tf1.Session() as sess:
      tf1.train.Saver().restore(sess, tf.train.latest_checkpoint(output_dir))
      np.testing.assert_array_equal(sess.run(variables[0]),
                                    averaged["embeddings/word_embeddings"])
  files = sorted(os.listdir(output_dir))
  assert "nmt_config.json" in files and common.EXPORT_MARKER in files
  with open(os.path.join(output_dir, average_checkpoints.REPORT_NAME)) as f:
    report = json.load(f)
  assert report["steps"] == [100, 200, 300] and report["num_dropped"] == 2 * len(SHAPES) + 1

  # A second run into the same directory needs --overwrite; the input directory is refused.
  last_two = average_checkpoints.last_checkpoints(model_dir, 2)
  with pytest.raises(common.UsageError, match="pass --overwrite"):
    average_checkpoints.write_averaged_checkpoint(last_two, output_dir)
  with pytest.raises(common.UsageError, match="--output_dir=%s: would replace" % model_dir):
    average_checkpoints.write_averaged_checkpoint(last_two, model_dir, overwrite=True)
  assert tf.train.latest_checkpoint(model_dir) == written[-1][0]
  report = average_checkpoints.write_averaged_checkpoint(last_two, output_dir, overwrite=True)
  assert report["steps"] == [200, 300]
  np.testing.assert_allclose(
      _read(tf.train.latest_checkpoint(output_dir))["embeddings/word_embeddings"],
      (written[1][1]["embeddings/word_embeddings"].astype(np.float64) +
       written[2][1]["embeddings/word_embeddings"]) / 2, rtol=0, atol=1e-7)


def test_relative_output_dir_is_found_by_latest_checkpoint(tmp_path, monkeypatch):
  """The README's relative --output_dir: latest_checkpoint finds the averaged weights there."""
  model_dir = str(tmp_path / "out" / "model")
  os.makedirs(model_dir)
  written = [_write_checkpoint(model_dir, step, seed) for step, seed in ((10, 1), (20, 2))]
  monkeypatch.chdir(tmp_path)
  output_dir = os.path.join("out", "model", "averaged")
  average_checkpoints.write_averaged_checkpoint([p for p, _ in written], output_dir,
                                                log_fn=lambda _: None)
  assert tf.train.latest_checkpoint(output_dir) == os.path.join(output_dir, "model.ckpt-20")
  with open(os.path.join(output_dir, "checkpoint")) as f:
    assert '"model.ckpt-20"' in f.read()


def test_include_optimizer_averages_slots_and_takes_step_state_from_newest(tmp_path):
  model_dir = str(tmp_path)
  written = [_write_checkpoint(model_dir, step, seed) for step, seed in ((5, 4), (7, 5))]
  # Listed newest first: "newest" is decided by the global step, not the order.
  prefixes = [written[1][0], written[0][0]]
  values, step, newest, report = average_checkpoints.average_checkpoints(
      prefixes, include_optimizer=True)
  assert step == 7 and newest == written[1][0]
  for name in SHAPES:
    for slot in (name + "/adam_m", name + "/adam_v"):
      np.testing.assert_allclose(
          values[slot], (written[0][1][slot].astype(np.float64) + written[1][1][slot]) / 2,
          rtol=0, atol=1e-7)
  assert values["loss_scale"] == written[1][1]["loss_scale"]
  assert "loss_scale" in report["copied"] and not report["dropped"]


def test_num_last_picks_the_highest_steps(tmp_path):
  model_dir = str(tmp_path)
  # Name order (1000 < 300 < 40 < 5 as strings) and write order differ from step order. Each
  # checkpoint comes from a new Saver, so the state file lists only the last one written
  # (step 300); the others are found by their .index files.
  for step in (5, 40, 1000, 300):
    _write_checkpoint(model_dir, step, seed=step)
  state = tf1.train.get_checkpoint_state(model_dir)
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model.ckpt-300"]
  found = average_checkpoints.checkpoints_by_step(model_dir)
  assert [step for step, _ in found] == [5, 40, 300, 1000]
  last = average_checkpoints.last_checkpoints(model_dir, 3)
  assert [os.path.basename(p) for p in last] == ["model.ckpt-40", "model.ckpt-300",
                                                 "model.ckpt-1000"]
  with pytest.raises(common.UsageError, match="holds only 4 checkpoint"):
    average_checkpoints.last_checkpoints(model_dir, 5)


def test_num_last_reads_the_state_file_and_global_step(tmp_path):
  model_dir = str(tmp_path)
  # One Saver, max_to_keep=2: the state file lists the last two; the global_step variable (not
  # the name) gives the step.
  with tf.Graph().as_default():
    var = tf1.get_variable("w", initializer=np.zeros([2], np.float32))
    step = tf1.train.get_or_create_global_step()
    saver = tf1.train.Saver(max_to_keep=2)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      for i, global_step in enumerate((10, 20, 30)):
        sess.run([var.assign([float(i), 1.0]), step.assign(global_step)])
        saver.save(sess, os.path.join(model_dir, "ckpt-%d" % (9 - i)))
  found = average_checkpoints.checkpoints_by_step(model_dir)
  assert [(s, os.path.basename(p)) for s, p in found] == [(20, "ckpt-8"), (30, "ckpt-7")]
  values, global_step, _, _ = average_checkpoints.average_checkpoints(
      average_checkpoints.last_checkpoints(model_dir, 2))
  assert global_step == 30
  np.testing.assert_allclose(values["w"], [1.5, 1.0])


def test_mismatched_checkpoints_fail_naming_variable_and_checkpoint(tmp_path):
  first, _ = _write_checkpoint(str(tmp_path / "a"), 1, 1)
  other_shape, _ = _write_checkpoint(
      str(tmp_path / "b"), 2, 2, shapes=dict(SHAPES, **{"encoder/layer_0/output/dense/bias": [4]}))
  more, _ = _write_checkpoint(str(tmp_path / "c"), 3, 3, extra={"decoder/extra": [2]})
  with pytest.raises(common.UsageError) as e:
    average_checkpoints.average_checkpoints([first, other_shape])
  assert str(e.value) == ("variable encoder/layer_0/output/dense/bias: shape [3] in %s but [4] "
                          "in %s" % (first, other_shape))
  with pytest.raises(common.UsageError, match="variable decoder/extra: in %s but missing from %s"
                     % (more, first)):
    average_checkpoints.average_checkpoints([first, more])
  proc = run_tool("average_checkpoints.py", ["--checkpoints=%s,%s" % (first, other_shape),
                                             "--output_dir=" + str(tmp_path / "out")],
                  expect_rc=2)
  assert last_error_line(proc).startswith(
      "error: variable encoder/layer_0/output/dense/bias: shape [3] in")
  assert not os.path.exists(str(tmp_path / "out"))


def test_bad_flags_are_one_line_errors(tmp_path):
  proc = run_tool("average_checkpoints.py", ["--output_dir=" + str(tmp_path / "out")],
                  expect_rc=2)
  assert last_error_line(proc) == "error: give exactly one of --checkpoints and --checkpoint_dir"
  with pytest.raises(common.UsageError, match="holds no checkpoint"):
    average_checkpoints.last_checkpoints(str(tmp_path), 2)
  prefix, _ = _write_checkpoint(str(tmp_path / "m"), 1, 1)
  with pytest.raises(common.UsageError, match="lists a checkpoint twice"):
    average_checkpoints.average_checkpoints([prefix, prefix])
