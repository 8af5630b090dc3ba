# coding=utf-8
r"""Scores SQuAD v1.1 / v2.0 predictions with the official evaluation rules.

Usage:
  python squad_evaluate.py dev-v2.0.json predictions.json \
      [--na_prob_file=null_odds.json] [--na_prob_thresh=1.0] [--out_file=eval.json] \
      [--squad_version=auto|1.1|2.0]

The rules, and where they differ from the official scripts, are in realformer_tf/squad_scoring.py
(the library run_squad.py scores with). Besides the official keys, the result holds
num_unknown_prediction_ids (prediction ids that are no question of the data file: not scored)
and num_duplicate_question_ids (questions repeating an earlier question's id), each also warned
about in one line.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os
import sys

from absl import app
from absl import flags

from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
from realformer_tf import common
from realformer_tf import squad_scoring

def _load_json(path, label):
  """Reads a JSON file; `label` names it in errors ("data file %s", "--na_prob_file=%s")."""
  name = label % path
  if not os.path.isfile(path):
    common.fail("%s: file does not exist" % name)
  try:
    with open(path, "r", encoding="utf-8") as f:
      return json.load(f)
  except (ValueError, UnicodeDecodeError) as e:
    common.fail("%s: not valid JSON (%s)" % (name, e))


def _check_squad(dataset_json, path):
  """Fails with one line unless `dataset_json` has the SQuAD layout the scorer reads."""
  if not isinstance(dataset_json, dict) or not isinstance(dataset_json.get("data"), list):
    common.fail("data file %s: not SQuAD JSON (no top-level \"data\" list)" % path)
  try:
    for article in dataset_json["data"]:
      for p in article["paragraphs"]:
        for qa in p["qas"]:
          qa["id"]  # pylint: disable=pointless-statement
          for a in qa.get("answers", []):
            if not isinstance(a["text"], str):
              raise TypeError("answer text is not a string")
  except (KeyError, TypeError) as e:
    common.fail("data file %s: not SQuAD JSON (%s: %s)" % (path, type(e).__name__, e))


def _check_str_dict(obj, name, value_type):
  """Fails with one line unless `obj` is a dict id -> value_type."""
  if not isinstance(obj, dict):
    common.fail("%s: expected a JSON object id -> %s" % (name, value_type.__name__))
  for k, v in obj.items():
    if not isinstance(v, value_type) or isinstance(v, bool):
      common.fail("%s: value for %s is %r, expected a %s" % (name, k, v, value_type.__name__))


FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags (only when run as a script)."""
  flags.DEFINE_string("na_prob_file", None,
                      "v2.0: JSON file id -> no-answer probability (BERT: null_odds.json).")
  flags.DEFINE_float("na_prob_thresh", 1.0,
                     "v2.0: predict no answer where the na prob is above this.")
  flags.DEFINE_string("out_file", None, "Also write the result JSON here (atomically).")
  flags.DEFINE_enum("squad_version", "auto", list(squad_scoring.VERSIONS),
                    "Which rules: 1.1, 2.0, or auto (2.0 when the data says so or "
                    "--na_prob_file is given).")


def main(argv):
  """Command line: squad_evaluate.py data.json predictions.json [flags]."""
  args = argv[1:]
  if len(args) != 2:
    common.fail("usage: squad_evaluate.py DATA.json PREDICTIONS.json [--na_prob_file=F] "
                "[--na_prob_thresh=1.0] [--out_file=F] (got %d positional arguments)" %
                len(args))
  data_file, pred_file = args
  dataset_json = _load_json(data_file, "data file %s")
  _check_squad(dataset_json, data_file)
  preds = _load_json(pred_file, "predictions file %s")
  _check_str_dict(preds, "predictions file %s" % pred_file, str)
  na_probs = None
  if FLAGS.na_prob_file:
    na_probs = _load_json(FLAGS.na_prob_file, "--na_prob_file=%s")
    if isinstance(na_probs, dict):
      na_probs = {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
                  for k, v in na_probs.items()}
    _check_str_dict(na_probs, "--na_prob_file=%s" % FLAGS.na_prob_file, float)
  if FLAGS.squad_version == "auto":
    version_2 = None
  else:
    version_2 = FLAGS.squad_version == "2.0"
    if not version_2 and na_probs is not None:
      common.fail("--na_prob_file needs the v2.0 rules, not --squad_version=1.1")
  try:
    result = squad_scoring.evaluate(dataset_json, preds, version_2, na_probs,
                                    FLAGS.na_prob_thresh)
  except ValueError as e:
    common.fail("%s: %s" % (data_file, e))
  # After the official keys: how many ids were merged or ignored (0 and 0 when clean).
  result.update(squad_scoring.warn_id_problems(
      dataset_json["data"], preds, "data file %s" % data_file, "predictions file %s" % pred_file))
  if FLAGS.out_file:
    common.check_output_path(FLAGS.out_file, "out_file")
    parent = os.path.dirname(FLAGS.out_file)
    if parent:
      os.makedirs(parent, exist_ok=True)  # as the tools that write into an --output_dir
    with common.atomic_output(FLAGS.out_file) as f:
      f.write(json.dumps(result) + "\n")
  print(json.dumps(result, indent=2))
  sys.stdout.flush()


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
