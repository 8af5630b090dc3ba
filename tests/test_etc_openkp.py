"""Tests of OpenKP for ETC (etc_model/openkp.py, create_openkp, openkp_evaluate and
run_long_tasks --task=openkp): the official scorer on crafted cases whose values are worked out
by hand from microsoft/OpenKP's evaluate.py, the features and labels of hand-made documents,
the keyphrase decoding, the n-gram head, and a tiny train / eval / predict job."""

import gzip
import json
import os
import types

import numpy as np
import pytest

from conftest import REPO_DIR, run_tool
from etc_model import openkp
from etc_model import openkp_evaluate
from realformer_tf import common

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")


def _write_jsonl(path, records, compress=False):
  text = "".join(json.dumps(r) + "\n" for r in records).encode("utf-8")
  with open(str(path), "wb") as f:
    f.write(gzip.compress(text) if compress else text)
  return str(path)


# ----------------------------------------------------------------------------- the official scorer
REFERENCES = {
    "a": [["Machine", "Learning"], ["deep", "learning"], ["AI"]],
    # No article or punctuation removal; a keyphrase without words or with an empty first word
    # is dropped.
    "b": [["the", "cat"], ["Cat"], [""], []],
    "c": [["x"]],
}
PREDICTIONS = {
    # A repeat (after lower-casing) is dropped; "AI " loses its trailing space.
    "a": [["machine", "learning"], ["MACHINE", "learning"], ["neural"], ["AI "],
          ["deep", "learning"], ["x"]],
    "b": [["cat."], ["", "cat"], ["the", "cat"]],
    "c": [],
}
# By hand. a: cleaned [machine learning, neural, ai, deep learning, x] against 3 references:
# tp 1, 2, 3 at k = 1, 3, 5: P 1, 2/3, 3/5; R 1/3, 2/3, 1; F1 1/2, 2/3, 3/4. b: [cat., the cat]
# against 2: tp 0, 1, 1: P 0, 1/3, 1/5; R 0, 1/2, 1/2; F1 0, 2/5, 2/7. c: all 0.
EXPECTED = {
    "F1@1": (0.5 + 0 + 0) / 3, "P@1": (1 + 0 + 0) / 3, "R@1": (1 / 3) / 3,
    "F1@3": (2 / 3 + 2 / 5) / 3, "P@3": (2 / 3 + 1 / 3) / 3, "R@3": (2 / 3 + 1 / 2) / 3,
    "F1@5": (3 / 4 + 2 / 7) / 3, "P@5": (3 / 5 + 1 / 5) / 3, "R@5": (1 + 1 / 2) / 3,
    "examples": 3,
}


def test_official_normalisation_and_metrics_on_crafted_documents():
  assert openkp.clean_phrases(PREDICTIONS["a"]) == [
      "machine learning", "neural", "ai", "deep learning", "x"]
  assert openkp.clean_phrases(REFERENCES["b"]) == ["the cat", "cat"]
  metrics = openkp.evaluate(REFERENCES, PREDICTIONS)
  assert list(metrics) == list(EXPECTED)
  for key, value in EXPECTED.items():
    assert metrics[key] == pytest.approx(value), key
  with pytest.raises(ValueError, match="1 reference urls have no prediction and 0"):
    openkp.evaluate(REFERENCES, {k: v for k, v in PREDICTIONS.items() if k != "c"})
  with pytest.raises(ValueError, match="url b has no reference keyphrase that is not empty"):
    openkp.evaluate(dict(REFERENCES, b=[[""], []]), PREDICTIONS)


def test_the_command_scores_the_official_files_and_refuses_bad_ones(tmp_path, monkeypatch):
  # The reference's url "a" twice: its last line counts, as officially.
  reference = _write_jsonl(tmp_path / "OpenKPDev.jsonl.gz", [
      {"url": "a", "text": "t", "KeyPhrases": [["other"]]}] + [
          {"url": url, "text": "t", "VDOM": "[]", "KeyPhrases": phrases}
          for url, phrases in REFERENCES.items()], compress=True)
  predictions = _write_jsonl(tmp_path / "predictions.jsonl", [
      {"url": url, "KeyPhrases": phrases} for url, phrases in PREDICTIONS.items()])
  result = openkp_evaluate.evaluate_files(reference, predictions)
  for key, value in EXPECTED.items():
    assert result[key] == pytest.approx(value), key
  assert result["duplicate_urls"] == {"reference": 1, "prediction": 0}
  out = tmp_path / "eval.json"
  monkeypatch.setattr(openkp_evaluate, "FLAGS", types.SimpleNamespace(out_file=str(out)))
  openkp_evaluate.main(["openkp_evaluate", reference, predictions])
  assert json.loads(out.read_text())["F1@3"] == pytest.approx(EXPECTED["F1@3"])

  def refused(lines):
    bad = _write_jsonl(tmp_path / "bad.jsonl", lines)
    with pytest.raises(common.UsageError) as error:
      openkp_evaluate.evaluate_files(reference, bad)
    return str(error.value)

  source = "prediction file %s" % (tmp_path / "bad.jsonl")
  assert refused([{"url": "a", "KeyPhrases": []}]) == source + (
      " against %s: 2 reference urls have no prediction and 0 predictions are for urls the "
      "reference file does not have (the official scorer needs exactly its urls)" % reference)
  assert refused([{"url": "a", "KeyPhrases": "ai"}]) == source + (
      ": line 1: url a: KeyPhrases is a str, not a list")
  assert refused([{"url": "a", "KeyPhrases": [["ai"], "ml"]}]) == source + (
      ": line 1: url a: keyphrase 1 is not a list of strings (the official format: "
      "[[word, ...], ...])")
  assert refused([{"KeyPhrases": []}]) == source + ": line 1: has no url string"
  (tmp_path / "broken.jsonl").write_text('{"url": "a", "KeyPhrases": [}\n')
  with pytest.raises(common.UsageError, match=r"broken.jsonl: line 1: Expecting value"):
    openkp_evaluate.evaluate_files(str(tmp_path / "broken.jsonl"), predictions)
  with pytest.raises(common.UsageError, match="missing.jsonl: file does not exist"):
    openkp_evaluate.evaluate_files(str(tmp_path / "missing.jsonl"), predictions)
