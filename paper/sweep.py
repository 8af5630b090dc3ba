# coding=utf-8
r"""The paper's fine-tuning protocol: grid sweeps over GLUE / SQuAD, then best-median aggregation.

For every task, every setting (batch size, learning rate, epochs) of the grid is fine-tuned once
per seed by run_classifier.py (GLUE: --do_train --do_eval on the dev set), run_squad.py
(SQuAD: --do_train --do_predict on the dev file, scored) or run_ner.py (task "ner": named-entity
recognition on CoNLL files, --do_train --do_eval, ranked by entity F1), each run a subprocess
with its own output directory

  <output_dir>/<task>/bs<B>_lr<LR>_ep<E>/seed<S>/   (eval_results.json, sweep_run.log, ...)

Defaults are the paper's grids (RealFormer, section 4.1.2 / Table 10): GLUE batch 32, epochs
{2,3,4}, LR {6e-6, 8e-6, 1e-5, 2e-5, 3e-5, 4e-5, 5e-5}; SQuAD batch {32,48}, epochs {2,3,4},
LR {2e-5, 3e-5, 4e-5, 5e-5}; seeds 1..5; NER (not in the paper) uses the GLUE grid. A sweep is
resumable: a run whose eval_results.json exists and reached its last step is skipped; an
unfinished one resumes from its checkpoint (exactly: the result is the uninterrupted run's). On
SIGINT / SIGTERM the running child is stopped (signal forwarded to its process group) and waited
for, and the sweep exits 130 / 143. One sweep at a time per --output_dir (lock file
.lock-sweep). sweep.json records the checkpoint, config and flags every run shares, and the
contents of the input files (sha256 and size; the checkpoint's .index digest and data sizes): a
rerun after one was edited in place is refused. Then, per task and setting, the median over
seeds of every metric; the best
setting is the one with the highest median task score; results.{md,csv,json} are written.

On TensorFlow 2.15 the scripts train with the Estimator, on TF >= 2.16 with the TF2 engine
(realformer_tf.tf2_training): the same flags, eval_results.json and resume. There, with the runs
on this interpreter (no --python), --extra_flags that only the Estimator implements
(--iterations_per_loop, --distribution_strategy=multi_worker_mirrored) are refused in one line
before any run.

  python -m paper.sweep --tasks=sst-2,mrpc,squad1.1 --glue_dir=glue --squad_dir=squad \
    --init_checkpoint=bert_model.ckpt --bert_config_file=bert_config.json \
    --vocab_file=vocab.txt --output_dir=out/sweep [--residual_attention=sum] \
    [--extra_flags="--use_tpu=true --tpu_name=x"] [--dry_run] [--aggregate_only]
  python -m paper.sweep --tasks=ner --ner_dir=ner/wnut17 ...   (train / dev files as run_ner.py names
    them: train.conll, dev.conll, ...)
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import argparse
import collections
import csv
import io
import json
import os
import re
import shlex
import sys
import tempfile
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import estimator_utils
from realformer_tf import export_utils
import modeling
from realformer_tf import reproduction
from realformer_tf import subprocess_utils
from realformer_tf import tf2_training

tf1 = tf.compat.v1

FLAGS = flags.FLAGS

REPO_DIR = common.REPO_DIR

# The paper's grids (section 4.1.2): GLUE and SQuAD differ in batch sizes and learning rates.
PAPER_GRIDS = {
    "glue": {"batch_sizes": [32], "epochs": [2.0, 3.0, 4.0],
             "learning_rates": [6e-6, 8e-6, 1e-5, 2e-5, 3e-5, 4e-5, 5e-5]},
    "squad": {"batch_sizes": [32, 48], "epochs": [2.0, 3.0, 4.0],
              "learning_rates": [2e-5, 3e-5, 4e-5, 5e-5]},
}
# The paper has no NER experiment: its GLUE grid is used.
PAPER_GRIDS["ner"] = dict(PAPER_GRIDS["glue"])
PAPER_SEEDS = [1, 2, 3, 4, 5]
DEFAULT_MAX_SEQ_LENGTH = {"glue": 128, "squad": 384, "ner": 128}
SCRIPTS = {"glue": "run_classifier.py", "squad": "run_squad.py", "ner": "run_ner.py"}

RUN_LOG = "sweep_run.log"
SWEEP_STATE = "sweep.json"
LOCK_LABEL = "sweep"   # the lock file .lock-sweep in --output_dir
FEATURE_CACHE_DIR = "feature_cache"
SETTING_RE = re.compile(r"^bs(\d+)_lr([0-9.]+(?:e[+-]?\d+)?)_ep([0-9.]+)$")
SEED_RE = re.compile(r"^seed(-?\d+)$")


class TaskSpec(collections.namedtuple("TaskSpec", [
    "name", "family", "dir_name", "metrics", "score", "scale", "overall_entries", "files"])):
  """How one task is run and scored.

  name: canonical task name (output sub-directory). family: "glue", "squad" or "ner". dir_name:
  GLUE sub-directory name. metrics: list of (metric, eval_results.json key, column title). score:
  the metrics averaged into the selection score. scale: factor to the paper's percent scale.
  overall_entries: (title, metrics) entries of GLUE "Overall" (empty: not part of it). files:
  data files the run needs (a tuple: any one of these names).
  """


_ACC = ("acc", "eval_accuracy", "Acc")
_F1 = ("f1", "eval_f1", "F1")

TASKS = collections.OrderedDict((spec.name, spec) for spec in [
    TaskSpec("mnli", "glue", "MNLI",
             [("acc_m", "eval_accuracy", "Acc-m"),
              ("acc_mm", "eval_mismatched_accuracy", "Acc-mm")],
             ["acc_m"], 100.0, [("MNLI-m", ["acc_m"]), ("MNLI-mm", ["acc_mm"])],
             ["train.tsv", "dev_matched.tsv", "dev_mismatched.tsv"]),
    TaskSpec("qqp", "glue", "QQP", [_ACC, _F1], ["acc", "f1"], 100.0,
             [("QQP", ["acc", "f1"])], ["train.tsv", "dev.tsv"]),
    TaskSpec("qnli", "glue", "QNLI", [_ACC], ["acc"], 100.0, [("QNLI", ["acc"])],
             ["train.tsv", "dev.tsv"]),
    TaskSpec("sst-2", "glue", "SST-2", [_ACC], ["acc"], 100.0, [("SST-2", ["acc"])],
             ["train.tsv", "dev.tsv"]),
    TaskSpec("cola", "glue", "CoLA", [("mcc", "eval_mcc", "MCC")], ["mcc"], 100.0,
             [("CoLA", ["mcc"])], ["train.tsv", "dev.tsv"]),
    TaskSpec("sts-b", "glue", "STS-B",
             [("pearson", "eval_pearson", "Pearson"), ("spearman", "eval_spearman", "Spearman")],
             ["pearson", "spearman"], 100.0, [("STS-B", ["pearson", "spearman"])],
             ["train.tsv", "dev.tsv"]),
    TaskSpec("mrpc", "glue", "MRPC", [_ACC, _F1], ["acc", "f1"], 100.0,
             [("MRPC", ["acc", "f1"])], ["train.tsv", "dev.tsv"]),
    TaskSpec("rte", "glue", "RTE", [_ACC], ["acc"], 100.0, [("RTE", ["acc"])],
             ["train.tsv", "dev.tsv"]),
    # WNLI is swept if asked for but, as in the paper, left out of "Overall".
    TaskSpec("wnli", "glue", "WNLI", [_ACC], ["acc"], 100.0, [], ["train.tsv", "dev.tsv"]),
    # SQuAD: the best setting is chosen by F1 (the official primary metric); EM reported too.
    TaskSpec("squad1.1", "squad", None, [("em", "exact_match", "EM"), ("f1", "f1", "F1")],
             ["f1"], 1.0, [], ["train-v1.1.json", "dev-v1.1.json"]),
    TaskSpec("squad2.0", "squad", None, [("em", "exact", "EM"), ("f1", "f1", "F1")],
             ["f1"], 1.0, [], ["train-v2.0.json", "dev-v2.0.json"]),
])

# Tasks beyond the paper's. NER (run_ner.py): chosen by entity F1 (conlleval rules); precision
# and recall reported.
OTHER_TASKS = collections.OrderedDict((spec.name, spec) for spec in [
    TaskSpec("ner", "ner", None,
             [("f1", "eval_f1", "F1"), ("precision", "eval_precision", "P"),
              ("recall", "eval_recall", "R")], ["f1"], 100.0, [],
             # The names run_ner.py looks for (run_ner.DATA_FILE_NAMES).
             [("train.conll", "train.txt", "train.tsv", "train.bio", "eng.train"),
              ("dev.conll", "dev.txt", "valid.txt", "validation.txt", "dev.tsv", "dev.bio",
               "eng.testa")]),
])

# Every task paper/sweep.py runs: the paper's (TASKS), then the others.
ALL_TASKS = collections.OrderedDict(list(TASKS.items()) + list(OTHER_TASKS.items()))

GLUE_OVERALL_TASKS = [name for name, spec in TASKS.items() if spec.overall_entries]


def define_flags():
  """Defines the command-line flags; call once."""
  flags.DEFINE_string(
      "tasks", None,
      "Comma-separated tasks: GLUE (cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli) and/or "
      "squad1.1, squad2.0 and/or ner (run_ner.py). With --aggregate_only: default all task "
      "directories found.")
  flags.DEFINE_string("glue_dir", None,
                      "Directory with one sub-directory per GLUE task, named as GLUE distributes "
                      "them (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI).")
  flags.DEFINE_string("data_dirs", None,
                      "Per-task data directories overriding --glue_dir / --squad_dir / "
                      "--ner_dir: "
                      "\"task=dir,task=dir\".")
  flags.DEFINE_string("squad_dir", None,
                      "Directory with train-v1.1.json, dev-v1.1.json, train-v2.0.json, "
                      "dev-v2.0.json.")
  flags.DEFINE_string("ner_dir", None,
                      "Task ner: directory with the train and dev CoNLL files (train.conll, "
                      "dev.conll, or the other names run_ner.py accepts).")
  flags.DEFINE_string("init_checkpoint", None, "The pre-trained checkpoint every run starts from.")
  flags.DEFINE_string("bert_config_file", None, "bert_config.json of the checkpoint.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab of the checkpoint.")
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
  flags.DEFINE_string("output_dir", None, "Sweep directory (one sub-directory per task).")
  flags.DEFINE_string("learning_rates", None,
                      "Comma-separated learning rates for every task (default: the paper's grid "
                      "of each task: GLUE 6e-6..5e-5, SQuAD 2e-5..5e-5).")
  flags.DEFINE_string("epochs", None,
                      "Comma-separated numbers of epochs (default: the paper's 2,3,4).")
  flags.DEFINE_string("batch_sizes", None,
                      "Comma-separated batch sizes (default: the paper's: GLUE 32, SQuAD 32,48).")
  flags.DEFINE_string("seeds", ",".join(str(s) for s in PAPER_SEEDS),
                      "Comma-separated seeds: each setting is run once per seed (paper: 5 runs).")
  flags.DEFINE_integer("max_seq_length", None,
                       "Sequence length for every task (default: GLUE 128, SQuAD 384, NER "
                       "128).")
  flags.DEFINE_enum("residual_attention", None, list(modeling.RESIDUAL_ATTENTION_TYPES),
                    "Passed to the run scripts: overrides residual_attention of the config.")
  flags.DEFINE_string("extra_flags", "",
                      "Flags appended verbatim to every run's command line (shell quoting), "
                      "e.g. \"--use_tpu=true --tpu_name=x\".")
  flags.DEFINE_enum("score_checkpoint", "last", ["last", "best"],
                    "GLUE tasks: score each run's last checkpoint (the paper's protocol) or its "
                    "best one on dev (run_classifier.py --eval_every_steps --keep_best).")
  flags.DEFINE_integer("eval_every_steps", 0,
                       "With --score_checkpoint=best: evaluate every this many steps.")
  flags.DEFINE_bool("keep_checkpoints", False,
                    "Keep each run's model.ckpt-* files (default: deleted once the run has "
                    "written eval_results.json).")
  flags.DEFINE_string("python", None,
                      "Program that runs run_classifier.py / run_squad.py / run_ner.py (given "
                      "the script and "
                      "its flags), e.g. another environment's python (default: this python).")
  flags.DEFINE_bool("dry_run", False, "Print the plan and the number of runs; run nothing.")
  flags.DEFINE_bool("aggregate_only", False,
                    "Run nothing; aggregate the eval_results.json files in --output_dir.")


# ----------------------------------------------------------------------------------------------
# Flags, grids and the plan.


def canonical_task(name, flag_name="tasks"):
  """Canonical task name ("SST2", "SST-2", "sst_2" -> "sst-2"; "squad1.1", "SQuAD-v2.0").

  Args:
    name: a task name as the user wrote it.
    flag_name: the flag it came from, for the error message.

  Returns:
    A key of ALL_TASKS.
  """
  key = re.sub(r"[^a-z0-9]", "", name.lower())
  key = re.sub(r"^squadv", "squad", key)
  aliases = {re.sub(r"[^a-z0-9]", "", t): t for t in ALL_TASKS}
  aliases.update({"squad1": "squad1.1", "squad2": "squad2.0"})
  if key not in aliases:
    common.fail("--%s: unknown task %r (known: %s)" % (flag_name, name, ", ".join(ALL_TASKS)))
  return aliases[key]


def parse_list(value, flag_name, convert, positive=True):
  """Parses a comma-separated flag value into a list without duplicates, in order.

  Args:
    value: the flag's string.
    flag_name: for error messages.
    convert: int or float.
    positive: values must be > 0.

  Returns:
    List of converted values.
  """
  values = []
  for item in value.split(","):
    item = item.strip()
    if not item:
      continue
    try:
      number = convert(item)
    except ValueError:
      common.fail("--%s=%s: %r is not %s" % (flag_name, value, item,
                                            "an integer" if convert is int else "a number"))
    if positive and not number > 0:
      common.fail("--%s=%s: %r must be > 0" % (flag_name, value, item))
    if number not in values:
      values.append(number)
  if not values:
    common.fail("--%s is empty" % flag_name)
  return values


def format_number(x):
  """Short, exact text of a learning rate or epoch count: 2e-05 -> "2e-5", 3.0 -> "3".

  Args:
    x: a float.

  Returns:
    A string that float() parses back to x.
  """
  text = "%.10g" % x
  return re.sub(r"e([+-])0*(\d)", lambda m: "e%s%s" % ("" if m.group(1) == "+" else "-",
                                                        m.group(2)), text)


def setting_name(batch_size, learning_rate, epochs):
  """Directory name of a setting.

  Args:
    batch_size: int.
    learning_rate: float.
    epochs: float.

  Returns:
    "bs<B>_lr<LR>_ep<E>", e.g. "bs32_lr1e-5_ep4".
  """
  return "bs%d_lr%s_ep%s" % (batch_size, format_number(learning_rate), format_number(epochs))


def setting_label(setting):
  """The paper's "batch/LR/epochs" notation (Table 10).

  Args:
    setting: (batch_size, learning_rate, epochs).

  Returns:
    e.g. "32/1e-5/4".
  """
  batch_size, learning_rate, epochs = setting
  return "%d/%s/%s" % (batch_size, format_number(learning_rate), format_number(epochs))


def parse_setting_name(name):
  """Inverse of setting_name.

  Args:
    name: a directory name.

  Returns:
    (batch_size, learning_rate, epochs), or None when `name` is not a setting directory.
  """
  match = SETTING_RE.match(name)
  if not match:
    return None
  try:
    return int(match.group(1)), float(match.group(2)), float(match.group(3))
  except ValueError:
    return None


def task_grid(spec, learning_rates=None, epochs=None, batch_sizes=None):
  """The grid of a task: the flags where given, else the paper's grid of its family.

  Returns:
    dict with "batch_sizes", "epochs", "learning_rates" lists.
  """
  grid = dict(PAPER_GRIDS[spec.family])
  for key, value in (("learning_rates", learning_rates), ("epochs", epochs),
                     ("batch_sizes", batch_sizes)):
    if value is not None:
      grid[key] = value
  return grid


Run = collections.namedtuple("Run", ["task", "setting", "seed", "run_dir", "cmd"])


def parse_data_dirs(value):
  """Parses --data_dirs.

  Args:
    value: "task=dir,task=dir" (or None).

  Returns:
    {canonical task name: dir}.
  """
  result = {}
  if not value:
    return result
  for item in value.split(","):
    if not item.strip():
      continue
    if "=" not in item:
      common.fail("--data_dirs=%s: %r is not task=dir" % (value, item))
    task, path = item.split("=", 1)
    result[canonical_task(task.strip(), "data_dirs")] = path.strip()
  return result


def task_data_dir(spec, glue_dir, squad_dir, data_dirs, ner_dir=None):
  """The data directory of a task, checked to hold the files the runs need.

  Args:
    spec: TaskSpec.
    glue_dir: --glue_dir (GLUE task directories named as distributed) or None.
    squad_dir: --squad_dir or None.
    data_dirs: parse_data_dirs result (overrides).
    ner_dir: --ner_dir or None.

  Returns:
    The directory path.
  """
  family_dirs = {"glue": glue_dir, "squad": squad_dir, "ner": ner_dir}
  if spec.name in data_dirs:
    path, source = data_dirs[spec.name], "--data_dirs=%s=%s" % (spec.name, data_dirs[spec.name])
  elif family_dirs.get(spec.family):
    base = family_dirs[spec.family]
    path = os.path.join(base, spec.dir_name) if spec.dir_name else base
    source = "--%s_dir=%s" % (spec.family, base)
  else:
    common.fail("task %s needs --%s_dir (or --data_dirs=%s=DIR)" %
                (spec.name, spec.family, spec.name))
  for names in spec.files:
    names = (names,) if isinstance(names, str) else tuple(names)
    if not any(tf.io.gfile.exists(os.path.join(path, name)) for name in names):
      common.fail("%s: %s has no %s (needed by task %s)" % (source, path, " or ".join(names),
                                                             spec.name))
  return path


def build_command(spec, data_dir, setting, seed, run_dir, opts):
  """The run_classifier.py / run_squad.py / run_ner.py command line of one run.

  Args:
    spec: TaskSpec.
    data_dir: the task's data directory.
    setting: (batch_size, learning_rate, epochs).
    seed: int.
    run_dir: the run's --output_dir.
    opts: dict with init_checkpoint, bert_config_file, vocab_file, do_lower_case,
      max_seq_length, residual_attention, extra_flags (list), python.

  Returns:
    List of arguments.
  """
  batch_size, learning_rate, epochs = setting
  args = ["--vocab_file=%s" % opts["vocab_file"],
          "--bert_config_file=%s" % opts["bert_config_file"],
          "--init_checkpoint=%s" % opts["init_checkpoint"],
          "--do_lower_case=%s" % ("true" if opts["do_lower_case"] else "false"),
          "--max_seq_length=%d" % opts["max_seq_length"],
          "--train_batch_size=%d" % batch_size,
          "--learning_rate=%s" % format_number(learning_rate),
          "--num_train_epochs=%s" % format_number(epochs),
          "--seed=%d" % seed,
          "--output_dir=%s" % run_dir]
  script = SCRIPTS[spec.family]
  if spec.family == "glue":
    args = ["--task_name=%s" % spec.name, "--data_dir=%s" % data_dir] + args + [
        "--do_train=true", "--do_eval=true"]
    if opts.get("score_checkpoint") == "best":
      # eval_results.json then holds the best checkpoint's metrics (scored_checkpoint "best").
      args += ["--eval_every_steps=%d" % opts["eval_every_steps"], "--keep_best=true"]
  elif spec.family == "ner":
    args = ["--data_dir=%s" % data_dir] + args + ["--do_train=true", "--do_eval=true"]
  else:
    args = ["--train_file=%s" % os.path.join(data_dir, spec.files[0]),
            "--predict_file=%s" % os.path.join(data_dir, spec.files[1]),
            "--version_2_with_negative=%s" % ("true" if spec.name == "squad2.0" else "false")
            ] + args + ["--do_train=true", "--do_predict=true"]
  if opts.get("residual_attention"):
    args.append("--residual_attention=%s" % opts["residual_attention"])
  return [opts.get("python") or sys.executable, os.path.join(REPO_DIR, script)] + args + list(
      opts.get("extra_flags") or [])


def build_plan(task_specs, grids, seeds, output_dir, data_dirs, opts):
  """Every run of the sweep, in order: task, batch size, epochs, learning rate, seed.

  Args:
    task_specs: list of TaskSpec.
    grids: {task: grid dict of task_grid}.
    seeds: list of int.
    output_dir: sweep directory.
    data_dirs: {task: data dir}.
    opts: see build_command; max_seq_length is taken per family from opts["max_seq_length"]
      (a dict family -> length; DEFAULT_MAX_SEQ_LENGTH for a family it lacks).

  Returns:
    List of Run.
  """
  runs = []
  for spec in task_specs:
    grid = grids[spec.name]
    task_opts = dict(opts, max_seq_length=opts["max_seq_length"].get(
        spec.family, DEFAULT_MAX_SEQ_LENGTH[spec.family]))
    for batch_size in grid["batch_sizes"]:
      for epochs in grid["epochs"]:
        for learning_rate in grid["learning_rates"]:
          setting = (batch_size, learning_rate, epochs)
          for seed in seeds:
            run_dir = os.path.join(output_dir, spec.name, setting_name(*setting),
                                   "seed%d" % seed)
            runs.append(Run(spec.name, setting, seed, run_dir,
                            build_command(spec, data_dirs.get(spec.name), setting, seed,
                                          run_dir, task_opts)))
  return runs


def results_complete(results):
  """Whether eval_results.json contents come from a run that trained to its last step.

  Args:
    results: the dict of a run's eval_results.json.

  Returns:
    bool: False when it records "num_train_steps" (the target) and "global_step" is below it
    (a run stopped early); True otherwise (older files without the target count as finished).
  """
  target = results.get("num_train_steps")
  if target is None:
    return True
  step = results.get("global_step")
  return isinstance(step, (int, float)) and step >= target


def read_results(run_dir):
  """A run's eval_results.json, or None when it is missing or not a JSON object.

  Args:
    run_dir: the run's output directory.

  Returns:
    dict or None.
  """
  path = os.path.join(run_dir, "eval_results.json")
  try:
    with tf.io.gfile.GFile(path) as f:
      results = json.load(f)
  except (tf.errors.OpError, ValueError):
    return None
  return results if isinstance(results, dict) else None


def is_done(run_dir):
  """Whether a run is finished: its eval_results.json exists and reached its last step.

  The file is written last (atomically), and a stopped run writes none; "num_train_steps" in it
  (the target) is compared with "global_step" so a run that stopped early is never final.

  Args:
    run_dir: the run's output directory.

  Returns:
    bool.
  """
  results = read_results(run_dir)
  return results is not None and results_complete(results)


# ----------------------------------------------------------------------------------------------
# Running.


def _is_local(path):
  return "://" not in path


def _remove_matching(run_dir, patterns):
  """Removes the files of run_dir matching any glob pattern; returns how many."""
  count = 0
  for pattern in patterns:
    for path in tf.io.gfile.glob(os.path.join(run_dir, pattern)):
      tf.io.gfile.remove(path)
      count += 1
  return count


# An unfinished run resumes from its last checkpoint: the training scripts resume exactly on
# either engine (same batches and dropout masks from the saved step on: the Estimator's
# estimator_utils.resume_skip_batches, the TF2 engine's tf2_training.Engine.train), so the
# result is the one an uninterrupted run of its seed gives and no finished training is lost.
# Under a distribution strategy or on TPU the Estimator's data order would restart, so such runs
# start again from scratch. An eval_results.json of a run that stopped early goes in every case, so
# only the new attempt can make the run count as done.
STALE_PATTERNS = ["eval_results.txt", "eval_results.json"]
RESTART_PATTERNS = ["model.ckpt-*", "checkpoint", "events.out.tfevents.*", "graph.pbtxt"]
CHECKPOINT_PATTERNS = ["model.ckpt-*", "checkpoint", "graph.pbtxt"]


def _feature_files(run_dir):
  """GLUE feature caches of a run (TFRecord + .json sidecar, see run_classifier)."""
  names = []
  for path in tf.io.gfile.glob(os.path.join(run_dir, "*.tf_record")):
    if tf.io.gfile.exists(path + ".json"):
      names += [os.path.basename(path), os.path.basename(path) + ".json"]
  return names


def seed_feature_cache(cache_dir, run_dir):
  """Hard-links the task's cached features into a new run directory (local disks only).

  run_classifier reuses them when their key (data file, vocab, length, ...) matches and rewrites
  them otherwise (write to a temporary name, then rename: the shared copy is never modified), so
  the tokenisation is done once per task instead of once per run.

  Args:
    cache_dir: <output_dir>/<task>/feature_cache.
    run_dir: the new run's directory.

  Returns:
    Number of files linked.
  """
  if not (_is_local(cache_dir) and os.path.isdir(cache_dir)):
    return 0
  count = 0
  for name in os.listdir(cache_dir):
    target = os.path.join(run_dir, name)
    if not os.path.exists(target):
      try:
        os.link(os.path.join(cache_dir, name), target)
        count += 1
      except OSError:
        pass  # e.g. another file system: run_classifier tokenises again.
  return count


def store_feature_cache(run_dir, cache_dir):
  """Moves a finished run's feature files into the task's cache (replacing older ones).

  Args:
    run_dir: the finished run's directory.
    cache_dir: <output_dir>/<task>/feature_cache (local disks; elsewhere the files are deleted).
  """
  names = _feature_files(run_dir)
  if not names:
    return
  if not _is_local(run_dir):
    _remove_matching(run_dir, names)
    return
  os.makedirs(cache_dir, exist_ok=True)
  # Sidecars last, so a sidecar in the cache never describes an older TFRecord.
  for name in sorted(names, key=lambda n: n.endswith(".json")):
    source, target = os.path.join(run_dir, name), os.path.join(cache_dir, name)
    if os.path.exists(target) and os.path.samefile(source, target):
      os.remove(source)  # still the shared copy
    else:
      os.replace(source, target)


def resumes_exactly(cmd):
  """Whether a run's command resumes a stopped training exactly (no strategy, no TPU).

  Args:
    cmd: the run's command line (list of arguments).

  Returns:
    bool.
  """
  for arg in cmd:
    if arg in ("--use_tpu", "--use_tpu=true", "--use_tpu=True"):
      return False
    if arg.startswith("--distribution_strategy=") and arg.split("=", 1)[1] != "none":
      return False
  return True


# How absl reads a boolean flag's value (--use_tpu=true, --use_tpu=1, ...).
BOOL_VALUES = {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}


def estimator_only_extra_flags(extra_flags):
  """The values --extra_flags gives the flags only the Estimator implements (and the strategy).

  Args:
    extra_flags: the --extra_flags arguments (shlex-split).

  Returns:
    argparse.Namespace {flag name: value} of the names in tf2_training.ESTIMATOR_ONLY_FLAGS and
    distribution_strategy that extra_flags sets, each of its "off" value's type (a value that
    does not parse is left to the run script's own error).
  """
  values = {}
  known = dict(tf2_training.ESTIMATOR_ONLY_FLAGS, distribution_strategy="none")
  for arg in extra_flags:
    match = re.match(r"^--(\w+?)(?:=(.*))?$", arg)
    if not match:
      continue
    name, value = match.groups()
    if value is None and name not in known and name.startswith("no") and isinstance(
        known.get(name[2:]), bool):
      name, value = name[2:], "false"   # --nouse_tpu
    if name not in known:
      continue
    off = known[name]
    if isinstance(off, bool):
      value = BOOL_VALUES.get("true" if value is None else value.lower())
    elif isinstance(off, int):
      value = int(value) if value is not None and re.match(r"^-?\d+$", value) else None
    if value is not None:
      values[name] = value
  return argparse.Namespace(**values)


def check_extra_flags_on_engine(extra_flags_text, extra_flags):
  """One line for --extra_flags that every run would refuse on the TF2 engine (TF >= 2.16).

  run_classifier.py, run_squad.py and run_ner.py train on tf2_training.Engine there and refuse
  the flags only the Estimator implements (tf2_training.check_flags: --iterations_per_loop);
  --use_xla, --precision=bf16 / fp16 and the TPU flags (TPUStrategy) they run. A sweep's runs are
  single processes: --distribution_strategy=multi_worker_mirrored is refused too. Call it only
  when the runs use this TensorFlow.

  Args:
    extra_flags_text: --extra_flags as given (named in the error).
    extra_flags: its arguments.
  """
  try:
    tf2_training.check_flags(estimator_only_extra_flags(extra_flags), "-m paper.sweep",
                             xla=True, precisions=tf2_training.ENGINE_PRECISIONS, tpu=True)
  except common.UsageError as e:
    common.fail("--extra_flags=%s: %s" % (extra_flags_text, e))


def run_one(run, keep_checkpoints=False, cache_dir=None):
  """Runs one fine-tuning subprocess, logging to <run_dir>/sweep_run.log.

  The child runs in its own process group (subprocess_utils.run_child): a SIGINT / SIGTERM of
  the sweep is forwarded to it, and it is waited for, so no run outlives the sweep.

  Args:
    run: Run.
    keep_checkpoints: keep model.ckpt-* after success.
    cache_dir: the task's feature cache directory (None: no sharing).

  Returns:
    (ok, seconds, message): message is the failure reason ("" on success).
  """
  tf.io.gfile.makedirs(run.run_dir)
  _remove_matching(run.run_dir, STALE_PATTERNS)
  if not resumes_exactly(run.cmd):
    _remove_matching(run.run_dir, RESTART_PATTERNS)
  if cache_dir:
    seed_feature_cache(cache_dir, run.run_dir)
  log_path = os.path.join(run.run_dir, RUN_LOG)
  local_log = log_path
  if not _is_local(log_path):
    handle, local_log = tempfile.mkstemp(suffix="-" + RUN_LOG)
    os.close(handle)
  result = subprocess_utils.run_child(
      run.cmd, local_log, header="# %s" % " ".join(shlex.quote(a) for a in run.cmd))
  seconds = result.seconds
  if local_log != log_path:
    tf.io.gfile.copy(local_log, log_path, overwrite=True)
    os.remove(local_log)
  if result.stopped and not (result.ok and is_done(run.run_dir)):
    return False, seconds, "interrupted (signal %d, %s)" % (result.signum, result.describe())
  if not result.ok:
    return False, seconds, result.describe()
  if not is_done(run.run_dir):
    results = read_results(run.run_dir)
    if results is None:
      return False, seconds, "exit status 0 but no eval_results.json"
    return False, seconds, "exit status 0 but eval_results.json has global_step %s of %s" % (
        results.get("global_step"), results.get("num_train_steps"))
  if cache_dir:
    store_feature_cache(run.run_dir, cache_dir)
  # SQuAD's train/eval TFRecords are rewritten by every run: not worth keeping.
  _remove_matching(run.run_dir, ["*.tf_record"])
  if not keep_checkpoints:
    _remove_matching(run.run_dir, CHECKPOINT_PATTERNS)
  return True, seconds, ""


def _last_lines(path, count=3):
  """The last non-empty lines of a log (for the failure summary)."""
  try:
    with tf.io.gfile.GFile(path) as f:
      lines = [l.rstrip() for l in f.read().splitlines() if l.strip()]
  except tf.errors.OpError:
    return []
  return lines[-count:]


def execute(runs, keep_checkpoints=False, log_fn=print):
  """Runs the runs in order (skipping finished ones), with progress; never stops on a failure.

  A SIGINT / SIGTERM (common.STOP_SIGNALS, see subprocess_utils.install_signal_forwarding)
  stops the running child and the loop: the interrupted run is neither done nor a failure, and
  the caller exits 130 / 143.

  Args:
    runs: list of Run.
    keep_checkpoints: see run_one.
    log_fn: where progress lines go.

  Returns:
    List of (Run, message, log path) of the failed runs.
  """
  todo = [run for run in runs if not is_done(run.run_dir)]
  meter = common.ProgressMeter(len(todo), unit="runs", min_interval_s=0.0, log_fn=log_fn)
  if todo:
    meter.update(0, force=True)
  failures = []
  durations = []
  for i, run in enumerate(todo):
    if common.STOP_SIGNALS.stopped:
      break
    cache_dir = None
    if ALL_TASKS[run.task].family == "glue":
      cache_dir = os.path.join(os.path.dirname(os.path.dirname(run.run_dir)), FEATURE_CACHE_DIR)
    ok, seconds, message = run_one(run, keep_checkpoints, cache_dir)
    name = os.path.join(run.task, setting_name(*run.setting), "seed%d" % run.seed)
    log_path = os.path.join(run.run_dir, RUN_LOG)
    if not ok and common.STOP_SIGNALS.stopped:
      log_fn("%s: %s; not recorded, it starts again when the sweep is rerun (log %s)" % (
          name, message, log_path))
      break
    durations.append(seconds)
    if ok:
      status = "done"
    else:
      status = "FAILED (%s, log %s)" % (message, log_path)
      failures.append((run, message, log_path))
    meter.update(i + 1, extra="| %s: %s in %s (mean %s per run)" % (
        name, status, common.format_duration(seconds),
        common.format_duration(sum(durations) / len(durations))), force=True)
  return failures


def describe_plan(task_specs, grids, seeds, runs, log_fn=print, list_runs=False):
  """Logs, per task, the grid and the number of runs (total, to run, done).

  Returns:
    (total, to_run).
  """
  todo_dirs = set(run.run_dir for run in runs if not is_done(run.run_dir))
  for spec in task_specs:
    grid = grids[spec.name]
    task_runs = [run for run in runs if run.task == spec.name]
    task_todo = sum(1 for run in task_runs if run.run_dir in todo_dirs)
    log_fn("%s: %d batch size(s) {%s} x %d epoch count(s) {%s} x %d learning rate(s) {%s} x "
           "%d seed(s) = %d runs (%d to run, %d done)" % (
               spec.name, len(grid["batch_sizes"]),
               ", ".join(str(b) for b in grid["batch_sizes"]), len(grid["epochs"]),
               ", ".join(format_number(e) for e in grid["epochs"]),
               len(grid["learning_rates"]),
               ", ".join(format_number(lr) for lr in grid["learning_rates"]), len(seeds),
               len(task_runs), task_todo, len(task_runs) - task_todo))
  log_fn("Plan: %d runs, %d to run, %d already done" % (len(runs), len(todo_dirs),
                                                        len(runs) - len(todo_dirs)))
  if list_runs:
    for run in runs:
      if run.run_dir in todo_dirs:
        log_fn("  to run: %s" % run.run_dir)
    first = [run for run in runs if run.run_dir in todo_dirs][:1]
    for run in first:
      log_fn("First command: %s" % " ".join(shlex.quote(a) for a in run.cmd))
  return len(runs), len(todo_dirs)


def task_input_files(spec, data_dir, flag):
  """The data files of a task the runs read, as the sweep's record names them.

  Args:
    spec: TaskSpec.
    data_dir: the task's data directory.
    flag: the flag that gave it (glue_dir, squad_dir, ner_dir or data_dirs).

  Returns:
    list of reproduction.InputFile labelled "task/<task>/<file name>" (of several accepted
    names, the first that exists).
  """
  inputs = []
  for names in spec.files:
    names = (names,) if isinstance(names, str) else tuple(names)
    found = [n for n in names if tf.io.gfile.exists(os.path.join(data_dir, n))][:1]
    for name in found:
      inputs.append(reproduction.InputFile("task/%s/%s" % (spec.name, name),
                                           os.path.join(data_dir, name), flag, "file"))
  return inputs


def sweep_input_files(init_checkpoint, bert_config_file, vocab_file, task_specs, data_dirs,
                      data_dir_flags):
  """Every input file of a sweep: the checkpoint, its config and vocab, the tasks' data.

  Args:
    init_checkpoint: the resolved checkpoint prefix (a cheap identity: its .index digest and
      data file sizes, see reproduction.checkpoint_identity).
    bert_config_file: --bert_config_file.
    vocab_file: --vocab_file.
    task_specs: the TaskSpecs swept.
    data_dirs: {task: data directory}.
    data_dir_flags: parse_data_dirs(--data_dirs) (which flag gave a task's directory).

  Returns:
    list of reproduction.InputFile.
  """
  inputs = [reproduction.input_file("init_checkpoint", init_checkpoint, kind="checkpoint"),
            reproduction.input_file("bert_config_file", bert_config_file),
            reproduction.input_file("vocab_file", vocab_file)]
  for spec in task_specs:
    flag = "data_dirs" if spec.name in data_dir_flags else "%s_dir" % spec.family
    inputs += task_input_files(spec, data_dirs[spec.name], flag)
  return inputs


def check_sweep_state(output_dir, state, write, inputs=()):
  """Refuses to mix runs of another checkpoint / config / data in one output_dir (sweep.json).

  Args:
    output_dir: sweep directory.
    state: dict of what identifies the sweep (init_checkpoint, bert_config_file, ...,
      "max_seq_length": {task: length}).
    write: record the (merged) state.
    inputs: sweep_input_files(...): their contents are recorded; a file edited in place since
      the runs were made (the checkpoint's weights, a task's train.tsv, ...) is refused. Tasks
      may be added to a sweep: only files both invocations read are compared.
  """
  path = os.path.join(output_dir, SWEEP_STATE)
  old = {}
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      old = json.load(f)
  current = reproduction.input_identities(inputs)
  reproduction.refuse_changes(output_dir, reproduction.input_changes(
      old.get("inputs", {}), current, inputs, partial=True))
  if old and "inputs" not in old and inputs:
    print("warning: %s records no input file contents (an earlier version): the input files as "
          "they are now are taken as the sweep's" % path)
  for key in ("init_checkpoint", "bert_config_file", "residual_attention", "do_lower_case"):
    if key in old and old[key] != state[key]:
      common.fail("--%s=%s: --output_dir=%s holds runs made with %s=%s (%s); use another "
                  "--output_dir" % (key, state[key], output_dir, key, old[key], path))
  lengths = dict(old.get("max_seq_length", {}))
  for task, length in state["max_seq_length"].items():
    if task in lengths and lengths[task] != length:
      common.fail("--max_seq_length=%d: --output_dir=%s holds %s runs with max_seq_length=%d "
                  "(%s); use another --output_dir" % (length, output_dir, task, lengths[task],
                                                      path))
    lengths[task] = length
  if old.get("extra_flags", state["extra_flags"]) != state["extra_flags"]:
    print("warning: --extra_flags changed from %r (%s) to %r" % (old["extra_flags"], path,
                                                                 state["extra_flags"]))
  if write:
    tf.io.gfile.makedirs(output_dir)
    common.write_json_atomic(path, dict(state, max_seq_length=lengths,
                                        inputs=dict(old.get("inputs", {}), **current)))


# ----------------------------------------------------------------------------------------------
# Aggregation.


def collect_results(task_dir):
  """Reads every <setting>/<seed>/eval_results.json under a task directory.

  Args:
    task_dir: <output_dir>/<task>.

  Returns:
    {(batch_size, learning_rate, epochs): {seed: results dict}}.
  """
  found = collections.defaultdict(dict)
  for path in sorted(tf.io.gfile.glob(os.path.join(task_dir, "bs*_lr*_ep*", "seed*",
                                                   "eval_results.json"))):
    seed_dir = os.path.dirname(path)
    setting = parse_setting_name(os.path.basename(os.path.dirname(seed_dir)))
    seed_match = SEED_RE.match(os.path.basename(seed_dir))
    if setting is None or not seed_match:
      continue
    try:
      with tf.io.gfile.GFile(path) as f:
        results = json.load(f)
    except ValueError as e:
      print("warning: %s: not JSON (%s); skipped" % (path, e))
      continue
    if not isinstance(results, dict) or not results_complete(results):
      print("warning: %s: global_step %s of %s, the run stopped early; skipped" % (
          path, results.get("global_step") if isinstance(results, dict) else None,
          results.get("num_train_steps") if isinstance(results, dict) else None))
      continue
    found[setting][int(seed_match.group(1))] = results
  return dict(found)


def _stats(values):
  """Median and sample standard deviation (ddof=1; None for one value) of a list."""
  values = np.asarray(values, dtype=np.float64)
  median = float(np.median(values))
  std = float(np.std(values, ddof=1)) if values.size > 1 else None
  return median, std


def summarize_task(spec, results_by_setting, log_fn=print):
  """Per-setting medians and standard deviations, and the best setting of one task.

  Metrics are put on the paper's percent scale. Each seed's task score is the mean of its
  spec.score metrics; the best setting is the one with the highest median score among the
  settings with the most seeds (so a half-finished setting cannot win on fewer runs); ties go to
  the first setting in (batch size, learning rate, epochs) order.

  Args:
    spec: TaskSpec.
    results_by_setting: output of collect_results.
    log_fn: warnings.

  Returns:
    dict: task, metrics (names), titles, score_metrics, settings (list of dicts: setting,
    label, batch_size, learning_rate, epochs, n, seeds, metrics {name: {median, std, values}},
    score {median, std, values}), best (label of the best setting, or None).
  """
  settings = []
  for setting in sorted(results_by_setting):
    by_seed = results_by_setting[setting]
    seeds, values = [], {name: [] for name, _, _ in spec.metrics}
    for seed in sorted(by_seed):
      results = by_seed[seed]
      missing = [key for _, key, _ in spec.metrics if not isinstance(results.get(key),
                                                                    (int, float))]
      if missing:
        log_fn("warning: %s/%s/seed%d: eval_results.json has no %s; skipped" % (
            spec.name, setting_name(*setting), seed, ", ".join(missing)))
        continue
      seeds.append(seed)
      for name, key, _ in spec.metrics:
        values[name].append(float(results[key]) * spec.scale)
    if not seeds:
      continue
    scores = [float(np.mean([values[m][i] for m in spec.score])) for i in range(len(seeds))]
    entry = {"setting": setting_name(*setting), "label": setting_label(setting),
             "batch_size": setting[0], "learning_rate": setting[1], "epochs": setting[2],
             "n": len(seeds), "seeds": seeds, "metrics": {}}
    for name, _, _ in spec.metrics:
      median, std = _stats(values[name])
      entry["metrics"][name] = {"median": median, "std": std, "values": values[name]}
    median, std = _stats(scores)
    entry["score"] = {"median": median, "std": std, "values": scores}
    settings.append(entry)
  best = None
  if settings:
    full_n = max(s["n"] for s in settings)
    partial = [s["label"] for s in settings if s["n"] < full_n]
    if partial:
      log_fn("warning: %s: %d setting(s) have fewer than %d seeds and cannot be best: %s" % (
          spec.name, len(partial), full_n, ", ".join(partial)))
    candidates = [s for s in settings if s["n"] == full_n]
    best_entry = max(candidates, key=lambda s: s["score"]["median"])  # first of ties
    best = best_entry["label"]
    for s in settings:
      s["best"] = s is best_entry
  return {"task": spec.name, "metrics": [name for name, _, _ in spec.metrics],
          "titles": {name: title for name, _, title in spec.metrics},
          "score_metrics": list(spec.score), "settings": settings, "best": best}


def best_setting(summary):
  """The best setting's entry of a summarize_task result, or None."""
  for s in summary["settings"]:
    if s.get("best"):
      return s
  return None


def glue_overall(summaries):
  """GLUE "Overall" (paper Table 3): the metrics averaged within each entry, then across entries.

  The entries are the columns of the paper's table: MNLI-m, MNLI-mm, QQP, QNLI, SST-2, CoLA,
  STS-B, MRPC, RTE (WNLI excluded). MNLI-m and MNLI-mm count as two entries: with the paper's
  RealFormer numbers this gives its 84.53 (averaging them into one MNLI entry would give 84.31).
  Values are the medians at each task's best setting.

  Args:
    summaries: {task: summarize_task result}.

  Returns:
    dict: overall (None without any entry), entries [{entry, task, value}], missing (GLUE tasks
    without results), complete, overall_mnli_as_one_task (MNLI-m/mm averaged first).
  """
  entries, missing = [], []
  one_task = []
  for task in GLUE_OVERALL_TASKS:
    best = best_setting(summaries[task]) if task in summaries else None
    if best is None:
      missing.append(task)
      continue
    task_values = []
    for title, metrics in TASKS[task].overall_entries:
      value = float(np.mean([best["metrics"][m]["median"] for m in metrics]))
      entries.append({"entry": title, "task": task, "value": value})
      task_values.append(value)
    one_task.append(float(np.mean(task_values)))
  return {"overall": float(np.mean([e["value"] for e in entries])) if entries else None,
          "entries": entries, "missing": missing, "complete": not missing,
          "overall_mnli_as_one_task": float(np.mean(one_task)) if one_task else None}


def aggregate(output_dir, task_names, log_fn=print):
  """Summaries of the given tasks from the runs on disk, and GLUE Overall.

  Returns:
    dict: tasks {task: summarize_task result}, glue_overall (or None without GLUE tasks).
  """
  summaries = collections.OrderedDict()
  for task in task_names:
    summaries[task] = summarize_task(ALL_TASKS[task],
                                     collect_results(os.path.join(output_dir, task)),
                                     log_fn=log_fn)
  has_glue = any(ALL_TASKS[t].overall_entries for t in task_names)
  return {"tasks": summaries, "glue_overall": glue_overall(summaries) if has_glue else None,
          "scored_checkpoints": scored_checkpoints(output_dir, task_names)}


def scored_checkpoints(output_dir, task_names):
  """How many runs scored their last and their best checkpoint (eval_results scored_checkpoint).

  Returns:
    {"last": n, "best": m}; runs written before the key existed count as "last".
  """
  counts = collections.Counter()
  for task in task_names:
    for per_seed in collect_results(os.path.join(output_dir, task)).values():
      for results in per_seed.values():
        counts[results.get("scored_checkpoint") or "last"] += 1
  return {"last": counts["last"], "best": counts["best"]}


def _fmt(value, digits=2):
  return "" if value is None else "%.*f" % (digits, value)


def _median_std(stats):
  if stats["std"] is None:
    return _fmt(stats["median"])
  return "%s ± %s" % (_fmt(stats["median"]), _fmt(stats["std"]))


NOTES = [
    "Each cell: median over seeds ± sample standard deviation (ddof=1) over seeds, at the task's "
    "best setting; GLUE and NER metrics x100. With an even number of seeds the median is the "
    "mean of the two middle values.",
    "Best setting: highest median task score among the settings with the most seeds. Task score "
    "= mean of the task's metrics per seed (MRPC, QQP: (Acc + F1) / 2; STS-B: (Pearson + "
    "Spearman) / 2); MNLI: matched accuracy; SQuAD: F1; NER: entity F1 (conlleval rules).",
    "GLUE Overall: mean over the entries MNLI-m, MNLI-mm, QQP, QNLI, SST-2, CoLA, STS-B, MRPC, "
    "RTE of the within-entry mean of the medians above (WNLI excluded); MNLI-m and MNLI-mm are "
    "two entries, which reproduces the paper's 84.53 from its Table 3 numbers.",
]


def render_markdown(aggregated):
  """results.md: a table like the paper's Table 3/4 (rows: tasks), then every setting.

  Args:
    aggregated: output of aggregate.

  Returns:
    Markdown text.
  """
  out = io.StringIO()
  out.write("# Fine-tuning sweep results\n\n")
  out.write("| Task | Metric | Median ± std | Seeds | Best setting (bs/lr/ep) |\n")
  out.write("|---|---|---|---|---|\n")
  for task, summary in aggregated["tasks"].items():
    best = best_setting(summary)
    if best is None:
      out.write("| %s | | no results | 0 | |\n" % task)
      continue
    metrics = summary["metrics"]
    out.write("| %s | %s | %s | %d | %s |\n" % (
        task, " / ".join(summary["titles"][m] for m in metrics),
        " / ".join(_median_std(best["metrics"][m]) for m in metrics), best["n"], best["label"]))
  overall = aggregated.get("glue_overall")
  if overall and overall["overall"] is not None:
    note = "" if overall["complete"] else " (partial: no %s)" % ", ".join(overall["missing"])
    out.write("| GLUE Overall%s | mean of %d entries | %s | | |\n" % (
        note, len(overall["entries"]), _fmt(overall["overall"])))
  out.write("\n")
  scored = aggregated.get("scored_checkpoints") or {}
  if scored:
    out.write("- Scores are from each run's %s.\n" % (
        "last checkpoint" if not scored.get("best") else
        "best checkpoint on dev (--score_checkpoint=best)" if not scored.get("last") else
        "best checkpoint (%d runs) or last checkpoint (%d runs): mixed" % (
            scored["best"], scored["last"])))
  for note in NOTES:
    out.write("- %s\n" % note)
  out.write("\n## All settings\n\n")
  out.write("| Task | Setting (bs/lr/ep) | Seeds | Score median ± std | Metric medians | Best |\n")
  out.write("|---|---|---|---|---|---|\n")
  for task, summary in aggregated["tasks"].items():
    for s in summary["settings"]:
      out.write("| %s | %s | %d | %s | %s | %s |\n" % (
          task, s["label"], s["n"], _median_std(s["score"]),
          ", ".join("%s %s" % (summary["titles"][m], _fmt(s["metrics"][m]["median"]))
                    for m in summary["metrics"]),
          "*" if s.get("best") else ""))
  return out.getvalue()


CSV_COLUMNS = ["task", "batch_size", "learning_rate", "epochs", "setting", "metric", "median",
               "std", "n", "seeds", "best"]


def render_csv(aggregated):
  """results.csv: one row per task x setting x metric (metric "score" = the selection score).

  Args:
    aggregated: output of aggregate.

  Returns:
    CSV text with the columns CSV_COLUMNS.
  """
  out = io.StringIO()
  writer = csv.writer(out, lineterminator="\n")
  writer.writerow(CSV_COLUMNS)
  for task, summary in aggregated["tasks"].items():
    for s in summary["settings"]:
      rows = [(m, s["metrics"][m]) for m in summary["metrics"]] + [("score", s["score"])]
      for metric, stats in rows:
        writer.writerow([task, s["batch_size"], format_number(s["learning_rate"]),
                         format_number(s["epochs"]), s["label"], metric,
                         repr(stats["median"]),
                         "" if stats["std"] is None else repr(stats["std"]), s["n"],
                         ";".join(str(seed) for seed in s["seeds"]),
                         int(bool(s.get("best")))])
  return out.getvalue()


def write_reports(output_dir, aggregated):
  """Writes results.md, results.csv and results.json into output_dir (atomically).

  Args:
    output_dir: sweep directory.
    aggregated: output of aggregate.
  """
  tf.io.gfile.makedirs(output_dir)
  with common.atomic_output(os.path.join(output_dir, "results.md")) as f:
    f.write(render_markdown(aggregated))
  with common.atomic_output(os.path.join(output_dir, "results.csv")) as f:
    f.write(render_csv(aggregated))
  common.write_json_atomic(os.path.join(output_dir, "results.json"),
                           dict(aggregated, notes=NOTES))


# ----------------------------------------------------------------------------------------------


def _abs(path):
  return os.path.abspath(path) if _is_local(path) else path


def checkpoint_exists(path):
  """Whether `path` is a checkpoint prefix (<path>.index) or a directory with a checkpoint.

  Args:
    path: --init_checkpoint.

  Returns:
    bool.
  """
  if tf.io.gfile.exists(path + ".index"):
    return True
  return tf.io.gfile.isdir(path) and tf1.train.latest_checkpoint(path) is not None


def tasks_on_disk(output_dir):
  """The tasks that have a directory in output_dir (for --aggregate_only without --tasks).

  Args:
    output_dir: sweep directory.

  Returns:
    Task names, in ALL_TASKS order.
  """
  if not tf.io.gfile.isdir(output_dir):
    common.fail("--output_dir=%s: no such directory" % output_dir)
  return [name for name in ALL_TASKS if tf.io.gfile.isdir(os.path.join(output_dir, name))]


def main(_):
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  common.check_output_dir(FLAGS.output_dir)
  if FLAGS.dry_run and FLAGS.aggregate_only:
    common.fail("--dry_run and --aggregate_only: choose one")
  task_names = []
  if FLAGS.tasks:
    for name in FLAGS.tasks.split(","):
      if name.strip() and canonical_task(name.strip()) not in task_names:
        task_names.append(canonical_task(name.strip()))
  if FLAGS.aggregate_only:
    task_names = task_names or tasks_on_disk(FLAGS.output_dir)
    if not task_names:
      common.fail("--output_dir=%s: no task directories (%s)" % (FLAGS.output_dir,
                                                                  ", ".join(ALL_TASKS)))
    # It writes results.{md,csv,json}: not while a sweep runs there.
    with common.OutputDirLock(FLAGS.output_dir, "output_dir", label=LOCK_LABEL):
      return report(FLAGS.output_dir, task_names)
  if not task_names:
    common.fail("--tasks is required")

  task_specs = [ALL_TASKS[name] for name in task_names]
  common.require_file(FLAGS.bert_config_file, "bert_config_file")
  common.require_file(FLAGS.vocab_file, "vocab_file")
  if not FLAGS.init_checkpoint:
    common.fail("--init_checkpoint is required")
  if not checkpoint_exists(FLAGS.init_checkpoint) and not tf.io.gfile.isdir(FLAGS.init_checkpoint):
    common.fail("--init_checkpoint=%s: no checkpoint there" % FLAGS.init_checkpoint)
  # Resolved once (a directory: its latest, or its one checkpoint without a state file): every
  # run starts from the same weights, whose identity the sweep records.
  init_checkpoint = export_utils.resolve_checkpoint(FLAGS.init_checkpoint, "init_checkpoint")
  data_dir_flags = parse_data_dirs(FLAGS.data_dirs)
  data_dirs = {spec.name: task_data_dir(spec, FLAGS.glue_dir, FLAGS.squad_dir, data_dir_flags,
                                       FLAGS.ner_dir)
               for spec in task_specs}
  seeds = parse_list(FLAGS.seeds, "seeds", int, positive=False)
  overrides = dict(
      learning_rates=(parse_list(FLAGS.learning_rates, "learning_rates", float)
                      if FLAGS.learning_rates is not None else None),
      epochs=parse_list(FLAGS.epochs, "epochs", float) if FLAGS.epochs is not None else None,
      batch_sizes=(parse_list(FLAGS.batch_sizes, "batch_sizes", int)
                   if FLAGS.batch_sizes is not None else None))
  grids = {spec.name: task_grid(spec, **overrides) for spec in task_specs}
  if FLAGS.max_seq_length is not None and FLAGS.max_seq_length < 8:
    common.fail("--max_seq_length=%d: too short" % FLAGS.max_seq_length)
  max_seq_length = {family: FLAGS.max_seq_length or length
                    for family, length in DEFAULT_MAX_SEQ_LENGTH.items()}
  try:
    extra_flags = shlex.split(FLAGS.extra_flags or "")
  except ValueError as e:
    common.fail("--extra_flags=%s: %s" % (FLAGS.extra_flags, e))
  if not FLAGS.python and not estimator_utils.has_estimator():
    # The runs use this TensorFlow: its TF2 engine (another --python may have the Estimator).
    check_extra_flags_on_engine(FLAGS.extra_flags, extra_flags)
  opts = dict(init_checkpoint=init_checkpoint, bert_config_file=FLAGS.bert_config_file,
              vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
              max_seq_length=max_seq_length, residual_attention=FLAGS.residual_attention,
              extra_flags=extra_flags, python=FLAGS.python,
              score_checkpoint=FLAGS.score_checkpoint, eval_every_steps=FLAGS.eval_every_steps)
  if FLAGS.score_checkpoint == "best":
    if FLAGS.eval_every_steps < 1:
      common.fail("--score_checkpoint=best needs --eval_every_steps >= 1 (how often each run "
                  "evaluates on dev)")
    other = [spec.name for spec in task_specs if spec.family != "glue"]
    if other:
      common.fail("--score_checkpoint=best: only GLUE tasks (run_classifier.py) keep a best "
                  "checkpoint; not %s" % ", ".join(other))
  runs = build_plan(task_specs, grids, seeds, FLAGS.output_dir, data_dirs, opts)
  state = {"init_checkpoint": _abs(FLAGS.init_checkpoint),
           "bert_config_file": _abs(FLAGS.bert_config_file),
           "residual_attention": FLAGS.residual_attention,
           "do_lower_case": bool(FLAGS.do_lower_case), "extra_flags": FLAGS.extra_flags or "",
           "score_checkpoint": FLAGS.score_checkpoint,
           "max_seq_length": {spec.name: max_seq_length[spec.family] for spec in task_specs}}
  inputs = sweep_input_files(init_checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file,
                             task_specs, data_dirs, data_dir_flags)
  if FLAGS.dry_run:
    check_sweep_state(FLAGS.output_dir, state, write=False, inputs=inputs)
    describe_plan(task_specs, grids, seeds, runs, list_runs=True)
    return 0
  # One sweep per directory: a second one would run the same runs into the same files. The
  # lock before anything is read or written there.
  with common.OutputDirLock(FLAGS.output_dir, "output_dir", label=LOCK_LABEL):
    check_sweep_state(FLAGS.output_dir, state, write=True, inputs=inputs)
    describe_plan(task_specs, grids, seeds, runs)
    # SIGINT / SIGTERM: the running child is stopped and waited for, nothing is recorded as
    # done, and the sweep exits 130 / 143 (a rerun resumes).
    subprocess_utils.install_signal_forwarding()
    failures = execute(runs, keep_checkpoints=FLAGS.keep_checkpoints)
    common.STOP_SIGNALS.exit_if_stopped(
        "sweep stopped; finished runs are kept, rerun the same command to resume")
    return report(FLAGS.output_dir, task_names, failures)


def report(output_dir, task_names, failures=(), log_fn=print):
  """Aggregates the runs on disk, writes results.{md,csv,json}, logs the table and the failures.

  Args:
    output_dir: sweep directory.
    task_names: tasks to aggregate.
    failures: (Run, message, log path) of the runs that failed in this invocation.
    log_fn: where the summary goes.

  Returns:
    The exit status: 1 if a run failed, else 0.
  """
  aggregated = aggregate(output_dir, task_names, log_fn=log_fn)
  write_reports(output_dir, aggregated)
  log_fn(render_markdown(aggregated).split("\n\n## All settings")[0])
  log_fn("Wrote %s (results.md, results.csv, results.json)" % output_dir)
  if not failures:
    return 0
  log_fn("%d run(s) failed (run the sweep again to retry them):" % len(failures))
  for run, message, log_path in failures:
    log_fn("  %s: %s; log %s" % (run.run_dir, message, log_path))
    for line in _last_lines(log_path):
      log_fn("    | %s" % line)
  return 1


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
