"""reproduction.py's settings record: the settings and the identity of every input file, so a
rerun with other flags or after an input was edited in place is refused in one line; cheap
identities of checkpoints; records of an earlier version; runs a few at a time
(run_in_parallel)."""

import collections
import hashlib
import json
import os
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import reproduction


def _save_checkpoint(prefix, value):
  """A one-variable checkpoint at exactly `prefix` (the same bytes but the variable's)."""
  with tf.Graph().as_default():
    variable = tf.compat.v1.get_variable("w", initializer=np.full([64], value, np.float32))
    saver = tf.compat.v1.train.Saver([variable])
    with tf.compat.v1.Session() as sess:
      sess.run(variable.initializer)
      saver.save(sess, prefix, write_meta_graph=False, write_state=False)


def test_input_labels_and_file_identity(tmp_path):
  (tmp_path / "corpus" / "sub").mkdir(parents=True)
  a, b = tmp_path / "corpus" / "a.txt", tmp_path / "corpus" / "sub" / "b.txt"
  a.write_bytes(b"some text\n")
  b.write_text("x")
  files = reproduction.input_files("corpus", [str(a), str(b), str(a)])
  assert [(f.label, f.flag, f.kind) for f in files] == [
      ("corpus/a.txt", "corpus", "file"), ("corpus/sub/b.txt", "corpus", "file")]
  assert reproduction.input_file("vocab_file", str(a)).label == "vocab_file"
  assert reproduction.file_identity(str(a)) == {
      "sha256": "a23e5fdcd7b276bdd81aa1a0b7b963101863dd3f61ff57935f8c5ba462681ea6", "size": 10}
  with pytest.raises(common.UsageError, match="^--corpus=.*missing.txt: cannot read it"):
    reproduction.input_identities(reproduction.input_files("corpus", [str(tmp_path /
                                                                          "missing.txt")]))


def test_checkpoint_identity_reads_the_index_not_the_weights(tmp_path):
  prefix = str(tmp_path / "model.ckpt")
  _save_checkpoint(prefix, 1.0)
  first = reproduction.checkpoint_identity(prefix)
  assert set(first) == {"index_sha256", "data_sizes"}
  assert first["data_sizes"] == {".data-00000-of-00001": os.path.getsize(
      prefix + ".data-00000-of-00001")}
  # Other weights of the same shapes (data files of the same size): the index holds each
  # tensor's crc32c, so its digest changes.
  _save_checkpoint(prefix, 2.0)
  second = reproduction.checkpoint_identity(prefix)
  assert second["data_sizes"] == first["data_sizes"]
  assert second["index_sha256"] != first["index_sha256"]
  _save_checkpoint(prefix, 1.0)
  assert reproduction.checkpoint_identity(prefix) == first


def test_record_refuses_other_settings_and_edited_inputs_in_one_line(tmp_path):
  out = str(tmp_path / "out")
  os.makedirs(out)
  text = tmp_path / "train.txt"
  text.write_text("one\n")
  prefix = str(tmp_path / "ckpt" / "model.ckpt")
  _save_checkpoint(prefix, 1.0)
  inputs = [reproduction.input_file("train_text", str(text)),
            reproduction.input_file("init_checkpoint", prefix, kind="checkpoint")]
  settings = {"steps": 10, "rate": 0.5}
  # Nothing recorded, nothing written by a plan-only run.
  assert reproduction.check_settings_record(out, settings, "r.json", False, inputs) == {}
  assert not os.path.exists(os.path.join(out, "r.json"))
  identities = reproduction.check_settings_record(out, settings, "r.json", True, inputs)
  stored = json.load(open(os.path.join(out, "r.json")))
  assert stored == {"settings": settings, "inputs": identities}
  assert identities["train_text"]["sha256"] == hashlib.sha256(b"one\n").hexdigest()
  reproduction.check_settings_record(out, dict(settings), "r.json", True, inputs)

  text.write_text("one!\n")
  _save_checkpoint(prefix, 3.0)
  with pytest.raises(common.UsageError) as e:
    reproduction.check_settings_record(out, dict(settings, steps=20), "r.json", True, inputs)
  assert str(e.value) == (
      "--output_dir=%s holds a run of other settings or input files: steps 10 -> 20, "
      "--init_checkpoint checkpoint %s: other weights (its .index differs), --train_text file "
      "%s: other contents (5 bytes, was 4); use a new --output_dir, or rerun with the flags and "
      "input files it was made with (restore an edited file)" % (out, prefix, text))
  assert json.load(open(os.path.join(out, "r.json"))) == stored
  # An input more or fewer than the recorded run read is a difference too.
  text.write_text("one\n")
  _save_checkpoint(prefix, 1.0)
  with pytest.raises(common.UsageError, match="input init_checkpoint: not read by this run"):
    reproduction.check_settings_record(out, settings, "r.json", True, inputs[:1])
  # ... unless only the inputs of both count (a sweep over other tasks): new ones are added.
  other = tmp_path / "dev.txt"
  other.write_text("dev\n")
  more = inputs[:1] + [reproduction.input_file("dev_text", str(other))]
  reproduction.check_settings_record(out, settings, "r.json", True, more, partial_inputs=True)
  assert sorted(json.load(open(os.path.join(out, "r.json")))["inputs"]) == [
      "dev_text", "init_checkpoint", "train_text"]


def test_record_of_an_earlier_version_without_inputs_is_adopted(tmp_path, capsys):
  out = tmp_path / "out"
  out.mkdir()
  (out / "r.json").write_text(json.dumps({"steps": 10, "files": ["a.txt"]}))
  text = tmp_path / "a.txt"
  text.write_text("a\n")
  inputs = reproduction.input_files("input_file", [str(text)])
  settings = {"steps": 10, "files": ["a.txt"]}
  with pytest.raises(common.UsageError, match=r"other settings or input files: steps 10 -> 11;"):
    reproduction.check_settings_record(str(out), dict(settings, steps=11), "r.json", True, inputs)
  reproduction.check_settings_record(str(out), settings, "r.json", True, inputs)
  assert "records no input file contents (an earlier version)" in capsys.readouterr().err
  assert json.load(open(str(out / "r.json")))["inputs"] == {
      "input_file/a.txt": reproduction.file_identity(str(text))}
  text.write_text("b\n")
  with pytest.raises(common.UsageError, match="--input_file file .*a.txt: other contents"):
    reproduction.check_settings_record(str(out), settings, "r.json", True, inputs)


def _google_layout(directory, names=("bert_model.ckpt",)):
  """A directory as Google's BERT releases lay it out: no `checkpoint` state file."""
  os.makedirs(directory, exist_ok=True)
  for name in names:
    _save_checkpoint(os.path.join(directory, name), 1.0)
  for name in ("bert_config.json", "vocab.txt"):
    open(os.path.join(directory, name), "w").close()


def test_resolve_checkpoint_of_a_directory_without_a_state_file(tmp_path):
  release = str(tmp_path / "uncased_L-2_H-128_A-2")
  _google_layout(release)
  assert not os.path.exists(os.path.join(release, "checkpoint"))
  prefix = os.path.join(release, "bert_model.ckpt")
  assert export_utils.resolve_checkpoint(release, "bert_checkpoint") == prefix
  assert export_utils.resolve_checkpoint(prefix, "bert_checkpoint") == prefix
  two = str(tmp_path / "two")
  _google_layout(two, ("a.ckpt", "b.ckpt"))
  with pytest.raises(common.UsageError, match=r"^--bert_checkpoint=%s: directory has 2 "
                     r"checkpoints \(a.ckpt, b.ckpt\) and no `checkpoint` state file" % two):
    export_utils.resolve_checkpoint(two, "bert_checkpoint")
  with pytest.raises(common.UsageError, match="directory has no checkpoint"):
    export_utils.resolve_checkpoint(str(tmp_path), "bert_checkpoint")
  # A state file names the latest; one naming a missing checkpoint is not replaced by another.
  tf.compat.v1.train.update_checkpoint_state(two, os.path.join(two, "b.ckpt"))
  assert export_utils.resolve_checkpoint(two) == os.path.join(two, "b.ckpt")
  tf.compat.v1.train.update_checkpoint_state(release, os.path.join(release, "gone.ckpt"))
  with pytest.raises(common.UsageError, match="state file names no checkpoint that exists"):
    export_utils.resolve_checkpoint(release, "bert_checkpoint")


class _Runs(object):
  """A run_fn for run_in_parallel: records starts and how many runs were going at once.

  Args:
    fail: {item: exception} raised by that item's run.
    wait_for: {item: item} a run that waits until the other one has ended, then 0.3 s more (so
      the other one's end is seen while it still runs).
  """

  def __init__(self, fail=None, wait_for=None):
    self.fail, self.wait_for = fail or {}, wait_for or {}
    self.lock = threading.Lock()
    self.started, self.active, self.most_active = [], 0, 0
    self.ended = collections.defaultdict(threading.Event)

  def __call__(self, item):
    with self.lock:
      self.started.append(item)
      self.active += 1
      self.most_active = max(self.most_active, self.active)
    try:
      if item in self.wait_for:
        assert self.ended[self.wait_for[item]].wait(timeout=30)
        time.sleep(0.3)
      if item in self.fail:
        raise self.fail[item]
      return item * 10
    finally:
      with self.lock:
        self.active -= 1
      self.ended[item].set()


def test_run_in_parallel_bounds_the_runs_at_a_time_and_keeps_the_items_order():
  # Run 0 lasts until 0.3 s after run 3 has ended: runs 1..4 finish first (on_done in the order
  # they finish); the results keep the items' order.
  runs, finished = _Runs(wait_for={0: 3}), []
  results = reproduction.run_in_parallel(range(5), runs, 2,
                                         on_done=lambda item, r: finished.append((item, r)))
  assert results == [0, 10, 20, 30, 40]
  assert runs.started == [0, 1, 2, 3, 4] and runs.most_active == 2
  assert finished == [(1, 10), (2, 20), (3, 30), (4, 40), (0, 0)]
  # One at a time: in order, never two together; no items, nothing runs.
  runs = _Runs()
  assert reproduction.run_in_parallel([3, 1, 2], runs, 1) == [30, 10, 20]
  assert runs.started == [3, 1, 2] and runs.most_active == 1
  assert reproduction.run_in_parallel([], runs, 4) == []


@pytest.mark.parametrize("failure", [common.UsageError("run 1 failed"), SystemExit(143)],
                         ids=["failure", "stop"])
def test_run_in_parallel_first_failure_starts_no_further_run_and_is_raised_last(failure):
  # Run 1 fails while run 0 still runs: nothing else starts, run 0 finishes (its on_done is
  # called), then the failure is raised.
  runs, finished = _Runs(fail={1: failure}, wait_for={0: 1}), []
  with pytest.raises(type(failure)) as raised:
    reproduction.run_in_parallel(range(6), runs, 2,
                                 on_done=lambda item, r: finished.append(item))
  assert raised.value is failure
  assert runs.started == [0, 1] and finished == [0] and runs.active == 0


def test_run_in_parallel_a_failed_on_done_starts_no_further_run():
  """on_done (a done marker, a report) failing stops new runs as a failed run does."""
  runs, finished = _Runs(wait_for={0: 1}), []

  def on_done(item, _):
    if item == 1:
      raise OSError("disk full")
    finished.append(item)

  with pytest.raises(OSError, match="disk full"):
    reproduction.run_in_parallel(range(6), runs, 2, on_done=on_done)
  assert runs.started == [0, 1] and finished == [0]
