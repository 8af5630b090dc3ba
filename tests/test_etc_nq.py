"""Tests of Natural Questions for ETC (etc_model/nq.py, create_nq, nq_evaluate and
run_long_tasks --task=nq): the official scorer on crafted cases whose values are worked out by
hand from nq_eval's rules, reading NQ files, the windows and labels of hand-made examples, the
answer decoding, and a tiny train / eval / predict job from a lifted checkpoint."""

import gzip
import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, run_tool
from conftest import train_bert_windows, write_random_bert_checkpoint
from etc_model import long_tasks
from etc_model import nq
from etc_model import nq_evaluate
from realformer_tf import common

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")


def _span(span=None, byte=None):
  start, end = span or (-1, -1)
  start_byte, end_byte = byte or (-1, -1)
  return {"start_token": start, "end_token": end, "start_byte": start_byte,
          "end_byte": end_byte}


def _annotation(long=None, short=(), yes_no="NONE"):
  return {"long_answer": dict(_span(long), candidate_index=-1),
          "short_answers": [_span(s) for s in short], "yes_no_answer": yes_no}


def _prediction(key, long, long_score, short=(), short_score=None, yes_no="NONE"):
  return {"example_id": key, "long_answer": _span(long), "long_answer_score": long_score,
          "short_answers": [_span(s) for s in short],
          "short_answers_score": long_score if short_score is None else short_score,
          "yes_no_answer": yes_no}


# Five annotations per example (the development set's form).
GOLD = {
    # 3 long answers (one other span), 2 short: gold has both.
    1: [_annotation((10, 20), [(12, 13)]), _annotation((10, 20), [(12, 13)]), _annotation(),
        _annotation(), _annotation((30, 40))],
    # 1 long answer, 1 yes: below 2 of 5, no gold answer.
    2: [_annotation((50, 60))] + [_annotation(yes_no="YES")] + [_annotation()] * 3,
    # A yes and a span: 2 short answers.
    3: [_annotation((0, 5), yes_no="YES"), _annotation((0, 5), [(1, 2)])] + [_annotation()] * 3,
    # Short answer sets {1-2, 3-4} and {1-2}.
    4: [_annotation((0, 5), [(1, 2), (3, 4)]), _annotation((0, 5), [(1, 2)])] +
       [_annotation()] * 3,
    # Long answer, no short one.
    5: [_annotation((0, 5)), _annotation((0, 5))] + [_annotation()] * 3,
    6: [_annotation((7, 9), [(7, 8)])] * 5,
}
PREDICTIONS = [
    _prediction(1, (30, 40), 5, [(12, 13)]),        # long right (any annotator), short right
    _prediction(2, (50, 60), 4, yes_no="YES"),      # no gold: both wrong predictions
    _prediction(3, (0, 5), 3, yes_no="yes"),        # long right, yes right
    _prediction(4, (0, 6), 2, [(1, 2)]),            # long wrong, short set {1-2} right
    _prediction(5, None, 1),                        # predicts nothing
    _prediction(6, (7, 9), 2, [(7, 8), (8, 9)]),    # long right (tied score), short set wrong
]
# By hand (nq_eval): long (gold, predicted, right, score): 1 TTT5, 2 FTF4, 3 TTT3, 4 TTF2,
# 6 TTT2, 5 TFF1: 5 gold, 5 predicted, 3 right. Thresholds (ties enter together): 5: P 1 R .2;
# 4: P .5 R .2; 3: P 2/3 R .4; 2: P .6 R .6 (F1 .6, best; splitting the tie would give P .75
# R .6); 1: the same point, F1 not higher: the threshold stays 2. R@P>=.5: .6 (P .6); >=.75
# and >=.9: .2 (P 1). Short: 1 TTT5, 2 FTF4, 3 TTT3, 4 TTT2, 6 TTF2, 5 FFF1: 4 gold, 5
# predicted, 3 right; 5: P 1 R .25; 4: P .5 R .25; 3: P 2/3 R .5; 2: P .6 R .75 (F1 2/3).
EXPECTED = {
    "long-best-threshold-f1": 0.6, "long-best-threshold-precision": 0.6,
    "long-best-threshold-recall": 0.6, "long-best-threshold": 2,
    "long-recall-at-precision>=0.5": 0.6, "long-precision-at-precision>=0.5": 0.6,
    "long-recall-at-precision>=0.75": 0.2, "long-precision-at-precision>=0.75": 1.0,
    "long-recall-at-precision>=0.9": 0.2, "long-precision-at-precision>=0.9": 1.0,
    "long-threshold-at-precision>=0.5": 2, "long-threshold-at-precision>=0.75": 5,
    "long-threshold-at-precision>=0.9": 5,
    "short-best-threshold-f1": 2 / 3.0, "short-best-threshold-precision": 0.6,
    "short-best-threshold-recall": 0.75, "short-best-threshold": 2,
    "short-recall-at-precision>=0.5": 0.75, "short-precision-at-precision>=0.5": 0.6,
    "short-recall-at-precision>=0.75": 0.25, "short-precision-at-precision>=0.75": 1.0,
    "short-recall-at-precision>=0.9": 0.25, "short-precision-at-precision>=0.9": 1.0,
    "short-threshold-at-precision>=0.5": 2, "short-threshold-at-precision>=0.75": 5,
    "short-threshold-at-precision>=0.9": 5,
    "long-answer-n": 6, "long-answer-f1": 0.6, "long-answer-precision": 0.6,
    "long-answer-recall": 0.6, "short-answer-n": 6, "short-answer-f1": 2 / 3.0,
    "short-answer-precision": 0.6, "short-answer-recall": 0.75,
    "examples": 6, "gold_long_answers": 5, "gold_short_answers": 4}


def _gold_line(key, annotations, tokens=60):
  return {"example_id": key, "question_text": "q %d" % key,
          "document_text": " ".join("w%d" % i for i in range(tokens)),
          "long_answer_candidates": [{"start_token": 0, "end_token": tokens, "top_level": True}],
          "annotations": annotations}


def _write_jsonl(path, records, compress=False):
  text = "".join(json.dumps(r) + "\n" for r in records).encode("utf-8")
  with open(str(path), "wb") as f:
    f.write(gzip.compress(text) if compress else text)
  return str(path)


# ----------------------------------------------------------------------------- the official scorer
def test_spans_compare_by_bytes_or_by_tokens():
  a = nq.Span(100, 200, 10, 20)
  assert nq.spans_equal(a, nq.Span(100, 200, 11, 20))      # equal bytes
  assert nq.spans_equal(a, nq.Span(101, 200, 10, 20))      # bytes differ, equal tokens
  assert nq.spans_equal(a, nq.Span(-1, -1, 10, 20))        # one side without bytes
  assert not nq.spans_equal(a, nq.Span(-1, -1, 10, 21))
  assert nq.span_sets_equal([nq.Span(-1, -1, 1, 2), nq.NULL_SPAN], [nq.Span(-1, -1, 1, 2)])
  assert not nq.span_sets_equal([nq.Span(-1, -1, 1, 2)], [])
  assert nq.span_problem(nq.Span(-1, -1, 5, 5)) == "start_token >= end_token"
  assert nq.span_problem(nq.Span(-1, -1, 5, -1)) == "one token offset is -1 and the other not"


def test_official_metrics_on_crafted_predictions():
  gold = {key: nq.parse_annotations({"annotations": a}) for key, a in GOLD.items()}
  predictions = dict(nq.parse_prediction(p, i) for i, p in enumerate(PREDICTIONS))
  metrics = nq.evaluate(gold, predictions)
  assert list(metrics) == list(EXPECTED)
  for key, value in EXPECTED.items():
    assert metrics[key] == pytest.approx(value), key
  # A prediction of "no" where the annotators said yes is wrong; gold needs 2 of 5.
  predictions[3] = predictions[3]._replace(yes_no="no")
  assert nq.evaluate(gold, predictions)["short-answer-precision"] == pytest.approx(0.4)
  # Without any right prediction nothing reaches a precision target: 0 and the threshold 0.0.
  wrong = {key: p._replace(long_answer=nq.Span(-1, -1, 58, 59)) for key, p in predictions.items()}
  metrics = nq.evaluate(gold, wrong)
  assert (metrics["long-best-threshold-f1"], metrics["long-best-threshold"],
          metrics["long-recall-at-precision>=0.5"],
          metrics["long-threshold-at-precision>=0.5"]) == (0.0, 0.0, 0, None)
  with pytest.raises(ValueError, match="1 examples have no prediction and 0"):
    nq.evaluate(gold, {key: p for key, p in predictions.items() if key != 6})


def test_the_command_scores_the_official_files_and_refuses_bad_ones(tmp_path, monkeypatch):
  gold = _write_jsonl(tmp_path / "nq-dev-00.jsonl.gz",
                      [_gold_line(key, a) for key, a in GOLD.items()], compress=True)
  predictions = tmp_path / "predictions.json"
  predictions.write_text(json.dumps({"predictions": PREDICTIONS}))
  result = nq_evaluate.evaluate_files(str(tmp_path / "nq-dev-0?.jsonl.gz"), str(predictions))
  for key, value in EXPECTED.items():
    assert result[key] == pytest.approx(value), key
  # The command's main (its flags as parsed).
  out = tmp_path / "eval.json"
  monkeypatch.setattr(nq_evaluate, "FLAGS", types.SimpleNamespace(out_file=str(out)))
  nq_evaluate.main(["nq_evaluate", gold, str(predictions)])
  assert json.loads(out.read_text())["short-best-threshold-f1"] == pytest.approx(2 / 3.0)

  def refused(entries):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(entries))
    with pytest.raises(common.UsageError) as error:
      nq_evaluate.evaluate_files(gold, str(bad))
    return str(error.value)

  source = "prediction file %s: " % (tmp_path / "bad.json")
  assert refused({"answers": []}) == (
      source + 'not the official format {"predictions": [...]}')
  assert refused({"predictions": PREDICTIONS[:-1]}) == source + (
      "1 examples have no prediction and 0 predictions are for examples the gold file does "
      "not have (the official scorer needs exactly its ids)")
  both = dict(PREDICTIONS[0], yes_no_answer="YES")
  assert refused({"predictions": [both] + PREDICTIONS[1:]}) == source + (
      "prediction 0 (example_id 1): a yes / no answer and short answer spans cannot coexist")
  empty = dict(PREDICTIONS[1], long_answer=_span((5, 5)))
  assert refused({"predictions": [PREDICTIONS[0], empty]}) == source + (
      "prediction 1 (example_id 2) long_answer: start_token >= end_token")
  unscored = {k: v for k, v in PREDICTIONS[0].items() if k != "short_answers_score"}
  assert refused({"predictions": [unscored]}) == source + (
      "prediction 0 (example_id 1): short_answers_score is missing or not a finite number")
  assert refused({"predictions": [dict(PREDICTIONS[0], long_answer_score=float("nan"))]}) == (
      source + "prediction 0 (example_id 1): long_answer_score is missing or not a finite number")
  # A bad gold line names the file and the line.
  bad_gold = _write_jsonl(tmp_path / "bad_gold.jsonl", [
      _gold_line(1, GOLD[1]), _gold_line(2, [_annotation((3, 2))])])
  with pytest.raises(common.UsageError) as error:
    nq_evaluate.evaluate_files(bad_gold, str(predictions))
  assert str(error.value) == (
      "--gold_file=%s: line 2: annotation 0 long_answer: start_token >= end_token" % bad_gold)


# ----------------------------------------------------------------------------- reading and features
DOCUMENT = "<P> Alpha beta gamma </P> <P> delta epsilon </P> <Table> <Tr> x </Tr> </Table>"
CANDIDATES = [{"start_token": 0, "end_token": 5, "top_level": True},
              {"start_token": 5, "end_token": 9, "top_level": True},
              {"start_token": 9, "end_token": 14, "top_level": True},
              {"start_token": 10, "end_token": 13, "top_level": False}]


def _record(key, question="what is beta", long=(0, 5), short=((2, 3),), yes_no="NONE",
            annotations=None):
  return {"example_id": key, "question_text": question, "document_text": DOCUMENT,
          "long_answer_candidates": CANDIDATES,
          "annotations": [_annotation(long, short, yes_no)] if annotations is None
          else annotations}


@pytest.fixture(scope="module")
def tokenizer():
  from realformer_tf import pretraining_data
  return pretraining_data.make_tokenizer(VOCAB, True)


def _convert(tokenizer, record, is_training=False, rng=None, **settings):
  example = nq.parse_example(record)
  settings = dict({"max_seq_length": 24, "max_global_seq_length": 12, "doc_stride": 18,
                   "max_question_length": 32, "include_unknown_rate": 1.0,
                   "include_unknown_rate_for_unanswerable": 4.0}, **settings)
  return nq.convert_example(example, long_tasks.make_tokenize_word(tokenizer),
                            nq.special_token_ids(tokenizer.vocab), settings,
                            is_training=is_training, rng=rng)


def test_features_of_a_hand_made_example(tokenizer):
  records, info = _convert(tokenizer, _record(1))
  assert len(records) == 1 and info["windows"] == 1
  f = records[0]
  v = tokenizer.vocab
  cls, sep, start, end = v["[CLS]"], v["[SEP]"], v["[unused102]"], v["[unused103]"]
  words = [v[w] for w in ("alpha", "beta", "gamma", "delta", "epsilon", "x")]
  # [CLS] what is beta [SEP] <P> alpha beta gamma </P> <P> delta epsilon </P> <Table> <Tr> x
  # </Tr> </Table> [SEP]: the top-level candidates' tokens, HTML tags as [unused102/103].
  assert f["token_ids"] == ([cls, v["what"], v["is"], v["beta"], sep, start] + words[:3] +
                            [end, start] + words[3:5] + [end, start, start, words[5], end, end,
                                                         sep, 0, 0, 0, 0])
  assert f["token_pos"] == [-1] * 5 + list(range(14)) + [-1] * 5
  assert f["candidate_ids"] == [-1] * 5 + [0] * 5 + [1] * 4 + [2] * 5 + [-1] * 5
  assert f["long_breakpoints"] == [0] * 19 + [1] + [0] * 4
  # Global: [CLS], 3 question tokens and the [SEP]'s, one per candidate, the closing [SEP]'s 0.
  q, c = v["[unused34]"], v["[unused0]"]
  assert f["global_token_ids"] == [cls, q, q, q, q, c, c, c, 0, 0, 0, 0]
  assert f["global_breakpoints"] == [0] * 8 + [1, 0, 0, 0]
  assert f["sentence_ids"] == [0, 1, 2, 3, 4] + [5] * 5 + [6] * 4 + [7] * 5 + [8] * 5
  # Long answer tokens 0-4 = pieces 5-9; short answer token 2 = piece 7; type short (4).
  assert (f["answer_type"], f["la_start"], f["la_end"], f["sa_start"], f["sa_end"]) == (
      [4], [5], [9], [7], [7])
  assert list(f) == [name for name, _ in nq.FEATURES]
  # Yes / no is the type in every window; a long answer without a short one is type 3.
  assert _convert(tokenizer, _record(2, short=(), yes_no="YES"))[0][0]["answer_type"] == [1]
  long_only = _convert(tokenizer, _record(3, short=()))[0][0]
  assert (long_only["answer_type"], long_only["sa_start"]) == ([3], [0])
  null = _convert(tokenizer, _record(4, long=None, short=()))[0][0]
  assert (null["answer_type"], null["la_start"], null["la_end"]) == ([0], [0], [0])


def test_windows_the_global_budget_and_down_sampling(tokenizer):
  # L 16, question "beta" (1 piece): 12 document pieces per window, stride 6: windows at 0
  # and 6. G 5 has room for [CLS], the question's two tokens and two candidates.
  settings = {"max_seq_length": 16, "max_global_seq_length": 5, "doc_stride": 6}
  records, info = _convert(tokenizer, _record(1, question="beta"), **settings)
  assert [r["token_pos"][3] for r in records] == [0, 6]
  first, second = records
  assert (first["answer_type"], first["la_start"], first["la_end"], first["sa_start"]) == (
      [4], [3], [7], [5])
  # The answer is not in the second window: type null, labels on [CLS].
  assert (second["answer_type"], second["la_start"], second["sa_end"]) == ([0], [0], [0])
  # Window 1 holds candidates 0-2: the third has no global token left (counted), its pieces
  # belong to the last global token.
  assert first["global_token_ids"][3:] == [1, 1]
  assert first["sentence_ids"][3:16] == [3] * 5 + [4] * 4 + [4] * 3 + [4]
  assert info["candidates_without_global_token"] == 1
  assert (info["question_pieces_cut"], info["null_windows_dropped"]) == (0, 0)
  # Training drops windows without an answer at --include_unknown_rate (0 here).
  import random
  kept, info = _convert(tokenizer, _record(1, question="beta"), is_training=True,
                        rng=random.Random(1), include_unknown_rate=0.0, **settings)
  assert len(kept) == 1 and info["null_windows_dropped"] == 1 and kept[0] == first
  # A question longer than --max_question_length is cut (counted).
  _, info = _convert(tokenizer, _record(1), max_question_length=2)
  assert info["question_pieces_cut"] == 1


def test_reading_checks_name_the_file_and_the_line(tmp_path):
  def error(records):
    path = _write_jsonl(tmp_path / "in.jsonl", records)
    with pytest.raises(common.UsageError) as e:
      list(nq.iter_examples(path, "dev_file"))
    return str(e.value).replace(path, "F")

  good = _record(1)
  assert error([good, dict(good)]) == "--dev_file=F: line 2 repeats example_id 1"
  assert error([{k: v for k, v in good.items() if k != "question_text"}]) == (
      '--dev_file=F: line 1: "question_text" is missing or not a string')
  assert error([_record(1, long=(3, 20))]) == (
      "--dev_file=F: line 1: annotation 0: token span [3, 20) ends past the document's 14 "
      "tokens")
  assert error([_record(1, yes_no="MAYBE")]) == (
      "--dev_file=F: line 1: annotation 0: yes_no_answer 'MAYBE' is not YES, NO or NONE")
  (tmp_path / "broken.jsonl.gz").write_bytes(b"\x1f\x8b not gzip")
  with pytest.raises(common.UsageError, match="cannot be read as"):
    list(nq.iter_examples(str(tmp_path / "broken.jsonl.gz"), "dev_file"))
  # The original format: document_tokens with html_token flags.
  original = dict(good, document_tokens=[{"token": t, "html_token": t.startswith("<")}
                                         for t in DOCUMENT.split(" ")])
  del original["document_text"]
  example = nq.parse_example(original)
  assert example.tokens == DOCUMENT.split(" ") and example.html[:2] == [True, False]


# ----------------------------------------------------------------------------- answers and the head
def _window(la=(0, 0), sa=(0, 0), answer_type=4, length=8, low=-5.0):
  """Outputs of one window whose logits peak at the given positions (10 over the floor)."""
  window = {"answer_type_logits": np.eye(5)[answer_type] * 3}
  for name, position in zip(nq.POSITION_LOGITS, la + sa):
    logits = np.full(length, low)
    logits[0] = 0.0
    logits[position] = 10.0 if position else 0.0
    window[name] = logits
  return window


def test_decoding_joins_windows_as_the_official_joint_selection():
  # Window 0: document tokens 10..14 at positions 3..7; window 1: tokens 13..17.
  pos = [[-1, -1, -1, 10, 11, 12, 13, 14], [-1, -1, -1, 13, 14, 15, 16, 17]]
  # The long answer starts in window 0 (token 11) and ends in window 1 (token 16); scores are
  # logit - [CLS] logit: 10 + 10.
  windows = [_window(la=(4, 0), sa=(5, 5)), _window(la=(0, 6), sa=(0, 0), answer_type=1)]
  prediction = nq.predict_example(7, windows, pos)
  assert prediction["long_answer"] == {"start_token": 11, "end_token": 17, "start_byte": -1,
                                       "end_byte": -1}
  assert prediction["long_answer_score"] == pytest.approx(20.0)
  assert [s["start_token"] for s in prediction["short_answers"]] == [12]
  assert prediction["short_answers"][0]["end_token"] == 13
  # The answer type is read from the window of the short answer's start (window 0: short).
  assert prediction["yes_no_answer"] == "NONE"
  windows[0]["answer_type_logits"] = np.eye(5)[2]
  prediction = nq.predict_example(7, windows, pos)
  assert (prediction["yes_no_answer"], prediction["short_answers"]) == ("NO", [])
  # The best end before the start: the best end at or after it (here the start itself).
  after = nq.predict_example(7, [_window(la=(6, 4), sa=(6, 4))], pos[:1])
  assert (after["long_answer"]["start_token"], after["long_answer"]["end_token"]) == (13, 14)
  assert after["long_answer_score"] == pytest.approx(10.0 - 5.0)
  # A short answer longer than max_short_answer_length takes the best end within it (tokens
  # 10 and 11 tie: the first).
  short = nq.predict_example(7, [_window(sa=(3, 7))], pos[:1], max_short_answer_length=2)
  assert (short["short_answers"][0]["start_token"], short["short_answers"][0]["end_token"]) == (
      10, 11)
  assert short["short_answers_score"] == pytest.approx(10.0 - 5.0)
  # The prediction is what the official reader accepts.
  nq.parse_prediction(json.loads(json.dumps(prediction)), 0)


def test_head_loss_is_the_official_mean_of_five_losses():
  from etc_model import long_task_heads as heads
  rng = np.random.RandomState(3)
  batch, long_len, hidden = 2, 6, 4
  long_output = rng.randn(batch, long_len, hidden).astype(np.float32)
  labels = {"answer_type": [[4], [0]], "la_start": [[1], [0]], "la_end": [[4], [0]],
            "sa_start": [[2], [0]], "sa_end": [[3], [0]]}
  config = type("Config", (), {"hidden_size": hidden, "initializer_range": 0.5})()
  tf1 = tf.compat.v1
  with tf.Graph().as_default():
    loss, per_example, logits = heads.nq_head(
        tf.constant(long_output), {k: tf.constant(v, tf.int32) for k, v in labels.items()},
        config, True)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      got = sess.run({"loss": loss, "per_example": per_example, "logits": logits,
                      "variables": {v.op.name: v for v in tf1.global_variables()}})
  v = got["variables"]
  assert sorted(v) == ["cls/long_tasks/nq/answer_type_output_bias",
                       "cls/long_tasks/nq/answer_type_output_weights",
                       "cls/long_tasks/nq/long_output_bias",
                       "cls/long_tasks/nq/long_output_weights"]
  positions = (long_output @ v["cls/long_tasks/nq/long_output_weights"].T +
               v["cls/long_tasks/nq/long_output_bias"])
  types = (long_output[:, 0] @ v["cls/long_tasks/nq/answer_type_output_weights"].T +
           v["cls/long_tasks/nq/answer_type_output_bias"])

  def ce(x, label):
    x = x - x.max()
    return -(x[label] - np.log(np.exp(x).sum()))

  want = []
  for b in range(batch):
    total = ce(types[b], labels["answer_type"][b][0])
    for k, name in enumerate(("la_start", "la_end", "sa_start", "sa_end")):
      total += ce(positions[b, :, k], labels[name][b][0])
    want.append(total / 5)
  np.testing.assert_allclose(got["logits"]["sa_start_logits"], positions[..., 2], rtol=1e-5,
                             atol=1e-5)
  np.testing.assert_allclose(got["per_example"], want, rtol=1e-5)
  assert got["loss"] == pytest.approx(np.mean(want), rel=1e-5)


# ------------------------------------------------------------------ create_nq, run_long_tasks
TINY_ETC_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1,
                   "num_attention_heads": 2, "intermediate_size": 64, "local_radius": 4,
                   "relative_pos_max_distance": 4, "relative_vocab_size": 12,
                   "residual_attention": "sum"}
L, G = 32, 16
DEV = [_record(10, annotations=[_annotation((0, 5), [(2, 3)])] * 3 + [_annotation()] * 2),
       _record(11, question="is it delta", annotations=[_annotation((5, 9), yes_no="YES")] * 2 +
               [_annotation()] * 3),
       _record(12, question="what is x", annotations=[_annotation()] * 5)]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
  """create_nq's records of three small splits (one window or two each), an ETC config and a
  BERT checkpoint (the sliding-window baseline's)."""
  root = tmp_path_factory.mktemp("nq_run")
  files = {"train": _write_jsonl(root / "train.jsonl", [
               _record(1), _record(2, question="is it delta", long=(5, 9), short=(),
                                   yes_no="YES"), _record(3, long=None, short=())]),
           "dev": _write_jsonl(root / "nq-dev-00.jsonl.gz", DEV, compress=True),
           "test": _write_jsonl(root / "test.jsonl", [
               {k: v for k, v in _record(20).items() if k != "annotations"}])}
  result = run_tool(None, ["-m", "etc_model.create_nq", "--vocab_file=" + VOCAB,
                           "--output_dir=%s" % (root / "data"), "--max_seq_length=%d" % L,
                           "--max_global_seq_length=%d" % G, "--doc_stride=8",
                           "--max_question_length=8"] +
                    ["--%s_file=%s" % (split, path) for split, path in files.items()])
  (root / "etc_config.json").write_text(json.dumps(TINY_ETC_CONFIG))
  (root / "bert_config.json").write_text(json.dumps(TINY_BERT_CONFIG))
  write_random_bert_checkpoint(str(root / "bert_config.json"), str(root / "bert.ckpt"))
  return {"root": root, "files": files, "output": result.stdout}


def test_create_nq_writes_windows_examples_and_counts(job):
  data = job["root"] / "data"
  summary = json.loads((data / "nq.json").read_text())
  # 14 document pieces, L 32: question of 3 pieces leaves 26, one window per example.
  assert summary["splits"]["dev"]["records"] == 3
  assert summary["splits"]["dev"]["answer_types"]["short"] == 1
  assert summary["splits"]["test"]["answer_types"]["unannotated"] == 1
  assert summary["settings"]["include_unknown_rate_for_unanswerable"] == 4.0
  lines = nq.read_split_examples(str(data), "dev", 3)
  assert [(l["id"], l["record"], l["num_records"]) for l in lines] == [
      (10, 0, 1), (11, 1, 1), (12, 2, 1)]
  assert nq.parse_annotations(lines[1])[0].yes_no == "yes"
  assert nq.read_split_examples(str(data), "train", 3)[0]["annotations"] is None
  with pytest.raises(common.UsageError, match="lists 3 records but nq_dev.tfrecord has 4"):
    nq.read_split_examples(str(data), "dev", 4)


def test_rerun_writes_the_same_bytes_and_a_stop_leaves_no_summary(job, tokenizer, tmp_path):
  from etc_model import create_nq
  from realformer_tf import pretraining_data
  data = job["root"] / "data"
  recorded = json.loads((data / "nq.json").read_text())["settings"]
  settings = {k: v for k, v in recorded.items() if k not in ("vocab_file", "input_files")}
  inputs = {"dev": job["files"]["dev"]}
  create_nq.create_nq(inputs, str(tmp_path / "again"), tokenizer, VOCAB, settings)
  for name in ("nq_dev.tfrecord", "nq_dev.examples.jsonl"):
    assert (tmp_path / "again" / name).read_bytes() == (data / name).read_bytes(), name
  calls = []

  def stop_at_the_second_example():
    calls.append(1)
    return len(calls) > 1

  with pytest.raises(pretraining_data.Stopped):
    create_nq.create_nq(inputs, str(tmp_path / "stopped"), tokenizer, VOCAB, settings,
                        should_stop=stop_at_the_second_example)
  assert os.listdir(str(tmp_path / "stopped")) == []


def _args(job, out, extra=()):
  root = job["root"]
  return ["-m", "etc_model.run_long_tasks", "--task=nq", "--data_dir=%s" % (root / "data"),
          "--etc_config_file=%s" % (root / "etc_config.json"), "--output_dir=%s" % out,
          "--max_seq_length=%d" % L, "--max_global_seq_length=%d" % G,
          "--train_batch_size=2", "--predict_batch_size=2", "--learning_rate=1e-3"] + list(extra)


@pytest.mark.slow
def test_train_eval_predict_scores_the_official_way(job, tmp_path):
  out = tmp_path / "out"
  run_tool(None, _args(job, out, ["--do_train", "--do_eval", "--do_predict",
                                  "--num_train_steps=2", "--max_short_answer_length=3"]))
  results = json.loads((out / "eval_results.json").read_text())
  assert results["task"] == "nq" and results["global_step"] == 2
  assert (results["examples"], results["records"]) == (3, 3)
  assert (results["gold_long_answers"], results["gold_short_answers"]) == (2, 2)
  for key in ("long-best-threshold-f1", "short-best-threshold-f1", "long-answer-f1",
              "short-answer-f1", "answer_type_accuracy"):
    assert 0.0 <= results[key] <= 1.0, key
  # dev_predictions.json is the official format; the official scorer agrees.
  dev = json.loads((out / "dev_predictions.json").read_text())
  assert [p["example_id"] for p in dev["predictions"]] == [10, 11, 12]
  scored = nq_evaluate.evaluate_files(job["files"]["dev"], str(out / "dev_predictions.json"))
  for key, value in scored.items():
    if key != "unknown_ids":
      assert results[key] == pytest.approx(value), key
  test = json.loads((out / "test_predictions.json").read_text())
  lines = [json.loads(line) for line in
           (out / "test_predictions.jsonl").read_text().splitlines()]
  assert [p["example_id"] for p in test["predictions"]] == [l["id"] for l in lines] == [20]
  assert json.loads((out / "test_results.json").read_text())["examples"] == 0


@pytest.mark.slow
def test_bert_windows_train_eval_predict(job, tmp_path):
  """The sliding-window BERT baseline on NQ: BERT's weights over windows of 12 of the 32 long
  tokens, the ETC head's variables under cls/long_tasks_bert, the official answers and scores."""
  root, out = job["root"], tmp_path / "out"
  train_bert_windows(_args(job, out), root, "4 not in checkpoint: cls/long_tasks_bert/nq/",
                     window_length=14, window_stride=6)
  results = json.loads((out / "eval_results.json").read_text())
  assert (results["model"], results["task"], results["global_step"]) == ("bert_windows", "nq", 2)
  assert (results["examples"], results["records"], results["window_length"]) == (3, 3, 14)
  scored = nq_evaluate.evaluate_files(job["files"]["dev"], str(out / "dev_predictions.json"))
  for key, value in scored.items():
    if key != "unknown_ids":
      assert results[key] == pytest.approx(value), key
  test = json.loads((out / "test_predictions.json").read_text())
  assert [p["example_id"] for p in test["predictions"]] == [20]


@pytest.mark.slow
def test_record_export_serves_run_long_tasks_predictions(job, tmp_path):
  # The SavedModel of serialized records, loaded in a fresh process: run_long_tasks' logits on
  # the dev windows, the same official predictions decoded.
  from test_etc_export_long_model import check_record_export
  data_dir = str(job["root"] / "data")
  served, expected = check_record_export("nq", data_dir, str(job["root"] / "etc_config.json"),
                                         tmp_path)
  token_pos = nq.read_token_pos(nq.record_file(data_dir, "dev"))
  examples = nq.read_split_examples(data_dir, "dev", len(token_pos))
  decoded = [nq.split_predictions(outputs, token_pos, examples)
             for outputs in (served, expected)]
  scores = ("long_answer_score", "short_answers_score")
  answers = [[{k: v for k, v in p.items() if k not in scores} for p in d["predictions"]]
             for d in decoded]
  assert answers[0] == answers[1] and len(answers[0]) == len(examples)
  for served_line, expected_line in zip(*[d["predictions"] for d in decoded]):
    for key in scores:
      assert served_line[key] == pytest.approx(expected_line[key], abs=1e-4), key
  assert all(a["long_answer"]["start_token"] >= 0 for a in answers[0])
