"""Tests of HotpotQA for ETC (etc_model/hotpotqa.py, create_hotpotqa, hotpotqa_evaluate and
run_long_tasks --task=hotpotqa): the official scorer on crafted cases computed by hand from its
definitions, reading HotpotQA files, the features of a hand-made example and the official
truncation, the records of the fixtures in tests/fixtures/hotpotqa, the answer decoding, and a
tiny train / eval / predict job from a lifted checkpoint."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool
from conftest import train_bert_windows, write_random_bert_checkpoint
from etc_model import bert_windows
from etc_model import create_hotpotqa
from etc_model import hotpotqa
from etc_model import hotpotqa_evaluate
from etc_model import lift_bert_checkpoint as lift
from etc_model import long_task_heads as heads
from realformer_tf import common
from realformer_tf import pretraining_data

tf1 = tf.compat.v1
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "hotpotqa")
L, G = 128, 32
SETTINGS = {"max_seq_length": L, "max_global_seq_length": G, "do_lower_case": True}


def _write(path, data):
  path.write_text(data if isinstance(data, str) else json.dumps(data))
  return str(path)


# ----------------------------------------------------------------------------- the official scorer
def test_answer_scores_by_hand():
  # Normalization: lower case, punctuation and articles removed, spaces collapsed.
  assert hotpotqa.normalize_answer("  The Eiffel-Tower, an  icon! ") == "eiffeltower icon"
  assert hotpotqa.answer_f1("eiffel tower!", "The Eiffel Tower") == (1.0, 1.0, 1.0)
  # Repeated words count once per gold occurrence: 1 common of 2 predicted, 1 gold.
  f1, precision, recall = hotpotqa.answer_f1("paris paris", "Paris")
  assert (precision, recall) == (0.5, 1.0) and f1 == pytest.approx(2 / 3.0)
  # yes / no / noanswer against anything else is 0 on both sides, even with a common word.
  assert hotpotqa.answer_f1("yes it is", "yes") == (0, 0, 0)
  assert hotpotqa.answer_f1("yes", "yes it is") == (0, 0, 0)
  assert hotpotqa.answer_f1("no", "yes") == (0, 0, 0)
  assert hotpotqa.answer_f1("Yes.", "yes") == (1.0, 1.0, 1.0)
  assert hotpotqa.answer_f1("noanswer", "noanswer") == (1.0, 1.0, 1.0)
  # An empty answer: no common word, F1 0, even against an empty gold (whose EM is 1).
  assert hotpotqa.answer_f1("", "Paris") == (0, 0, 0)
  assert hotpotqa.answer_f1("the", "a") == (0, 0, 0)
  # Supporting facts are sets: a duplicate pair counts once.
  assert hotpotqa.supporting_facts_scores(
      [["A", 0], ["A", 0], ["B", 2]], [["A", 0], ["B", 1]]) == (0.0, 0.5, 0.5, 0.5)
  assert hotpotqa.supporting_facts_scores([], [["A", 0]]) == (0.0, 0.0, 0.0, 0.0)
  assert hotpotqa.supporting_facts_scores([["A", 0]], [["A", 0]]) == (1.0, 1.0, 1.0, 1.0)
  # Titles are compared exactly and sentence ids as integers.
  assert hotpotqa.supporting_facts_scores([["a", 0], ["A", 1]], [["A", 0]])[1] == 0.0


GOLD = [("a", "The Eiffel Tower", [["Paris", 0], ["Tower", 1]]),
        ("b", "yes", [["X", 0], ["Y", 0]]),
        ("c", "1889", [["Tower", 0]]),
        ("d", "no", [["Z", 2]])]
PREDICTIONS = {
    "answer": {"a": "eiffel tower!", "b": "yes it is", "c": "in 1889 and 1890", "e": "x"},
    "sp": {"a": [["Paris", 0], ["Paris", 0], ["Tower", 2]], "b": [["Y", 0], ["X", 0]],
           "d": []}}
# By hand: a: answer 1 / 1 / 1 / 1, facts {Paris 0, Tower 2} vs {Paris 0, Tower 1}: EM 0,
# P = R = F1 = 0.5, joint P = R = F1 = 0.5, EM 0. b: "yes it is" vs yes: 0; facts exact: 1;
# joint 0. c: 1 common word of 4 predicted: P 0.25, R 1, F1 0.4, EM 0; no facts predicted: 0, no
# joint. d: no answer predicted (0, no joint); facts [] vs 1 gold: 0. Sums over 4 examples.
EXPECTED = {
    "em": 1 / 4.0, "f1": 1.4 / 4, "prec": 1.25 / 4, "recall": 2 / 4.0,
    "sp_em": 1 / 4.0, "sp_f1": 1.5 / 4, "sp_prec": 1.5 / 4, "sp_recall": 1.5 / 4,
    "joint_em": 0.0, "joint_f1": 0.5 / 4, "joint_prec": 0.5 / 4, "joint_recall": 0.5 / 4,
    "examples": 4, "missing_answers": 1, "missing_sp": 1, "unknown_ids": 1}


def test_official_metrics_on_crafted_predictions():
  result = hotpotqa.evaluate(PREDICTIONS, GOLD)
  assert list(result) == list(hotpotqa.METRIC_NAMES) + [
      "examples", "missing_answers", "missing_sp", "unknown_ids"]
  for key, value in EXPECTED.items():
    assert result[key] == pytest.approx(value, abs=1e-12), key
  # Joint scores are products of the answer's and the facts' precision and recall: answer P 0.5
  # R 1 (2 predicted words, 1 gold) and facts P 1 R 0.5 give joint P 0.5, R 0.5, F1 0.5.
  joint = hotpotqa.evaluate({"answer": {"a": "paris london"}, "sp": {"a": [["A", 0]]}},
                            [("a", "Paris", [["A", 0], ["B", 0]])])
  assert (joint["joint_prec"], joint["joint_recall"], joint["joint_f1"]) == (0.5, 0.5, 0.5)
  assert joint["joint_em"] == 0.0
  # An empty predicted answer against an empty gold one: EM 1 but F1 0 (official).
  empty = hotpotqa.evaluate({"answer": {"a": ""}, "sp": {"a": [["A", 0]]}}, [("a", "", [["A", 0]])])
  assert (empty["em"], empty["f1"], empty["joint_em"], empty["joint_f1"]) == (1.0, 0.0, 1.0, 0.0)
  assert hotpotqa.evaluate({"answer": {}, "sp": {}}, [])["em"] is None


def _dev_record(**overrides):
  record = {"_id": "a", "question": "q?", "answer": "x",
            "supporting_facts": [["T", 0]], "context": [["T", ["x is here."]]]}
  record.update(overrides)
  return record


def test_the_command_scores_a_prediction_file_and_refuses_bad_ones(tmp_path):
  gold = [_dev_record(_id=key, answer=answer, supporting_facts=facts)
          for key, answer, facts in GOLD]
  data = _write(tmp_path / "dev.json", gold)
  predictions = _write(tmp_path / "pred.json", PREDICTIONS)
  out = tmp_path / "eval.json"
  result = run_tool(None, ["-m", "etc_model.hotpotqa_evaluate", data, predictions,
                           "--out_file=%s" % out])
  written = json.loads(out.read_text())
  for key, value in EXPECTED.items():
    assert written[key] == pytest.approx(value, abs=1e-12), key
  assert "1 predicted ids are not in" in result.output
  assert hotpotqa_evaluate.evaluate_files(data, predictions) == written

  # Bad prediction files are one line naming the file.
  def error(predictions):
    path = _write(tmp_path / "bad.json", predictions)
    with pytest.raises(common.UsageError) as e:
      hotpotqa.read_predictions(path)
    return str(e.value).replace(path, "P")

  assert error({"answer": {}}) == (
      'prediction file P: has no "sp" (the official format {"answer": {id: text}, "sp": {id: '
      '[[title, sent_id], ...]}})')
  assert error({"answer": {"a": ["x"]}, "sp": {}}) == (
      "prediction file P: the answer of a is a list, not a string")
  assert error({"answer": {}, "sp": {"a": [["T", "0"]]}}) == (
      "prediction file P: the supporting facts of a are not a list of [title, sentence index] "
      "pairs")
  assert error({"answer": {}, "sp": {"a": [["T", True]]}}) == error({"answer": {}, "sp": {
      "a": [["T", 0, 1]]}})
  assert error({"answer": [], "sp": {}}) == (
      'prediction file P: "answer" is a list, not an object {id: ...}')
  assert error("[1, ").startswith("prediction file P: not valid JSON (")
  empty = _write(tmp_path / "empty.json", [])
  with pytest.raises(common.UsageError, match=r"empty.json: has no examples to score$"):
    hotpotqa_evaluate.evaluate_files(empty, predictions)
  with pytest.raises(common.UsageError, match=r"^usage: python -m etc_model.hotpotqa_evaluate "):
    hotpotqa_evaluate.main(["hotpotqa_evaluate", data])


# ----------------------------------------------------------------------------- reading the data
def test_reading_checks_name_the_file_and_the_record(tmp_path):
  def error(data, require_answer=True):
    path = _write(tmp_path / "dev.json", data)
    with pytest.raises(common.UsageError) as e:
      hotpotqa.read_examples(path, "--dev_file=" + path, require_answer)
    return str(e.value).replace(path, "P")

  assert error("[{").startswith("--dev_file=P: not valid JSON (")
  assert error({"data": []}) == (
      "--dev_file=P: not a HotpotQA file (a JSON list of records), got a dict")
  assert error([_dev_record(), 3]) == "--dev_file=P: record 1 is a int, not an object"
  no_facts = _dev_record(_id="b")
  del no_facts["supporting_facts"]
  assert error([_dev_record(), no_facts]) == (
      '--dev_file=P: record 1 (_id b) has no "supporting_facts"')
  assert error([_dev_record(question=None)]) == (
      '--dev_file=P: record 0 (_id a): "question" is a NoneType, not a string')
  assert error([_dev_record(context=[["T", "x is here."]])]) == (
      '--dev_file=P: record 0 (_id a): "context" paragraph 0 is not [title, [sentences]]')
  assert error([_dev_record(supporting_facts=[["T", 0.0]])]) == (
      '--dev_file=P: record 0 (_id a): "supporting_facts" is not a list of [title, sentence '
      'index] pairs')
  assert error([_dev_record(), _dev_record()]) == (
      "--dev_file=P: record 1 (_id a) repeats an earlier record's _id")
  # The fullwiki test file has neither answers nor facts; a fact outside the context is kept.
  test = _dev_record(supporting_facts=[["T", 1], ["U", 0], ["T", 0]])
  del test["answer"]
  path = _write(tmp_path / "test.json", [test])
  example, = hotpotqa.read_examples(path, "--test_file", require_answer=False)
  assert example.answer is None and example.type == ""
  assert hotpotqa.facts_outside_context(example) == [["T", 1], ["U", 0]]


def test_bad_input_file_is_one_line_and_writes_nothing(tmp_path):
  good = os.path.join(FIXTURES, "train.json")
  bad = _write(tmp_path / "dev.json", [_dev_record(), _dev_record(context="T")])
  result = run_tool(None, ["-m", "etc_model.create_hotpotqa", "--train_file=" + good,
                           "--dev_file=" + bad, "--vocab_file=" + VOCAB,
                           "--output_dir=%s" % (tmp_path / "out")], expect_rc=2)
  assert last_error_line(result) == (
      "error: --dev_file=%s: record 1 (_id a): \"context\" is not a list of [title, "
      "[sentences]]" % bad)
  assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- features
class _FakeTokenizer(object):
  """Lower-cases a white-space word; a final "." or "?" is its own piece; ids grow from 1000."""

  def __init__(self):
    self.vocab = {}

  def tokenize(self, text):
    pieces = []
    for word in text.lower().split():
      if word[-1] in ".?" and len(word) > 1:
        pieces += [word[:-1], word[-1]]
      else:
        pieces.append(word)
    return pieces

  def convert_tokens_to_ids(self, pieces):
    return [self.vocab.setdefault(p, 1000 + len(self.vocab)) for p in pieces]


IDS = {"cls": 101, "sentence": 1, "question": 3, "paragraph": 5}
HAND_EXAMPLE = hotpotqa.Example(
    id="x", question="Where is X?",
    context=[hotpotqa.Paragraph("Alpha", ["Alpha is in Beta.", " It is old."]),
             hotpotqa.Paragraph("Beta", ["Beta is a city."])],
    answer="Beta", supporting_facts=[["Alpha", 0], ["Beta", 0]], type="bridge", level="easy")


def _convert(example, is_training=False, **settings):
  tokenizer = _FakeTokenizer()
  settings = dict({"max_seq_length": 24, "max_global_seq_length": 14}, **settings)
  features, info = hotpotqa.convert_example(example, hotpotqa.make_tokenize(tokenizer),
                                            tokenizer.tokenize, IDS, settings, is_training)
  words = {i: w for w, i in tokenizer.vocab.items()}
  words[101] = "[CLS]"
  return features, info, words


def test_features_of_a_hand_made_example():
  features, info, words = _convert(HAND_EXAMPLE)
  assert list(features) == [name for name, _ in hotpotqa.FEATURES]
  assert info == {"skipped": None, "long_tokens": 21, "global_tokens": 12, "dropped_parts": 0,
                  "dropped_global_full": 0, "dropped_pieces": 0, "answer_type": 0,
                  "answer_found": True}
  assert [words.get(i, "") for i in features["token_ids"]] == (
      ["[CLS]", "where", "is", "x", "?", "alpha", "alpha", "is", "in", "beta", ".",
       "it", "is", "old", ".", "beta", "beta", "is", "a", "city", "."] + [""] * 3)
  # Global: [CLS], 4 question pieces, Alpha (paragraph 5, title 6, sentences 7, 8), Beta
  # (paragraph 9, title 10, sentence 11); every global token of type 0.
  assert features["global_token_ids"] == [101, 3, 3, 3, 3, 5, 1, 1, 1, 5, 1, 1, 0, 0]
  assert features["global_segment_ids"] == [0] * 14
  assert features["global_breakpoints"] == [1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0]
  assert features["sentence_ids"] == ([-1, 1, 2, 3, 4, 6] + [7] * 5 + [8] * 4 + [10] +
                                      [11] * 5 + [-1] * 3)
  assert features["paragraph_ids"] == [-1] * 5 + [5] * 10 + [9] * 6 + [-1] * 3
  assert features["long_breakpoints"] == ([1, 0, 0, 0, 1] + [0] * 9 + [1] + [0] * 5 + [1] +
                                          [0] * 3)
  assert features["segment_ids"] == [1, 3, 3, 3, 3, 2] + [1] * 9 + [2] + [1] * 5 + [0] * 3
  assert features["long_tokens_to_unigrams"] == (
      [-1] * 5 + [0, 0, 1, 2, 3, 3, 0, 1, 2, 2, 0, 0, 1, 2, 3, 3] + [-1] * 3)
  assert features["global_paragraph_ids"] == [-1] * 5 + [0] * 4 + [1] * 3 + [-1] * 2
  assert features["global_sentence_ids"] == [-1] * 7 + [0, 1, -1, -1, 0, -1, -1]
  # The supporting paragraphs' paragraph and title tokens and the supporting sentences.
  assert features["supporting_facts"] == [0] * 5 + [1, 1, 1, 0, 1, 1, 1, 0, 0]
  # "Beta" occurs in Alpha's sentence 0 ("beta ." tightened to "beta"), Beta's title and its
  # sentence: the occurrence ending first.
  assert (features["answer_type"], features["answer_begin"], features["answer_end"]) == (
      [0], [9], [9])


def test_truncation_answer_types_and_the_training_filter():
  # L = 15: Beta's title and sentence do not fit (its paragraph token does).
  features, info, _ = _convert(HAND_EXAMPLE, max_seq_length=15)
  assert (info["long_tokens"], info["global_tokens"]) == (15, 10)
  assert (info["dropped_parts"], info["dropped_pieces"], info["dropped_global_full"]) == (2, 6, 0)
  assert features["global_token_ids"][9:] == [5, 0, 0, 0, 0]
  assert features["global_breakpoints"][9:] == [1, 0, 0, 0, 0]
  # L = 14: Alpha's sentence 1 (4 pieces) does not fit but Beta's title (1 piece) after it does,
  # as officially; the sentence numbers stay those of the data.
  features, info, words = _convert(HAND_EXAMPLE, max_seq_length=14)
  assert (info["dropped_parts"], info["dropped_pieces"]) == (2, 9)
  assert features["global_token_ids"] == [101, 3, 3, 3, 3, 5, 1, 1, 5, 1, 0, 0, 0, 0]
  assert features["global_sentence_ids"][:10] == [-1] * 7 + [0, -1, -1]
  assert [words.get(i, "") for i in features["token_ids"][11:]] == ["beta", "", ""]
  assert features["long_breakpoints"][10:] == [1, 1, 0, 0]
  # G = 8: the global input fills up at Alpha's sentence 0.
  features, info, _ = _convert(HAND_EXAMPLE, max_global_seq_length=8)
  assert (info["global_tokens"], info["dropped_parts"], info["dropped_global_full"]) == (8, 3, 3)
  # yes / no: type 1 / 2 and the [CLS] span; an unknown answer: -1.
  for answer, want in (("yes", [1, 0, 0]), ("no", [2, 0, 0]), ("Gamma", [-1, -1, -1]),
                       (None, [-1, -1, -1])):
    features, info, _ = _convert(HAND_EXAMPLE._replace(answer=answer))
    assert [features[k][0] for k in ("answer_type", "answer_begin", "answer_end")] == want
  # Training: an answer not found, or no supporting fact kept, gives no record.
  assert _convert(HAND_EXAMPLE._replace(answer="Gamma"), is_training=True)[:2] == (
      None, {"skipped": "answer not found in the kept supporting sentences", "long_tokens": 21,
             "global_tokens": 12, "dropped_parts": 0, "dropped_global_full": 0,
             "dropped_pieces": 0, "answer_type": -1, "answer_found": False})
  # (Beta's paragraph token carries a label too; with G = 9 it does not fit.)
  features, info, _ = _convert(HAND_EXAMPLE._replace(supporting_facts=[["Beta", 0]]),
                               is_training=True, max_global_seq_length=9)
  assert features is None and info["skipped"] == "no supporting fact in the kept input"
  # The answer must be found in a kept supporting sentence: Beta's was cut, Alpha's is not one.
  features, info, _ = _convert(HAND_EXAMPLE._replace(supporting_facts=[["Alpha", 1],
                                                                       ["Beta", 0]]),
                               is_training=True, max_seq_length=15)
  assert features is None and info["skipped"] == (
      "answer not found in the kept supporting sentences")


def test_answer_spans_are_tightened_to_the_answer_pieces():
  tokenizer = pretraining_data.make_tokenizer(VOCAB, True)
  tokenize = hotpotqa.make_tokenize(tokenizer)
  text = "The leader was John Smith (1895-1943). John Smith's son"
  tokenized = tokenize(text)
  spans = hotpotqa.find_answer_spans(tokenized, "1895", tokenizer.tokenize)
  assert [tokenized.pieces[a:b + 1] for a, b in spans] == [["1895"]]
  spans = hotpotqa.find_answer_spans(tokenized, "John Smith", tokenizer.tokenize)
  assert [tokenized.pieces[a:b + 1] for a, b in spans] == [["john", "smith"]] * 2
  # A match inside a word keeps the whole word (as officially): "opera" in "operas".
  tokenized = tokenize("He wrote 39 operas.")
  spans = hotpotqa.find_answer_spans(tokenized, "opera", tokenizer.tokenize)
  assert [tokenized.pieces[a:b + 1] for a, b in spans] == [tokenizer.tokenize("operas.")]
  assert hotpotqa.find_answer_spans(tokenized, "", tokenizer.tokenize) == []


# ----------------------------------------------------------------------------- the fixtures
def _fixture_examples(splits=("train", "dev", "test")):
  return {split: hotpotqa.read_examples(os.path.join(FIXTURES, split + ".json"), split,
                                        require_answer=split != "test") for split in splits}


def test_outputs_counts_and_byte_identical_rerun(tmp_path):
  tokenizer = pretraining_data.make_tokenizer(VOCAB, True)
  examples = _fixture_examples()
  summaries = [create_hotpotqa.create_hotpotqa(examples, str(tmp_path / out), tokenizer, VOCAB,
                                               SETTINGS) for out in ("a", "b")]
  names = sorted(os.listdir(str(tmp_path / "a")))
  assert names == ["hotpotqa.json", "hotpotqa_dev.examples.jsonl", "hotpotqa_dev.tfrecord",
                   "hotpotqa_test.examples.jsonl", "hotpotqa_test.tfrecord",
                   "hotpotqa_train.examples.jsonl", "hotpotqa_train.tfrecord",
                   "hotpotqa_vocab.txt"]
  for name in names:
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
  splits = summaries[0]["splits"]
  assert [(s, splits[s]["examples"], splits[s]["records"]) for s in splits] == [
      ("train", 5, 4), ("dev", 3, 3), ("test", 2, 2)]
  # hp_train_4's answer ("the harpsichord") is nowhere in its context.
  assert splits["train"]["skipped"] == {"answer not found in the kept supporting sentences": 1}
  assert splits["train"]["answer_types"] == {"span": 2, "yes": 1, "no": 1, "unknown": 0}
  # hp_dev_2's ["Jorn Utzon", 3] points past its one-sentence paragraph.
  assert splits["dev"]["supporting_facts_outside_context"] == 1
  assert splits["test"]["answer_types"] == {"span": 0, "yes": 1, "no": 0, "unknown": 1}
  assert splits["dev"]["truncated_examples"] == 0
  assert summaries[0]["global_tokens"]["cls"] == {"token": "[CLS]", "id": 101}
  assert (tmp_path / "a" / "hotpotqa_vocab.txt").read_bytes() == open(VOCAB, "rb").read()
  # G = 16: hp_dev_0 (12 global tokens of [CLS] and question, Louvre's 3) keeps Paris' paragraph
  # token and loses its title and 2 sentences and Madrid's title and sentence (its answer
  # "France" with them); hp_dev_2 loses 3 likewise; every cut because G was full.
  _, _, stats = create_hotpotqa.convert_split(
      examples["dev"], tokenizer, hotpotqa.global_token_ids(tokenizer.vocab),
      dict(SETTINGS, max_global_seq_length=16), is_training=False)
  assert {k: stats[k] for k in ("truncated_examples", "dropped_parts", "dropped_parts_global_full",
                                "span_answers_not_found", "max_global_tokens")} == {
                                    "truncated_examples": 2, "dropped_parts": 8,
                                    "dropped_parts_global_full": 8, "span_answers_not_found": 1,
                                    "max_global_tokens": 16}
  assert stats["answer_types"] == {"span": 1, "yes": 1, "no": 0, "unknown": 1}
  lines = hotpotqa.read_split_examples(str(tmp_path / "a"), "train", 4)
  assert [(l["id"], l["record"]) for l in lines] == [
      ("hp_train_0", 0), ("hp_train_1", 1), ("hp_train_2", 2), ("hp_train_3", 3),
      ("hp_train_4", None)]
  assert {l["context"] is None for l in lines} == {True}  # never decoded: not kept
  with pytest.raises(common.UsageError,
                     match="lists 4 records but hotpotqa_train.tfrecord has 5"):
    hotpotqa.read_split_examples(str(tmp_path / "a"), "train", 5)
  # Every record's answer span reads the answer, every supporting sentence is labelled.
  records = hotpotqa.read_decoding_features(str(tmp_path / "a" / "hotpotqa_dev.tfrecord"))
  dev = hotpotqa.read_split_examples(str(tmp_path / "a"), "dev", 3)
  for i, raw in enumerate(tf.compat.v1.io.tf_record_iterator(
      str(tmp_path / "a" / "hotpotqa_dev.tfrecord"))):
    feature = tf.train.Example.FromString(raw).features.feature
    begin = feature["answer_begin"].int64_list.value[0]
    end = feature["answer_end"].int64_list.value[0]
    answer_type = feature["answer_type"].int64_list.value[0]
    if answer_type == 0:
      pieces = tokenizer.convert_ids_to_tokens(records["token_ids"][i][begin:end + 1].tolist())
      assert pieces == tokenizer.tokenize(dev[i]["answer"])
    else:
      assert (begin, end) == (0, 0) and hotpotqa.ANSWER_TYPES[answer_type] == dev[i]["answer"]
    labels = list(feature["supporting_facts"].int64_list.value)
    labelled = [[dev[i]["context"][p][0], s] for p, s, label in zip(
        records["global_paragraph_ids"][i], records["global_sentence_ids"][i], labels)
                if label and s >= 0]
    assert sorted(labelled) == sorted(f for f in dev[i]["supporting_facts"]
                                      if f != ["Jorn Utzon", 3]), dev[i]["id"]


def test_stop_request_leaves_no_temporary_and_no_summary(tmp_path):
  tokenizer = pretraining_data.make_tokenizer(VOCAB, True)
  examples = _fixture_examples(("train", "dev"))
  polls = []
  create_hotpotqa.create_hotpotqa(examples, str(tmp_path / "full"), tokenizer, VOCAB, SETTINGS,
                                  should_stop=lambda: polls.append(1) and False)
  assert len(polls) == (5 + 3) + (4 + 3)  # each example converted, each record written
  out = str(tmp_path / "out")
  for polls_before_stop in (2, 9, len(polls) - 1):
    calls = []

    def should_stop():
      calls.append(1)
      return len(calls) > polls_before_stop  # pylint: disable=cell-var-from-loop

    with pytest.raises(pretraining_data.Stopped):
      create_hotpotqa.create_hotpotqa(examples, out, tokenizer, VOCAB, SETTINGS,
                                      should_stop=should_stop)
    left = sorted(os.listdir(out)) if os.path.exists(out) else []
    assert hotpotqa.SUMMARY_NAME not in left
    assert not [name for name in left if ".tmp-" in name], left


# ----------------------------------------------------------------------------- answers
def test_best_span_and_predicted_facts_by_hand():
  # Long: [CLS], q, title T0 (sentence token 3), sentence 0 of T0 (4: 3 pieces), title T1 (6),
  # sentence 0 of T1 (7: 2 pieces).
  types = np.array([1, 3, 2, 1, 1, 1, 2, 1, 1])
  sentence_ids = np.array([-1, 1, 3, 4, 4, 4, 6, 7, 7])
  begin = np.array([9.0, 8, 0, 1, 3, 0, 0, 2, 0])
  end = np.array([9.0, 8, 0, 0, 1, 2, 0, 0, 5])
  supporting = np.array([0, 0, 0, 1, 1, 0, 1, 0], bool)
  # [CLS] and the question never; across sentences never: (4, 5) in sentence 4 scores 3 + 2
  # (title 6's one piece: 0).
  assert hotpotqa.best_span(begin, end, types, sentence_ids, supporting, 30) == (4, 5)
  # Only sentence 7 supporting: (7, 8) 2 + 5.
  supporting_7 = np.array([0, 0, 0, 0, 0, 0, 0, 1], bool)
  assert hotpotqa.best_span(begin, end, types, sentence_ids, supporting_7, 30) == (7, 8)
  # At most 1 piece: (7, 7) 2 + 0 against (8, 8) 0 + 5.
  assert hotpotqa.best_span(begin, end, types, sentence_ids, supporting_7, 1) == (8, 8)
  # Ties go to the later span (the official sorted()[-1]).
  assert hotpotqa.best_span(np.zeros(9), np.zeros(9), types, sentence_ids, supporting_7,
                            30) == (8, 8)
  assert hotpotqa.best_span(begin, end, types, sentence_ids, np.zeros(8, bool), 30) is None


def test_predictions_of_a_record_read_the_context():
  tokenizer = pretraining_data.make_tokenizer(VOCAB, True)
  example = hotpotqa.Example(
      id="x", question="Where does the Loire end?",
      context=[hotpotqa.Paragraph("Loire", ["The Loire rises in the Massif Central.",
                                            " It flows into the Bay of Biscay."]),
               hotpotqa.Paragraph("Seine", ["The Seine flows through Paris."])],
      answer="Bay of Biscay", supporting_facts=[["Loire", 1]], type="", level="")
  features, _ = hotpotqa.convert_example(
      example, hotpotqa.make_tokenize(tokenizer), tokenizer.tokenize,
      hotpotqa.global_token_ids(tokenizer.vocab), {"max_seq_length": 64,
                                                   "max_global_seq_length": 16})
  record = {name: np.array(features[name]) for name in hotpotqa.DECODING_FEATURES}
  begin, end = features["answer_begin"][0], features["answer_end"][0]
  context = [[p.title, p.sentences] for p in example.context]
  # The gold span reads back as the answer's own text (case kept, "." left out).
  assert hotpotqa.span_text((begin, end), record, context, tokenizer) == "Bay of Biscay"
  # Loire's paragraph and title tokens, its sentence 1 at probability 0.5.
  loire = np.nonzero(record["global_paragraph_ids"] == 0)[0]
  sentence_1 = loire[record["global_sentence_ids"][loire] == 1][0]
  sp_logits = np.full(16, -5.0)
  sp_logits[[loire[0], loire[1], sentence_1]] = [3.0, 3.0, 0.0]
  outputs = {"sp_logits": sp_logits, "answer_type_logits": np.array([2.0, 1.0, 0.0]),
             "begin_logits": np.where(np.arange(64) == begin, 5.0, 0.0),
             "end_logits": np.where(np.arange(64) == end, 5.0, 0.0)}
  answer, facts = hotpotqa.predict_example(outputs, record, context, tokenizer)
  assert (answer, facts) == ("Bay of Biscay", [["Loire", 1]])
  # At 0.6 sentence 1 is no fact; the span comes from the supporting title (a title is no
  # fact).
  assert hotpotqa.predict_example(outputs, record, context, tokenizer, sp_threshold=0.6) == (
      "Loire", [])
  sp_logits[loire[1]] = -3.0
  assert hotpotqa.predict_example(outputs, record, context, tokenizer, sp_threshold=0.6) == (
      "", [])
  outputs["answer_type_logits"] = np.array([0.0, 1.0, 3.0])
  assert hotpotqa.predict_example(outputs, record, context, tokenizer)[0] == "no"
  # A split: every example predicted, one without a record "" and no facts; scored officially.
  lines = [{"id": "x", "record": 0, "answer": "Bay of Biscay",
            "supporting_facts": [["Loire", 1]], "context": context},
           {"id": "y", "record": None, "answer": "no", "supporting_facts": [["A", 0]],
            "context": []}]
  stacked = {name: np.stack([value]) for name, value in outputs.items()}
  stacked["answer_type_logits"] = np.array([[2.0, 1.0, 0.0]])
  records = {name: np.stack([value]) for name, value in record.items()}
  predictions, metrics = hotpotqa.split_metrics(stacked, records, lines, tokenizer)
  assert predictions == {"answer": {"x": "Bay of Biscay", "y": ""},
                         "sp": {"x": [["Loire", 1]], "y": []}}
  assert (metrics["em"], metrics["sp_em"], metrics["joint_f1"], metrics["skipped"]) == (
      0.5, 0.5, 0.5, 1)


def test_head_loss_is_the_official_mean_of_four_losses():
  rng = np.random.RandomState(3)
  batch, long_len, global_len, hidden = 3, 6, 5, 4
  long_output = rng.randn(batch, long_len, hidden).astype(np.float32)
  global_output = rng.randn(batch, global_len, hidden).astype(np.float32)
  features = {"supporting_facts": np.array([[0, 1, 1, 0, 0], [0, 0, 1, 0, 0], [0] * 5]),
              "answer_type": np.array([[0], [1], [-1]]),
              "answer_begin": np.array([[3], [0], [-1]]), "answer_end": np.array([[4], [0], [-1]])}
  config = type("Config", (), {"hidden_size": hidden, "initializer_range": 0.5})()
  tf1 = tf.compat.v1
  with tf.Graph().as_default():
    loss, per_example, logits = heads.hotpotqa_head(
        tf.constant(long_output), tf.constant(global_output),
        {k: tf.constant(v, tf.int32) for k, v in features.items()}, config, True)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      got = sess.run({"loss": loss, "per_example": per_example, "logits": logits,
                      "variables": {v.op.name.split("/")[-1]: v for v in tf1.global_variables()}})
  v = got["variables"]
  sp = global_output @ v["supporting_facts_output_weights"][0] + v["supporting_facts_output_bias"]
  types = global_output[:, 0] @ v["answer_type_output_weights"].T + v["answer_type_output_bias"]
  spans = long_output @ v["answer_span_output_weights"].T + v["answer_span_output_bias"]
  np.testing.assert_allclose(got["logits"]["sp_logits"], sp, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got["logits"]["begin_logits"], spans[..., 0], rtol=1e-5, atol=1e-5)

  def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))

  z = features["supporting_facts"]
  sp_ce = (np.maximum(sp, 0) - sp * z + np.log1p(np.exp(-np.abs(sp)))).sum(1)
  type_ce = -log_softmax(types)[[0, 1], [0, 1]]
  begin_ce = -log_softmax(spans[..., 0])[[0, 1], [3, 0]]
  end_ce = -log_softmax(spans[..., 1])[[0, 1], [4, 0]]
  # Example 2 has no label: no loss; each loss is the mean over the examples with its label.
  want = (sp_ce[:2].mean() + type_ce.mean() + begin_ce.mean() + end_ce.mean()) / 4
  assert got["loss"] == pytest.approx(want, rel=1e-5)
  assert got["per_example"][2] == 0.0
  assert got["per_example"][0] == pytest.approx(
      (sp_ce[0] + type_ce[0] + begin_ce[0] + end_ce[0]) / 4, rel=1e-5)

# ----------------------------------------------------------------------------- run_long_tasks
TINY_ETC_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "intermediate_size": 64, "local_radius": 8,
                   "relative_pos_max_distance": 4, "relative_vocab_size": 12,
                   "residual_attention": "sum", "use_hard_g2l_mask": True}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
  """The fixtures' records (create_hotpotqa's command), an ETC config and a lifted checkpoint."""
  root = tmp_path_factory.mktemp("hotpotqa_run")
  run_tool(None, ["-m", "etc_model.create_hotpotqa", "--vocab_file=" + VOCAB,
                  "--output_dir=%s" % (root / "data"), "--max_seq_length=%d" % L,
                  "--max_global_seq_length=%d" % G] +
           ["--%s_file=%s" % (split, os.path.join(FIXTURES, split + ".json"))
            for split in ("train", "dev", "test")])
  (root / "etc_config.json").write_text(json.dumps(TINY_ETC_CONFIG))
  (root / "bert_config.json").write_text(json.dumps(TINY_BERT_CONFIG))
  write_random_bert_checkpoint(str(root / "bert_config.json"), str(root / "bert.ckpt"))
  lifted = lift.lift_bert_checkpoint(str(root / "bert.ckpt"), str(root / "lifted"),
                                     etc_config_file=str(root / "etc_config.json"))
  return {"root": root, "init": lifted["output_checkpoint"]}


def _args(job, out, extra=()):
  root = job["root"]
  return ["-m", "etc_model.run_long_tasks", "--task=hotpotqa",
          "--data_dir=%s" % (root / "data"), "--etc_config_file=%s" % (root / "etc_config.json"),
          "--output_dir=%s" % out, "--max_seq_length=%d" % L, "--max_global_seq_length=%d" % G,
          "--train_batch_size=2", "--eval_batch_size=2", "--predict_batch_size=2",
          "--learning_rate=1e-3"] + list(extra)


@pytest.mark.slow
def test_train_eval_predict_from_a_lifted_checkpoint(job, tmp_path):
  out = tmp_path / "out"
  result = run_tool(None, _args(job, out, ["--init_checkpoint=" + job["init"], "--do_train",
                                           "--do_eval", "--do_predict", "--num_train_steps=2",
                                           "--sp_threshold=0.4"]))
  # Every ETC variable comes from the lifted BERT; only the head's are new.
  assert "6 not in checkpoint: cls/long_tasks/hotpotqa/" in result.output, result.output[-3000:]
  results = json.loads((out / "eval_results.json").read_text())
  assert results["task"] == "hotpotqa" and results["global_step"] == 2
  assert (results["examples"], results["records"], results["skipped"]) == (3, 3, 0)
  for key in hotpotqa.METRIC_NAMES + ("answer_type_accuracy", "sp_label_f1"):
    assert results[key] is not None and 0.0 <= results[key] <= 1.0, key
  # dev_predictions.json is the official submission; the official scorer agrees.
  dev = json.loads((out / "dev_predictions.json").read_text())
  assert sorted(dev) == ["answer", "sp"]
  assert sorted(dev["answer"]) == sorted(dev["sp"]) == ["hp_dev_0", "hp_dev_1", "hp_dev_2"]
  scored = hotpotqa_evaluate.evaluate_files(os.path.join(FIXTURES, "dev.json"),
                                            str(out / "dev_predictions.json"))
  for key in hotpotqa.METRIC_NAMES:
    assert scored[key] == pytest.approx(results[key]), key
  assert (scored["missing_answers"], scored["missing_sp"]) == (0, 0)
  # Every predicted fact is a sentence of its example's context.
  contexts = {e["_id"]: dict(e["context"])
              for e in json.load(open(os.path.join(FIXTURES, "dev.json")))}
  for key, facts in dev["sp"].items():
    assert all(0 <= n < len(contexts[key][title]) for title, n in facts), (key, facts)
  # Test: both examples, the lines name them.
  test = json.loads((out / "test_predictions.json").read_text())
  lines = [json.loads(line) for line in
           (out / "test_predictions.jsonl").read_text().splitlines()]
  assert [l["id"] for l in lines] == list(test["answer"]) == ["hp_test_0", "hp_test_1"]
  for line in lines:
    assert (line["answer"], line["sp"]) == (test["answer"][line["id"]], test["sp"][line["id"]])
  assert [l["label"] for l in lines] == [-1, 1]
  results = json.loads((out / "test_results.json").read_text())
  assert results["examples"] == 1   # hp_test_1 has an answer and facts
  # The batches cut to their real lengths (the default) predict as --padding=max_length does,
  # here from the trained checkpoint as --init_checkpoint.
  full = tmp_path / "max_length"
  run_tool(None, _args(job, full, ["--init_checkpoint=%s" % (out / "model.ckpt-2"),
                                   "--do_predict", "--padding=max_length",
                                   "--sp_threshold=0.4"]))
  full_lines = [json.loads(line) for line in
                (full / "test_predictions.jsonl").read_text().splitlines()]
  for cut, whole in zip(lines, full_lines):
    np.testing.assert_allclose(cut["answer_type_probabilities"],
                               whole["answer_type_probabilities"], atol=2e-5)
    assert (cut["answer"], cut["sp"]) == (whole["answer"], whole["sp"])


def test_bert_windows_global_token_states_of_a_hand_made_example():
  """BERT windows read each global token off its long tokens: a title / sentence / question
  piece the mean of its tokens, a PARAGRAPH token its paragraph's, [CLS] the long [CLS]."""
  features, _, _ = _convert(HAND_EXAMPLE)
  rng = np.random.RandomState(2)
  token_output = rng.randn(1, 24, 8).astype(np.float32)
  names = ("token_ids", "sentence_ids", "paragraph_ids", "global_token_ids")
  with tf.Graph().as_default():
    states = bert_windows.global_token_states(
        tf.constant(token_output), {n: tf.constant([features[n]], tf.int32) for n in names})
    with tf1.Session() as sess:
      states = sess.run(states)[0]
  sentence_ids, paragraph_ids = np.array(features["sentence_ids"]), np.array(
      features["paragraph_ids"])
  want = np.zeros((14, 8), np.float32)
  want[0] = token_output[0, 0]
  for g in range(1, 12):
    tokens = np.flatnonzero((sentence_ids == g) | (paragraph_ids == g))
    want[g] = token_output[0, tokens].mean(axis=0)
  np.testing.assert_allclose(states, want, atol=1e-5)
  # Alpha's paragraph token (5) reads its 10 tokens; its sentence 0 (7) its 5 ("alpha is in
  # beta ."); the padding global tokens nothing.
  np.testing.assert_allclose(states[5], token_output[0, 5:15].mean(axis=0), atol=1e-5)
  np.testing.assert_allclose(states[7], token_output[0, 6:11].mean(axis=0), atol=1e-5)
  assert not states[12:].any()


@pytest.mark.slow
def test_bert_windows_train_eval_predict(job, tmp_path):
  """The sliding-window BERT baseline on HotpotQA: BERT's weights, the ETC head's variables
  under cls/long_tasks_bert, the official answers and scores."""
  root, out = job["root"], tmp_path / "out"
  train_bert_windows(_args(job, out), root, "6 not in checkpoint: cls/long_tasks_bert/hotpotqa/")
  results = json.loads((out / "eval_results.json").read_text())
  assert (results["model"], results["task"], results["global_step"]) == (
      "bert_windows", "hotpotqa", 2)
  assert (results["examples"], results["records"], results["skipped"]) == (3, 3, 0)
  scored = hotpotqa_evaluate.evaluate_files(os.path.join(FIXTURES, "dev.json"),
                                            str(out / "dev_predictions.json"))
  for key in hotpotqa.METRIC_NAMES:
    assert scored[key] == pytest.approx(results[key]), key
  test = json.loads((out / "test_predictions.json").read_text())
  assert sorted(test["answer"]) == ["hp_test_0", "hp_test_1"]


def test_flags_and_token_types_are_checked(job, tmp_path):
  small = tmp_path / "small_segments.json"
  small.write_text(json.dumps(dict(TINY_ETC_CONFIG, segment_vocab_size=3)))
  args = ["-m", "etc_model.run_long_tasks", "--data_dir=%s" % (job["root"] / "data"),
          "--etc_config_file=%s" % small, "--output_dir=%s" % (tmp_path / "out"),
          "--max_seq_length=%d" % L, "--max_global_seq_length=%d" % G, "--do_eval"]
  result = run_tool(None, args + ["--task=hotpotqa"], expect_rc=2)
  assert last_error_line(result) == (
      "error: --etc_config_file=%s: segment_vocab_size=3, but HotpotQA's token types go up to 3"
      % small)
  result = run_tool(None, args + ["--task=wikihop", "--sp_threshold=0.3"], expect_rc=2)
  assert last_error_line(result) == "error: --sp_threshold: only with --task=hotpotqa"
  assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_record_export_serves_run_long_tasks_predictions(job, tmp_path):
  # The SavedModel of serialized records, loaded in a fresh process: run_long_tasks' logits on
  # the dev records ([CLS] ignores the hard g2l mask, as in the job), the same answers decoded.
  from test_etc_export_long_model import check_record_export
  data_dir = str(job["root"] / "data")
  tokenizer, do_lower_case = hotpotqa.load_data_tokenizer(data_dir)
  served, expected = check_record_export(
      "hotpotqa", data_dir, str(job["root"] / "etc_config.json"), tmp_path,
      side_input_options={"cls_token_id": tokenizer.vocab["[CLS]"]})
  records = hotpotqa.read_decoding_features(hotpotqa.record_file(data_dir, "dev"))
  examples = hotpotqa.read_split_examples(data_dir, "dev", len(records["token_ids"]))
  decoded = [hotpotqa.split_predictions(outputs, records, examples, tokenizer, do_lower_case)
             for outputs in (served, expected)]
  assert decoded[0] == decoded[1] and len(decoded[0]["answer"]) == 3
