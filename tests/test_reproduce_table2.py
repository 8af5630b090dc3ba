"""Tests for paper/reproduce_table2.py: corpus split, budget planning, --tiny_test end to end."""

import collections
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import last_error_line, process_alive, REPO_DIR, run_tool, shared_path, start_tool
from realformer_tf import common
import modeling
from paper import reproduce_table2 as rt
from realformer_tf import reproduction

# One invocation of the --tiny_test job (4 models x 4 steps, analysis, report) on 2 shared cores.
TINY_TEST_TIMEOUT_S = 600


def _settings(**overrides):
  """rt.Settings of a small CPU plan, with `overrides`."""
  values = dict(size="micro", num_train_steps=4, train_batch_size=8, seeds=[1],
                max_seq_length=64, max_predictions_per_seq=10, learning_rate=5e-4,
                warmup_proportion=0.1, eval_every=4, eval_batch_size=8, max_eval_steps=2,
                curve_eval_steps=2, models=["post_ln"], corpus="/c", max_corpus_mb=0.1,
                heldout_every=20, dupe_factor=1, vocab_file="/v.txt", analysis_examples=32,
                probe_steps=20, parallel_runs=1)
  values.update(overrides)
  return rt.Settings(**values)


def test_split_corpus_every_nth_document(tmp_path):
  src = tmp_path / "c.txt"
  docs = ["doc %d line a\ndoc %d line b\n" % (i, i) for i in range(7)]
  src.write_text("\n".join(docs))
  stats = rt.split_corpus([str(src)], str(tmp_path / "train.txt"), str(tmp_path / "held.txt"),
                          3, 0)
  held = (tmp_path / "held.txt").read_text()
  train = (tmp_path / "train.txt").read_text()
  assert stats["heldout_documents"] == 2 and stats["train_documents"] == 5
  assert "doc 2 line a\ndoc 2 line b\n\ndoc 5 line a" in held
  assert "doc 2" not in train and "doc 0 line b\n\ndoc 1 line a" in train


def test_eval_steps_and_budget_fit():
  assert rt.eval_steps(2500, 500) == [500, 1000, 1500, 2000, 2500]
  assert rt.eval_steps(700, 500) == [500, 700]
  # 4 runs x (10 s + steps / 2 steps/s + 4 evals x 5 s) + 100 s analysis.
  assert rt.estimate_seconds(4, 1000, 2.0, 10.0, 4, 5.0, 100.0) == pytest.approx(
      4 * (10 + 500 + 20) + 100)
  # 2 runs, 1 step/s, no overhead: 600 s fit 300 steps each -> multiple of 100 below it.
  assert rt.fit_steps_to_budget(600, 2, 1000, 100, 1.0, 0.0, 0.0, 0.0) == 300
  assert rt.fit_steps_to_budget(1e9, 2, 1000, 100, 1.0, 0.0, 0.0, 0.0) == 1000
  assert rt.fit_steps_to_budget(10, 2, 1000, 100, 1.0, 0.0, 0.0, 0.0) == 0


def test_mean_std_and_configs():
  assert rt.mean_std([0.5]) == (0.5, None)
  mean, std = rt.mean_std([0.1, 0.3])
  assert mean == pytest.approx(0.2) and std == pytest.approx(0.1414213562)
  cfg = rt.model_config("tiny", "pre", "none", 30522)
  assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["layer_norm_type"]) == (2, 128, "pre")
  assert "use_running_mean" not in cfg
  # The official RealFormer code, which reads only use_running_mean, reads the same model.
  assert rt.model_config("tiny", "post", "sum", 30522)["use_running_mean"] is False
  assert rt.model_config("tiny", "post", "mean", 30522)["use_running_mean"] is True
  for residual_attention in ("none", "sum", "mean"):
    config = modeling.BertConfig.from_dict(rt.model_config("tiny", "post", residual_attention, 99))
    assert config.residual_attention == residual_attention


def test_bad_seeds_one_line_error(tmp_path):
  proc = run_tool("paper/reproduce_table2.py", ["--output_dir=%s" % tmp_path, "--seeds=1,1"],
                  expect_rc=2)
  assert proc.returncode == 2
  assert last_error_line(proc).startswith("error: --seeds=1,1")


def test_settings_record_and_final_eval_steps(tmp_path):
  settings = _settings(max_eval_steps=0)
  # plan.json keeps the keys of earlier versions: derived ones start with "_".
  recorded = rt.with_final_eval_steps(settings, 37).as_dict()
  assert recorded["_final_eval_steps"] == 4 and "final_eval_steps" not in recorded
  assert set(recorded) - {"_final_eval_steps"} == set(rt.Settings._fields) - {"final_eval_steps"}
  # The whole held-out set once (37 // 8 batches), at most --max_eval_steps, at least one.
  assert rt.with_final_eval_steps(_settings(max_eval_steps=3), 37).final_eval_steps == 3
  assert rt.with_final_eval_steps(_settings(max_eval_steps=0), 5).final_eval_steps == 1
  assert rt.curve_eval_count(rt.with_final_eval_steps(_settings(curve_eval_steps=9), 37)) == 2
  # The timing probe's rate comes from run_pretraining.py's summary JSON.
  assert rt._train_steps_per_sec(str(tmp_path)) is None
  common.write_json_atomic(str(tmp_path / "train_summary_local.json"),
                           {"global_step": 60, "train_seconds": 20.0,
                            "train_steps_per_sec": 2.5})
  assert rt._train_steps_per_sec(str(tmp_path)) == 2.5
  # The steady rate (warm-up excluded) wins when the summary has it.
  common.write_json_atomic(str(tmp_path / "train_summary_local.json"),
                           {"global_step": 60, "train_steps_per_sec": 2.5,
                            "steady_steps_per_sec": 8.0})
  assert rt._train_steps_per_sec(str(tmp_path)) == 8.0


def test_parallel_runs_log_each_run_as_it_ends_and_start_none_after_a_failure(monkeypatch):
  """--parallel_runs=2, training stubbed: run 0 ends 0.3 s after run 1. The progress names each
  run when it ends and the results keep the runs' order; when run 1 fails, no further run
  starts, run 0 ends, then the failure is raised."""
  runs = [("post_ln", 1), ("post_ln", 2), ("pre_ln", 1), ("pre_ln", 2)]

  def stub(failing):
    started, ended = [], collections.defaultdict(threading.Event)

    def train_and_evaluate(workspace, settings, run):
      started.append(run)
      try:
        if run == runs[0]:
          assert ended[runs[1]].wait(timeout=30)
          time.sleep(0.3)
        if run == failing:
          common.fail("stub: %s seed %d failed" % run)
        return {"run": run}
      finally:
        ended[run].set()

    monkeypatch.setattr(rt, "train_and_evaluate", train_and_evaluate)
    return started

  logs = []
  workspace = rt.Workspace(runner=None, out_dir=None, data_dir=None, config_paths={},
                           log=logs.append)
  settings = _settings(parallel_runs=2)
  stub(failing=None)
  results = rt.train_and_evaluate_all(workspace, settings, runs)
  assert list(results.items()) == [(run, {"run": run}) for run in runs]
  assert len(logs) == 4 and "(post_ln seed 2)" in logs[0] and "(post_ln seed 1)" in logs[-1]
  del logs[:]
  started = stub(failing=runs[1])
  with pytest.raises(common.UsageError, match="stub: post_ln seed 2 failed"):
    rt.train_and_evaluate_all(workspace, settings, runs)
  assert started == runs[:2]
  assert len(logs) == 1 and "(post_ln seed 1)" in logs[0]


def test_a_stopped_run_resumes_from_its_last_curve_checkpoint(tmp_path):
  """reproduction.rewind_to_checkpoint: a run stopped at step 22 (the TF2 engine saves the step
  a stop reached) resumes from step 20, so the resumed process saves the curve's 40 and 60 (it
  counts from where it starts)."""
  run_dir = str(tmp_path)
  names = ["model.ckpt-0", "model.ckpt-20", "model.ckpt-22"]
  for name in names:
    for suffix in (".index", ".data-00000-of-00001"):
      open(os.path.join(run_dir, name + suffix), "w").close()
  rt.tf1.train.update_checkpoint_state(run_dir, names[-1], all_model_checkpoint_paths=names)
  curve = lambda step: step in (20, 40, 60)
  assert reproduction.rewind_to_checkpoint(run_dir, curve) == 20
  state = rt.tf1.train.get_checkpoint_state(run_dir)
  assert os.path.basename(state.model_checkpoint_path) == "model.ckpt-20"
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == names[:2]
  assert sorted(os.listdir(run_dir)) == ["checkpoint"] + sorted(
      n + s for n in names[:2] for s in (".data-00000-of-00001", ".index"))
  # At a curve step (or without checkpoints) nothing changes.
  assert reproduction.rewind_to_checkpoint(run_dir, curve) is None
  assert reproduction.rewind_to_checkpoint(str(tmp_path / "none"), curve) is None


@pytest.mark.slow
def test_tiny_test_end_to_end_and_resume(tmp_path):
  corpus = shared_path("corpus")
  out = tmp_path / "work"
  report = tmp_path / "paper" / "table2.md"
  args = ["--tiny_test", "--corpus=%s" % corpus, "--output_dir=%s" % out,
          "--report=%s" % report]
  proc = run_tool("paper/reproduce_table2.py", args, timeout=TINY_TEST_TIMEOUT_S)
  assert proc.returncode == 0, proc.stderr[-3000:]
  text = report.read_text()
  assert "| model | MLM accuracy (%) | MLM loss | NSP accuracy (%)" in text
  for label in ("Post-LN", "Pre-LN", "RealFormer (sum)", "RealFormer (mean)"):
    assert "\n| %s | " % label in text
  assert "| Small (paper) | 61.57 | 61.67 | 61.70 | +0.13 |" in text
  assert "Judgement (to be written by a human" in text
  assert "## Attention analyses" in text and "table2_images/entropy.png" in text
  for name in ("learning_curves.png", "entropy.png", "jsd.png"):
    data = (tmp_path / "paper" / "table2_images" / name).read_bytes()
    assert len(data) > 1024 and data[:8] == b"\x89PNG\r\n\x1a\n", name
  curve = json.loads((out / "runs" / "realformer_sum_s12345" / "curve.json").read_text())
  assert [c["step"] for c in curve] == [4] and 0 <= curve[0]["masked_lm_accuracy"] <= 1
  summary = json.loads((out / "analysis" / "summary.json").read_text())
  assert summary["labels"] == ["Post-LN", "Pre-LN", "RealFormer (sum)", "RealFormer (mean)"]

  # A second invocation finds everything done: no training, same table, and it keeps the
  # human-written judgement that replaced the placeholder.
  logs_before = sorted(os.listdir(out / "logs"))
  begin = text.index(rt.JUDGEMENT_BEGIN)
  end = text.index(rt.JUDGEMENT_END) + len(rt.JUDGEMENT_END)
  human = rt.JUDGEMENT_BEGIN + "\nOur verdict: nothing reproduces at 4 steps.\n" + rt.JUDGEMENT_END
  report.write_text(text[:begin] + human + text[end:])
  proc = run_tool("paper/reproduce_table2.py", args, timeout=TINY_TEST_TIMEOUT_S)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Training " not in proc.stderr
  rewritten = report.read_text()
  assert human in rewritten and "TODO" not in rewritten
  assert "| Small (paper) | 61.57 | 61.67 | 61.70 | +0.13 |" in rewritten
  assert sorted(os.listdir(out / "logs")) == logs_before
  # Asking for other settings in the same output_dir is refused.
  proc = run_tool("paper/reproduce_table2.py", args + ["--learning_rate=1e-3"], expect_rc=2)
  assert proc.returncode == 2 and "learning_rate" in last_error_line(proc)


def test_shared_data_dir_default_and_env(monkeypatch, tmp_path):
  monkeypatch.delenv("REALFORMER_SHARED_DATA", raising=False)
  assert common.shared_data_dir() == os.path.join(os.path.dirname(REPO_DIR), "shared", "data")
  monkeypatch.setenv("REALFORMER_SHARED_DATA", str(tmp_path / "x" / ".." / "data"))
  assert common.shared_data_dir() == str(tmp_path / "data")
  # No machine path is written into the tool itself.
  source = open(os.path.join(REPO_DIR, "paper/reproduce_table2.py")).read()
  assert "/work/" not in source and "/home/" not in source


def test_reports_name_inputs_without_absolute_paths(monkeypatch, tmp_path):
  monkeypatch.delenv("REALFORMER_SHARED_DATA", raising=False)
  shared = common.shared_data_dir()
  out = str(tmp_path / "out")
  assert rt.display_path(os.path.join(REPO_DIR, "data", "vocab.txt")) == "data/vocab.txt"
  assert rt.display_path(os.path.join(shared, "corpus")) == "../shared/data/corpus"
  assert rt.display_path(os.path.join(out, "runs", "a"), output_dir=out) == "<output_dir>/runs/a"
  assert rt.display_path("/elsewhere/texts/c.txt", "corpus") == "--corpus (c.txt)"
  monkeypatch.setenv("REALFORMER_SHARED_DATA", str(tmp_path / "sd"))
  assert rt.display_path(str(tmp_path / "sd" / "corpus"), "corpus") == (
      "$REALFORMER_SHARED_DATA/corpus")
  text = ("| Post-LN | `%s/runs/post_ln_s1/model.ckpt-4` |\nInput: %s/data/heldout.tfrecord; "
          "vocab %s/data/vocab.txt, corpus %s/corpus.\n" % (out, out, REPO_DIR,
                                                           tmp_path / "sd"))
  assert rt.portable_text(text, out) == (
      "| Post-LN | `<output_dir>/runs/post_ln_s1/model.ckpt-4` |\nInput: "
      "<output_dir>/data/heldout.tfrecord; vocab data/vocab.txt, corpus "
      "$REALFORMER_SHARED_DATA/corpus.\n")


def test_corpus_edited_in_place_is_refused_and_its_data_made_again(tmp_path, capsys):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("doc one .\n\ndoc two .\n")
  (corpus / "b.txt").write_text("doc three .\n")
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n")
  settings = _settings(corpus=str(corpus), vocab_file=str(vocab))
  inputs = rt.input_files(settings)
  assert [f.label for f in inputs] == ["corpus/a.txt", "corpus/b.txt", "vocab_file"]
  identities = reproduction.input_identities(inputs)
  out = str(tmp_path / "out")
  os.makedirs(out)
  plan_path = os.path.join(out, "plan.json")
  common.write_json_atomic(plan_path, {"requested": settings.as_dict(), "num_train_steps": 4,
                                       "probe": None, "inputs": identities})
  assert rt.load_plan(plan_path, settings, out, inputs)["inputs"] == identities
  stats = {"train_instances": 10, "heldout_instances": 2, "settings": rt.data_settings(settings),
           "inputs": identities}
  assert rt.data_current(stats, settings, planned=False, identities=identities)
  # A corpus file edited in place: the plan (runs trained on the old text) refuses in one
  # line; data made by --plan_only from the old text is made again.
  (corpus / "b.txt").write_text("doc three , edited .\n")
  with pytest.raises(common.UsageError) as e:
    rt.load_plan(plan_path, settings, out, inputs)
  assert str(e.value) == (
      "--output_dir=%s holds a run of other settings or input files: --corpus file %s: other "
      "contents (21 bytes, was 12); use a new --output_dir, or rerun with the flags and input "
      "files it was made with (restore an edited file)" % (out, corpus / "b.txt"))
  edited = reproduction.input_identities(rt.input_files(settings))
  assert not rt.data_current(stats, settings, planned=False, identities=edited)
  # A file added to the corpus directory is a difference too.
  (corpus / "b.txt").write_text("doc three .\n")
  (corpus / "c.txt").write_text("doc four .\n")
  with pytest.raises(common.UsageError, match="--corpus file .*c.txt: not an input of the "
                     "recorded run"):
    rt.load_plan(plan_path, settings, out, rt.input_files(settings))
  os.remove(str(corpus / "c.txt"))
  # A plan of an earlier version (no inputs): taken with the inputs as they are now.
  common.write_json_atomic(plan_path, {"requested": settings.as_dict(), "num_train_steps": 4,
                                       "probe": None})
  assert rt.load_plan(plan_path, settings, out, inputs)["inputs"] == identities
  assert "records no input file contents" in capsys.readouterr().err
  assert json.load(open(plan_path))["inputs"] == identities
  with pytest.raises(common.UsageError, match=r"learning_rate 0.0005 -> 0.001"):
    rt.load_plan(plan_path, settings._replace(learning_rate=1e-3), out, inputs)


def test_stale_data_and_analysis_are_redone(tmp_path):
  s = _settings(models=["post_ln", "realformer_sum"])
  stats = {"train_instances": 10, "heldout_instances": 2, "settings": rt.data_settings(s)}
  assert rt.data_current(stats, s, planned=False)
  assert not rt.data_current(stats, s._replace(dupe_factor=2), planned=True)
  legacy = {"train_instances": 10, "heldout_instances": 2}
  assert rt.data_current(legacy, s, planned=True) and not rt.data_current(legacy, s, False)
  assert not rt.data_current(None, s, planned=True)

  out, analysis = str(tmp_path), str(tmp_path / "analysis")
  ckpts = [os.path.join(out, "runs", m + "_s1", "model.ckpt-4") for m in s.models]
  request = rt.analysis_request(s, out, ckpts, [{"weights_digest": "a"}, {"weights_digest": "b"}])
  assert request["checkpoints"] == ["runs/post_ln_s1/model.ckpt-4",
                                    "runs/realformer_sum_s1/model.ckpt-4"]
  os.makedirs(analysis)
  for name in ("summary.json", "report.md"):
    open(os.path.join(analysis, name), "w").write("{}")
  assert not rt.analysis_done(analysis, request)  # summary.json alone says nothing
  with open(os.path.join(analysis, rt.ANALYSIS_MARKER), "w") as f:
    json.dump(request, f)
  assert rt.analysis_done(analysis, request)
  retrained = rt.analysis_request(s, out, ckpts, [{"weights_digest": "a"},
                                                  {"weights_digest": "c"}])
  assert not rt.analysis_done(analysis, retrained)
  assert not rt.analysis_done(analysis, rt.analysis_request(
      s._replace(analysis_examples=64), out, ckpts, [{"weights_digest": "a"},
                                                  {"weights_digest": "b"}]))


RUNNER_DRIVER = """
import sys
from paper import reproduce_table2 as rt
from realformer_tf import subprocess_utils
subprocess_utils.install_signal_forwarding()
rt.Runner(sys.argv[1]).run("child", sys.argv[2], [sys.argv[3]])
print("not reached")
"""

CHILD = """
import os, signal, subprocess, sys, time
worker = subprocess.Popen(["sleep", "60"])
def stop(signum, frame):
  sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1], "w").write("%d %d" % (os.getpid(), worker.pid))
time.sleep(60)
"""


def test_sigterm_is_forwarded_to_the_child_and_exits_143(tmp_path):
  child = tmp_path / "child.py"
  child.write_text(CHILD)
  driver = tmp_path / "driver.py"
  driver.write_text(RUNNER_DRIVER)
  pids = str(tmp_path / "pids")
  # An absolute script path is run as it is (not under the repository).
  proc = start_tool(str(driver), [tmp_path / "logs", child, pids],
                    env={"PYTHONPATH": REPO_DIR}, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT)
  try:
    deadline = time.time() + 180  # TensorFlow starts slowly on a loaded machine
    while not (os.path.exists(pids) and open(pids).read()):
      assert proc.poll() is None and time.time() < deadline, proc.communicate(timeout=30)[0]
      time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=30)[0]
  finally:
    if proc.poll() is None:
      proc.kill()
      os.killpg(int(open(pids).read().split()[0]), signal.SIGKILL)  # clean up after a failure
  assert proc.returncode == 143, output
  assert "interrupted (signal 15): reproduction stopped; rerun the same command" in output
  assert "not reached" not in output and "error:" not in output
  assert not [p for p in map(int, open(pids).read().split()) if process_alive(p)]
