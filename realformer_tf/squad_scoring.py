# coding=utf-8
"""The official SQuAD v1.1 and v2.0 evaluation rules (squad_evaluate.py and run_squad.py score
with them).

The scores are those of the official `evaluate-v1.1.py` and `evaluate-v2.0.py` scripts
(same normalisation, same EM / F1, same keys, same best-threshold search), with one deliberate
difference: a question of the data file that has no prediction counts as wrong (EM 0, F1 0) in
both versions, and the number of such questions is logged. (v1.1 official does the same; v2.0
official skips them from `total` and then fails with a KeyError in the HasAns / NoAns split.)
`warn_id_problems` warns (one line each) about predictions whose id is no question of the data
file (not scored) and questions that repeat an earlier question's id, and counts both.

Normalisation (identical in both official scripts): lower-case; drop every character of
`string.punctuation` (ASCII only: '–' or '«' stay); drop the whole words a / an / the
(regex `\\b(a|an|the)\\b`); collapse white space. Accents are NOT stripped.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import re
import string
import sys

from absl import logging

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b", re.UNICODE)

VERSIONS = ("auto", "1.1", "2.0")


def normalize_answer(s):
  """Lower text and remove punctuation, articles and extra whitespace (official rules).

  Args:
    s: str.

  Returns:
    The normalised str.
  """
  s = s.lower()
  s = "".join(ch for ch in s if ch not in _PUNCTUATION)
  s = _ARTICLES_RE.sub(" ", s)
  return " ".join(s.split())


def get_tokens(s):
  """Normalised white-space tokens of `s` ([] for an empty or None string)."""
  if not s:
    return []
  return normalize_answer(s).split()


# ----------------------------------------------------------------------------------------------
# SQuAD v1.1
# ----------------------------------------------------------------------------------------------


def f1_score_v1(prediction, ground_truth):
  """Token-level F1 (a fraction in [0, 1]) of evaluate-v1.1.py; 0 when nothing overlaps."""
  prediction_tokens = normalize_answer(prediction).split()
  ground_truth_tokens = normalize_answer(ground_truth).split()
  common_tokens = collections.Counter(prediction_tokens) & collections.Counter(
      ground_truth_tokens)
  num_same = sum(common_tokens.values())
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(prediction_tokens)
  recall = 1.0 * num_same / len(ground_truth_tokens)
  return (2 * precision * recall) / (precision + recall)


def exact_match_score_v1(prediction, ground_truth):
  """True when the normalised strings are equal (evaluate-v1.1.py)."""
  return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
  """The best score of `prediction` over the gold answers."""
  return max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths)


def evaluate_v1(dataset, predictions):
  """Scores predictions with the SQuAD v1.1 rules.

  Args:
    dataset: the "data" list of a SQuAD JSON file.
    predictions: dict question id -> predicted answer text.

  Returns:
    dict with "exact_match" and "f1", percentages over all questions of `dataset`; a question
    without a prediction scores 0 (as in the official script).

  Raises:
    ValueError: the dataset has no questions.
  """
  f1 = exact_match = total = 0
  missing = 0
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        total += 1
        if qa["id"] not in predictions:
          missing += 1
          continue
        ground_truths = [x["text"] for x in qa.get("answers", [])]
        if not ground_truths:
          # v1.1 has no unanswerable questions; nothing can match an empty gold list.
          continue
        prediction = predictions[qa["id"]]
        exact_match += metric_max_over_ground_truths(exact_match_score_v1, prediction,
                                                     ground_truths)
        f1 += metric_max_over_ground_truths(f1_score_v1, prediction, ground_truths)
  if total == 0:
    raise ValueError("the dataset has no questions")
  if missing:
    logging.warning("%d of %d questions have no prediction: they score 0", missing, total)
  return collections.OrderedDict([("exact_match", 100.0 * exact_match / total),
                                  ("f1", 100.0 * f1 / total)])


# ----------------------------------------------------------------------------------------------
# SQuAD v2.0
# ----------------------------------------------------------------------------------------------


def make_qid_to_has_ans(dataset):
  """dict question id -> whether the question has at least one gold answer."""
  qid_to_has_ans = collections.OrderedDict()
  for article in dataset:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        qid_to_has_ans[qa["id"]] = bool(qa.get("answers"))
  return qid_to_has_ans


def compute_exact(a_gold, a_pred):
  """1 when the normalised strings are equal, else 0 (evaluate-v2.0.py)."""
  return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
  """Token-level F1 of evaluate-v2.0.py: 1/0 when either side is empty (no answer)."""
  gold_toks = get_tokens(a_gold)
  pred_toks = get_tokens(a_pred)
  common_tokens = collections.Counter(gold_toks) & collections.Counter(pred_toks)
  num_same = sum(common_tokens.values())
  if not gold_toks or not pred_toks:
    # If either is no-answer, then F1 is 1 if they agree, 0 otherwise.
    return int(gold_toks == pred_toks)
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(pred_toks)
  recall = 1.0 * num_same / len(gold_toks)
  return (2 * precision * recall) / (precision + recall)


def get_raw_scores(dataset, preds):
  """Per-question EM and F1 before any no-answer threshold.

  Args:
    dataset: the "data" list of a SQuAD JSON file.
    preds: dict question id -> predicted text ("" = no answer).

  Returns:
    (exact_scores, f1_scores, missing): dicts over every question of `dataset` (a question
    without a prediction scores 0) and the set of those question ids without a prediction.
  """
  exact_scores = collections.OrderedDict()
  f1_scores = collections.OrderedDict()
  missing = set()
  for article in dataset:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        qid = qa["id"]
        gold_answers = [a["text"] for a in qa.get("answers", []) if normalize_answer(a["text"])]
        if not gold_answers:
          # For unanswerable questions, only correct answer is empty string.
          gold_answers = [""]
        if qid not in preds:
          missing.add(qid)
          exact_scores[qid] = 0
          f1_scores[qid] = 0
          continue
        a_pred = preds[qid]
        exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
        f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
  return exact_scores, f1_scores, missing


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh, missing=()):
  """Scores after predicting "no answer" wherever na_prob > na_prob_thresh.

  Args:
    scores: dict qid -> raw score.
    na_probs: dict qid -> no-answer probability (or null odds); must cover every qid of
      `scores` that has a prediction.
    qid_to_has_ans: dict qid -> bool.
    na_prob_thresh: float.
    missing: qids without a prediction (they stay wrong).

  Returns:
    dict qid -> score.

  Raises:
    ValueError: a predicted question has no na_prob.
  """
  lacking = [qid for qid in scores if qid not in missing and qid not in na_probs]
  if lacking:
    raise ValueError("the na-prob file has no value for %d predicted questions (e.g. %s)" %
                     (len(lacking), lacking[0]))
  new_scores = collections.OrderedDict()
  for qid, s in scores.items():
    if qid in missing:
      new_scores[qid] = s
    elif na_probs[qid] > na_prob_thresh:
      new_scores[qid] = float(not qid_to_has_ans[qid])
    else:
      new_scores[qid] = s
  return new_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
  """{"exact", "f1", "total"} over `qid_list` (default: all scored questions)."""
  if not qid_list:
    qid_list = list(exact_scores)
  total = len(qid_list)
  return collections.OrderedDict([
      ("exact", 100.0 * sum(exact_scores[k] for k in qid_list) / total),
      ("f1", 100.0 * sum(f1_scores[k] for k in qid_list) / total),
      ("total", total),
  ])


def merge_eval(main_eval, new_eval, prefix):
  """Adds new_eval's entries to main_eval as "<prefix>_<key>"."""
  for k in new_eval:
    main_eval["%s_%s" % (prefix, k)] = new_eval[k]


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans, missing=()):
  """The official threshold search: the best total score over all no-answer thresholds.

  Start with every question predicted "no answer" (all unanswerable ones right), then walk the
  questions by increasing na_prob, each time letting that question's prediction through, and
  keep the best cumulative score and the na_prob where it was reached (0.0 if never beaten).

  Args:
    preds: dict qid -> predicted text.
    scores: dict qid -> raw score (every question of the dataset).
    na_probs: dict qid -> no-answer probability.
    qid_to_has_ans: dict qid -> bool.
    missing: qids without a prediction: wrong at any threshold.

  Returns:
    (best score in percent of len(scores), best threshold).
  """
  num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k] and k not in missing)
  cur_score = num_no_ans
  best_score = cur_score
  best_thresh = 0.0
  qid_list = sorted(na_probs, key=lambda k: na_probs[k])
  for qid in qid_list:
    if qid not in scores or qid in missing:
      continue
    if qid_to_has_ans[qid]:
      diff = scores[qid]
    else:
      diff = -1 if preds[qid] else 0
    cur_score += diff
    if cur_score > best_score:
      best_score = cur_score
      best_thresh = na_probs[qid]
  return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(dataset, preds, na_probs=None, na_prob_thresh=1.0):
  """Scores predictions with the SQuAD v2.0 rules.

  Args:
    dataset: the "data" list of a SQuAD JSON file.
    preds: dict question id -> predicted text ("" = no answer).
    na_probs: optional dict question id -> no-answer probability (BERT: null odds). When given,
      the result also has best_exact, best_exact_thresh, best_f1, best_f1_thresh.
    na_prob_thresh: predict "no answer" where na_prob > this.

  Returns:
    OrderedDict: exact, f1, total, then HasAns_exact/f1/total when some questions have answers,
    NoAns_exact/f1/total when some have none, and the best-threshold entries. Percentages.

  Raises:
    ValueError: no questions, or a predicted question missing from na_probs.
  """
  qid_to_has_ans = make_qid_to_has_ans(dataset)
  if not qid_to_has_ans:
    raise ValueError("the dataset has no questions")
  has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
  no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
  exact_raw, f1_raw, missing = get_raw_scores(dataset, preds)
  if missing:
    logging.warning("%d of %d questions have no prediction: they count as wrong",
                    len(missing), len(exact_raw))
  thresh_probs = na_probs if na_probs is not None else {k: 0.0 for k in preds}
  exact_thresh = apply_no_ans_threshold(exact_raw, thresh_probs, qid_to_has_ans,
                                        na_prob_thresh, missing)
  f1_thresh = apply_no_ans_threshold(f1_raw, thresh_probs, qid_to_has_ans, na_prob_thresh,
                                     missing)
  out_eval = make_eval_dict(exact_thresh, f1_thresh)
  if has_ans_qids:
    merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=has_ans_qids),
               "HasAns")
  if no_ans_qids:
    merge_eval(out_eval, make_eval_dict(exact_thresh, f1_thresh, qid_list=no_ans_qids),
               "NoAns")
  if na_probs is not None:
    best_exact, exact_thresh_value = find_best_thresh(preds, exact_raw, na_probs,
                                                      qid_to_has_ans, missing)
    best_f1, f1_thresh_value = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans,
                                                missing)
    out_eval["best_exact"] = best_exact
    out_eval["best_exact_thresh"] = exact_thresh_value
    out_eval["best_f1"] = best_f1
    out_eval["best_f1_thresh"] = f1_thresh_value
  return out_eval


# ----------------------------------------------------------------------------------------------
# Version detection and the command line
# ----------------------------------------------------------------------------------------------


def is_version_2(dataset_json):
  """Whether a SQuAD JSON object is v2.0 (version "v2.x", or any question with is_impossible)."""
  version = str(dataset_json.get("version", ""))
  if version.lstrip("v").startswith("2"):
    return True
  for article in dataset_json.get("data", []):
    for p in article.get("paragraphs", []):
      for qa in p.get("qas", []):
        if "is_impossible" in qa:
          return True
  return False


def has_gold_answers(dataset_json):
  """Whether a SQuAD JSON object carries gold answers to score against (dev, not test)."""
  for article in dataset_json.get("data", []):
    for p in article.get("paragraphs", []):
      for qa in p.get("qas", []):
        if qa.get("answers") or qa.get("is_impossible"):
          return True
  return False


def evaluate(dataset_json, preds, version_2=None, na_probs=None, na_prob_thresh=1.0):
  """Scores with the v1.1 or v2.0 rules.

  Args:
    dataset_json: a whole SQuAD JSON object ({"version", "data"}).
    preds: dict question id -> predicted text.
    version_2: True / False, or None to detect it from the data (na_probs imply v2.0).
    na_probs: v2.0 only: dict question id -> no-answer probability.
    na_prob_thresh: v2.0 only: no-answer threshold.

  Returns:
    The official result dict of that version.
  """
  if version_2 is None:
    version_2 = na_probs is not None or is_version_2(dataset_json)
  if version_2:
    return evaluate_v2(dataset_json["data"], preds, na_probs, na_prob_thresh)
  if na_probs is not None:
    raise ValueError("na-probs only make sense with the SQuAD v2.0 rules")
  return evaluate_v1(dataset_json["data"], preds)


def count_id_problems(dataset, preds=None):
  """Counts the ids that scoring cannot use as they are.

  Args:
    dataset: the "data" list of a SQuAD JSON file.
    preds: dict question id -> predicted text, or None.

  Returns:
    (counts, firsts): counts is an OrderedDict with "num_duplicate_question_ids" (questions
    whose id an earlier question of the dataset already has: they share one prediction) and
    "num_unknown_prediction_ids" (prediction ids that are no question of the dataset: never
    scored; 0 without preds); firsts maps the same keys to the first such id (or None).
  """
  seen = set()
  duplicates = []
  for article in dataset:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        if qa["id"] in seen:
          duplicates.append(qa["id"])
        seen.add(qa["id"])
  unknown = [qid for qid in (preds or {}) if qid not in seen]
  counts = collections.OrderedDict([("num_duplicate_question_ids", len(duplicates)),
                                    ("num_unknown_prediction_ids", len(unknown))])
  firsts = {"num_duplicate_question_ids": duplicates[0] if duplicates else None,
            "num_unknown_prediction_ids": unknown[0] if unknown else None}
  return counts, firsts


def _warn(message):
  """Writes one "warning: ..." line to stderr (next to the tools' "error: ..." lines)."""
  sys.stderr.write("warning: %s\n" % message)
  sys.stderr.flush()


def warn_id_problems(dataset, preds, data_name, pred_name=None,
                     duplicate_note="each of them is scored against the one prediction of "
                     "that id"):
  """Warns (one line each) about duplicate question ids and unknown prediction ids.

  Both were silent before: predictions for ids not in the dataset were ignored, and questions
  sharing an id were merged into one prediction.

  Args:
    dataset: the "data" list of a SQuAD JSON file.
    preds: dict question id -> predicted text, or None.
    data_name: how to name the dataset in the warning ("data file X", "--predict_file=X").
    pred_name: how to name the predictions ("predictions file X").
    duplicate_note: what the duplicates mean for the caller, appended to that warning.

  Returns:
    count_id_problems' counts (to keep in the eval results).
  """
  counts, firsts = count_id_problems(dataset, preds)
  key = "num_duplicate_question_ids"
  if counts[key]:
    _warn("%s: %d question(s) repeat an earlier question's id (first: %s); %s" %
          (data_name, counts[key], firsts[key], duplicate_note))
  key = "num_unknown_prediction_ids"
  if counts[key]:
    _warn("%s: %d id(s) not in the dataset (first: %s); they are not scored (%s)" %
          (pred_name or "predictions", counts[key], firsts[key], data_name))
  return counts
