"""Tests for the shared helpers: one-line errors, atomic writes, input globs, progress, eval files."""

import json
import os
import types

import pytest
import tensorflow as tf

import common
import estimator_utils


def test_expand_input_files_globs_and_comma_lists(tmp_path):
  for name in ("b.txt", "a.txt", "c.log"):
    (tmp_path / name).write_text("x")
  pattern = "%s,%s" % (tmp_path / "*.txt", tmp_path / "c.log")
  files = common.expand_input_files(pattern)
  assert [os.path.basename(f) for f in files] == ["a.txt", "b.txt", "c.log"]
  # Duplicates are read once.
  assert len(common.expand_input_files("%s,%s" % (tmp_path / "a.txt", tmp_path / "*.txt"))) == 2
  with pytest.raises(common.UsageError, match=r"--input_file: .*nope\*.txt matches no file"):
    common.expand_input_files(str(tmp_path / "nope*.txt"))
  with pytest.raises(common.UsageError, match="--input_file is empty"):
    common.expand_input_files(" , ")


def test_require_file(tmp_path):
  with pytest.raises(common.UsageError, match="--vocab_file is required"):
    common.require_file("", "vocab_file")
  with pytest.raises(common.UsageError, match="file does not exist"):
    common.require_file(str(tmp_path / "missing.txt"), "vocab_file")
  with pytest.raises(common.UsageError, match="is a directory"):
    common.require_file(str(tmp_path), "vocab_file")


def test_atomic_output_leaves_nothing_on_failure(tmp_path):
  target = tmp_path / "out.txt"
  with pytest.raises(RuntimeError):
    with common.atomic_output(str(target)) as f:
      f.write("half")
      raise RuntimeError("killed")
  assert os.listdir(tmp_path) == []
  with common.atomic_output(str(target)) as f:
    f.write("whole")
  assert target.read_text() == "whole"
  assert os.listdir(tmp_path) == ["out.txt"]


def test_progress_meter_rate_and_remaining():
  lines = []
  meter = common.ProgressMeter(total=100, unit="MB", min_interval_s=0.0, log_fn=lines.append)
  meter.start_time -= 10.0  # pretend 10 s have passed
  meter.start_done = 0
  meter.update(25)
  assert abs(meter.rate() - 2.5) < 0.1
  assert 29 <= meter.remaining_s() <= 31
  assert "25/100 MB" in lines[-1] and "remaining" in lines[-1]
  assert common.format_duration(3725) == "1:02:05"
  assert common.format_duration(65) == "1:05"


def test_write_eval_results_txt_and_json(tmp_path):
  written = estimator_utils.write_eval_results(str(tmp_path), {"b": 0.5, "a": 2})
  assert (tmp_path / "eval_results.txt").read_text() == "a = 2\nb = 0.5\n"
  assert json.loads((tmp_path / "eval_results.json").read_text()) == written == {"a": 2, "b": 0.5}


def _flag_values(**overrides):
  values = dict(use_tpu=False, tpu_name=None, master=None, distribution_strategy="none",
                num_gpus=None, iterations_per_loop=1000, save_checkpoints_steps=1000,
                keep_checkpoint_max=5)
  values.update(overrides)
  return types.SimpleNamespace(**values)


@pytest.mark.parametrize("overrides,message", [
    ({"use_tpu": True, "tpu_name": "t", "distribution_strategy": "mirrored"},
     "cannot be combined with --use_tpu"),
    ({"use_tpu": True}, "--use_tpu needs --tpu_name"),
    ({"num_gpus": 2}, "--num_gpus is only used with --distribution_strategy=mirrored"),
    ({"save_checkpoints_steps": 0}, "--save_checkpoints_steps must be >= 1"),
])
def test_estimator_flag_errors(overrides, message):
  with pytest.raises(common.UsageError, match=message):
    estimator_utils.validate_estimator_flags(_flag_values(**overrides))


def test_multi_worker_needs_tf_config(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with pytest.raises(common.UsageError, match="needs the TF_CONFIG"):
    estimator_utils.make_distribution_strategy("multi_worker_mirrored")


def test_check_tfrecord_lengths(tmp_path):
  path = str(tmp_path / "x.tfrecord")
  with tf.io.TFRecordWriter(path) as writer:
    example = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * 16))}))
    writer.write(example.SerializeToString())
  estimator_utils.check_tfrecord_lengths([path], {"input_ids": (16, "--max_seq_length=16")})
  with pytest.raises(common.UsageError, match="has input_ids of length 16 but --max_seq_length=32"):
    estimator_utils.check_tfrecord_lengths([path], {"input_ids": (32, "--max_seq_length=32")})
  with pytest.raises(common.UsageError, match="has no feature 'segment_ids'"):
    estimator_utils.check_tfrecord_lengths([path], {"segment_ids": (16, "x")})
  empty = str(tmp_path / "empty.tfrecord")
  with tf.io.TFRecordWriter(empty):
    pass
  with pytest.raises(common.UsageError, match="has no records"):
    estimator_utils.check_tfrecord_lengths([empty], {})
  garbage = tmp_path / "garbage.tfrecord"
  garbage.write_bytes(b"this is not a tfrecord at all")
  with pytest.raises(common.UsageError, match="is not a readable TFRecord file"):
    estimator_utils.check_tfrecord_lengths([str(garbage)], {})


def test_load_config_overrides_and_errors(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps({"vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2,
                              "num_hidden_layers": 1, "intermediate_size": 16,
                              "max_position_embeddings": 32}))
  config = estimator_utils.load_config(
      str(path), types.SimpleNamespace(residual_attention="mean", layer_norm_type=None))
  assert (config.residual_attention, config.layer_norm_type) == ("mean", "post")
  with pytest.raises(common.UsageError, match="--max_seq_length=64 is longer than "
                                              "max_position_embeddings=32"):
    estimator_utils.load_config(str(path), None, max_seq_length=64)
  with pytest.raises(common.UsageError, match="--bert_config_file=.*file does not exist"):
    estimator_utils.load_config(str(tmp_path / "nope.json"))
