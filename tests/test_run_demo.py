"""run_demo.py's stages: done only at the requested step (not when a file merely exists), a
failing or incomplete stage stops the demo with one line and a non-zero exit, and SIGTERM stops
the running stage and exits 143. The full demo (~10 minutes) is not run here."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import last_error_line, REPO_DIR, run_tool, tool_env
from realformer_tf import common
from realformer_tf import reproduction
import run_demo


def _write(path, obj):
  os.makedirs(os.path.dirname(str(path)), exist_ok=True)
  with open(str(path), "w") as f:
    json.dump(obj, f)


def test_pretrain_done_checks_the_step(tmp_path):
  d = str(tmp_path)
  assert run_demo.pretrain_done(d, 400) == (False, "no train_summary_local.json")
  # Stopped after 26 of 400 steps (what the old run_pretraining then evaluated and exited 0).
  _write(tmp_path / "train_summary_local.json", {"global_step": 26, "num_train_steps": 400})
  _write(tmp_path / "eval_results.json", {"global_step": 26, "masked_lm_accuracy": 0.1})
  assert run_demo.pretrain_done(d, 400) == (
      False, "train_summary_local.json: global_step 26 of 400")
  _write(tmp_path / "train_summary_local.json", {"global_step": 400, "num_train_steps": 400})
  assert run_demo.pretrain_done(d, 400) == (False, "eval_results.json: global_step 26 of 400")
  os.remove(str(tmp_path / "eval_results.json"))
  assert run_demo.pretrain_done(d, 400) == (False, "trained 400 steps, no eval_results.json")
  _write(tmp_path / "eval_results.json", {"global_step": 400, "masked_lm_accuracy": 0.1})
  assert run_demo.pretrain_done(d, 400) == (True, "400 steps, evaluated")
  assert not run_demo.pretrain_done(d, 1200)[0]  # another requested step count


def test_classifier_done_checks_step_and_export(tmp_path):
  cls, export = str(tmp_path / "sst2"), str(tmp_path / "export")
  assert run_demo.classifier_done(cls, export) == (False, "no eval_results.json")
  _write(tmp_path / "sst2" / "eval_results.json",
         {"eval_accuracy": 0.6, "global_step": 3, "num_train_steps": 9})
  assert run_demo.classifier_done(cls, export) == (
      False, "eval_results.json: global_step 3 of 9")
  _write(tmp_path / "sst2" / "eval_results.json",
         {"eval_accuracy": 0.6, "global_step": 9, "num_train_steps": 9})
  assert run_demo.classifier_done(cls, export) == (False, "evaluated, not exported")
  _write(tmp_path / "export" / common.EXPORT_MARKER, {})
  # An earlier version's integer-only export: the stage runs again (and replaces it).
  assert run_demo.classifier_done(cls, export) == (
      False, "exported by an earlier version (integer inputs only)")
  _write(tmp_path / "export" / "export_info.json", {"mode": "classifier"})
  assert run_demo.classifier_done(cls, export) == (True, "global_step 9, exported")


def test_run_stage_skips_runs_and_fails_in_one_line(tmp_path, capsys):
  log_dir = str(tmp_path / "logs")
  marker = tmp_path / "out.json"
  done = lambda: run_demo.file_done(str(marker))
  # Done already: nothing runs.
  marker.write_text("{}")
  assert run_demo.run_stage("s0", ["-c", "raise SystemExit(5)"], done, log_dir) == 0.0
  assert "[demo] s0: done already" in capsys.readouterr().out
  os.remove(str(marker))
  # Runs, streams progress lines, completes.
  code = "import sys; print('10/10 steps, 1 remaining'); open(sys.argv[1], 'w').write('{}')"
  assert run_demo.run_stage("s1", ["-c", code, str(marker)], done, log_dir) >= 0.0
  out = capsys.readouterr().out
  assert "    10/10 steps, 1 remaining" in out and "[demo] s1: " in out
  # Fails: exit 1, one line naming the stage, the cause and that a rerun resumes.
  os.remove(str(marker))
  with pytest.raises(SystemExit) as e:
    run_demo.run_stage("pretrain", ["-c", "print('error: --x: broken'); raise SystemExit(3)"],
                       done, log_dir)
  assert e.value.code == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(
      "error: stage 'pretrain' failed (exit status 3): error: --x: broken; log ")
  assert err[0].endswith("rerun the same command to resume (finished stages are skipped)")
  # Exits 0 without completing (the old stopped run_pretraining): also a failure.
  with pytest.raises(SystemExit) as e:
    run_demo.run_stage("pretrain", ["-c", "pass"], done, log_dir)
  assert e.value.code == 1
  assert "error: stage 'pretrain' exited 0 but is not complete (no %s)" % marker in (
      capsys.readouterr().err)


def _demo_input(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text)
  return reproduction.input_file(name.split(".")[0], str(path))


def test_output_dir_of_other_settings_or_data_is_refused(tmp_path):
  out = str(tmp_path / "out")
  os.makedirs(out)
  settings = {"pretrain_steps": 3000, "seed": 12345}
  inputs = [_demo_input(tmp_path, "train_text.txt", "one\ntwo\n")]
  # A new directory records the settings and the input's contents; the same pass (a stopped
  # run resumes).
  run_demo.check_output_dir_settings(out, settings, inputs)
  with open(os.path.join(out, run_demo.SETTINGS_FILE)) as f:
    recorded = json.load(f)
  assert recorded["settings"] == settings
  assert recorded["inputs"] == {"train_text": {
      "size": 8, "sha256": hashlib.sha256(b"one\ntwo\n").hexdigest()}}
  os.makedirs(os.path.join(out, "pretrain"))
  run_demo.check_output_dir_settings(out, dict(settings), inputs)
  # Another recipe, or the text edited in place: one line naming what differs, nothing
  # overwritten.
  with pytest.raises(common.UsageError) as e:
    run_demo.check_output_dir_settings(out, dict(settings, pretrain_steps=9000), inputs)
  assert str(e.value) == (
      "--output_dir=%s holds a run of other settings or input files: pretrain_steps 3000 -> "
      "9000; use a new --output_dir, or rerun with the flags and input files it was made with "
      "(restore an edited file)" % out)
  (tmp_path / "train_text.txt").write_text("one\nTWO\n")
  with pytest.raises(common.UsageError) as e:
    run_demo.check_output_dir_settings(out, settings, inputs)
  assert "\n" not in str(e.value) and (
      "holds a run of other settings or input files: --train_text file %s: other contents "
      "(sha256 differs); use a new --output_dir" % (tmp_path / "train_text.txt")) in str(e.value)
  with open(os.path.join(out, run_demo.SETTINGS_FILE)) as f:
    assert json.load(f) == recorded
  # Restored, it resumes.
  (tmp_path / "train_text.txt").write_text("one\ntwo\n")
  run_demo.check_output_dir_settings(out, settings, inputs)
  # A demo's outputs without the settings file (an earlier version's run): refused too.
  os.remove(os.path.join(out, run_demo.SETTINGS_FILE))
  with pytest.raises(common.UsageError, match=r"holds a demo run's outputs \(pretrain\) but no "
                     r"demo_settings.json"):
    run_demo.check_output_dir_settings(out, settings, inputs)
  assert not os.path.exists(os.path.join(out, run_demo.SETTINGS_FILE))


def test_demo_settings_file_of_the_earlier_format_is_still_checked(tmp_path):
  """demo_settings.json as the earlier version wrote it: flags and each input's sha256 flat."""
  out = tmp_path / "out"
  out.mkdir()
  inputs = [_demo_input(tmp_path, "train_text.txt", "some text\n")]
  sha = "a23e5fdcd7b276bdd81aa1a0b7b963101863dd3f61ff57935f8c5ba462681ea6"
  earlier = {"pretrain_steps": 3, "seed": 1, "train_text": sha, "vocab_file": None}
  _write(out / run_demo.SETTINGS_FILE, earlier)
  run_demo.check_output_dir_settings(str(out), {"pretrain_steps": 3, "seed": 1}, inputs)
  with open(str(out / run_demo.SETTINGS_FILE)) as f:
    assert json.load(f)["inputs"]["train_text"]["sha256"] == sha  # rewritten as this version's
  _write(out / run_demo.SETTINGS_FILE, dict(earlier, train_text="b" * 64))
  with pytest.raises(common.UsageError, match="--train_text file .*: other contents"):
    run_demo.check_output_dir_settings(str(out), {"pretrain_steps": 3, "seed": 1}, inputs)


def test_output_dir_that_is_a_file_is_a_one_line_error(tmp_path):
  args = _tiny_demo_inputs(tmp_path)
  a_file = tmp_path / "a_file"
  a_file.write_text("")
  proc = run_tool("run_demo.py", args + ["--output_dir=%s" % a_file], expect_rc=2)
  assert last_error_line(proc) == (
      "error: --output_dir=%s: is a file, expected a directory" % a_file), proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr and "errno" not in proc.stderr, proc.stderr[-2000:]


def test_a_second_demo_into_a_running_demos_directory_is_refused(tmp_path):
  """A demo running in the directory (its lock, held here by this process): the second demo
  fails in one line naming it and touches nothing there (not the running stage's child)."""
  args = _tiny_demo_inputs(tmp_path)
  out = tmp_path / "out"
  with common.OutputDirLock(str(out), "output_dir", label=run_demo.LOCK_LABEL):
    (out / "logs").mkdir()
    (out / "logs" / ".pretrain.log.child.json").write_text("{}")
    before = sorted(os.listdir(str(out)))
    proc = run_tool("run_demo.py", args + ["--output_dir=%s" % out], expect_rc=2)
    assert last_error_line(proc).startswith(
        "error: --output_dir=%s: in use by another job (pid %d on host " % (out, os.getpid()))
    assert "[demo]" not in proc.stdout
    assert sorted(os.listdir(str(out))) == before
    assert (out / "logs" / ".pretrain.log.child.json").read_text() == "{}"


def test_domain_text_is_the_train_sentences_without_labels(tmp_path):
  train = tmp_path / "train.tsv"
  train.write_text('sentence\tlabel\nA "warm" film .\t1\n\t0\nA dull , lifeless mess .\t0\n')
  out = str(tmp_path / "domain.txt")
  assert run_demo.write_domain_text(str(train), out) == 2
  # Each sentence its own document (a blank line before it), no label, nothing of dev.tsv.
  with open(out) as f:
    assert f.read() == '\nA "warm" film .\n\nA dull , lifeless mess .\n'
  train.write_text("text\tlabel\nA film .\t1\n")
  with pytest.raises(common.UsageError, match="^--sentiment_dir=.*: train.tsv has no 'sentence'"):
    run_demo.write_domain_text(str(train), out)
  with pytest.raises(common.UsageError, match="^--sentiment_dir=.*: no train.tsv"):
    run_demo.write_domain_text(str(tmp_path / "none" / "train.tsv"), out)


def test_pretraining_config_is_the_models_with_the_pretraining_dropout(tmp_path):
  """--pretrain_dropout changes the two dropout probabilities of the config pre-training reads,
  nothing else; fine-tuning reads --bert_config_file itself."""
  from conftest import TINY_BERT_CONFIG  # pylint: disable=g-import-not-at-top
  config = dict(TINY_BERT_CONFIG, residual_attention="sum", use_running_mean=False)
  _write(tmp_path / "model.json", config)
  out = str(tmp_path / "pretrain_config.json")
  run_demo.write_pretrain_config(str(tmp_path / "model.json"), 0.0, out)
  with open(out) as f:
    assert json.load(f) == dict(config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  (tmp_path / "list.json").write_text("[1, 2]")
  with pytest.raises(common.UsageError, match="^--bert_config_file=.*list.json: not a JSON "
                     "object$"):
    run_demo.write_pretrain_config(str(tmp_path / "list.json"), 0.0, out)


def test_pretrain_dropout_out_of_range_is_a_one_line_error(tmp_path):
  args = _tiny_demo_inputs(tmp_path)
  out = tmp_path / "out"
  proc = run_tool("run_demo.py", args + ["--output_dir=%s" % out, "--pretrain_dropout=1"],
                  expect_rc=2)
  assert last_error_line(proc) == "error: --pretrain_dropout=1.0: must be in [0, 1)", (
      proc.stderr[-2000:])
  assert not out.exists()


DRIVER = """
import sys
import run_demo
from realformer_tf import subprocess_utils
subprocess_utils.install_signal_forwarding()
child = ("import signal, sys, time\\n"
         "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))\\n"
         "open(sys.argv[1], 'w').close(); time.sleep(60)")
run_demo.run_stage("pretrain", ["-c", child, sys.argv[1]], lambda: (False, "not yet"),
                   sys.argv[2])
print("not reached")
"""


def test_sigterm_stops_the_stage_and_exits_143(tmp_path):
  started = str(tmp_path / "started")
  # A `-c` driver (not a repository tool), so Popen directly; every wait below has a timeout.
  proc = subprocess.Popen([sys.executable, "-c", DRIVER, started, str(tmp_path / "logs")],
                          env=tool_env({"PYTHONPATH": REPO_DIR}), cwd=REPO_DIR,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  try:
    deadline = time.time() + 60
    while not os.path.exists(started):
      assert proc.poll() is None and time.time() < deadline, proc.communicate(timeout=30)[0]
      time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=30)[0]
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == 143, output
  assert "interrupted (signal 15): demo stopped in stage 'pretrain'; rerun the same" in output
  assert "not reached" not in output


def _tiny_demo_inputs(tmp_path):
  """A tiny version of the demo's inputs: the first documents of data/, a 32-wide model."""
  from conftest import TINY_BERT_CONFIG  # pylint: disable=g-import-not-at-top
  inputs = tmp_path / "inputs"
  (inputs / "sst2").mkdir(parents=True)
  for name, lines in (("train.txt", 120), ("heldout.txt", 60)):
    with open(os.path.join(REPO_DIR, "data", "demo_corpus", name)) as f:
      (inputs / name).write_text("".join(f.readlines()[:lines]))
  for name in ("train.tsv", "dev.tsv"):
    with open(os.path.join(REPO_DIR, "data", "sst2_slice", name)) as f:
      (inputs / "sst2" / name).write_text("".join(f.readlines()[:33]))
  config = dict(TINY_BERT_CONFIG, residual_attention="sum", vocab_size=300)
  _write(inputs / "bert_config.json", config)
  return ["--train_text=%s" % (inputs / "train.txt"),
          "--heldout_text=%s" % (inputs / "heldout.txt"),
          "--sentiment_dir=%s" % (inputs / "sst2"),
          "--bert_config_file=%s" % (inputs / "bert_config.json"),
          "--max_seq_length=32", "--pretrain_steps=3", "--pretrain_batch_size=8",
          "--finetune_epochs=1", "--finetune_batch_size=16",
          "--domain_adaptive"]  # (off by default) the slice's sentences join the text


def _comparable(report, output_dir):
  """The report without what may differ between two runs: timings and the output directory."""
  lines = [l.replace(output_dir, "<out>") for l in report.splitlines()]
  return [l for l in lines if not l.startswith(("| speed |", "Stage times:"))]


@pytest.mark.slow
def test_demo_pipeline_is_deterministic(tmp_path):
  """The whole demo (data, pre-training, fine-tuning, exports, fill-mask) at a tiny size, run
  twice at once into two directories: the reports (and the held-out / dev metrics, exactly)
  are the same, so the README's figures are what a fresh clone prints."""
  from conftest import start_tool  # pylint: disable=g-import-not-at-top
  args = _tiny_demo_inputs(tmp_path)
  outs = [str(tmp_path / "run1"), str(tmp_path / "run2")]
  procs = [start_tool("run_demo.py", args + ["--output_dir=%s" % out], stdout=subprocess.PIPE)
           for out in outs]
  stdouts = []
  try:
    for proc in procs:
      out, err = proc.communicate(timeout=300)
      assert proc.returncode == 0, err[-3000:]
      stdouts.append(out)
  finally:
    for proc in procs:  # SIGTERM first: the demo stops its stage's process group too
      if proc.poll() is None:
        proc.terminate()
        try:
          proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
          proc.kill()
          proc.wait(timeout=60)
  reports = []
  for out in outs:
    with open(os.path.join(out, "report.md")) as f:
      reports.append(_comparable(f.read(), out))
    assert any(l.startswith("| MLM accuracy |") for l in reports[-1]), reports[-1]
    assert any(l.startswith("- \"a warm") for l in reports[-1]), reports[-1]
    # One export answers: run_classifier's, raw text in.
    assert not os.path.exists(os.path.join(out, "sst2_text_export"))
    assert any("(domain-adaptive)" in l for l in reports[-1]), reports[-1]
    # Pre-trained without dropout (--pretrain_dropout's default), fine-tuned with the config's.
    for name, dropout in (("pretrain", 0.0), ("sst2", 0.1)):
      with open(os.path.join(out, name, "bert_config.json")) as f:
        used = json.load(f)
      assert (used["hidden_dropout_prob"], used["attention_probs_dropout_prob"]) == (
          dropout, dropout), name
  assert reports[0] == reports[1]
  # The recipe is stated when the demo starts, as the report states it.
  recipe = [l for l in reports[0] if l.startswith("Recipe: ")]
  assert len(recipe) == 1 and "dropout 0, fused optimizer" in recipe[0], reports[0]
  assert stdouts[0].splitlines()[0] == "[demo] recipe: " + recipe[0][len("Recipe: "):], (
      stdouts[0][:2000])
  # Rerun into a finished run's directory with another recipe: refused before any stage runs.
  rerun = run_tool("run_demo.py", args + ["--output_dir=%s" % outs[0], "--pretrain_steps=4"],
                   expect_rc=2)
  assert ("holds a run of other settings or input files: pretrain_steps 3 -> 4; use a new "
          "--output_dir" in rerun.stderr), rerun.stderr[-2000:]
  assert "[demo]" not in rerun.stdout
  # The same flags after the training text was edited in place: refused too (the finished
  # stages were made from the old text).
  train_text = tmp_path / "inputs" / "train.txt"
  train_text.write_text(train_text.read_text() + "one more sentence .\n")
  rerun = run_tool("run_demo.py", args + ["--output_dir=%s" % outs[0]], expect_rc=2)
  assert last_error_line(rerun).startswith(
      "error: --output_dir=%s holds a run of other settings or input files: --train_text file "
      "%s: other contents" % (outs[0], train_text)), rerun.stderr[-2000:]
  assert "[demo]" not in rerun.stdout
  for name in ("pretrain/eval_results.json", "sst2/eval_results.json"):
    results = []
    for out in outs:
      with open(os.path.join(out, name)) as f:
        results.append({k: v for k, v in json.load(f).items() if "sec" not in k and
                        not isinstance(v, str)})
    assert results[0] == results[1], name
