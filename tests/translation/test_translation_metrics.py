"""Tests for translation_metrics.py against values computed by hand from the BLEU / chrF formulas."""

import json
import math
import os

import pytest

from translation import translation_metrics



def _bleu(precisions, hyp_len, ref_len):
  """BLEU (in %) from the modified n-gram precisions and the lengths (Papineni et al. 2002)."""
  bp = 1.0 if hyp_len >= ref_len else math.exp(1.0 - ref_len / hyp_len)
  return 100.0 * bp * math.exp(sum(math.log(p) for p in precisions) / len(precisions))


def test_identical_text_scores_100():
  text = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee-Feld!"]
  scores = translation_metrics.score_translations(text, text, "de")
  assert scores["bleu"] == pytest.approx(100.0)
  assert scores["chrf"] == pytest.approx(100.0)
  assert scores["tokenized_compound_split_bleu"] == pytest.approx(100.0)
  assert scores["num_sentences"] == 2


def test_bleu_hand_computed():
  # the cat sat on the mat / the cat sat on a mat: clipped matches 5/6, 3/5, 2/4, 1/3; BP 1.
  scores = translation_metrics.sacrebleu_scores(["the cat sat on the mat"],
                                                ["the cat sat on a mat"])
  expected = _bleu([5 / 6, 3 / 5, 2 / 4, 1 / 3], 6, 6)  # = 100 * (1/12) ** 0.25
  assert expected == pytest.approx(100 * (1 / 12) ** 0.25)
  assert scores["bleu"] == pytest.approx(expected, abs=1e-9)
  assert scores["bleu_details"]["precisions"] == pytest.approx([500 / 6, 60.0, 50.0, 100 / 3])


def test_bleu_brevity_penalty_hand_computed():
  # Every n-gram of the 5-word hypothesis matches; the reference has 6 words: BP = exp(1 - 6/5).
  scores = translation_metrics.sacrebleu_scores(["the cat sat on the"],
                                                ["the cat sat on the mat"])
  assert scores["bleu"] == pytest.approx(100 * math.exp(-0.2), abs=1e-9)
  assert scores["bleu_details"]["brevity_penalty"] == pytest.approx(math.exp(-0.2))


def test_corpus_bleu_sums_counts_over_sentences():
  # Corpus BLEU pools the n-gram counts: (5+4)/(6+4), (3+3)/(5+3), (2+2)/(4+2), (1+1)/(3+1).
  scores = translation_metrics.sacrebleu_scores(
      ["the cat sat on the mat", "a dog ran home"], ["the cat sat on a mat", "a dog ran home"])
  assert scores["bleu"] == pytest.approx(_bleu([9 / 10, 6 / 8, 4 / 6, 2 / 4], 10, 10), abs=1e-9)


def test_chrf_hand_computed():
  # abc / abd: character 1-grams 2/3 (precision = recall), 2-grams 1/2, 3-grams 0/1, no 4..6
  # grams: average 7/18 over the 3 effective orders; F2 of P = R is P.
  scores = translation_metrics.sacrebleu_scores(["abc"], ["abd"])
  assert scores["chrf"] == pytest.approx(100 * 7 / 18, abs=1e-9)


def test_signatures_are_the_standard_strings():
  import sacrebleu  # pylint: disable=g-import-not-at-top
  scores = translation_metrics.score_translations(["a b c d"], ["a b c d"], "en")
  version = sacrebleu.__version__
  assert scores["bleu_signature"] == (
      "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:%s" % version)
  assert scores["chrf_signature"] == (
      "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:%s" % version)
  assert "tok:none" in scores["tokenized_compound_split_bleu_signature"]
  assert "moses-tok:en|compound-split:atat" in scores["tokenized_compound_split_bleu_signature"]
  assert "not comparable to sacreBLEU" in scores["tokenized_compound_split_bleu_note"]


def test_split_compounds_matches_the_perl_substitution():
  # perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g': non-overlapping, left to right.
  split = translation_metrics.split_compounds
  assert split("rich-text format") == "rich ##AT##-##AT## text format"
  assert split("Mann-im-Mond") == "Mann ##AT##-##AT## im ##AT##-##AT## Mond"
  assert split("a-b-c") == "a ##AT##-##AT## b-c"
  assert split("x - y") == "x - y"
  assert split("-a a-") == "-a a-"


def test_tokenized_compound_split_bleu_hand_computed():
  # Moses (de): "Der Mann-im-Mond lacht ." -> split: Der Mann ##AT##-##AT## im ##AT##-##AT##
  # Mond lacht . (8 tokens); the reference differs in "lacht"/"weint": matches 7/8, 5/7, 4/6, 3/5.
  scores = translation_metrics.score_translations(["Der Mann-im-Mond lacht."],
                                                  ["Der Mann-im-Mond weint."], "de")
  assert scores["tokenized_compound_split_bleu"] == pytest.approx(
      _bleu([7 / 8, 5 / 7, 4 / 6, 3 / 5], 8, 8), abs=1e-9)
  assert scores["tokenized_compound_split_bleu_details"]["sys_len"] == 8
  # 13a keeps "Mann-im-Mond" whole (4 tokens), so the detokenised BLEU is lower.
  assert scores["bleu_details"]["sys_len"] == 4
  assert scores["bleu"] < scores["tokenized_compound_split_bleu"]


def test_moses_processor_tokenizes_and_escapes():
  process = translation_metrics.MosesProcessor("en")
  assert process("A dog & a well-known cat, \u201cyes\u201d.") == (
      "A dog &amp; a well ##AT##-##AT## known cat , &quot; yes &quot; .")


def test_mismatched_lengths_raise():
  with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
    translation_metrics.score_translations(["a", "b"], ["a"], "de")
  with pytest.raises(ValueError, match="no hypotheses"):
    translation_metrics.score_translations([], [], "de")


def test_write_bleu_json_atomic(tmp_path):
  scores = translation_metrics.score_translations(["a b c d e"], ["a b c d f"], "en")
  path = os.path.join(str(tmp_path), "bleu.json")
  translation_metrics.write_bleu_json(path, scores)
  with open(path) as f:
    assert json.load(f) == scores  # floats survive JSON exactly (repr round-trips)
  assert sorted(os.listdir(str(tmp_path))) == ["bleu.json"]
