# coding=utf-8
"""Evaluation during training: the history, early stopping and the best checkpoint.

Model-agnostic (run_classifier's --eval_every_steps / --early_stopping_patience / --keep_best):
train_with_evaluation trains in chunks through a caller's function, scores each chunk's
checkpoint through another, and keeps output_dir/eval_history.jsonl (EvalHistory, one line per
evaluated step, rewritten atomically), TensorBoard scalars (output_dir/eval_history) and a copy
of the best checkpoint in output_dir/best/ (best.json: step, metric, score, metrics). A killed
job resumes with its history and best.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import importlib.util
import json
import os
import time

from absl import flags
import numpy as np
import tensorflow as tf

from realformer_tf import common

tf1 = tf.compat.v1


HISTORY_FILE = "eval_history.jsonl"
HISTORY_SUMMARY_DIR = "eval_history"
BEST_DIR = "best"


def define_flags(main_metric="the task's main metric"):
  """Defines --eval_every_steps, --early_stopping_patience and --keep_best (absl flags).

  Args:
    main_metric: how the help text names the metric early stopping and --keep_best follow.
  """
  flags.DEFINE_integer(
      "eval_every_steps", 0,
      "With --do_train: evaluate on the dev set every N steps (and at the last step), append "
      "each evaluation to output_dir/eval_history.jsonl and TensorBoard "
      "(output_dir/eval_history). 0: off.")
  flags.DEFINE_integer(
      "early_stopping_patience", 0,
      "With --eval_every_steps: stop training after this many evaluations without an "
      "improvement of %s. 0: off." % main_metric)
  flags.DEFINE_bool(
      "keep_best", False,
      "With --eval_every_steps: copy the best checkpoint (%s) to output_dir/best/ "
      "(best.json: step and score); --do_eval, --do_predict (and --export_dir, where the tool "
      "has it) then use it."
      % main_metric)


def check_flags(flag_values):
  """One-line errors (common.fail) for the flags of define_flags against --do_train.

  Args:
    flag_values: the parsed flags (eval_every_steps, early_stopping_patience, keep_best,
      do_train).
  """
  every = flag_values.eval_every_steps
  patience = flag_values.early_stopping_patience
  if every < 0:
    common.fail("--eval_every_steps=%d: must be >= 0" % every)
  if every and not flag_values.do_train:
    common.fail("--eval_every_steps=%d: evaluates during training; it needs --do_train" % every)
  if patience < 0:
    common.fail("--early_stopping_patience=%d: must be >= 0" % patience)
  if patience and not every:
    common.fail("--early_stopping_patience=%d: needs --eval_every_steps (the evaluations it "
                "counts)" % patience)
  if flag_values.keep_best and flag_values.do_train and not every:
    common.fail("--keep_best: needs --eval_every_steps with --do_train (the evaluations that "
                "pick the best checkpoint)")
BEST_FILE = "best.json"


class EvalHistory(object):
  """output_dir/eval_history.jsonl: one JSON line per evaluation during training.

  Each line: {"step", "metric" (the task's main metric), "score" (its value), "metrics" (all
  dev metrics), "best_step", "best_score", "evals_without_improvement"}. The file is rewritten
  whole and atomically on every evaluation, one line per step: a rerun after a kill keeps the
  lines of the steps its checkpoints reached and never repeats a step.
  """

  def __init__(self, output_dir, metric, max_step):
    """Loads the history of a job resumed at max_step.

    Args:
      output_dir: the job's --output_dir.
      metric: the main metric (higher is better).
      max_step: the step of the checkpoint the job resumes from (0: a new job). Lines of later
        steps belong to a model that is gone and are dropped.
    """
    self.path = os.path.join(output_dir, HISTORY_FILE)
    self.metric = metric
    by_step = {}
    dropped = 0
    if tf.io.gfile.exists(self.path):
      with tf.io.gfile.GFile(self.path) as f:
        for number, line in enumerate(f, 1):
          if not line.strip():
            continue
          try:
            entry = json.loads(line)
            step = int(entry["step"])
          except (ValueError, KeyError, TypeError):
            tf1.logging.warning("%s:%d: not a history line; dropped", self.path, number)
            dropped += 1
            continue
          if step > max_step:
            dropped += 1
            continue
          by_step[step] = entry
    self.entries = [by_step[step] for step in sorted(by_step)]
    if dropped:
      tf1.logging.warning("%s: dropped %d line(s) beyond the checkpoint of step %d", self.path,
                          dropped, max_step)
      self._write()
    elif self.entries:
      tf1.logging.info("%s: %d evaluation(s) so far, the last at step %d", self.path,
                       len(self.entries), self.entries[-1]["step"])

  def has(self, step):
    return any(entry["step"] == step for entry in self.entries)

  def _score(self, entry):
    score = entry.get("score") if entry.get("metric") == self.metric else None
    if score is None:
      score = entry.get("metrics", {}).get(self.metric)
    return float(score) if score is not None else float("-inf")

  def best(self):
    """The entry of the best score (the earliest of equal ones), or None."""
    best = None
    for entry in self.entries:
      if best is None or self._score(entry) > self._score(best):
        best = entry
    return best

  def evals_without_improvement(self):
    """Evaluations after the best one."""
    best = self.best()
    return 0 if best is None else sum(1 for e in self.entries if e["step"] > best["step"])

  def make_entry(self, step, metrics):
    """The line of an evaluation at `step` (not yet added): best and patience included."""
    entry = {"step": int(step), "metric": self.metric,
             "score": _plain(metrics.get(self.metric)),
             "metrics": {k: _plain(v) for k, v in sorted(metrics.items())}}
    previous = self.best()
    improved = previous is None or self._score(entry) > self._score(previous)
    best = entry if improved else previous
    entry["best_step"] = best["step"]
    entry["best_score"] = best["score"]
    entry["evals_without_improvement"] = 0 if improved else (
        sum(1 for e in self.entries if e["step"] > previous["step"]) + 1)
    entry["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return entry

  def add(self, entry):
    """Adds an entry (replacing one of the same step) and rewrites the file atomically."""
    self.entries = [e for e in self.entries if e["step"] != entry["step"]] + [entry]
    self.entries.sort(key=lambda e: e["step"])
    self._write()

  def _write(self):
    with common.atomic_output(self.path) as f:
      for entry in self.entries:
        f.write(json.dumps(entry, sort_keys=True) + "\n")


def _plain(value):
  """A JSON-friendly Python number (NumPy scalars converted)."""
  return value.item() if hasattr(value, "item") else value


def read_best_checkpoint(output_dir):
  """output_dir/best/best.json with "path" (the checkpoint prefix) added, or None.

  Args:
    output_dir: the job's --output_dir.

  Returns:
    dict with step, metric, score, checkpoint, metrics, path; None when there is no complete
    best checkpoint.
  """
  path = os.path.join(output_dir, BEST_DIR, BEST_FILE)
  if not tf.io.gfile.exists(path):
    return None
  try:
    with tf.io.gfile.GFile(path) as f:
      best = json.load(f)
    prefix = os.path.join(output_dir, BEST_DIR, best["checkpoint"])
  except (ValueError, KeyError, TypeError):
    return None
  if not tf.io.gfile.exists(prefix + ".index"):
    return None
  best["path"] = prefix
  return best


def remove_stale_best_temps(output_dir):
  """Removes the temporaries a killed --keep_best job left in output_dir/best/.

  save_best_checkpoint writes every file under a hidden temporary name first; a job killed
  there leaves e.g. `.best.json.tmp-PID` or `.checkpoint.tmp-PID` (of a dead PID) behind.

  Args:
    output_dir: the job's --output_dir.

  Returns:
    The list of removed paths.
  """
  best_dir = os.path.join(output_dir, BEST_DIR)
  if not tf.io.gfile.isdir(best_dir):
    return []
  finals = set()
  for name in tf.io.gfile.listdir(best_dir):
    name = name.rstrip("/")
    if common.is_temp_path(name):
      head = name.rsplit(common.TEMP_INFIX, 1)[0]
      finals.add(head[1:] if head.startswith(".") else head)
  removed = []
  for final in sorted(finals):
    removed.extend(common.remove_stale_temps(os.path.join(best_dir, final)))
  if removed:
    tf1.logging.warning("--keep_best: removed %d temporary file(s) of a killed job in %s: %s",
                        len(removed), best_dir, ", ".join(os.path.basename(p) for p in removed))
  return removed


def save_best_checkpoint(output_dir, checkpoint, step, metric, score, metrics):
  """Copies a checkpoint into output_dir/best/ and records it in best/best.json.

  The new files are copied under temporary names and renamed, then best.json (and best's
  `checkpoint` state file) are replaced atomically, then the previous best's files removed:
  a kill at any point leaves best.json naming complete files.

  Args:
    output_dir: the job's --output_dir.
    checkpoint: the checkpoint prefix (output_dir/model.ckpt-<step>).
    step: its global step.
    metric: the main metric's name.
    score: its value.
    metrics: all dev metrics of the evaluation.
  """
  best_dir = os.path.join(output_dir, BEST_DIR)
  tf.io.gfile.makedirs(best_dir)
  name = os.path.basename(checkpoint)
  sources = [p for p in tf.io.gfile.glob(checkpoint + ".*")
             if p.endswith(".index") or ".data-" in p]
  if not any(p.endswith(".index") for p in sources):
    raise RuntimeError("checkpoint %s has no .index file" % checkpoint)
  for source in sources:
    target = os.path.join(best_dir, os.path.basename(source))
    common.remove_stale_temps(target)  # a copy a killed job left
    tmp = common.temp_path(target)
    tf.io.gfile.copy(source, tmp, overwrite=True)
    tf.io.gfile.rename(tmp, target, overwrite=True)
  with common.atomic_output(os.path.join(best_dir, "checkpoint")) as f:
    f.write('model_checkpoint_path: "%s"\nall_model_checkpoint_paths: "%s"\n' % (name, name))
  common.write_json_atomic(os.path.join(best_dir, BEST_FILE), {
      "step": int(step), "metric": metric, "score": _plain(score), "checkpoint": name,
      "metrics": {k: _plain(v) for k, v in sorted(metrics.items())}})
  keep = set(os.path.basename(p) for p in sources) | {BEST_FILE, "checkpoint"}
  for entry in tf.io.gfile.listdir(best_dir):
    if entry not in keep and entry.startswith("model.ckpt-"):
      tf.io.gfile.remove(os.path.join(best_dir, entry))
  tf1.logging.info("Best checkpoint: step %d (%s = %.6g), copied to %s", step, metric, score,
                   best_dir)


def write_summaries(writer, step, metrics):
  """Dev metrics of one evaluation as TensorBoard scalars (eval/<name>); none (a warning) where
  the TensorBoard package is not installed (the newest TensorFlow does not require it)."""
  if importlib.util.find_spec("tensorboard") is None:
    tf1.logging.warning("TensorBoard is not installed: no eval/* scalars (%s has them all)",
                        HISTORY_FILE)
    return
  with writer.as_default():
    for key, value in sorted(metrics.items()):
      if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        tf.summary.scalar("eval/%s" % key, float(value), step=int(step))
  writer.flush()


def checkpoint_step(checkpoint):
  """The global step stored in a checkpoint (None when it has none)."""
  try:
    return int(tf1.train.load_variable(checkpoint, "global_step"))
  except (tf.errors.NotFoundError, ValueError):
    return None


def _evaluate_step(output_dir, history, writer, checkpoint, step, evaluate, keep_best):
  """Scores the checkpoint of `step`, adds the evaluation to the history and TensorBoard, and
  with keep_best copies a better checkpoint to best/; returns the history entry."""
  start = time.time()
  metrics = evaluate(checkpoint)
  entry = history.make_entry(step, metrics)
  if keep_best and entry["best_step"] == step:
    save_best_checkpoint(output_dir, checkpoint, step, history.metric, entry["score"], metrics)
  history.add(entry)
  write_summaries(writer, step, metrics)
  tf1.logging.info("Evaluation at step %d: %s = %.6g (best %.6g at step %d; %d evaluation(s) "
                   "without improvement) in %.1f s", step, history.metric, entry["score"],
                   entry["best_score"], entry["best_step"],
                   entry["evals_without_improvement"], time.time() - start)
  return entry


def _drop_orphan_best(output_dir, history):
  """Removes best/ when its step is not in the history (a model that is gone, or a copy made
  before its line was written: that step is scored again)."""
  best = read_best_checkpoint(output_dir)
  if best is not None and not history.has(best["step"]):
    tf1.logging.warning("Removing %s/%s of step %d: not in %s", output_dir, BEST_DIR,
                        best["step"], HISTORY_FILE)
    tf.io.gfile.rmtree(os.path.join(output_dir, BEST_DIR))


def train_with_evaluation(output_dir, main_metric, num_train_steps, resume_step, every,
                          train_to, evaluate, patience=0, keep_best=False):
  """Trains in chunks of `every` steps, evaluating the checkpoint after each.

  Training goes to the next multiple of `every` (or the last step) and checkpoints there; the
  checkpoint is scored (its main metric decides the best and early stopping), the evaluation
  added to output_dir/eval_history.jsonl and TensorBoard (output_dir/eval_history), and with
  keep_best a better checkpoint copied to output_dir/best/. A resumed job keeps its history and
  best; steps already evaluated are not evaluated again.

  Args:
    output_dir: the job's --output_dir (its checkpoints).
    main_metric: the metric (higher is better) of the best and of early stopping.
    num_train_steps: the schedule's last step.
    resume_step: the step of the checkpoint resumed from (None: a new job).
    every: steps between evaluations (>= 1).
    train_to: function (step, target) that trains from the checkpoint of `step` to `target`;
      returns the global step reached (exits on a stop signal).
    evaluate: function (checkpoint prefix) -> dict of dev metrics (main_metric among them).
    patience: stop after this many evaluations without a higher main metric (0: never).
    keep_best: copy the best checkpoint to output_dir/best/.

  Returns:
    dict for eval_results: num_train_steps (the step training ended at: the schedule's, or
    the early-stopping step), planned_train_steps, eval_every_steps, early_stopped,
    num_evaluations, main_metric, best_step, best_score, last_step, last_score (and
    early_stopping_patience when set).
  """
  step = resume_step or 0
  history = EvalHistory(output_dir, main_metric, step)
  _drop_orphan_best(output_dir, history)
  writer = tf.summary.create_file_writer(os.path.join(output_dir, HISTORY_SUMMARY_DIR))
  early_stopped = False
  while True:
    is_eval_step = step > 0 and (step % every == 0 or step >= num_train_steps)
    if is_eval_step and not history.has(step):
      checkpoint = tf1.train.latest_checkpoint(output_dir)
      if checkpoint is None or checkpoint_step(checkpoint) != step:
        raise RuntimeError("no checkpoint of step %d in %s" % (step, output_dir))
      _evaluate_step(output_dir, history, writer, checkpoint, step, evaluate, keep_best)
      common.STOP_SIGNALS.exit_if_stopped()
    if step >= num_train_steps:
      break
    if patience and history.evals_without_improvement() >= patience:
      early_stopped = True
      best_entry = history.best()
      tf1.logging.info("Early stopping at step %d: %d evaluation(s) without an improvement of "
                       "%s over %.6g (step %d)", step, patience, main_metric,
                       best_entry["score"], best_entry["step"])
      break
    target = min(num_train_steps, (step // every + 1) * every)
    step = train_to(step, target)
    if step < target:
      raise RuntimeError("training stopped at step %d before step %d" % (step, target))
  writer.close()
  best_entry, last_entry = history.best(), history.entries[-1]
  summary = {"num_train_steps": step if early_stopped else num_train_steps,
             "planned_train_steps": num_train_steps, "eval_every_steps": every,
             "early_stopped": early_stopped, "num_evaluations": len(history.entries),
             "main_metric": main_metric, "best_step": best_entry["step"],
             "best_score": best_entry["score"], "last_step": last_entry["step"],
             "last_score": last_entry["score"]}
  if patience:
    summary["early_stopping_patience"] = patience
  return summary
