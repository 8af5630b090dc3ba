# coding=utf-8
r"""Scores Natural Questions predictions (the official format) against NQ development files,
as the official nq_eval.py does.

Usage:
  python -m etc_model.nq_evaluate "nq-dev-0?.jsonl.gz" dev_predictions.json \
      [--out_file=eval.json]

The gold file is NQ JSON lines (gzipped or not; a comma-separated list or a quoted glob): the
five-way annotated development set in the original format, or any file in the simplified
format; only example_id and annotations are read. The prediction file is {"predictions":
[{"example_id", "long_answer": {"start_token", "end_token"[, "start_byte", "end_byte"]},
"long_answer_score", "short_answers": [{...}], "short_answers_score", "yes_no_answer"}]}.
The metrics are nq_eval's JSON ones (long- / short-best-threshold-f1, -precision, -recall,
best-threshold, recall-at-precision>=0.5 / 0.75 / 0.9 with the precision and the score
threshold there) and those it prints over every prediction (long-answer-f1, -precision,
-recall, -n and short-answer-...); etc_model.nq has the rules (2 of 5 annotators, exact spans,
yes / no).
As officially, the prediction file must hold one prediction per gold example and no other
(one line naming the counts otherwise), and a malformed span, a yes / no answer beside short
spans or a missing score is one line (exit 2). run_long_tasks --task=nq writes such files
(dev_predictions.json, test_predictions.json) and reports the same metrics.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function


from absl import app
from absl import flags

from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
from realformer_tf import common
from etc_model import long_tasks
from etc_model import nq

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a script)."""
  flags.DEFINE_string("out_file", None, "Also write the result JSON here (atomically).")


def evaluate_files(gold_files, prediction_file):
  """The official metrics of a prediction file against NQ gold files (one line on bad input).

  Args:
    gold_files: NQ JSON lines files (comma-separated, globs).
    prediction_file: {"predictions": [...]} JSON.

  Returns:
    nq.evaluate's dict, with unknown_ids 0 (predictions for other ids are refused).
  """
  gold = nq.read_gold(gold_files, "gold_file")
  if not gold:
    common.fail("gold file %s: has no examples to score" % gold_files)
  predictions = nq.read_predictions(prediction_file)
  try:
    result = nq.evaluate(gold, predictions)
  except ValueError as e:
    common.fail("prediction file %s: %s" % (prediction_file, e))
  result["unknown_ids"] = 0
  return result


def main(argv):
  """Command line: nq_evaluate GOLD.jsonl.gz PREDICTIONS.json [--out_file=F]."""
  long_tasks.evaluate_command(argv, "etc_model.nq_evaluate", evaluate_files, FLAGS,
                              "prediction file %s: %d predicted ids are not in %s")


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
