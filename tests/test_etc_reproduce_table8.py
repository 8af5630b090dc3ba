"""Tests for paper/reproduce_table8.py, stages stubbed: plan, resume, best median, report."""

import json
import os
import re
import threading
import time

import pytest

from conftest import REPO_DIR
from realformer_tf import common
from paper import reproduce_table8 as rt8

MACHINE_PATH = re.compile(r"(?<![\w.:/<])/(?:work|home|root|Users|tmp)/[\w.-]+")


def _settings(tmp_path, **overrides):
  """rt8.Settings as the flags' defaults give them, inputs in tmp_path."""
  values = dict(hf_dir=str(tmp_path / "hf"), bert_checkpoint=None, num_layers=2,
                task_input_files=[str(tmp_path / "novels.txt")],
                pretraining_input_files=[str(tmp_path / "plays.txt")],
                systems=list(rt8.SYSTEMS), tasks=list(rt8.TASKS), seeds=[1, 2, 3],
                max_seq_length=256, max_global_seq_length=32, max_candidates=8,
                min_context_tokens=128, local_radius=32, window_length=128, window_stride=64,
                pretrain_steps=100, pretrain_batch_size=8, pretrain_learning_rate=1e-4,
                max_predictions_per_seq=40, finetune_steps=120, finetune_batch_size=8,
                finetune_learning_rate=1e-4, eval_every_steps=60, predict_batch_size=32,
                data_seed=12345, hard_g2l_tasks=["supporting"])
  values.update(overrides)
  return rt8.Settings(**values)


def _write_inputs(tmp_path):
  """The input files _settings names: task and pre-training text, a Hugging Face directory."""
  (tmp_path / "novels.txt").write_text("It was a dark night.\n")
  (tmp_path / "plays.txt").write_text("To be.\n")
  os.makedirs(str(tmp_path / "hf"), exist_ok=True)
  for name, text in (("config.json", "{}"), ("vocab.txt", "[PAD]\n"),
                     ("model.safetensors", "weights")):
    (tmp_path / "hf" / name).write_text(text)


def _write_json(path, obj):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    json.dump(obj, f)


def _touch(path):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  open(path, "w").close()


# Dev / test main metric per (system, task, seed) of the stub: etc_sum is 2 points above
# etc_none on seeds 1 and 3 and 6 below on seed 2 (the median difference is +2).
SCORES = {"etc_none": [0.50, 0.56, 0.40], "etc_sum": [0.52, 0.50, 0.42],
          "bert_windows": [0.30, 0.31, 0.29]}


class StubStages(object):
  """Stands in for run_stage: leaves the files the real tools would, counts the calls."""

  def __init__(self, fail_at=None):
    self.calls = []
    self.fail_at = fail_at

  def __call__(self, runner, settings, out_dir, stage):
    self.calls.append(stage.name)
    if stage.name == self.fail_at:
      common.fail("stub: %s failed" % stage.name)
    if stage.kind == "bert":
      _touch(os.path.join(stage.output, "bert_model.ckpt.index"))
      _write_json(os.path.join(stage.output, "bert_config_cut.json"),
                  {"num_hidden_layers": 2, "hidden_size": 384, "num_attention_heads": 12})
    elif stage.kind == "long_tasks":
      for task in rt8.TASKS:
        for split in ("train", "dev", "test"):
          _touch(os.path.join(stage.output, "%s_%s.tfrecord" % (task, split)))
      _write_json(os.path.join(stage.output, rt8.LONG_TASKS_SUMMARY), {
          "classify_label": "book", "classify_labels": ["Emma", "Moby Dick", "Dracula"],
          "classify_baselines": {
              split: {"examples": n, "majority_label": "Moby Dick", "majority_accuracy": share}
              for split, n, share in (("train", 600, 0.4), ("dev", 80, 0.25),
                                      ("test", 70, 0.3))}})
    elif stage.kind == "pretraining_data":
      _touch(stage.output)
    elif stage.kind == "lift":
      _touch(os.path.join(stage.output, "model.ckpt.index"))
      _touch(os.path.join(stage.output, "etc_config.json"))
    elif stage.kind == "pretrain":
      _touch(os.path.join(stage.output, "model.ckpt-%d.index" % settings.pretrain_steps))
    else:
      system, task, seed = (stage.params[k] for k in ("system", "task", "seed"))
      value = SCORES[system][seed - 1]
      for name, split_value in (("eval_results.json", value), ("test_results.json",
                                                               value - 0.1)):
        results = {"examples": 200, "checkpoint": os.path.join(stage.output, "model.ckpt-60")}
        if task == "cloze":
          results.update({"accuracy": split_value, "most_frequent_accuracy": 0.35,
                          "most_recent_accuracy": 0.38, "distance_0-127_examples": 150,
                          "distance_0-127_accuracy": split_value + 0.05,
                          "distance_0-127_most_frequent_accuracy": 0.4,
                          "distance_0-127_most_recent_accuracy": 0.45,
                          "distance_128-511_examples": 50,
                          "distance_128-511_accuracy": split_value - 0.1,
                          "distance_128-511_most_frequent_accuracy": 0.2,
                          "distance_128-511_most_recent_accuracy": 0.15})
        elif task == "classify":
          results.update({"accuracy": split_value + 0.3, "macro_f1": split_value,
                          "best_step": 60})
        else:
          results.update({"f1": split_value, "exact_match": split_value / 2,
                          "inserted_share": 0.2, "best_step": 60,
                          "r_precision": split_value + 0.2})
          # The F1 at the dev split's best threshold: on dev its own, on test the dev one's.
          results.update({"best_threshold_f1": split_value + 0.1} if name == "eval_results.json"
                         else {"f1_at_dev_threshold": split_value + 0.05,
                               "best_threshold_f1": 0.99})
        _write_json(os.path.join(stage.output, name), results)


def test_plan_order_and_commands(tmp_path):
  settings = _settings(tmp_path)
  out = str(tmp_path / "out")
  names = [s.name for s in rt8.stage_plan(settings, out)]
  assert names[:7] == ["bert", "long_tasks", "pretraining_data", "lift_none", "lift_sum",
                       "pretrain_none", "pretrain_sum"]
  # Seed by seed: every system and task of seed 1 before any of seed 2.
  assert names[7:10] == ["finetune_etc_none_cloze_seed1", "finetune_etc_sum_cloze_seed1",
                         "finetune_bert_windows_cloze_seed1"]
  # Every system on every corpus task: three runs of classify per seed.
  assert names[13:16] == ["finetune_etc_none_classify_seed1", "finetune_etc_sum_classify_seed1",
                          "finetune_bert_windows_classify_seed1"]
  assert names[16] == "finetune_etc_none_cloze_seed2" and len(names) == 7 + 27
  # Without pre-training: no data or pre-training stage, fine-tuning starts from the lift.
  short = _settings(tmp_path, pretrain_steps=0, systems=["etc_none"], seeds=[4])
  assert [s.name for s in rt8.stage_plan(short, out)] == [
      "bert", "long_tasks", "lift_none", "finetune_etc_none_cloze_seed4",
      "finetune_etc_none_supporting_seed4", "finetune_etc_none_classify_seed4"]
  # Both ETC systems: the same BERT weights, seed, data and steps; only residual_attention differs.
  none, sum_ = (rt8.lift_args(settings, out, ra) for ra in ("none", "sum"))
  assert [a for a in none if a not in sum_] == [
      "--output_dir=" + rt8.lifted_dir(out, "none"), "--residual_attention=none"]
  none, sum_ = (rt8.pretrain_args(settings, out, ra) for ra in ("none", "sum"))
  assert len([a for a in none if a not in sum_]) == 4   # config, init, output_dir, residual
  ft = rt8.finetune_args(settings, out, "etc_sum", "cloze", 2)
  assert "--init_checkpoint=%s" % os.path.join(out, "pretrained", "sum", "model.ckpt-100") in ft
  assert "--seed=2" in ft and "--keep_best" in ft and "--residual_attention=sum" in ft
  # The hard g2l mask on the tasks of --hard_g2l_tasks only, and never for BERT windows.
  assert "--use_hard_g2l_mask" not in ft
  assert "--use_hard_g2l_mask" in rt8.finetune_args(settings, out, "etc_none", "supporting", 1)
  bert = rt8.finetune_args(settings, out, "bert_windows", "supporting", 1)
  assert "--model=bert_windows" in bert and "--window_length=128" in bert
  assert not any(a.startswith("--etc_config_file") for a in bert)
  assert "--use_hard_g2l_mask" not in bert
  assert ("--init_checkpoint=%s" % os.path.join(out, "lifted", "none", "model.ckpt") in
          rt8.finetune_args(short, out, "etc_none", "cloze", 4))


def test_resume_runs_only_what_is_missing(tmp_path):
  settings = _settings(tmp_path, seeds=[1, 2])
  out = str(tmp_path / "out")
  stub = StubStages(fail_at="finetune_etc_sum_cloze_seed1")
  with pytest.raises(common.UsageError):
    rt8.run_all(settings, out, runner=None, run_fn=stub)
  assert stub.calls[-1] == "finetune_etc_sum_cloze_seed1" and len(stub.calls) == 9
  reports = []
  stub = StubStages()
  # A stage whose marker is gone is redone; the failed run and those after it run now.
  os.remove(rt8.marker_path(out, rt8.stage_plan(settings, out)[3]))   # lift_none
  ran = rt8.run_all(settings, out, runner=None, run_fn=stub,
                    report_fn=lambda: reports.append(1))
  assert ran[0] == "lift_none" and ran[1] == "finetune_etc_sum_cloze_seed1"
  assert len(ran) == 1 + 17 and len(reports) == 17
  assert rt8.run_all(settings, out, runner=None, run_fn=stub) == []   # all done
  # A tool that exits 0 without its outputs: no marker.
  os.remove(rt8.marker_path(out, rt8.stage_plan(settings, out)[-1]))
  os.remove(os.path.join(rt8.run_dir_of(out, "bert_windows", "classify", 2), "test_results.json"))
  with pytest.raises(common.UsageError, match="without <output_dir>/runs/bert_windows_classify_"):
    rt8.run_all(settings, out, runner=None, run_fn=lambda *a: None)
  assert not rt8.stage_done(out, rt8.stage_plan(settings, out)[-1])


class ConcurrentStubStages(StubStages):
  """StubStages whose fine-tuning runs take a moment; records how many stages ran at once."""

  def __init__(self, fail_at=None):
    super(ConcurrentStubStages, self).__init__(fail_at)
    self.lock = threading.Lock()
    self.active = []
    self.overlaps = {}   # {stage name: the most stages running while it ran}

  def __call__(self, runner, settings, out_dir, stage):
    with self.lock:
      self.active.append(stage.name)
      for name in self.active:
        self.overlaps[name] = max(self.overlaps.get(name, 0), len(self.active))
    try:
      if stage.kind == "finetune" and stage.name != self.fail_at:
        time.sleep(0.3)
      super(ConcurrentStubStages, self).__call__(runner, settings, out_dir, stage)
    finally:
      with self.lock:
        self.active.remove(stage.name)


def test_parallel_runs_fine_tune_together_and_keep_every_finished_run(tmp_path):
  settings = _settings(tmp_path, seeds=[1, 2])
  out = str(tmp_path / "out")
  stages = rt8.stage_plan(settings, out)
  stub = ConcurrentStubStages()
  ran = rt8.run_all(settings, out, runner=None, run_fn=stub, parallel_runs=2)
  assert sorted(ran) == sorted(s.name for s in stages) and len(ran) == 7 + 18
  # The stages before the fine-tuning one at a time, in order; then two runs at a time.
  assert stub.calls[:7] == [s.name for s in stages[:7]]
  assert all(stub.overlaps[s.name] == 1 for s in stages[:7])
  assert max(stub.overlaps.values()) == 2
  assert all(rt8.stage_done(out, s) for s in stages)
  # A failed run starts no further one; the run beside it finishes and is kept.
  failing = "finetune_etc_none_cloze_seed2"   # the second of a pair: no run starts beside it
  for stage in stages[7:]:
    os.remove(rt8.marker_path(out, stage))
  stub = ConcurrentStubStages(fail_at=failing)
  with pytest.raises(common.UsageError, match="stub: %s failed" % failing):
    rt8.run_all(settings, out, runner=None, run_fn=stub, parallel_runs=2)
  names = [s.name for s in stages[7:]]
  position = names.index(failing)
  assert sorted(stub.calls) == sorted(names[:position + 1])   # none after the failed run
  assert stub.overlaps[names[position - 1]] == 2   # ... which ran beside the one before it
  kept = [s.name for s in stages[7:] if rt8.stage_done(out, s)]
  assert kept == [n for n in names[:position + 1] if n != failing]
  # A partial report that cannot be written stops the same way: the run beside it is kept.
  for stage in stages[7:]:
    if rt8.stage_done(out, stage):
      os.remove(rt8.marker_path(out, stage))

  def report_fails():
    raise OSError("report: disk full")

  stub = ConcurrentStubStages()
  with pytest.raises(OSError, match="report: disk full"):
    rt8.run_all(settings, out, runner=None, run_fn=stub, report_fn=report_fails,
                parallel_runs=2)
  assert sorted(stub.calls) == sorted(names[:2])   # the two start together, in either order
  assert [s.name for s in stages[7:] if rt8.stage_done(out, s)] == names[:2]
  # The estimate of the time left shares the fine-tuning runs out.
  done = {"bert": 10, "finetune_etc_none_cloze_seed1": 100, "finetune_etc_sum_cloze_seed1": 200}
  one = rt8.estimate_seconds_left(stages, done)
  two = rt8.estimate_seconds_left(stages, done, parallel_runs=2)
  assert one == (100 + 200 + 14 * 150, 22, 6) and two == ((100 + 200 + 14 * 150) / 2, 22, 6)


def test_run_stage_removes_partial_output_of_non_resumable_stage(tmp_path):
  settings = _settings(tmp_path)
  out = str(tmp_path / "out")
  stage = rt8.stage_plan(settings, out)[3]   # lift_none

  class Runner(object):
    def __init__(self):
      self.calls = []

    def run(self, name, script, args):
      self.calls.append((name, script, args))
      assert not os.path.exists(os.path.join(stage.output, "stale"))

  _touch(os.path.join(stage.output, "stale"))
  runner = Runner()
  rt8.run_stage(runner, settings, out, stage)
  assert runner.calls == [("lift_none", "etc_model/lift_bert_checkpoint.py",
                           rt8.lift_args(settings, out, "none"))]


def test_best_median_and_time_estimate(tmp_path):
  per_seed = {1: {"dev": {"accuracy": 0.5}, "test": {"accuracy": 0.4}},
              2: {"dev": {"accuracy": 0.7}, "test": {}},
              3: {"dev": {"accuracy": 0.6}, "test": {"accuracy": 0.1}}}
  assert rt8.best_median(per_seed, "accuracy") == (0.6, [(1, 0.5), (2, 0.7), (3, 0.6)])
  value, pairs = rt8.best_median(per_seed, "accuracy", "test")
  assert value == pytest.approx(0.25) and pairs[1] == (2, None)   # even count: the mean
  assert rt8.best_median({}, "accuracy") == (None, [])
  stages = rt8.stage_plan(_settings(tmp_path, seeds=[1, 2]), str(tmp_path))
  done = {"bert": 10, "long_tasks": 30, "finetune_etc_none_cloze_seed1": 100,
          "finetune_etc_sum_cloze_seed1": 200}
  seconds, left, unknown = rt8.estimate_seconds_left(stages, done)
  # etc_none cloze s2 100 + etc_sum cloze s2 200 + 14 other fine-tuning runs at the kind's 150;
  # pretraining_data, the lifts and pre-training are not measured yet.
  assert (seconds, left, unknown) == (100 + 200 + 14 * 150, 21, 5)


def test_final_loss_from_either_engines_log(tmp_path):
  """The pre-training loss at the last step: the Estimator's "Loss for final step" (TF 2.15),
  the TF2 engine's "loss = x, step = N" line of the last step (TF >= 2.16)."""
  estimator = tmp_path / "estimator.log"
  estimator.write_text("INFO:tensorflow:loss = 9.9, step = 0\n"
                       "INFO:tensorflow:Loss for final step: 9.160573.\n")
  engine = tmp_path / "engine.log"
  engine.write_text("INFO:tensorflow:loss = 9.5, step = 10\n"
                    "INFO:tensorflow:train: step 20/20 steps, 2.08 steps/s, 0:00 remaining\n"
                    "INFO:tensorflow:loss = 9.160573, step = 20\n"
                    "INFO:tensorflow:Saved checkpoint out/model.ckpt-20\n")
  assert rt8.final_loss(str(estimator), 20) == pytest.approx(9.160573)
  assert rt8.final_loss(str(engine), 20) == pytest.approx(9.160573)
  # A log that stops before the last step has no final loss.
  assert rt8.final_loss(str(engine), 30) is None
  assert rt8.final_loss(str(tmp_path / "missing.log"), 20) is None


def _tasks_row(report):
  """The settings table's "tasks" row of a report."""
  return re.search(r"^\| tasks \|.*$", report, re.M).group(0)


def test_report_tables_and_settings_checks(tmp_path):
  settings = _settings(tmp_path)
  out = str(tmp_path / "out")
  rt8.run_all(settings, out, runner=None, run_fn=StubStages())
  os.makedirs(os.path.join(out, "logs"))
  with open(os.path.join(out, "logs", "pretrain_sum.log"), "w") as f:
    f.write("INFO:tensorflow:Loss for final step: 7.0\nINFO:tensorflow:Loss for final step: "
            "6.4940953.\n")
  _write_json(os.path.join(rt8.pretrained_dir(out, "sum"), "train_summary_local.json"),
              {"global_step": 100, "steady_steps_per_sec": 0.494})
  text = rt8.report_text(settings, out)
  assert "All 27 fine-tuning runs finished" in text
  assert "| residual attention sum | 100 | 6.494 | 0.494 |" in text
  assert "| residual attention none | not done | n/a | n/a |" in text
  # Medians: etc_none 50.0 (of 50, 56, 40), etc_sum 50.0 (52, 50, 42): the medians tie although
  # sum is above none on two seeds of three.
  assert "| ETC | cloze | accuracy | 50.0 | s1 50.0, s2 56.0, s3 40.0 | 40.0 |" in text
  assert "| ETC + residual attention (sum) | cloze | accuracy | 50.0 |" in text
  assert "| cloze | accuracy | dev | +0.0 | s1 +2.0, s2 -6.0, s3 +2.0 | 8.1 / 5.3 |" in text
  assert "| BERT, sliding windows | supporting | exact match | 15.0 |" in text
  assert ("| supporting | sentence F1 | 30.0 | s1 30.0 @60, s2 31.0 @60, s3 29.0 @60 | 20.0 |"
          in text)
  # Dev: the dev split's best-threshold F1; test: the F1 at that dev threshold.
  assert ("| supporting | sentence F1, threshold chosen on dev | 40.0 | s1 40.0 @60, s2 41.0 @60, "
          "s3 39.0 @60 | 25.0 | s1 25.0, s2 26.0, s3 24.0 |") in text
  assert "| BERT, sliding windows | supporting | R-precision | 50.0 |" in text
  # sum - none also by the figures that do not depend on the 0.5 threshold (test: at dev's).
  assert ("| supporting | sentence F1, threshold chosen on dev | test | +0.0 | s1 +2.0, s2 -6.0, "
          "s3 +2.0 |") in text
  assert "| supporting | R-precision | dev | +0.0 | s1 +2.0, s2 -6.0, s3 +2.0 |" in text
  assert "| ETC + residual attention (sum) | classify | macro F1 | 50.0 |" in text
  assert ("Classification by book: 3 labels; 600 train / 80 dev / 70 test examples; always the "
          "train split's most frequent label (Moby Dick) scores 25.0% dev / 30.0% test." in text)
  assert "| BERT, sliding windows | classify | accuracy |" in text
  assert "hard g2l mask on supporting |" in text
  # Only the cloze has candidates: the tasks row names them only in a run with the cloze.
  assert "L=256, G=32, at most 8 candidates, contexts >= 128 pieces" in _tasks_row(text)
  without_cloze = rt8.report_text(settings._replace(tasks=["supporting", "classify"]), out)
  assert "L=256, G=32, contexts >= 128 pieces" in _tasks_row(without_cloze)
  assert "candidates" not in _tasks_row(without_cloze)
  assert "| test examples | 150 | 50 |" in text
  assert "| baseline: most recent | 45.0 | 15.0 |" in text
  assert not MACHINE_PATH.search(text), MACHINE_PATH.search(text)
  os.remove(rt8.marker_path(out, rt8.stage_plan(settings, out)[-1]))
  assert "Partial report: 26 of 27" in rt8.report_text(settings, out)
  for overrides, message in (
      (dict(systems=["etc_none", "etc"]), "--systems=etc_none,etc: unknown etc"),
      (dict(seeds=[1, 1]), "--seeds=1,1: repeated seed"),
      (dict(min_context_tokens=256), "--min_context_tokens=256: must be below"),
      (dict(eval_every_steps=200), "--eval_every_steps=200: more than --finetune_steps=120"),
      (dict(window_stride=200), "--window_stride=200"),
  ):
    with pytest.raises(common.UsageError, match=re.escape(message)):
      rt8.check_settings(_settings(tmp_path, **overrides), check_files=False)
  # The settings of the first invocation are kept: more seeds are fine, other steps are not.
  _write_inputs(tmp_path)
  rt8.check_record(out, settings, write=True)
  rt8.check_record(out, settings._replace(seeds=[1, 2, 3, 4]), write=True)
  with pytest.raises(common.UsageError,
                     match=r"other settings or input files: finetune_steps 120 -> 50;"):
    rt8.check_record(out, settings._replace(finetune_steps=50), write=True)
  with pytest.raises(common.UsageError, match="--task_input_file="):
    rt8.check_settings(settings._replace(task_input_files=[str(tmp_path / "none.txt")]))
  assert rt8.bert_windows_available()
  assert os.path.exists(os.path.join(REPO_DIR, "paper", "reproduce_table8.py"))


def test_an_input_edited_in_place_is_refused(tmp_path):
  """The record keeps each input's contents, not only its name: an edited corpus is refused."""
  settings = _settings(tmp_path)
  out = str(tmp_path / "out")
  os.makedirs(out)
  _write_inputs(tmp_path)
  rt8.check_record(out, settings, write=True)
  record = json.load(open(os.path.join(out, rt8.RECORD_NAME)))
  assert sorted(record["inputs"]) == [
      "hf_dir/config.json", "hf_dir/model.safetensors", "hf_dir/vocab.txt",
      "pretraining_input_file/plays.txt", "task_input_file/novels.txt"]
  assert set(record["inputs"]["hf_dir/model.safetensors"]) == {"size", "mtime_ns"}
  novels = tmp_path / "novels.txt"
  novels.write_text("It was a bright day.\n")
  with pytest.raises(common.UsageError) as e:
    rt8.check_record(out, settings, write=True)
  assert str(e.value).startswith(
      "--output_dir=%s holds a run of other settings or input files: --task_input_file file %s: "
      "other contents" % (out, novels))
  assert json.load(open(os.path.join(out, rt8.RECORD_NAME))) == record
  # The pre-training text is an input only when a stage reads it.
  (tmp_path / "plays.txt").write_text("Not to be.\n")
  novels.write_text("It was a dark night.\n")
  with pytest.raises(common.UsageError, match="pretraining_input_file file"):
    rt8.check_record(out, settings, write=False)
  with pytest.raises(common.UsageError, match="input pretraining_input_file/plays.txt: not read"):
    rt8.check_record(out, settings._replace(pretrain_steps=0), write=False)


def _google_bert(directory):
  """A BERT directory laid out like Google's releases: bert_model.ckpt.*, no state file."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  os.makedirs(directory)
  with tf.Graph().as_default():
    variable = tf.compat.v1.get_variable("bert/w", initializer=[1.0, 2.0])
    saver = tf.compat.v1.train.Saver([variable])
    with tf.compat.v1.Session() as sess:
      sess.run(variable.initializer)
      saver.save(sess, os.path.join(directory, "bert_model.ckpt"), write_meta_graph=False,
                 write_state=False)
  _write_json(os.path.join(directory, "bert_config.json"), {"num_hidden_layers": 2})
  open(os.path.join(directory, "vocab.txt"), "w").write("[PAD]\n")


def test_a_bert_checkpoint_directory_without_a_state_file_resolves_once(tmp_path):
  release = str(tmp_path / "uncased_L-2_H-128_A-2")
  _google_bert(release)
  prefix = os.path.join(release, "bert_model.ckpt")
  assert rt8.resolve_bert_checkpoint(release) == (release, prefix)
  assert rt8.resolve_bert_checkpoint(prefix) == (release, prefix)
  assert rt8.resolve_bert_checkpoint(None) == (None, None)
  with pytest.raises(common.UsageError, match="^--bert_checkpoint=.*directory has no checkpoint"):
    rt8.resolve_bert_checkpoint(str(tmp_path))
  settings = _settings(tmp_path, bert_checkpoint=release, bert_init_checkpoint=prefix)
  out = str(tmp_path / "out")
  # Every stage reads the one resolved prefix: the lift, BERT's fine-tuning, the bert stage's
  # output check.
  assert "--bert_checkpoint=%s" % prefix in rt8.lift_args(settings, out, "sum")
  assert "--init_checkpoint=%s" % prefix in rt8.finetune_args(settings, out, "bert_windows",
                                                              "cloze", 1)
  rt8.write_cut_config(settings, out)
  rt8.check_stage_outputs(settings, out, rt8.stage_plan(settings, out)[0])
  _write_inputs(tmp_path)
  rt8.check_record(out, settings, write=True)
  record = json.load(open(os.path.join(out, rt8.RECORD_NAME)))
  assert set(record["inputs"]["bert_checkpoint"]) == {"index_sha256", "data_sizes"}
  assert "bert_checkpoint/vocab.txt" in record["inputs"]


def test_dry_run_with_a_bert_release_directory(tmp_path):
  from conftest import run_tool  # pylint: disable=g-import-not-at-top
  release = str(tmp_path / "bert")
  _google_bert(release)
  _write_inputs(tmp_path)
  proc = run_tool("paper/reproduce_table8.py", [
      "--output_dir=%s" % (tmp_path / "out"), "--bert_checkpoint=%s" % release,
      "--task_input_file=%s" % (tmp_path / "novels.txt"),
      "--pretraining_input_file=%s" % (tmp_path / "plays.txt"), "--dry_run"])
  assert "lift_sum" in proc.stdout and "to run" in proc.stdout
  assert not (tmp_path / "out").exists()


def test_supporting_all_inserted_baseline(tmp_path):
  import tensorflow as tf
  path = str(tmp_path / "supporting_dev.tfrecord")
  with tf.io.TFRecordWriter(path) as writer:
    for labels, ids in (([1, 0, 0, 0], [5, 5, 5, 0]), ([0, 0, 0, 0], [5, 5, 0, 0])):
      feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
                 for name, values in (("sentence_labels", labels), ("global_token_ids", ids))}
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())
  metrics = rt8.supporting_all_inserted(path)
  # Example 1: 1 of 3 real sentences inserted, all predicted: P 1/3, R 1, F1 0.5; example 2:
  # none inserted, 2 predicted: F1 0. Neither is exact.
  assert metrics["f1"] == pytest.approx(0.25) and metrics["exact_match"] == 0.0
  assert metrics["predicted_share"] == 1.0
  # A random order: 1 inserted of 3 (the example without one has no R-precision).
  assert metrics["random_r_precision"] == pytest.approx(1.0 / 3)
  assert rt8.supporting_all_inserted(str(tmp_path / "missing.tfrecord")) is None


def test_hard_g2l_tasks_flag():
  from etc_model import long_tasks  # pylint: disable=g-import-not-at-top  (loads TensorFlow)
  assert rt8.LONG_TASKS_SUMMARY == long_tasks.SUMMARY_NAME
  # The default names tasks a run may leave out; a given flag may not.
  assert rt8.hard_g2l_tasks_from_flag("supporting", ["cloze"], given=False) == []
  assert rt8.hard_g2l_tasks_from_flag("classify,cloze", ["cloze", "supporting", "classify"],
                                      given=True) == ["cloze", "classify"]
  assert rt8.hard_g2l_tasks_from_flag("", ["cloze"], given=True) == []
  with pytest.raises(common.UsageError, match=re.escape(
      "--hard_g2l_tasks=supporting: supporting is not among --tasks=cloze")):
    rt8.hard_g2l_tasks_from_flag("supporting", ["cloze"], given=True)
  with pytest.raises(common.UsageError, match=re.escape(
      "--hard_g2l_tasks=clozes: unknown task clozes (known: cloze, supporting, classify, ")):
    rt8.hard_g2l_tasks_from_flag("clozes", ["cloze"], given=False)


def test_a_task_flag_without_its_task_is_refused():
  rt8.check_task_only_flags(["nq", "cloze"], ["nq_doc_stride", "nq_max_question_length"])
  rt8.check_task_only_flags(["cloze"], [])
  with pytest.raises(common.UsageError, match=re.escape(
      "--nq_doc_stride: only with the nq task (--tasks=cloze,supporting)")):
    rt8.check_task_only_flags(["cloze", "supporting"], ["nq_doc_stride"])
