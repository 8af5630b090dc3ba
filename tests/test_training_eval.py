"""Tests for training_eval.train_with_evaluation on its own (no Estimator): chunks, history,
early stopping, the best checkpoint and a resume, with a fake trainer writing tiny checkpoints."""

import json

import numpy as np
import tensorflow as tf

from realformer_tf import training_eval

tf1 = tf.compat.v1


def _write_checkpoint(output_dir, step):
  """A checkpoint holding global_step = step and one variable (its value: the step)."""
  with tf.Graph().as_default():
    global_step = tf1.train.get_or_create_global_step()
    weight = tf1.get_variable("w", initializer=np.float32(step))
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      sess.run(global_step.assign(step))
      tf1.train.Saver([global_step, weight]).save(sess, str(output_dir / "model.ckpt"),
                                                  global_step=step)


def _run(output_dir, scores, resume_step=None, patience=2):
  """train_with_evaluation over 10 steps, evaluated every 2, scoring each step as `scores`."""
  trained = []

  def train_to(step, target):
    trained.append((step, target))
    _write_checkpoint(output_dir, target)
    return target

  def evaluate(checkpoint):
    step = training_eval.checkpoint_step(checkpoint)
    return {"accuracy": scores[step], "loss": 1.0 - scores[step]}

  summary = training_eval.train_with_evaluation(
      str(output_dir), "accuracy", 10, resume_step, 2, train_to, evaluate, patience=patience,
      keep_best=True)
  return summary, trained


def test_chunks_early_stopping_best_and_resume(tmp_path):
  scores = {2: 0.5, 4: 0.7, 6: 0.6, 8: 0.7, 10: 0.9}
  summary, trained = _run(tmp_path, scores)
  # Step 4 stays the best (8 only ties it): two evaluations without improvement stop at 8.
  assert trained == [(0, 2), (2, 4), (4, 6), (6, 8)]
  assert summary == {
      "num_train_steps": 8, "planned_train_steps": 10, "eval_every_steps": 2,
      "early_stopped": True, "num_evaluations": 4, "main_metric": "accuracy", "best_step": 4,
      "best_score": 0.7, "last_step": 8, "last_score": 0.7, "early_stopping_patience": 2}
  lines = [json.loads(l) for l in (tmp_path / training_eval.HISTORY_FILE).read_text().split(
      "\n") if l]
  assert [(e["step"], e["best_step"], e["evals_without_improvement"]) for e in lines] == [
      (2, 2, 0), (4, 4, 0), (6, 4, 1), (8, 4, 2)]
  best = training_eval.read_best_checkpoint(str(tmp_path))
  assert (best["step"], best["score"]) == (4, 0.7)
  assert tf.train.load_variable(best["path"], "w") == 4.0  # the weights of step 4
  # A resume from the checkpoint of step 6 (history lines of later steps dropped) without
  # patience: step 6 is not scored again, training goes on to the end and 10 becomes the best.
  summary, trained = _run(tmp_path, scores, resume_step=6, patience=0)
  assert trained == [(6, 8), (8, 10)]
  assert (summary["num_evaluations"], summary["best_step"], summary["early_stopped"]) == (
      5, 10, False)
  assert training_eval.read_best_checkpoint(str(tmp_path))["step"] == 10
