# coding=utf-8
r"""Scores WikiHop predictions {id: answer} (the official submission format) against a QAngaroo
file.

Usage:
  python -m etc_model.wikihop_evaluate qangaroo_v1.1/wikihop/dev.json dev_predictions.json \
      [--out_file=eval.json]

accuracy = right / examples of the data file: a prediction is right when it equals the answer
after strip().lower(); an example without a prediction is wrong (missing); predictions for ids
the data file does not have are not scored (unknown_ids, warned about in one line). The rules
are etc_model.wikihop's (evaluate_predictions); run_long_tasks --task=wikihop writes the
predictions (dev_predictions.json, test_predictions.json) and reports the same accuracy.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections

from absl import app
from absl import flags

from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
from realformer_tf import common
from etc_model import long_tasks
from etc_model import wikihop

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a script)."""
  flags.DEFINE_string("out_file", None, "Also write the result JSON here (atomically).")


def evaluate_files(data_file, prediction_file):
  """The accuracy of a prediction file against a QAngaroo file (one line on bad input).

  Args:
    data_file: QAngaroo JSON (every record with an answer).
    prediction_file: {id: answer} JSON.

  Returns:
    wikihop.evaluate_predictions' dict.
  """
  examples = wikihop.read_examples(data_file, "data file %s" % data_file)
  gold = collections.OrderedDict((e.id, e.answer) for e in examples)
  predictions = wikihop.read_predictions(prediction_file)
  return wikihop.evaluate_predictions(gold, predictions)


def main(argv):
  """Command line: wikihop_evaluate DATA.json PREDICTIONS.json [--out_file=F]."""
  long_tasks.evaluate_command(argv, "etc_model.wikihop_evaluate", evaluate_files, FLAGS,
                              "prediction file %s: %d predictions for ids that are not in %s "
                              "(not scored)")


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
