"""paper/sweep.py: plan sizes of the paper's grids, commands, best-median aggregation and GLUE Overall
on hand-made eval_results.json files (checked against hand-computed values and the paper's
Table 3), report files, failure handling with fake runs, and one small real resumable sweep."""

import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import last_error_line, process_alive, REPO_DIR, run_tool, start_tool
from conftest import TINY_BERT_CONFIG
from conftest import write_random_bert_checkpoint

from realformer_tf import checkpoint_slimming
from realformer_tf import common
from paper import sweep


def _tiny_checkpoint(prefix):
  """A readable checkpoint for the sweep's checks (its fake children never load it)."""
  checkpoint_slimming.write_checkpoint({"bert/embeddings/word_embeddings":
                                        np.zeros([2, 2], np.float32)}, prefix)


GLUE_FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "glue")
SQUAD_FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "squad")

TINY_CONFIG = TINY_BERT_CONFIG


def _fake_run(output_dir, task, setting, seed, results):
  """Writes <output_dir>/<task>/<setting>/seed<seed>/eval_results.json."""
  run_dir = os.path.join(str(output_dir), task, setting, "seed%d" % seed)
  os.makedirs(run_dir, exist_ok=True)
  with open(os.path.join(run_dir, "eval_results.json"), "w") as f:
    json.dump(results, f)
  return run_dir


def _sample_std(values):
  mean = sum(values) / len(values)
  return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
  """A random tiny BERT checkpoint (bert/* variables), as test_run_classifier makes it."""
  root = tmp_path_factory.mktemp("tiny_bert")
  config_file = str(root / "bert_config.json")
  with open(config_file, "w") as f:
    json.dump(TINY_CONFIG, f)
  checkpoint = write_random_bert_checkpoint(config_file, str(root / "bert_model.ckpt"))
  return config_file, checkpoint


@pytest.fixture
def squad_dir(tmp_path):
  """The tiny SQuAD fixtures under the names --squad_dir expects."""
  path = tmp_path / "squad"
  path.mkdir()
  for version in ("1.1", "2.0"):
    for split in ("train", "dev"):
      shutil.copy(os.path.join(SQUAD_FIXTURES, "tiny-v%s.json" % version),
                  path / ("%s-v%s.json" % (split, version)))
  return str(path)


# ----------------------------------------------------------------------------------------------
# Names, grids, plan and commands.


def test_names_and_numbers():
  assert [sweep.format_number(x) for x in (2e-5, 6e-6, 1e-5, 5e-5, 1e-3, 3.0, 2.5)] == [
      "2e-5", "6e-6", "1e-5", "5e-5", "0.001", "3", "2.5"]
  assert sweep.setting_name(32, 1e-5, 4.0) == "bs32_lr1e-5_ep4"
  assert sweep.setting_label((48, 3e-5, 2.0)) == "48/3e-5/2"
  for setting in [(32, 6e-6, 2.0), (48, 5e-5, 4.0), (4, 0.001, 1.5)]:
    assert sweep.parse_setting_name(sweep.setting_name(*setting)) == setting
  assert sweep.parse_setting_name("feature_cache") is None
  assert sweep.parse_setting_name("bs32_lrfoo_ep3") is None
  assert [sweep.canonical_task(n) for n in ("SST2", "SST-2", "sts_b", "MNLI", "SQuAD-v1.1",
                                            "squad2")] == [
      "sst-2", "sst-2", "sts-b", "mnli", "squad1.1", "squad2.0"]
  with pytest.raises(common.UsageError, match="--tasks: unknown task 'xnli'"):
    sweep.canonical_task("xnli")
  assert sweep.parse_list("2e-5, 3e-5,2e-5", "learning_rates", float) == [2e-5, 3e-5]
  with pytest.raises(common.UsageError, match=r"--batch_sizes=32,x: 'x' is not an integer"):
    sweep.parse_list("32,x", "batch_sizes", int)
  with pytest.raises(common.UsageError, match=r"'0' must be > 0"):
    sweep.parse_list("0", "epochs", float)


def test_plan_sizes_of_the_paper_grids():
  opts = dict(init_checkpoint="ckpt", bert_config_file="c.json", vocab_file="v.txt",
              do_lower_case=True, max_seq_length={"glue": 128, "squad": 384})
  specs = list(sweep.TASKS.values())
  grids = {s.name: sweep.task_grid(s) for s in specs}
  data_dirs = {s.name: "data/" + s.name for s in specs}
  runs = sweep.build_plan(specs, grids, sweep.PAPER_SEEDS, "/out", data_dirs, opts)
  per_task = {name: sum(1 for r in runs if r.task == name) for name in sweep.TASKS}
  # GLUE: 1 batch x 3 epochs x 7 LRs x 5 seeds; SQuAD: 2 x 3 x 4 x 5.
  assert per_task == dict({name: 105 for name in sweep.TASKS if "squad" not in name},
                          **{"squad1.1": 120, "squad2.0": 120})
  assert len(set(r.run_dir for r in runs)) == len(runs)
  assert runs[0].run_dir == "/out/mnli/bs32_lr6e-6_ep2/seed1"
  # Flags override every task's grid.
  grids = {s.name: sweep.task_grid(s, learning_rates=[1e-5], epochs=[3.0]) for s in specs}
  assert grids["squad1.1"] == {"batch_sizes": [32, 48], "epochs": [3.0],
                               "learning_rates": [1e-5]}


def test_commands(squad_dir):
  opts = dict(init_checkpoint="ck", bert_config_file="c.json", vocab_file="v.txt",
              do_lower_case=False, max_seq_length={"glue": 128, "squad": 384},
              residual_attention="sum", extra_flags=["--use_tpu=true", "--tpu_name=x y"],
              python="py")
  runs = sweep.build_plan([sweep.TASKS["squad2.0"], sweep.TASKS["mnli"]],
                          {"squad2.0": {"batch_sizes": [48], "epochs": [2.0],
                                        "learning_rates": [5e-5]},
                           "mnli": {"batch_sizes": [32], "epochs": [4.0],
                                    "learning_rates": [1e-5]}},
                          [3], "out", {"squad2.0": squad_dir, "mnli": "glue/MNLI"}, opts)
  squad, mnli = runs
  assert squad.cmd[:2] == ["py", os.path.join(REPO_DIR, "run_squad.py")]
  for arg in ["--train_file=%s/train-v2.0.json" % squad_dir,
              "--predict_file=%s/dev-v2.0.json" % squad_dir, "--version_2_with_negative=true",
              "--max_seq_length=384", "--train_batch_size=48", "--learning_rate=5e-5",
              "--num_train_epochs=2", "--seed=3", "--do_train=true", "--do_predict=true",
              "--do_lower_case=false", "--init_checkpoint=ck",
              "--output_dir=out/squad2.0/bs48_lr5e-5_ep2/seed3", "--residual_attention=sum"]:
    assert arg in squad.cmd
  assert squad.cmd[-2:] == ["--use_tpu=true", "--tpu_name=x y"]
  assert mnli.cmd[1] == os.path.join(REPO_DIR, "run_classifier.py")
  for arg in ["--task_name=mnli", "--data_dir=glue/MNLI", "--max_seq_length=128",
              "--do_eval=true", "--learning_rate=1e-5", "--num_train_epochs=4"]:
    assert arg in mnli.cmd
  assert float("1e-5") == 1e-5  # the text passed parses back exactly
  assert "--keep_best=true" not in mnli.cmd
  # Scoring each run's best checkpoint: run_classifier evaluates during training and keeps it.
  best = sweep.build_command(sweep.TASKS["mnli"], "glue/MNLI", (32, 1e-5, 4.0), 3, "o",
                             dict(opts, max_seq_length=128, score_checkpoint="best",
                                  eval_every_steps=50))
  assert best[best.index("--do_eval=true") + 1:][:2] == ["--eval_every_steps=50",
                                                         "--keep_best=true"]


def test_results_say_which_checkpoint_was_scored():
  empty = {"tasks": {}, "glue_overall": None}
  for scored, words in [({"last": 4, "best": 0}, "each run's last checkpoint"),
                        ({"last": 0, "best": 4}, "best checkpoint on dev"),
                        ({"last": 1, "best": 3}, "best checkpoint (3 runs) or last checkpoint "
                                                 "(1 runs): mixed")]:
    assert words in sweep.render_markdown(dict(empty, scored_checkpoints=scored))


def test_dry_run_counts_and_writes_nothing(tmp_path, tiny_model, squad_dir, vocab_file):
  config_file, checkpoint = tiny_model
  out = tmp_path / "sweep"
  log = run_tool("paper/sweep.py", ["--tasks=sst-2,squad1.1,squad2.0", "--glue_dir=%s" % GLUE_FIXTURES,
                "--squad_dir=%s" % squad_dir, "--init_checkpoint=%s" % checkpoint,
                "--bert_config_file=%s" % config_file, "--vocab_file=%s" % vocab_file,
                "--output_dir=%s" % out, "--dry_run"]).output
  assert ("sst-2: 1 batch size(s) {32} x 3 epoch count(s) {2, 3, 4} x 7 learning rate(s) "
          "{6e-6, 8e-6, 1e-5, 2e-5, 3e-5, 4e-5, 5e-5} x 5 seed(s) = 105 runs" in log)
  assert ("squad1.1: 2 batch size(s) {32, 48} x 3 epoch count(s) {2, 3, 4} x 4 learning "
          "rate(s) {2e-5, 3e-5, 4e-5, 5e-5} x 5 seed(s) = 120 runs" in log)
  assert "squad2.0: 2 batch size(s)" in log and "Plan: 345 runs, 345 to run, 0 already done" in log
  assert log.count("  to run: ") == 345
  assert not out.exists()
  # One-line errors for bad inputs.
  log = run_tool("paper/sweep.py", ["--tasks=sst-2,cola", "--glue_dir=%s" % tmp_path,
                "--init_checkpoint=%s" % checkpoint, "--bert_config_file=%s" % config_file,
                "--vocab_file=%s" % vocab_file, "--output_dir=%s" % out, "--dry_run"],
               expect_rc=2).output
  assert "error: --glue_dir=%s: %s/SST-2 has no train.tsv (needed by task sst-2)" % (
      tmp_path, tmp_path) in log
  assert "Traceback" not in log


# ----------------------------------------------------------------------------------------------
# Aggregation on hand-made results.


def _make_hand_made_sweep(out):
  """Fake runs with known numbers; returns nothing (expected values are in the tests)."""
  # SST-2: B wins (median 93); C has a higher median but only 2 of 5 seeds.
  for seed, acc in enumerate([0.90, 0.92, 0.91, 0.95, 0.80], 1):
    _fake_run(out, "sst-2", "bs32_lr2e-5_ep3", seed, {"eval_accuracy": acc, "eval_loss": 0.3})
  for seed, acc in enumerate([0.93, 0.93, 0.89, 0.94, 0.92], 1):
    _fake_run(out, "sst-2", "bs32_lr1e-5_ep4", seed, {"eval_accuracy": acc})
  for seed, acc in enumerate([0.99, 0.99], 1):
    _fake_run(out, "sst-2", "bs32_lr5e-5_ep2", seed, {"eval_accuracy": acc})
  _fake_run(out, "sst-2", "bs32_lrfoo_ep3", 1, {"eval_accuracy": 1.0})  # not a setting: ignored
  # MRPC: X wins on (Acc + F1) / 2 although Y has the higher accuracy.
  for seed, (acc, f1) in enumerate([(0.80, 0.86), (0.82, 0.88), (0.84, 0.90)], 1):
    _fake_run(out, "mrpc", "bs32_lr2e-5_ep2", seed, {"eval_accuracy": acc, "eval_f1": f1})
  for seed in (1, 2, 3):
    _fake_run(out, "mrpc", "bs32_lr3e-5_ep2", seed, {"eval_accuracy": 0.85, "eval_f1": 0.80})
  _fake_run(out, "mrpc", "bs32_lr3e-5_ep2", 4, {"eval_accuracy": 0.99})  # no F1: skipped
  # STS-B, 4 seeds: even count, the median is the mean of the middle two.
  for seed, (p, s) in enumerate([(0.1, 0.2), (0.2, 0.2), (0.3, 0.4), (0.9, 0.4)], 1):
    _fake_run(out, "sts-b", "bs32_lr1e-5_ep3", seed, {"eval_pearson": p, "eval_spearman": s})
  # MNLI: chosen by matched accuracy (P), although Q has the higher m/mm mean.
  for seed in (1, 2, 3):
    _fake_run(out, "mnli", "bs32_lr1e-5_ep4", seed,
              {"eval_accuracy": 0.80, "eval_mismatched_accuracy": 0.70})
    _fake_run(out, "mnli", "bs32_lr2e-5_ep4", seed,
              {"eval_accuracy": 0.79, "eval_mismatched_accuracy": 0.90})
  # WNLI is aggregated but not part of Overall.
  _fake_run(out, "wnli", "bs32_lr1e-5_ep2", 1, {"eval_accuracy": 1.0})


def test_aggregation_maths(tmp_path):
  _make_hand_made_sweep(tmp_path)
  warnings = []
  agg = sweep.aggregate(str(tmp_path), ["sst-2", "mrpc", "sts-b", "mnli", "wnli"],
                        log_fn=warnings.append)
  tasks = agg["tasks"]

  sst = tasks["sst-2"]
  assert [s["label"] for s in sst["settings"]] == ["32/1e-5/4", "32/2e-5/3", "32/5e-5/2"]
  assert sst["best"] == "32/1e-5/4"
  by_label = {s["label"]: s for s in sst["settings"]}
  a = by_label["32/2e-5/3"]["metrics"]["acc"]
  assert a["median"] == pytest.approx(91.0)
  assert a["std"] == pytest.approx(math.sqrt(129.2 / 4))  # sum of squared deviations / (n-1)
  b = by_label["32/1e-5/4"]["metrics"]["acc"]
  assert (b["median"], b["std"]) == (pytest.approx(93.0), pytest.approx(math.sqrt(14.8 / 4)))
  assert by_label["32/5e-5/2"]["n"] == 2 and not by_label["32/5e-5/2"]["best"]
  assert any("sst-2: 1 setting(s) have fewer than 5 seeds" in w for w in warnings)

  mrpc = tasks["mrpc"]
  assert mrpc["best"] == "32/2e-5/2"
  x = sweep.best_setting(mrpc)
  assert x["score"]["median"] == pytest.approx(85.0)
  assert x["metrics"]["acc"]["median"] == pytest.approx(82.0)
  assert x["metrics"]["f1"]["median"] == pytest.approx(88.0)
  y = [s for s in mrpc["settings"] if s["label"] == "32/3e-5/2"][0]
  assert y["n"] == 3 and y["score"]["median"] == pytest.approx(82.5)
  assert y["metrics"]["acc"]["std"] == pytest.approx(0.0)
  assert any("mrpc/bs32_lr3e-5_ep2/seed4: eval_results.json has no eval_f1" in w
             for w in warnings)

  stsb = sweep.best_setting(tasks["sts-b"])
  assert stsb["metrics"]["pearson"]["median"] == pytest.approx(25.0)
  assert stsb["metrics"]["spearman"]["median"] == pytest.approx(30.0)
  assert stsb["metrics"]["pearson"]["std"] == pytest.approx(_sample_std([10, 20, 30, 90]))
  assert stsb["metrics"]["pearson"]["std"] == pytest.approx(math.sqrt(3875 / 3))

  assert tasks["mnli"]["best"] == "32/1e-5/4"

  overall = agg["glue_overall"]
  assert [(e["entry"], round(e["value"], 6)) for e in overall["entries"]] == [
      ("MNLI-m", 80.0), ("MNLI-mm", 70.0), ("SST-2", 93.0), ("STS-B", 27.5), ("MRPC", 85.0)]
  assert overall["overall"] == pytest.approx((80 + 70 + 93 + 27.5 + 85) / 5)
  assert overall["overall_mnli_as_one_task"] == pytest.approx((75 + 93 + 27.5 + 85) / 4)
  assert overall["missing"] == ["qqp", "qnli", "cola", "rte"] and not overall["complete"]


# The paper's BERT-Large RealFormer dev results (Table 3/4) as one-seed runs at its Table 10
# settings: the aggregation must give back its numbers and its Overall 84.53.
PAPER = {
    "mnli": ("bs32_lr1e-5_ep4", {"eval_accuracy": 0.8628, "eval_mismatched_accuracy": 0.8634}),
    "qqp": ("bs32_lr2e-5_ep4", {"eval_accuracy": 0.9134, "eval_f1": 0.8828}),
    "qnli": ("bs32_lr2e-5_ep2", {"eval_accuracy": 0.9189}),
    "sst-2": ("bs32_lr1e-5_ep4", {"eval_accuracy": 0.9404}),
    "cola": ("bs32_lr1e-5_ep3", {"eval_mcc": 0.5983}),
    "sts-b": ("bs32_lr2e-5_ep4", {"eval_pearson": 0.9011, "eval_spearman": 0.8988}),
    "mrpc": ("bs32_lr1e-5_ep4", {"eval_accuracy": 0.8701, "eval_f1": 0.9091}),
    "rte": ("bs32_lr1e-5_ep4", {"eval_accuracy": 0.7365}),
    "wnli": ("bs32_lr1e-5_ep2", {"eval_accuracy": 0.10}),
    "squad1.1": ("bs48_lr3e-5_ep2", {"exact_match": 85.58, "f1": 91.93}),
    "squad2.0": ("bs48_lr5e-5_ep2", {"exact": 79.95, "f1": 82.93, "total": 100}),
}


def test_overall_reproduces_the_paper_and_report_files(tmp_path):
  for task, (setting, results) in PAPER.items():
    _fake_run(tmp_path, task, setting, 1, results)
    # A worse setting per task; for SQuAD a higher EM but lower F1 (F1 decides).
    worse = {k: v * 0.9 for k, v in results.items()}
    if task.startswith("squad"):
      worse = dict(results, f1=results["f1"] - 1, **{("exact_match" if task == "squad1.1"
                                                        else "exact"): 99.0})
    _fake_run(tmp_path, task, "bs16_lr1e-4_ep1", 1, worse)
  os.makedirs(tmp_path / "sst-2" / "feature_cache")
  tasks = sweep.tasks_on_disk(str(tmp_path))
  assert tasks == list(sweep.TASKS)
  lines = []
  assert sweep.report(str(tmp_path), tasks, log_fn=lines.append) == 0
  agg = json.loads((tmp_path / "results.json").read_text())
  assert round(agg["glue_overall"]["overall"], 2) == 84.53
  assert round(agg["glue_overall"]["overall_mnli_as_one_task"], 2) == 84.31
  assert agg["glue_overall"]["complete"]
  for task, (setting, _) in PAPER.items():
    assert agg["tasks"][task]["best"] == sweep.setting_label(sweep.parse_setting_name(setting))

  md = (tmp_path / "results.md").read_text()
  assert "| Task | Metric | Median ± std | Seeds | Best setting (bs/lr/ep) |" in md
  assert "| mnli | Acc-m / Acc-mm | 86.28 / 86.34 | 1 | 32/1e-5/4 |" in md
  assert "| sts-b | Pearson / Spearman | 90.11 / 89.88 | 1 | 32/2e-5/4 |" in md
  assert "| squad1.1 | EM / F1 | 85.58 / 91.93 | 1 | 48/3e-5/2 |" in md
  assert "| GLUE Overall | mean of 9 entries | 84.53 | | |" in md
  assert "| cola | 32/1e-5/3 | 1 | 59.83 | MCC 59.83 | * |" in md
  assert any("GLUE Overall" in line for line in lines)

  rows = list(csv.DictReader(open(tmp_path / "results.csv")))
  assert list(rows[0]) == sweep.CSV_COLUMNS
  # Per task: 2 settings x (metrics + score).
  assert len(rows) == sum(2 * (len(s.metrics) + 1) for s in sweep.TASKS.values())
  best_rows = [r for r in rows if r["best"] == "1"]
  assert len(best_rows) == sum(len(s.metrics) + 1 for s in sweep.TASKS.values())
  row = [r for r in rows if r["task"] == "mrpc" and r["metric"] == "score" and r["best"] == "1"]
  assert len(row) == 1
  assert float(row[0]["median"]) == pytest.approx((87.01 + 90.91) / 2)
  assert (row[0]["std"], row[0]["n"], row[0]["seeds"], row[0]["setting"]) == (
      "", "1", "1", "32/1e-5/4")
  assert (row[0]["batch_size"], row[0]["learning_rate"], row[0]["epochs"]) == ("32", "1e-5", "4")
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_partial_overall_is_labelled(tmp_path):
  _make_hand_made_sweep(tmp_path)
  sweep.report(str(tmp_path), ["sst-2", "mrpc"], log_fn=lambda s: None)
  md = (tmp_path / "results.md").read_text()
  assert ("| GLUE Overall (partial: no mnli, qqp, qnli, cola, sts-b, rte) | mean of 2 entries |"
          in md)
  assert "| sst-2 | Acc | 93.00 ± 1.92 | 5 | 32/1e-5/4 |" in md
  assert "| sst-2 | 32/5e-5/2 | 2 | 99.00 ± 0.00 | Acc 99.00 |  |" in md


# ----------------------------------------------------------------------------------------------
# Running: failures, clean-up, feature cache (fake runs), then one real sweep.

FAKE_RUN = """
import json, os, sys
out, mode = sys.argv[1], sys.argv[2]
print("stale checkpoint present:", os.path.exists(os.path.join(out, "model.ckpt-5.index")))
print("cached features present:", os.path.exists(os.path.join(out, "train.tf_record")))
for name in ("model.ckpt-1.index", "model.ckpt-1.data-00000-of-00001", "checkpoint",
             "train.tf_record", "train.tf_record.json", "events.out.tfevents.1"):
  open(os.path.join(out, name), "w").write(mode)
if mode == "fail":
  print("Traceback: something broke"); sys.exit(3)
if mode == "ok":
  json.dump({"eval_accuracy": 0.5}, open(os.path.join(out, "eval_results.json"), "w"))
"""


def _fake_runs(out, modes):
  runs = []
  for seed, mode in enumerate(modes, 1):
    run_dir = os.path.join(str(out), "sst-2", "bs32_lr1e-5_ep3", "seed%d" % seed)
    runs.append(sweep.Run("sst-2", (32, 1e-5, 3.0), seed, run_dir,
                          [sys.executable, "-c", FAKE_RUN, run_dir, mode]))
  return runs


def test_failures_are_recorded_and_the_sweep_goes_on(tmp_path):
  runs = _fake_runs(tmp_path, ["fail", "ok", "no_results", "ok"])
  os.makedirs(runs[1].run_dir)
  open(os.path.join(runs[1].run_dir, "model.ckpt-5.index"), "w").close()  # interrupted before
  lines = []
  failures = sweep.execute(runs, log_fn=lines.append)
  assert [(f[0].seed, f[1]) for f in failures] == [
      (1, "exit status 3"), (3, "exit status 0 but no eval_results.json")]
  assert lines[0].startswith("0/4 runs")
  assert lines[-1].startswith("4/4 runs") and "sst-2/bs32_lr1e-5_ep3/seed4: done in" in lines[-1]
  assert "seed1: FAILED (exit status 3, log %s)" % os.path.join(runs[0].run_dir,
                                                                "sweep_run.log") in lines[1]
  # Finished runs: checkpoints removed, features moved to the task's cache, log kept.
  cache = tmp_path / "sst-2" / "feature_cache"
  assert sorted(os.listdir(cache)) == ["train.tf_record", "train.tf_record.json"]
  ok_dir = runs[1].run_dir
  assert sorted(os.listdir(ok_dir)) == ["eval_results.json", "events.out.tfevents.1",
                                        "sweep_run.log"]
  log = open(os.path.join(ok_dir, "sweep_run.log")).read()
  assert log.startswith("# %s -c " % sys.executable)
  assert "stale checkpoint present: True" in log  # an unfinished run resumes from it
  # The later run got the cached features (hard link) before it started.
  assert "cached features present: True" in open(
      os.path.join(runs[3].run_dir, "sweep_run.log")).read()
  # A failed run keeps its files for inspection.
  assert "model.ckpt-1.index" in os.listdir(runs[0].run_dir)
  lines = []
  assert sweep.report(str(tmp_path), ["sst-2"], failures, log_fn=lines.append) == 1
  text = "\n".join(lines)
  assert "2 run(s) failed" in text and "    | Traceback: something broke" in text
  # Again: only the two failed runs are tried; --keep_checkpoints keeps model.ckpt-*.
  runs = _fake_runs(tmp_path, ["ok", "ok", "ok", "ok"])
  lines = []
  assert sweep.execute(runs, keep_checkpoints=True, log_fn=lines.append) == []
  assert lines[0].startswith("0/2 runs") and len(lines) == 3
  assert "model.ckpt-1.index" in os.listdir(runs[2].run_dir)
  assert "model.ckpt-1.index" not in os.listdir(runs[1].run_dir)


def test_done_means_the_last_step_was_reached(tmp_path):
  # eval_results.json of a run stopped after 26 of 400 steps: neither done nor aggregated.
  stopped = _fake_run(tmp_path, "sst-2", "bs32_lr1e-5_ep3", 1,
                      {"eval_accuracy": 0.9, "global_step": 26, "num_train_steps": 400})
  finished = _fake_run(tmp_path, "sst-2", "bs32_lr1e-5_ep3", 2,
                       {"eval_accuracy": 0.7, "global_step": 400, "num_train_steps": 400})
  legacy = _fake_run(tmp_path, "sst-2", "bs32_lr1e-5_ep3", 3, {"eval_accuracy": 0.6})
  assert [sweep.is_done(d) for d in (stopped, finished, legacy)] == [False, True, True]
  assert not sweep.is_done(str(tmp_path / "nothing"))
  found = sweep.collect_results(str(tmp_path / "sst-2"))
  assert sorted(found[(32, 1e-5, 3.0)]) == [2, 3]
  # The sweep reruns the stopped run (its old eval_results.json is removed first).
  runs = _fake_runs(tmp_path, ["ok", "ok", "ok"])
  lines = []
  assert sweep.execute(runs, log_fn=lines.append) == []
  assert lines[0].startswith("0/1 runs") and "seed1: done" in lines[-1]
  assert json.loads(open(os.path.join(stopped, "eval_results.json")).read()) == {
      "eval_accuracy": 0.5}
  # A run that exits 0 short of its last step is a failure, not a result.
  _fake_run(tmp_path, "sst-2", "bs32_lr1e-5_ep3", 1,
            {"eval_accuracy": 0.9, "global_step": 26, "num_train_steps": 400})
  short = sweep.Run("sst-2", (32, 1e-5, 3.0), 1, stopped, [sys.executable, "-c", (
      "import json, sys; json.dump({'global_step': 26, 'num_train_steps': 400}, "
      "open(sys.argv[1] + '/eval_results.json', 'w'))"), stopped])
  failures = sweep.execute([short], log_fn=lambda s: None)
  assert [f[1] for f in failures] == [
      "exit status 0 but eval_results.json has global_step 26 of 400"]


# A stand-in for the python that runs run_classifier.py (sweep --python): it gets the script and
# its flags, starts a worker in its process group (as data pipelines do), and, while the file
# "block" exists, waits; on SIGTERM it saves a "checkpoint" and exits 143 without results, like
# the real tools. Otherwise it writes eval_results.json with a known accuracy.
FAKE_PYTHON = """
import json, os, signal, subprocess, sys, time
state = os.environ["FAKE_STATE_DIR"]
flags = dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--") and "=" in a)
out, seed = flags["output_dir"], int(flags["seed"])
os.makedirs(out, exist_ok=True)
worker = subprocess.Popen(["sleep", "120"])
with open(os.path.join(state, "pids-%d" % os.getpid()), "w") as f:
  f.write("%d %d" % (os.getpid(), worker.pid))
def stop(signum, frame):
  open(os.path.join(out, "model.ckpt-3.index"), "w").close()
  sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stop)
print("fake run of", sys.argv[1], "seed", seed, flush=True)
if os.path.exists(os.path.join(state, "block")):
  open(os.path.join(state, "started"), "w").close()
  time.sleep(120)
json.dump({"eval_accuracy": 0.5 + seed / 10.0, "global_step": 10, "num_train_steps": 10},
          open(os.path.join(out, "eval_results.json"), "w"))
worker.kill()
"""


def _kill_groups(pid_files):
  """Test clean-up after a failure: kills the fake runs' process groups."""
  for path in pid_files:
    try:
      os.killpg(int(open(str(path)).read().split()[0]), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
      pass


def _wait_for(path, proc, timeout=90):
  deadline = time.time() + timeout
  while not os.path.exists(path):
    assert proc.poll() is None, proc.communicate(timeout=60)[0][-3000:]
    assert time.time() < deadline, "timed out waiting for %s" % path
    time.sleep(0.1)


@pytest.mark.slow
def test_sigterm_stops_the_child_and_a_rerun_finishes(tmp_path, vocab_file):
  state = tmp_path / "state"
  state.mkdir()
  fake = tmp_path / "fake_python"
  fake.write_text("#!%s\n%s" % (sys.executable, FAKE_PYTHON))
  fake.chmod(0o755)
  _tiny_checkpoint(str(tmp_path / "ckpt"))
  (tmp_path / "bert_config.json").write_text("{}")
  out = tmp_path / "sweep"
  args = ["--tasks=sst-2", "--glue_dir=%s" % GLUE_FIXTURES,
          "--init_checkpoint=%s" % (tmp_path / "ckpt"),
          "--bert_config_file=%s" % (tmp_path / "bert_config.json"),
          "--vocab_file=%s" % vocab_file, "--output_dir=%s" % out, "--learning_rates=1e-5",
          "--epochs=1", "--batch_sizes=4", "--seeds=1,2", "--python=%s" % fake]
  env = {"FAKE_STATE_DIR": str(state)}
  (state / "block").write_text("")
  proc = start_tool("paper/sweep.py", args, env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT)
  try:
    _wait_for(str(state / "started"), proc)
    # A second sweep in the same directory is refused while the first runs.
    second = run_tool("paper/sweep.py", args, expect_rc=2, env=env, timeout=120)
    assert "in use by another job (pid %d" % proc.pid in second.stderr
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=60)[0]
  finally:
    if proc.poll() is None:
      proc.kill()
      _kill_groups(state.glob("pids-*"))
  assert proc.returncode == 143, output[-3000:]
  assert "interrupted (signal 15)" in output and "rerun the same command" in output
  pids = [int(p) for f in state.glob("pids-*") for p in f.read_text().split()]
  assert len(pids) == 2 and not [p for p in pids if process_alive(p)]  # child and its worker are gone
  run_dir = out / "sst-2" / "bs4_lr1e-5_ep1" / "seed1"
  assert not (run_dir / "eval_results.json").exists() and (run_dir / "model.ckpt-3.index").exists()
  assert not (out / "results.json").exists() and not (out / ".lock-sweep").exists()

  os.remove(str(state / "block"))
  rerun = run_tool("paper/sweep.py", args, env=env, timeout=120)
  assert "Plan: 2 runs, 2 to run, 0 already done" in rerun.stdout
  results = json.loads((out / "results.json").read_text())
  best = results["tasks"]["sst-2"]["settings"][0]
  assert best["seeds"] == [1, 2]
  assert best["metrics"]["acc"]["values"] == pytest.approx([60.0, 70.0])
  log = (run_dir / "sweep_run.log").read_text()
  assert "\0" not in log and log.count("fake run of") == 1 and log.startswith("# ")
  assert not [p for f in state.glob("pids-*") for p in map(int, f.read_text().split())
              if process_alive(p)]


def test_extra_flags_only_the_estimator_implements_are_one_line_on_the_engine():
  """What every run would refuse on the TF2 engine is refused once, naming --extra_flags."""
  for flags, shown in ((["--iterations_per_loop=10"], "--iterations_per_loop=10"),
                       (["--use_tpu", "--iterations_per_loop=5"], "--iterations_per_loop=5"),
                       (["--distribution_strategy=multi_worker_mirrored"],
                        "--distribution_strategy=multi_worker_mirrored")):
    with pytest.raises(common.UsageError) as e:
      sweep.check_extra_flags_on_engine(" ".join(flags), flags)
    assert str(e.value).startswith("--extra_flags=%s: %s: implemented by the Estimator only" % (
        " ".join(flags), shown))
    assert "-m paper.sweep on TF " in str(e.value) and "\n" not in str(e.value)
  # The engine runs these (and the run scripts' own flags).
  for flags in (["--nouse_tpu"], ["--use_tpu=false"], ["--num_tpu_cores=8"], ["--use_xla"],
                ["--use_tpu=true", "--tpu_name=x"], ["--num_tpu_cores=4"],
                ["--precision=bf16"], ["--precision=fp16"], ["--distribution_strategy=mirrored"],
                ["--eval_batch_size=5", "--save_checkpoints_steps=100"]):
    sweep.check_extra_flags_on_engine(" ".join(flags), flags)


def test_output_dir_of_another_checkpoint_is_refused(tmp_path):
  state = {"init_checkpoint": "/a/ckpt", "bert_config_file": "/a/c.json",
           "residual_attention": None, "do_lower_case": True, "extra_flags": "",
           "max_seq_length": {"sst-2": 128}}
  sweep.check_sweep_state(str(tmp_path), state, write=True)
  sweep.check_sweep_state(str(tmp_path), dict(state, max_seq_length={"squad1.1": 384}), True)
  assert json.loads((tmp_path / "sweep.json").read_text())["max_seq_length"] == {
      "sst-2": 128, "squad1.1": 384}
  with pytest.raises(common.UsageError, match="--init_checkpoint=/b/ckpt: --output_dir="):
    sweep.check_sweep_state(str(tmp_path), dict(state, init_checkpoint="/b/ckpt"), False)
  with pytest.raises(common.UsageError, match="holds sst-2 runs with max_seq_length=128"):
    sweep.check_sweep_state(str(tmp_path), dict(state, max_seq_length={"sst-2": 64}), False)


def test_output_dir_of_edited_inputs_is_refused(tmp_path):
  """sweep.json keeps the inputs' contents: a task's data or the checkpoint edited in place is
  refused in one line; another task's files join the record."""
  glue = tmp_path / "glue"
  shutil.copytree(GLUE_FIXTURES, str(glue))
  (tmp_path / "ckpt.index").write_text("index")
  (tmp_path / "ckpt.data-00000-of-00001").write_text("weights")
  (tmp_path / "bert_config.json").write_text("{}")
  (tmp_path / "vocab.txt").write_text("[PAD]\n")
  state = {"init_checkpoint": str(tmp_path / "ckpt"), "bert_config_file": "c.json",
           "residual_attention": None, "do_lower_case": True, "extra_flags": "",
           "max_seq_length": {"sst-2": 128}}

  def inputs(*tasks):
    specs = [sweep.ALL_TASKS[t] for t in tasks]
    return sweep.sweep_input_files(
        str(tmp_path / "ckpt"), str(tmp_path / "bert_config.json"), str(tmp_path / "vocab.txt"),
        specs, {s.name: str(glue / s.dir_name) for s in specs}, {})

  out = str(tmp_path / "out")
  sweep.check_sweep_state(out, state, True, inputs("sst-2"))
  recorded = json.loads(open(os.path.join(out, "sweep.json")).read())["inputs"]
  assert sorted(recorded) == ["bert_config_file", "init_checkpoint", "task/sst-2/dev.tsv",
                              "task/sst-2/train.tsv", "vocab_file"]
  sweep.check_sweep_state(out, dict(state, max_seq_length={"mrpc": 128}), True, inputs("mrpc"))
  assert "task/mrpc/train.tsv" in json.loads(open(os.path.join(out, "sweep.json")).read())[
      "inputs"]
  train = glue / "SST-2" / "train.tsv"
  train.write_text(train.read_text() + "one more\t1\n")
  with pytest.raises(common.UsageError) as e:
    sweep.check_sweep_state(out, state, False, inputs("sst-2"))
  assert str(e.value).startswith(
      "--output_dir=%s holds a run of other settings or input files: --glue_dir file %s: other "
      "contents" % (out, train))
  # Other weights under the same checkpoint prefix (a new .index).
  sweep.check_sweep_state(out, state, False, inputs("mrpc"))
  (tmp_path / "ckpt.index").write_text("other index")
  with pytest.raises(common.UsageError, match="--init_checkpoint checkpoint .*ckpt: other "
                     r"weights \(its .index differs\)"):
    sweep.check_sweep_state(out, state, False, inputs("mrpc"))


@pytest.mark.slow
def test_a_rerun_after_an_edit_in_place_is_refused(tmp_path, vocab_file):
  """The sweep command end to end (fake runs): the first sweep records the data, the rerun
  after train.tsv was edited in place stops before any run."""
  state = tmp_path / "state"
  state.mkdir()
  fake = tmp_path / "fake_python"
  fake.write_text("#!%s\n%s" % (sys.executable, FAKE_PYTHON))
  fake.chmod(0o755)
  glue = tmp_path / "glue"
  shutil.copytree(GLUE_FIXTURES, str(glue))
  _tiny_checkpoint(str(tmp_path / "ckpt"))
  (tmp_path / "bert_config.json").write_text("{}")
  out = tmp_path / "sweep"
  args = ["--tasks=sst-2", "--glue_dir=%s" % glue, "--init_checkpoint=%s" % (tmp_path / "ckpt"),
          "--bert_config_file=%s" % (tmp_path / "bert_config.json"),
          "--vocab_file=%s" % vocab_file, "--output_dir=%s" % out, "--learning_rates=1e-5",
          "--epochs=1", "--batch_sizes=4", "--seeds=1", "--python=%s" % fake]
  env = {"FAKE_STATE_DIR": str(state)}
  try:
    run_tool("paper/sweep.py", args, env=env, timeout=120)
    train = glue / "SST-2" / "train.tsv"
    train.write_text(train.read_text().replace("\t1\n", "\t0\n", 1))
    (out / "sst-2" / "bs4_lr1e-5_ep1" / "seed1" / "eval_results.json").unlink()
    proc = run_tool("paper/sweep.py", args, env=env, expect_rc=2, timeout=120)
  finally:
    _kill_groups(state.glob("pids-*"))
  assert last_error_line(proc).startswith(
      "error: --output_dir=%s holds a run of other settings or input files: --glue_dir file %s: "
      "other contents" % (out, train)), proc.stderr[-2000:]
  assert "Plan:" not in proc.stdout and len(list(state.glob("pids-*"))) == 1


@pytest.mark.slow
def test_real_sweep_is_resumable(tmp_path, tiny_model, vocab_file):
  config_file, checkpoint = tiny_model
  out = tmp_path / "sweep"
  args = ["--tasks=sst-2", "--glue_dir=%s" % GLUE_FIXTURES, "--init_checkpoint=%s" % checkpoint,
          "--bert_config_file=%s" % config_file, "--vocab_file=%s" % vocab_file,
          "--output_dir=%s" % out, "--learning_rates=1e-3", "--epochs=1",
          "--batch_sizes=4", "--seeds=1,2", "--max_seq_length=32",
          "--extra_flags=--eval_batch_size=5 --save_checkpoints_steps=100"]
  log = run_tool("paper/sweep.py", args).output
  assert "Plan: 2 runs, 2 to run, 0 already done" in log
  assert "2/2 runs" in log and "remaining" in log
  run_dirs = sorted(str(p.parent) for p in out.glob("sst-2/bs4_lr*_ep1/seed*/eval_results.json"))
  assert [os.path.relpath(d, str(out)) for d in run_dirs] == [
      "sst-2/bs4_lr0.001_ep1/seed1", "sst-2/bs4_lr0.001_ep1/seed2"]
  logs = {}
  for d in run_dirs:
    results = json.loads(open(os.path.join(d, "eval_results.json")).read())
    assert results["global_step"] == 2  # 8 examples / batch 4 x 1 epoch
    assert not [n for n in os.listdir(d) if n.startswith("model.ckpt-") or n.endswith(
        ".tf_record")]
    logs[d] = os.path.join(d, "sweep_run.log")
  reused = [d for d in run_dirs if "Reusing cached features" in open(logs[d]).read()]
  assert reused == run_dirs[1:]  # tokenised once, by the first run
  md = (out / "results.md").read_text()
  assert "| sst-2 | Acc |" in md and "| 2 | 4/0.00" in md
  assert len(list(csv.DictReader(open(out / "results.csv")))) == 2  # 1 setting x (acc, score)

  mtimes = {d: os.stat(logs[d]).st_mtime_ns for d in run_dirs}
  log = run_tool("paper/sweep.py", args).output
  assert "Plan: 2 runs, 0 to run, 2 already done" in log
  assert {d: os.stat(logs[d]).st_mtime_ns for d in run_dirs} == mtimes

  os.remove(os.path.join(run_dirs[0], "eval_results.json"))
  log = run_tool("paper/sweep.py", args).output
  assert "Plan: 2 runs, 1 to run, 1 already done" in log
  assert "1/1 runs" in log and "sst-2/bs4_lr0.001_ep1/seed1: done" in log
  changed = [d for d in run_dirs if os.stat(logs[d]).st_mtime_ns != mtimes[d]]
  assert changed == [run_dirs[0]]
  assert os.path.exists(os.path.join(run_dirs[0], "eval_results.json"))
