# coding=utf-8
r"""Scores HotpotQA predictions (the official submission format) against a HotpotQA file, as the
official hotpot_evaluate_v1.py does.

Usage:
  python -m etc_model.hotpotqa_evaluate hotpot_dev_distractor_v1.json dev_predictions.json \
      [--out_file=eval.json]

The prediction file is {"answer": {_id: text}, "sp": {_id: [[title, sent_id], ...]}}. The
metrics are the official twelve (em, f1, prec, recall, sp_em, sp_f1, sp_prec, sp_recall,
joint_em, joint_f1, joint_prec, joint_recall; etc_model.hotpotqa has the rules: normalized
answers, yes / no / noanswer, sets of (title, sent_id) pairs, joint products), each averaged
over every example of the data file: an example without a predicted answer or without predicted
supporting facts scores 0 there and in the joint metrics (missing_answers / missing_sp count
them); predictions for ids the data file does not have are not scored (unknown_ids, warned about
in one line). A prediction file without "answer" or "sp", a non-string answer or facts that are
not [title, integer] pairs are one line (exit 2). run_long_tasks --task=hotpotqa writes such
files (dev_predictions.json, test_predictions.json) and reports the same metrics.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function


from absl import app
from absl import flags

from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
from realformer_tf import common
from etc_model import hotpotqa
from etc_model import long_tasks

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a script)."""
  flags.DEFINE_string("out_file", None, "Also write the result JSON here (atomically).")


def evaluate_files(data_file, prediction_file):
  """The official metrics of a prediction file against a HotpotQA file (one line on bad input).

  Args:
    data_file: HotpotQA JSON (every record with "answer" and "supporting_facts").
    prediction_file: {"answer": {...}, "sp": {...}} JSON.

  Returns:
    hotpotqa.evaluate's dict.
  """
  source = "data file %s" % data_file
  examples = hotpotqa.read_examples(data_file, source)
  if not examples:
    common.fail("%s: has no examples to score" % source)
  gold = [(e.id, e.answer, e.supporting_facts) for e in examples]
  return hotpotqa.evaluate(hotpotqa.read_predictions(prediction_file), gold)


def main(argv):
  """Command line: hotpotqa_evaluate DATA.json PREDICTIONS.json [--out_file=F]."""
  long_tasks.evaluate_command(argv, "etc_model.hotpotqa_evaluate", evaluate_files, FLAGS,
                              "prediction file %s: %d predicted ids are not in %s (not scored)")


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
