"""Tests for reproduce_table7.py: run order, done markers, plan, report, --tiny_test end to end."""

import csv
import gzip
import json
import os
import re
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, run_tool, shared_path, start_tool
from realformer_tf import common
from realformer_tf import reproduction
from paper import reproduce_table7 as rt7

MACHINE_PATH = re.compile(r"(?<![\w.:/])/(?:work|home|root|Users|tmp)/[\w.-]+")
TARGET = 952   # steps of a fake run (7 epochs of 136 batches)


def _settings(tmp_path, **overrides):
  """rt7.Settings as the flags' defaults give them, data_dir in tmp_path."""
  values = dict(data_dir=str(tmp_path / "multi30k"), source_language="en",
                target_language="de", test_set="test_2016_flickr",
                variants=["admin", "realformer_mean"], seeds=[1, 2], spm_vocab_size=8000,
                config_file=os.path.join(REPO_DIR, "configs", "nmt_multi30k_6l.json"),
                num_train_epochs=7, max_tokens=4096, learning_rate=1e-3, warmup_steps=400,
                keep_checkpoint_max=10, num_average=3, beam_size=4, length_penalty=0.6,
                max_decode_length=80, predict_batch_size=64, curve_smoothing=0.6,
                tiny_test=False)
  values.update(overrides)
  return rt7.Settings(**values)


def _write_json(path, obj):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    json.dump(obj, f)


def _write_losses(directory, points, suffix=""):
  """An events file with the scalar "loss" at the given (step, value) points."""
  with tf.Graph().as_default():   # FileWriter is graph-mode only, as in the Estimator
    writer = tf.compat.v1.summary.FileWriter(directory, filename_suffix=suffix)
    for step, value in points:
      summary = tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag="loss",
                                                                        simple_value=value)])
      writer.add_summary(summary, step)
    writer.close()


def _fake_run(out, variant, seed, bleu=None, tok=None, chrf=None, ppl=None, tps=None,
              secs=None, step=TARGET, rate=0.5, losses=None):
  """A run directory as the driver leaves it: done when bleu is given."""
  run_dir = rt7.run_dir_of(str(out), variant, seed)
  os.makedirs(run_dir, exist_ok=True)
  with open(os.path.join(run_dir, "train.log"), "w") as f:
    f.write("INFO:tensorflow:One epoch = 136 batches of <= 4096 tokens: 952 updates\n")
    for s in range(2, step + 1, max(1, step // 3)):
      f.write("INFO:tensorflow:train: step %d/%d steps, %.2f steps/s, 9:00 remaining "
              "(2200 target tokens/s)\n" % (s, TARGET, rate))
    f.write("INFO:tensorflow:train: step %d/%d steps, %.2f steps/s, 0:00 remaining\n" % (
        step, TARGET, rate))
  if step == TARGET:
    _write_json(os.path.join(run_dir, "train_summary.json"), {
        "global_step": TARGET, "global_step_target": TARGET, "num_train_steps": TARGET,
        "epoch_batches": 136, "target_tokens_per_second": tps, "train_seconds": secs})
    _write_json(os.path.join(run_dir, "eval_results.json"),
                {"eval_perplexity": ppl, "eval_nll_per_token": float(np.log(ppl or 1.0)),
                 "global_step": TARGET})
  if bleu is not None:
    _write_json(os.path.join(run_dir, "bleu.json"), {
        "bleu": bleu, "tokenized_compound_split_bleu": tok, "chrf": chrf,
        "num_sentences": 1000, "checkpoint": os.path.join(run_dir, "averaged", "model.ckpt-952"),
        "bleu_signature": "tok:13a", "tokenized_compound_split_bleu_signature": "moses-tok:de"})
  if losses:
    _write_losses(run_dir, losses)
  return run_dir


def test_run_order_interleaves_the_core_comparison_first():
  runs = rt7.run_order(["admin", "realformer_mean", "realformer_sum", "pre_ln"], [1, 2])
  assert runs == [("admin", 1), ("realformer_mean", 1), ("admin", 2), ("realformer_mean", 2),
                  ("realformer_sum", 1), ("pre_ln", 1), ("realformer_sum", 2), ("pre_ln", 2)]
  assert rt7.run_order(["admin", "realformer_mean", "post_ln"], [3]) == [
      ("admin", 3), ("realformer_mean", 3), ("post_ln", 3)]
  assert rt7.run_dir_of("out", "pre_ln", 2) == os.path.join("out", "runs", "pre_ln_seed2")
  assert rt7.VARIANTS["realformer_sum"][1:] == ("admin", "sum")
  assert rt7.VARIANTS["pre_ln"][1:] == ("pre", "none")


def test_done_marker_and_run_states(tmp_path):
  run_dir = _fake_run(tmp_path, "admin", 1, bleu=30.0, tok=31.0, chrf=60.0, ppl=5.0,
                      tps=2000.0, secs=1900.0)
  assert rt7.run_done(run_dir) and rt7.run_state(run_dir).status == "done"
  os.remove(os.path.join(run_dir, "bleu.json"))   # trained, decoding not finished
  assert not rt7.run_done(run_dir) and rt7.train_complete(run_dir)
  assert rt7.run_state(run_dir).status == "trained"
  # bleu.json without a finished training (e.g. a summary of an earlier, shorter target).
  _write_json(os.path.join(run_dir, "bleu.json"), {"bleu": 1.0})
  _write_json(os.path.join(run_dir, "train_summary.json"),
              {"global_step": 500, "global_step_target": TARGET})
  assert not rt7.run_done(run_dir) and not rt7.train_complete(run_dir)
  partly = _fake_run(tmp_path, "admin", 2, step=452, rate=0.57)
  state = rt7.run_state(partly)
  assert (state.status, state.step, state.total, state.steps_per_sec) == (
      "partly trained", 452, TARGET, 0.57)
  assert rt7.run_state(str(tmp_path / "runs" / "nothing")).status == "not started"
  # The evaluation belongs to the final checkpoint or it is redone.
  done = _fake_run(tmp_path, "pre_ln", 1, bleu=1.0, tok=1.0, chrf=1.0, ppl=9.0)
  assert rt7.eval_complete(done)
  _write_json(os.path.join(done, "eval_results.json"), {"global_step": 816})
  assert not rt7.eval_complete(done)


class FakeRunner(object):
  """Records the children and leaves the files the real tools would."""
  calls = []

  def __init__(self, log_dir):
    self.log_dir = log_dir

  def run(self, name, script, args):
    FakeRunner.calls.append((name, script, list(args)))
    flag = dict(a[2:].split("=", 1) for a in args if "=" in a)
    if name == "train":
      _write_json(os.path.join(self.log_dir, "train_summary.json"),
                  {"global_step": TARGET, "global_step_target": TARGET})
    if name in ("train", "eval"):
      _write_json(os.path.join(self.log_dir, "eval_results.json"), {"global_step": TARGET})
    if name == "average":
      assert not os.path.exists(flag["output_dir"]), "averaged/ must be removed first"
      os.makedirs(flag["output_dir"])
    if name == "predict":
      _write_json(os.path.join(self.log_dir, "bleu.json"), {"bleu": 1.0})
    return 1.0


def _flags(args):
  return dict(a[2:].split("=", 1) if "=" in a else (a[2:], None) for a in args)


def test_complete_run_commands_and_what_is_redone(tmp_path, monkeypatch):
  monkeypatch.setattr(reproduction, "Runner", FakeRunner)
  s = _settings(tmp_path)
  out = str(tmp_path / "out")
  # A new run: train (+eval), average, decode, with the driver's flags.
  FakeRunner.calls = []
  assert rt7.complete_run(s, out, "realformer_mean", 2)
  assert [c[0] for c in FakeRunner.calls] == ["train", "average", "predict"]
  run = rt7.run_dir_of(out, "realformer_mean", 2)
  data = os.path.join(out, "data")
  assert _flags(FakeRunner.calls[0][2]) == {
      "do_train": None, "do_eval": None, "train_file": os.path.join(data, "train.tfrecord"),
      "dev_file": os.path.join(data, "val.tfrecord"), "config_file": s.config_file,
      "layer_norm_type": "admin", "residual_attention": "mean", "seed": "2",
      "output_dir": run, "num_train_epochs": "7", "max_tokens": "4096",
      "learning_rate": "0.001", "warmup_steps": "400", "keep_checkpoint_max": "10"}
  assert FakeRunner.calls[0][1] == "translation/run_translation.py"
  assert FakeRunner.calls[1][1:] == ("average_checkpoints.py", [
      "--checkpoint_dir=%s" % run, "--num_last=3",
      "--output_dir=%s" % os.path.join(run, "averaged")])
  assert _flags(FakeRunner.calls[2][2]) == {
      "do_predict": None, "output_dir": run, "checkpoint": os.path.join(run, "averaged"),
      "spm_model": os.path.join(data, "spm.model"),
      "predict_source_file": os.path.join(s.data_dir, "test_2016_flickr.en.gz"),
      "predict_reference_file": os.path.join(s.data_dir, "test_2016_flickr.de.gz"),
      "beam_size": "4", "length_penalty": "0.6", "max_decode_length": "80",
      "predict_batch_size": "64", "target_language": "de"}
  # Done: nothing runs.
  FakeRunner.calls = []
  assert not rt7.complete_run(s, out, "realformer_mean", 2) and FakeRunner.calls == []
  # bleu.json missing (stopped while decoding): average (averaged/ replaced) and decode again.
  os.remove(os.path.join(run, "bleu.json"))
  assert rt7.complete_run(s, out, "realformer_mean", 2)
  assert [c[0] for c in FakeRunner.calls] == ["average", "predict"]
  # Trained but stopped during the evaluation: evaluate only, then average and decode.
  FakeRunner.calls = []
  os.remove(os.path.join(run, "bleu.json"))
  os.remove(os.path.join(run, "eval_results.json"))
  rt7.complete_run(s, out, "realformer_mean", 2)
  assert [c[0] for c in FakeRunner.calls] == ["eval", "average", "predict"]
  assert "--do_train" not in FakeRunner.calls[0][2]
  # Partly trained with a stale bleu.json: it is removed before the training resumes.
  FakeRunner.calls = []
  _write_json(os.path.join(run, "train_summary.json"), {"global_step": 10,
                                                        "global_step_target": TARGET})
  stale = os.path.join(run, "bleu.json")
  seen = []
  original = FakeRunner.run

  def spy(self, name, script, args):
    seen.append((name, os.path.exists(stale)))
    return original(self, name, script, args)

  monkeypatch.setattr(FakeRunner, "run", spy)
  rt7.complete_run(s, out, "realformer_mean", 2)
  assert seen[0] == ("train", False)
  assert [c[0] for c in FakeRunner.calls] == ["train", "average", "predict"]


def _fake_reproduction(out):
  """admin s1, s2 and realformer_mean s1 finished; realformer_mean s2 at step 452."""
  _fake_run(out, "admin", 1, bleu=29.0, tok=30.0, chrf=58.0, ppl=6.0, tps=2000.0, secs=1800.0,
            losses=[(1, 9.0), (100, 7.0), (200, 5.0)])
  _fake_run(out, "admin", 2, bleu=31.0, tok=33.0, chrf=60.0, ppl=5.0, tps=2200.0, secs=1700.0,
            losses=[(1, 9.1), (100, 6.9)])
  _fake_run(out, "realformer_mean", 1, bleu=30.5, tok=31.0, chrf=59.0, ppl=5.5, tps=2100.0,
            secs=1750.0, losses=[(1, 9.2), (100, 6.5)])
  _fake_run(out, "realformer_mean", 2, step=452, losses=[(1, 9.0)])


def test_report_tables_missing_runs_and_no_absolute_path(tmp_path):
  out = tmp_path / "out"
  _fake_reproduction(out)
  settings = _settings(tmp_path)
  # A resumed run: the later events file repeats step 200 and wins; eval/ is not training.
  run_dir = rt7.run_dir_of(str(out), "admin", 1)
  # The suffix sorts it after the first file of the same second (names start with the time).
  _write_losses(run_dir, [(200, 4.0), (300, 3.0)], suffix=".resumed")
  _write_losses(os.path.join(run_dir, "eval"), [(952, 1.0)])
  assert rt7.read_loss_curve(run_dir) == ([1, 100, 200, 300], [9.0, 7.0, 4.0, 3.0])

  path = rt7.write_report(settings, str(out))
  assert path == str(out / "report.md")
  text = open(path).read()
  assert "**Partial report: 3 of 4 runs finished.**" in text
  # ADMIN: 29, 31 -> mean 30, sample std sqrt(2) = 1.41; tokenised 30, 33 -> 31.50 ± 2.12.
  assert ("| ADMIN | 30.00 ± 1.41 | s1 29.00, s2 31.00 | 31.50 ± 2.12 | s1 30.00, s2 33.00 | "
          "59.00 ± 1.41 | 5.500 ± 0.707 | 2/2 | 27.90 (authors' run 28.06) |") in text
  assert ("| RealFormer (mean) | 30.50 | s1 30.50 | 31.00 | s1 31.00 | 59.00 | 5.500 | 1/2 | "
          "28.17 |") in text
  assert "WMT'14 En-De" in text and "not values" in text
  # Paired by seed: only seed 1 has both.
  assert "| 1 | +1.50 | +1.00 | -0.500 |" in text and "| mean | +1.50 | +1.00 | -0.500 |" in text
  assert "| 2 |" not in text.split("## RealFormer (mean) − ADMIN")[1].split("##")[0]
  # Speed: ADMIN 2100 tokens/s, RealFormer 2100 -> 1.000.
  assert "| ADMIN | 2100 | 1.000 | s1 1800, s2 1700 | 952 |" in text
  assert "| RealFormer (mean) | 2100 | 1.000 | s1 1750 | 952 |" in text
  assert ("- RealFormer (mean) seed 2 (`realformer_mean_seed2`): partly trained (step 452 of "
          "952)") in text
  assert "## Settings" in text and "7 epochs (136 batches per epoch, 952 updates)" in text
  assert "`configs/nmt_multi30k_6l.json`: 6L-6L, hidden 128" in text
  assert str(tmp_path) not in text and REPO_DIR not in text and not MACHINE_PATH.search(text)
  # Curves: every logged point, the EMA debiased by hand for admin s1 (weight 0.6).
  with open(out / "report_images" / "training_loss.csv") as f:
    rows = list(csv.DictReader(f))
  admin1 = [r for r in rows if r["run"] == "admin_seed1"]
  assert [int(r["step"]) for r in admin1] == [1, 100, 200, 300]
  e1 = 0.4 * 9.0
  e2 = 0.6 * e1 + 0.4 * 7.0
  assert float(admin1[1]["smoothed_loss"]) == pytest.approx(e2 / (1 - 0.6 ** 2), rel=1e-5)
  assert float(admin1[0]["smoothed_loss"]) == pytest.approx(9.0)
  assert {r["run"] for r in rows} == {"admin_seed1", "admin_seed2", "realformer_mean_seed1",
                                      "realformer_mean_seed2"}
  assert "| RealFormer (mean) s2 (unfinished) | 1 | 1 | 9.000 | 9.000 |" in text
  png = (out / "report_images" / "training_loss.png").read_bytes()
  assert png[:8] == b"\x89PNG\r\n\x1a\n" and "![training loss](report_images/" in text


def test_report_when_everything_or_nothing_is_finished(tmp_path):
  out = tmp_path / "out"
  settings = _settings(tmp_path, seeds=[1])
  text = open(rt7.write_report(settings, str(out))).read()
  assert "**Partial report: 0 of 2 runs finished.**" in text
  assert "| ADMIN | n/a | n/a | n/a | n/a | n/a | n/a | 0/1 |" in text
  assert "_No seed has both runs finished yet._" in text
  assert "- ADMIN seed 1 (`admin_seed1`): not started" in text
  _fake_run(out, "admin", 1, bleu=29.0, tok=30.0, chrf=58.0, ppl=6.0, tps=2000.0, secs=1800.0)
  _fake_run(out, "realformer_mean", 1, bleu=28.0, tok=29.5, chrf=57.0, ppl=6.5, tps=1900.0,
            secs=1900.0)
  text = open(rt7.write_report(settings, str(out))).read()
  assert "All 2 runs finished." in text and "## Missing runs\n\nNone." in text
  assert "| mean | -1.00 | -0.50 | +0.500 |" in text
  assert "| RealFormer (mean) | 1900 | 0.950 |" in text


def test_tokens_per_second_of_runs_that_count_steps_only(tmp_path):
  """run_translation on the TF2 engine (TF >= 2.16) records no target tokens/s: the report
  gives the steps/s of the run's progress line times the training data's tokens per batch."""
  out = tmp_path / "out"
  settings = _settings(tmp_path, seeds=[1])
  _fake_run(out, "admin", 1, bleu=29.0, tok=30.0, chrf=58.0, ppl=6.0, tps=None, secs=1800.0,
            rate=0.5)
  _fake_run(out, "realformer_mean", 1, bleu=28.0, tok=29.5, chrf=57.0, ppl=6.5, tps=None,
            secs=1900.0, rate=0.4)
  text = open(rt7.write_report(settings, str(out))).read()
  assert "| ADMIN | n/a | n/a | s1 1800 | 952 |" in text   # no data summary: not derived
  # 136 batches of one epoch hold 54,400 target tokens: 400 a batch.
  _write_json(rt7.summary_path(rt7.data_paths(str(out))["train"]), {"target_tokens": 54400})
  text = open(rt7.write_report(settings, str(out))).read()
  assert "| ADMIN | 200 | 1.000 | s1 1800 | 952 |" in text
  assert "| RealFormer (mean) | 160 | 0.800 | s1 1900 | 952 |" in text
  assert ("Target tokens/s of ADMIN s1, RealFormer (mean) s1: the training counted steps, not "
          "tokens (run_translation.py on the TF2 engine of TF >= 2.16") in text
  # A run that counted its tokens keeps its own figure.
  _fake_run(out, "admin", 1, bleu=29.0, tok=30.0, chrf=58.0, ppl=6.0, tps=2000.0, secs=1800.0)
  text = open(rt7.write_report(settings, str(out))).read()
  assert "| ADMIN | 2000 | 1.000 |" in text and "| RealFormer (mean) | 160 | 0.080 |" in text
  assert "Target tokens/s of RealFormer (mean) s1: the training counted steps" in text


def test_a_run_stopped_inside_an_epoch_resumes_from_the_epochs_checkpoint(tmp_path):
  """Stopped at step 30 (the TF2 engine saves where a stop is), one epoch 28 batches: the rerun
  resumes from step 28, so the checkpoints averaged stay one per epoch."""
  run_dir = str(tmp_path)
  with open(os.path.join(run_dir, "train.log"), "w") as f:
    f.write("INFO:tensorflow:One epoch = 28 batches of <= 2048 tokens: 140 updates for 5 epochs\n")
  names = ["model.ckpt-0", "model.ckpt-28", "model.ckpt-30"]
  for name in names:
    open(os.path.join(run_dir, name + ".index"), "w").close()
  tf.compat.v1.train.update_checkpoint_state(run_dir, names[-1], all_model_checkpoint_paths=names)
  assert rt7.rewind_to_epoch_checkpoint(run_dir) == 28
  assert os.path.basename(tf.compat.v1.train.latest_checkpoint(run_dir)) == "model.ckpt-28"
  assert not os.path.exists(os.path.join(run_dir, "model.ckpt-30.index"))
  assert rt7.rewind_to_epoch_checkpoint(run_dir) is None
  assert rt7.rewind_to_epoch_checkpoint(str(tmp_path / "new")) is None


def test_plan_lines_status_and_time_left(tmp_path):
  out = tmp_path / "out"
  _fake_run(out, "admin", 1, bleu=29.0, tok=30.0, chrf=58.0, ppl=6.0, tps=2000.0, secs=1800.0)
  run = rt7.run_dir_of(str(out), "admin", 1)
  # Evaluation, averaging and decoding took 100 s (train_summary.json to bleu.json).
  os.utime(os.path.join(run, "train_summary.json"), (1e9, 1e9))
  os.utime(os.path.join(run, "bleu.json"), (1e9 + 100, 1e9 + 100))
  _fake_run(out, "realformer_mean", 1, step=452, rate=0.5)
  lines = rt7.plan_lines(_settings(tmp_path, seeds=[1, 2]), str(out))
  assert lines[0].startswith("Plan: 4 runs (admin s1, realformer_mean s1, admin s2, "
                             "realformer_mean s2), 7 epochs, max_tokens 4096")
  assert lines[1] == "Data: to make (create_translation_data.py)"
  assert lines[2:6] == ["  admin_seed1: done (0.50 steps/s)",
                        "  realformer_mean_seed1: partly trained, step 452/952 (0.50 steps/s)",
                        "  admin_seed2: not started", "  realformer_mean_seed2: not started"]
  # 500 steps + 2 x 952 steps at 0.5 steps/s, and 100 s after each of the 3 trainings.
  seconds = 500 / 0.5 + 2 * 952 / 0.5 + 3 * 100
  assert lines[6] == ("Done: 1 of 4 runs. Estimated time left: %s (training at the measured "
                      "steps/s + 1:40 per run for evaluation, averaging and decoding "
                      "(measured))" % common.format_duration(seconds))
  empty = rt7.plan_lines(_settings(tmp_path), str(tmp_path / "none"))
  assert empty[-1].startswith("Done: 0 of 4 runs. Estimated time left: n/a")


def _write_multi30k(data_dir, settings):
  """Small .gz files under the names source_files gives."""
  os.makedirs(data_dir, exist_ok=True)
  for pair in rt7.source_files(settings).values():
    for path in pair:
      with gzip.open(path, "wt") as f:
        f.write("a line of %s\n" % os.path.basename(path))


def test_settings_record_refuses_other_settings(tmp_path):
  out = str(tmp_path / "out")
  os.makedirs(out)
  settings = _settings(tmp_path)
  _write_multi30k(settings.data_dir, settings)
  rt7.check_record(out, settings, write=True)
  record = json.load(open(os.path.join(out, rt7.RECORD_NAME)))
  assert record["settings"]["learning_rate"] == 1e-3 and record["settings"]["config_file"] == (
      os.path.join("configs", "nmt_multi30k_6l.json"))
  assert sorted(record["inputs"]) == ["data_dir/%s.%s.gz" % (split, lang) for split in (
      "test_2016_flickr", "train", "val") for lang in ("de", "en")]
  rt7.check_record(out, settings._replace(seeds=[1, 2, 3], predict_batch_size=8), write=True)
  with pytest.raises(common.UsageError, match="learning_rate"):
    rt7.check_record(out, settings._replace(learning_rate=5e-4), write=True)
  # A data file edited in place: refused in one line naming it (the data and runs were made
  # from the old text); restored, it resumes.
  train_de = rt7.source_files(settings)["train"][1]
  with open(train_de, "rb") as f:
    original = f.read()
  with gzip.open(train_de, "wt") as f:
    f.write("another line\n")
  with pytest.raises(common.UsageError) as e:
    rt7.check_record(out, settings, write=False)
  assert str(e.value).startswith(
      "--output_dir=%s holds a run of other settings or input files: --data_dir file %s: other "
      "contents" % (out, train_de)) and "use a new --output_dir" in str(e.value)
  with open(train_de, "wb") as f:
    f.write(original)
  rt7.check_record(out, settings, write=True)


def test_bad_settings_are_one_line_errors(tmp_path):
  with pytest.raises(common.UsageError, match="--variants=admin,bogus: unknown bogus"):
    rt7.check_settings(_settings(tmp_path, variants=["admin", "bogus"]))
  with pytest.raises(common.UsageError, match="--seeds=1,1: repeated seed"):
    rt7.check_settings(_settings(tmp_path, seeds=[1, 1]))
  with pytest.raises(common.UsageError, match="--num_average=11"):
    rt7.check_settings(_settings(tmp_path, num_average=11))
  with pytest.raises(common.UsageError, match="--data_dir=.*not a directory"):
    rt7.check_settings(_settings(tmp_path))


@pytest.mark.slow
def test_tiny_test_end_to_end_with_a_kill_and_a_rerun(tmp_path):
  """Stopped during the first training, the rerun resumes it and finishes both runs."""
  data = shared_path("nmt", "multi30k")
  out = tmp_path / "t7"
  args = ["--tiny_test", "--data_dir=%s" % data, "--output_dir=%s" % out]
  train_log = out / "runs" / "admin_seed1" / "train.log"
  proc = start_tool("paper/reproduce_table7.py", args)
  try:
    deadline = time.time() + 120
    while not (train_log.exists() and "train: step" in train_log.read_text(errors="replace")):
      assert proc.poll() is None and time.time() < deadline, proc.communicate(timeout=60)[1]
      time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait(timeout=60)
  assert proc.returncode == 143, err[-3000:]
  assert "interrupted (signal 15)" in err
  assert not (out / "report.md").exists()
  assert not (out / "runs" / "admin_seed1" / "bleu.json").exists()
  data_log = (out / "logs" / "create_train.log").stat().st_mtime

  proc = run_tool("paper/reproduce_table7.py", args, timeout=300)
  assert (out / "logs" / "create_train.log").stat().st_mtime == data_log   # data kept
  assert "Wrote %s" % (out / "report.md") in proc.stdout
  for run in ("admin_seed1", "realformer_mean_seed1"):
    run_dir = out / "runs" / run
    for name in ("train.log", "average.log", "predict.log", "bleu.json", "translations.txt",
                 "eval_results.json"):
      assert (run_dir / name).exists(), (run, name)
    assert (run_dir / "averaged" / "average_checkpoints.json").exists()
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert summary["global_step"] == summary["global_step_target"] == 14
    bleu = json.loads((run_dir / "bleu.json").read_text())
    assert bleu["num_sentences"] == rt7.TINY_EVAL_LINES
  assert (out / "data" / "spm.model").exists() and (out / "data" / "val.summary.json").exists()
  text = (out / "report.md").read_text()
  assert "All 2 runs finished." in text
  assert "\n| ADMIN | " in text and "\n| RealFormer (mean) | " in text
  assert "| 1 | +" in text or "| 1 | -" in text
  assert str(tmp_path) not in text and not MACHINE_PATH.search(text)
  rows = (out / "report_images" / "training_loss.csv").read_text().splitlines()
  assert rows[0] == "run,variant,seed,step,loss,smoothed_loss" and len(rows) >= 3
