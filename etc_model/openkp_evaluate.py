# coding=utf-8
r"""Scores OpenKP keyphrase predictions against an OpenKP file, as microsoft/OpenKP's
evaluate.py does.

Usage:
  python -m etc_model.openkp_evaluate OpenKPDev.jsonl dev_predictions.jsonl \
      [--out_file=eval.json]

Both files are JSON lines (gzipped or not) with "url" and "KeyPhrases" (a list of keyphrases,
each a list of words; other keys such as "text" or "VDOM" are not read): the reference is the
OpenKP development file, the predictions one line per url, best keyphrase first. The metrics are
the official F1@k, P@k and R@k for k = 1, 3, 5 (etc_model.openkp has the rules: lower-cased
words, empty keyphrases dropped, de-duplication, P@k over k, means over the urls; the paper
reports F1@3). As officially, the prediction file must hold exactly the reference's urls (one
line naming the counts otherwise), a url on several lines counts by its last line
(duplicate_urls in the result), and a reference document without a keyphrase is one line
(exit 2). run_long_tasks --task=openkp writes such files (dev_predictions.jsonl,
test_predictions.jsonl) and reports the same metrics.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

from absl import app
from absl import flags

from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
from realformer_tf import common
from etc_model import long_tasks
from etc_model import openkp

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a script)."""
  flags.DEFINE_string("out_file", None, "Also write the result JSON here (atomically).")


def evaluate_files(reference_file, prediction_file):
  """The official metrics of a prediction file against an OpenKP file (one line on bad input).

  Args:
    reference_file: OpenKP JSON lines with KeyPhrases.
    prediction_file: JSON lines {"url", "KeyPhrases"}.

  Returns:
    openkp.evaluate's dict with duplicate_urls (reference and prediction lines whose url an
    earlier line of the file had) and unknown_ids 0 (predictions for other urls are refused).
  """
  references, reference_duplicates = openkp.read_keyphrases(
      reference_file, "reference file %s" % reference_file)
  if not references:
    common.fail("reference file %s: has no documents to score" % reference_file)
  predictions, prediction_duplicates = openkp.read_keyphrases(
      prediction_file, "prediction file %s" % prediction_file)
  try:
    result = openkp.evaluate(references, predictions)
  except ValueError as e:
    common.fail("prediction file %s against %s: %s" % (prediction_file, reference_file, e))
  result["duplicate_urls"] = {"reference": reference_duplicates,
                              "prediction": prediction_duplicates}
  result["unknown_ids"] = 0
  return result


def main(argv):
  """Command line: openkp_evaluate REFERENCE.jsonl PREDICTIONS.jsonl [--out_file=F]."""
  long_tasks.evaluate_command(argv, "etc_model.openkp_evaluate", evaluate_files, FLAGS,
                              "prediction file %s: %d predicted urls are not in %s")


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
