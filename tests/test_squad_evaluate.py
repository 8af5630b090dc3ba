# coding=utf-8
"""Tests for squad_evaluate.py: the official SQuAD v1.1 / v2.0 rules on hand-computed cases.

Every expected number below was worked out by hand (the arithmetic is in the comments), not
by running the code under test.
"""

import json
import os

import pytest

from conftest import last_error_line, run_tool
from realformer_tf import squad_scoring as se


def _dataset(questions):
  """A one-paragraph SQuAD "data" list from (qid, [gold texts]) pairs."""
  qas = [{"id": qid, "question": "q?", "answers": [{"text": t, "answer_start": 0} for t in golds]}
         for qid, golds in questions]
  return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


# ----------------------------------------------------------------------------------------------
# Normalisation
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("The Cat sat on a mat.", "cat sat on mat"),
    # Articles only as whole words.
    ("theater Anatomy another", "theater anatomy another"),
    ("An apple, the pear & A plum", "apple pear plum"),
    # Punctuation is deleted, not replaced by a space: "don't" -> "dont", "a-b" -> "ab".
    ("don't stop-motion", "dont stopmotion"),
    ("U.S.A.", "usa"),
    # An article glued to punctuation becomes a word once the punctuation is gone.
    ("(the) end", "end"),
    # Accents are NOT stripped; non-ASCII punctuation is NOT in string.punctuation.
    ("Café  Müller", "café müller"),
    ("1990 \u2013 1995", "1990 \u2013 1995"),
    ("\u00abParis\u00bb", "\u00abparis\u00bb"),
    ("\u00c9TAT", "\u00e9tat"),
    # Every kind of white space collapses.
    ("  a\tb \n c  ", "b c"),
    ("", ""),
    ("the a an", ""),
])
def test_normalize_answer(text, expected):
  assert se.normalize_answer(text) == expected


def test_get_tokens():
  assert se.get_tokens("") == []
  assert se.get_tokens(None) == []
  assert se.get_tokens("The Big, big dog") == ["big", "big", "dog"]


# ----------------------------------------------------------------------------------------------
# v1.1
# ----------------------------------------------------------------------------------------------


def test_v1_scores():
  # pred [cat, sat] vs gold [cat, sat, on, mat]: 2 common, P = 1, R = 1/2, F1 = 2/3.
  assert se.f1_score_v1("the cat sat", "Cat sat on a mat") == pytest.approx(2.0 / 3.0)
  # Repeated tokens count with multiplicity: pred [a?] no: [big, big] vs [big]: common 1,
  # P = 1/2, R = 1, F1 = 2/3.
  assert se.f1_score_v1("big big", "big") == pytest.approx(2.0 / 3.0)
  assert se.f1_score_v1("", "Paris") == 0
  # v1.1: two answers that both normalise to "" match exactly but have F1 0.
  assert se.exact_match_score_v1("a", "The")
  assert se.f1_score_v1("a", "The") == 0


def test_evaluate_v1_several_answers_and_missing():
  dataset = _dataset([("q1", ["France", "a region in France"]),
                      ("q2", ["Rollo"]),
                      ("q3", ["911"])])
  # q1: "in france" vs "france": EM 0, F1 = 2*(1/2*1)/(1/2+1) = 2/3;
  #     vs "region in france": common {in, france} = 2, P = 2/2, R = 2/3, F1 = 0.8 -> max 0.8.
  # q2: "rollo." == "rollo" -> EM 1, F1 1.  q3: missing -> 0.
  result = se.evaluate_v1(dataset, {"q1": "in France", "q2": "Rollo."})
  assert list(result) == ["exact_match", "f1"]
  assert result["exact_match"] == pytest.approx(100.0 / 3)
  assert result["f1"] == pytest.approx(100.0 * 1.8 / 3)


# ----------------------------------------------------------------------------------------------
# v2.0
# ----------------------------------------------------------------------------------------------


def test_v2_compute_f1_empty_cases():
  assert se.compute_f1("", "") == 1
  assert se.compute_f1("", "Paris") == 0
  assert se.compute_f1("Paris", "") == 0
  # "the" normalises to nothing: it is a no-answer on either side.
  assert se.compute_f1("the", "") == 1
  assert se.compute_exact("a", "") == 1
  assert se.compute_f1("about two million residents", "two million") == pytest.approx(2.0 / 3)


def _v2_case():
  dataset = _dataset([
      ("h1", ["Paris", "the city of Paris"]),
      ("h2", ["two million"]),
      ("h3", ["1342"]),
      ("h4", ["the"]),     # has an answer, but it normalises to "": gold becomes [""]
      ("n1", []),
      ("n2", []),
  ])
  preds = {"h1": "city of paris", "h2": "about two million residents", "h3": "",
           "h4": "", "n1": "", "n2": "Brackenford"}
  na_probs = {"h1": 0.1, "h2": 0.5, "h3": 0.9, "h4": 0.3, "n1": 0.8, "n2": 0.2}
  return dataset, preds, na_probs


def test_evaluate_v2_no_na_probs():
  dataset, preds, _ = _v2_case()
  result = se.evaluate_v2(dataset, preds)
  # Raw EM: h1 1 ("city of paris" = norm("the city of Paris")), h2 0, h3 0, h4 1, n1 1, n2 0.
  # Raw F1: h1 1, h2 2/3 (P 2/4, R 2/2), h3 0, h4 1, n1 1, n2 0.
  assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                          "NoAns_exact", "NoAns_f1", "NoAns_total"]
  assert result["total"] == 6
  assert result["exact"] == pytest.approx(100.0 * 3 / 6)
  assert result["f1"] == pytest.approx(100.0 * (1 + 2.0 / 3 + 0 + 1 + 1 + 0) / 6)
  assert result["HasAns_total"] == 4
  assert result["HasAns_exact"] == pytest.approx(100.0 * 2 / 4)
  assert result["HasAns_f1"] == pytest.approx(100.0 * (1 + 2.0 / 3 + 0 + 1) / 4)
  assert result["NoAns_total"] == 2
  assert result["NoAns_exact"] == pytest.approx(50.0)
  assert result["NoAns_f1"] == pytest.approx(50.0)


def test_evaluate_v2_threshold_and_best_thresh():
  dataset, preds, na_probs = _v2_case()
  result = se.evaluate_v2(dataset, preds, na_probs=na_probs, na_prob_thresh=0.4)
  # na_prob > 0.4: h2 (0.5), h3 (0.9), n1 (0.8) become "no answer": h2 -> 0, h3 -> 0, n1 -> 1.
  # EM: h1 1, h2 0, h3 0, h4 1, n1 1, n2 0 = 3/6;  F1: 1, 0, 0, 1, 1, 0 = 3/6.
  assert result["exact"] == pytest.approx(50.0)
  assert result["f1"] == pytest.approx(50.0)
  assert result["HasAns_f1"] == pytest.approx(50.0)
  # Best threshold (official walk): start with all "no answer": score = #no-ans = 2.
  # By na_prob: h1 0.1 (+1 -> 3, best, thresh 0.1), n2 0.2 (pred non-empty: -1 -> 2),
  # h4 0.3 (+1 -> 3, not better), h2 0.5 (EM +0 / F1 +2/3), n1 0.8 (+0), h3 0.9 (+0).
  # EM: best 3/6 at 0.1.  F1: 3 + 2/3 at 0.5 -> 100 * (11/3) / 6.
  assert result["best_exact"] == pytest.approx(50.0)
  assert result["best_exact_thresh"] == pytest.approx(0.1)
  assert result["best_f1"] == pytest.approx(100.0 * (11.0 / 3) / 6)
  assert result["best_f1_thresh"] == pytest.approx(0.5)


def test_evaluate_v2_all_no_answer():
  dataset = _dataset([("a", []), ("b", [])])
  preds = {"a": "", "b": "something"}
  plain = se.evaluate_v2(dataset, preds)
  assert "HasAns_total" not in plain
  assert plain["exact"] == pytest.approx(50.0) and plain["f1"] == pytest.approx(50.0)
  assert plain["NoAns_total"] == 2
  # b's na prob 3.0 > 1.0 turns it into "no answer": all right. Best threshold: start at 2
  # (both no-answer); a (-2.0): +0; b (3.0): -1. Never better than the start: thresh 0.0.
  result = se.evaluate_v2(dataset, preds, na_probs={"a": -2.0, "b": 3.0})
  assert result["exact"] == pytest.approx(100.0)
  assert result["NoAns_f1"] == pytest.approx(100.0)
  assert result["best_exact"] == pytest.approx(100.0)
  assert result["best_exact_thresh"] == 0.0
  assert result["best_f1_thresh"] == 0.0


def test_evaluate_v2_missing_predictions_count_as_wrong():
  dataset = _dataset([("h", ["Paris"]), ("n", []), ("m", [])])
  # "m" (unanswerable) has no prediction: wrong, even though "" would have been right.
  result = se.evaluate_v2(dataset, {"h": "Paris", "n": ""}, na_probs={"h": 0.0, "n": 0.5})
  assert result["total"] == 3
  assert result["exact"] == pytest.approx(100.0 * 2 / 3)
  assert result["NoAns_exact"] == pytest.approx(50.0)
  # Best threshold: start = 1 (only n, m is missing); h 0.0: +1 -> 2 (best, 0.0); n 0.5: +0.
  assert result["best_exact"] == pytest.approx(100.0 * 2 / 3)
  # v1.1 counts them as 0 too.
  v1 = se.evaluate_v1(_dataset([("h", ["Paris"]), ("x", ["Rome"])]), {"h": "paris"})
  assert v1["exact_match"] == pytest.approx(50.0)


def test_evaluate_v2_na_probs_must_cover_predictions():
  dataset = _dataset([("h", ["Paris"]), ("n", [])])
  with pytest.raises(ValueError, match="no value for 1 predicted"):
    se.evaluate_v2(dataset, {"h": "Paris", "n": ""}, na_probs={"h": 0.0})


def test_v1_and_v2_agree_on_answerable_questions():
  dataset = _dataset([("q1", ["France", "a region in France"]), ("q2", ["Rollo"]),
                      ("q3", ["in 911", "911"])])
  preds = {"q1": "in France", "q2": "the Rollo", "q3": "King Charles in 911"}
  v1 = se.evaluate_v1(dataset, preds)
  v2 = se.evaluate_v2(dataset, preds)
  assert v1["exact_match"] == pytest.approx(v2["exact"])
  assert v1["f1"] == pytest.approx(v2["f1"])


def test_version_detection_and_dispatch():
  v1_json = {"version": "1.1", "data": _dataset([("q", ["x"])])}
  v2_json = {"version": "v2.0", "data": _dataset([("q", ["x"])])}
  assert not se.is_version_2(v1_json)
  assert se.is_version_2(v2_json)
  assert list(se.evaluate(v1_json, {"q": "x"})) == ["exact_match", "f1"]
  assert "HasAns_exact" in se.evaluate(v2_json, {"q": "x"})
  assert se.has_gold_answers(v1_json)
  assert not se.has_gold_answers({"data": [{"paragraphs": [{"qas": [{"id": "q"}]}]}]})


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def test_cli(tmp_path):
  dataset, preds, na_probs = _v2_case()
  data_file = tmp_path / "dev.json"
  data_file.write_text(json.dumps({"version": "v2.0", "data": dataset}))
  pred_file = tmp_path / "pred.json"
  pred_file.write_text(json.dumps(preds))
  na_file = tmp_path / "na.json"
  na_file.write_text(json.dumps(na_probs))
  out_file = tmp_path / "new_folder" / "eval.json"  # a folder that does not exist yet
  bad_file = tmp_path / "bad.json"
  bad_file.write_text("{not json")
  proc = run_tool("squad_evaluate.py", [
      data_file, pred_file, "--na_prob_file=%s" % na_file, "--na_prob_thresh=0.4",
      "--out_file=%s" % out_file], timeout=120)
  written = json.loads(out_file.read_text())
  assert written == json.loads(proc.stdout)
  assert written["best_f1_thresh"] == pytest.approx(0.5)
  assert written["exact"] == pytest.approx(50.0)
  assert not [p for p in os.listdir(out_file.parent) if ".tmp-" in p]
  proc = run_tool("squad_evaluate.py", [data_file, bad_file], expect_rc=2, timeout=120)
  assert last_error_line(proc).startswith(
      "error: predictions file %s: not valid JSON" % bad_file)


# ----------------------------------------------------------------------------------------------
# Ids the scorer cannot use: predictions for unknown ids, questions that share an id
# ----------------------------------------------------------------------------------------------


def test_count_and_warn_id_problems(capsys):
  dataset = _dataset([("q1", ["a"]), ("q2", ["b"]), ("q1", ["c"]), ("q2", ["d"]), ("q3", ["e"])])
  preds = {"q1": "a", "zz": "x", "q3": "e", "yy": "y", "xx": "z"}
  counts, firsts = se.count_id_problems(dataset, preds)
  # q1 and q2 come back once each: 2 duplicates; zz, yy, xx are no question: 3 unknown.
  assert dict(counts) == {"num_duplicate_question_ids": 2, "num_unknown_prediction_ids": 3}
  assert firsts == {"num_duplicate_question_ids": "q1", "num_unknown_prediction_ids": "zz"}
  assert se.warn_id_problems(dataset, preds, "data file d.json", "predictions file p.json") == (
      counts)
  err = capsys.readouterr().err.splitlines()
  assert err == [
      "warning: data file d.json: 2 question(s) repeat an earlier question's id (first: q1); "
      "each of them is scored against the one prediction of that id",
      "warning: predictions file p.json: 3 id(s) not in the dataset (first: zz); they are not "
      "scored (data file d.json)"]
  # Clean input: no warning, zero counts.
  assert dict(se.warn_id_problems(_dataset([("q", ["a"])]), {"q": "a"}, "d", "p")) == {
      "num_duplicate_question_ids": 0, "num_unknown_prediction_ids": 0}
  assert capsys.readouterr().err == ""


def test_cli_warns_about_unknown_and_duplicate_ids(tmp_path):
  dataset = _dataset([("q1", ["Paris"]), ("q2", ["Rome"]), ("q1", ["Paris"])])
  data_file = tmp_path / "dev.json"
  data_file.write_text(json.dumps({"version": "1.1", "data": dataset}))
  pred_file = tmp_path / "pred.json"
  pred_file.write_text(json.dumps({"q1": "Paris", "q2": "Oslo", "q9": "x", "q8": "y"}))
  out_file = tmp_path / "eval.json"
  proc = run_tool("squad_evaluate.py", [data_file, pred_file, "--out_file=%s" % out_file],
                  timeout=120)
  warnings = [l for l in proc.stderr.splitlines() if l.startswith("warning: ")]
  assert warnings == [
      "warning: data file %s: 1 question(s) repeat an earlier question's id (first: q1); each "
      "of them is scored against the one prediction of that id" % data_file,
      "warning: predictions file %s: 2 id(s) not in the dataset (first: q9); they are not "
      "scored (data file %s)" % (pred_file, data_file)]
  result = json.loads(out_file.read_text())
  # v1.1 rules over the 3 questions: q1 right twice, q2 wrong: EM = F1 = 200 / 3.
  assert result["exact_match"] == pytest.approx(200.0 / 3)
  assert result["num_unknown_prediction_ids"] == 2
  assert result["num_duplicate_question_ids"] == 1
  assert list(result)[:2] == ["exact_match", "f1"]  # the official keys first
