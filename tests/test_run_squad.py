# coding=utf-8
"""Tests for run_squad.py: reader, doc spans, features, predictions, and a tiny end-to-end run.

Fixtures: tests/fixtures/squad/tiny-v1.1.json (several answers per question, Unicode context,
an answer that cannot be aligned, a long context) and tiny-v2.0.json (impossible questions
with plausible answers). Expected values are hand-computed or come from the fixture's gold
answers, never from the code under test.
"""

import collections
import json
import os
import threading

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool, start_tool

import run_squad
from realformer_tf import squad_scoring
import tokenization

FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "squad")
V1_FILE = os.path.join(FIXTURES, "tiny-v1.1.json")
V2_FILE = os.path.join(FIXTURES, "tiny-v2.0.json")


@pytest.fixture(scope="module")
def tokenizer():
  vocab = os.path.join(REPO_DIR, "data", "vocab.txt")
  if not os.path.exists(vocab):
    from conftest import shared_path  # pylint: disable=g-import-not-at-top
    vocab = shared_path("vocab", "bert_uncased_vocab.txt")
  return tokenization.FullTokenizer(vocab, do_lower_case=True)


def _gold_texts():
  """qid -> list of gold answer texts of both fixtures (read with plain json)."""
  gold = {}
  for path in (V1_FILE, V2_FILE):
    with open(path, encoding="utf-8") as f:
      for article in json.load(f)["data"]:
        for p in article["paragraphs"]:
          for qa in p["qas"]:
            gold[qa["id"]] = [a["text"] for a in qa["answers"]]
  return gold


# ----------------------------------------------------------------------------------------------
# Reader
# ----------------------------------------------------------------------------------------------


def test_split_context_whitespace_and_offsets():
  # U+202F (narrow no-break space) separates words in the official reader.
  tokens, offsets = run_squad.split_context(" ab\u202fc  d\u00e9")
  assert tokens == ["ab", "c", "d\u00e9"]
  #                 ' '  a  b  nnbsp c  ' ' ' '  d  é
  assert offsets == [-1, 0, 0, 0, 1, 1, 1, 2, 2]


def test_read_v1_training():
  stats = collections.Counter()
  examples = run_squad.read_squad_examples(V1_FILE, is_training=True, stats=stats)
  # 9 questions; "q-price" (answer "5000", context "5,000") cannot be aligned: skipped, counted.
  assert [e.qas_id for e in examples] == [
      "q-country", "q-leader", "q-year", "q-city", "q-person", "q-owner", "q-cathedral",
      "q-canal"]
  assert stats["answer_not_found"] == 1
  assert stats["several_answers_used_first"] == 3
  by_id = {e.qas_id: e for e in examples}
  # Whole whitespace words that contain the first answer.
  spans = {qid: " ".join(e.doc_tokens[e.start_position:e.end_position + 1])
           for qid, e in by_id.items()}
  assert spans["q-country"] == "France."
  assert spans["q-city"] == "S\u00e3o Paulo"
  assert spans["q-person"] == "Zo\u00eb M\u00fcller"
  assert spans["q-owner"] == "Steve Smith's"
  assert spans["q-cathedral"] == "1342"
  assert by_id["q-canal"].orig_answer_text == "a canal"
  assert not any(e.is_impossible for e in examples)


def test_read_v2_training_and_prediction():
  stats = collections.Counter()
  examples = run_squad.read_squad_examples(V2_FILE, is_training=True,
                                           version_2_with_negative=True, stats=stats)
  assert len(examples) == 5 and stats["impossible"] == 2
  impossible = [e for e in examples if e.is_impossible]
  assert sorted(e.qas_id for e in impossible) == ["o-discoverer", "p-mayor"]
  assert all(e.start_position == -1 and e.orig_answer_text == "" for e in impossible)
  # Without --version_2_with_negative the unanswerable questions cannot be trained on.
  stats = collections.Counter()
  examples = run_squad.read_squad_examples(V2_FILE, is_training=True, stats=stats)
  assert len(examples) == 3 and stats["no_answer_skipped"] == 2
  # Prediction reads every question, the unaligned one included, without positions.
  examples = run_squad.read_squad_examples(V1_FILE, is_training=False)
  assert len(examples) == 9
  assert all(e.start_position is None for e in examples)


def test_read_bad_file_is_one_line_error(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text('{"data": [{"paragraphs": [{"qas": []}]}]}')
  with pytest.raises(run_squad.common.UsageError, match="not SQuAD JSON.*context"):
    run_squad.read_squad_examples(str(bad), is_training=False, flag_name="predict_file")
  bad.write_text("[1, 2")
  with pytest.raises(run_squad.common.UsageError, match="--predict_file=.*not valid JSON"):
    run_squad.read_squad_examples(str(bad), is_training=False, flag_name="predict_file")


# ----------------------------------------------------------------------------------------------
# Doc spans, max context, features
# ----------------------------------------------------------------------------------------------


def test_make_doc_spans():
  assert run_squad.make_doc_spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
  # The stride is capped by the window length: no token is ever skipped.
  assert run_squad.make_doc_spans(10, 4, 5) == [(0, 4), (4, 4), (8, 2)]
  assert run_squad.make_doc_spans(3, 4, 2) == [(0, 3)]
  assert run_squad.make_doc_spans(0, 4, 2) == []


def test_check_is_max_context():
  spans = [run_squad.DocSpan(0, 5), run_squad.DocSpan(3, 5), run_squad.DocSpan(6, 5)]
  # Token 6: span 1 has min(3 left, 1 right) + 0.05 = 1.05; span 2 has min(0, 4) + 0.05.
  assert [run_squad._check_is_max_context(spans, i, 6) for i in range(3)] == [False, True, False]
  # Token 4: span 0 min(4, 0) = 0.05; span 1 min(1, 3) = 1.05.
  assert [run_squad._check_is_max_context(spans, i, 4) for i in range(3)] == [False, True, False]
  # Token 0 is only in span 0.
  assert run_squad._check_is_max_context(spans, 0, 0)


def test_improve_answer_span(tokenizer):
  # The official example: "(1895-1943)." -> the answer "1895" is the single token "1895".
  doc_tokens = tokenizer.tokenize("The leader was John Smith (1895-1943).")
  start = doc_tokens.index("(")
  end = len(doc_tokens) - 1
  new_start, new_end = run_squad._improve_answer_span(doc_tokens, start, end, tokenizer, "1895")
  assert doc_tokens[new_start:new_end + 1] == ["1895"]
  # An answer inside a word keeps the whole word.
  doc_tokens = tokenizer.tokenize("The Japanese industry")
  assert run_squad._improve_answer_span(doc_tokens, 1, 1, tokenizer, "Japan") == (1, 1)


def _features(examples, tokenizer, is_training, max_seq_length=64, doc_stride=32,
              max_query_length=16):
  features = []
  run_squad.convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                         max_query_length, is_training, features.append,
                                         log_first_n=0)
  return features


def test_features_positions_and_doc_spans(tokenizer):
  examples = run_squad.read_squad_examples(V1_FILE, is_training=True)
  features = _features(examples, tokenizer, is_training=True)
  by_example = collections.defaultdict(list)
  for f in features:
    by_example[f.example_index].append(f)
    assert len(f.input_ids) == len(f.input_mask) == len(f.segment_ids) == 64
    n = sum(f.input_mask)
    assert f.input_mask == [1] * n + [0] * (64 - n)
    assert f.tokens[0] == "[CLS]" and f.tokens[-1] == "[SEP]" and len(f.tokens) == n
    assert f.input_ids[:n] == tokenizer.convert_tokens_to_ids(f.tokens)
    first_sep = f.tokens.index("[SEP]")
    assert f.segment_ids[:n] == [0] * (first_sep + 1) + [1] * (n - first_sep - 1)
  assert [f.unique_id for f in features] == list(range(1000000000,
                                                       1000000000 + len(features)))

  for index, example in enumerate(examples):
    feats = by_example[index]
    query_len = min(16, len(tokenizer.tokenize(example.question_text)))
    doc_len = sum(len(tokenizer.tokenize(t)) for t in example.doc_tokens)
    # The windows are the official sliding windows over the document tokens.
    expected_spans = run_squad.make_doc_spans(doc_len, 64 - query_len - 3, 32)
    assert len(feats) == len(expected_spans)
    # Every document token is "max context" in exactly one feature.
    counts = collections.Counter()
    for f in feats:
      for pos, is_max in f.token_is_max_context.items():
        if is_max:
          counts[expected_spans[f.doc_span_index].start + pos - (query_len + 2)] += 1
    assert sorted(counts) == list(range(doc_len)) and set(counts.values()) == {1}
    # Positions map back to the answer's tokens in the features that hold it, else [CLS].
    answer_tokens = tokenizer.tokenize(example.orig_answer_text)
    found = 0
    for f in feats:
      if f.start_position == 0:
        assert f.end_position == 0
        continue
      found += 1
      assert f.tokens[f.start_position:f.end_position + 1] == answer_tokens
    assert found >= 1

  # The long context needs several windows; its answer "1342" is only in the last two.
  cathedral = [e.qas_id for e in examples].index("q-cathedral")
  positions = [(f.start_position > 0) for f in by_example[cathedral]]
  assert len(positions) >= 3 and positions[0] is False and positions[-1] is True


def test_features_impossible_and_prediction_mode(tokenizer):
  examples = run_squad.read_squad_examples(V2_FILE, is_training=True,
                                           version_2_with_negative=True)
  features = _features(examples, tokenizer, is_training=True)
  for f in features:
    if f.is_impossible:
      assert (f.start_position, f.end_position) == (0, 0)
    else:
      assert f.start_position > 0
  features = _features(run_squad.read_squad_examples(V2_FILE, is_training=False), tokenizer,
                       is_training=False)
  assert all(f.start_position is None for f in features)


def test_convert_rejects_too_long_query(tokenizer):
  with pytest.raises(ValueError, match="max_query_length"):
    _features([], tokenizer, False, max_seq_length=19, max_query_length=16)


# ----------------------------------------------------------------------------------------------
# get_final_text and predictions
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pred,orig,lower,expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    ("sao paulo", "S\u00e3o Paulo", True, "S\u00e3o Paulo"),
    ("911", "911.", True, "911"),
    ("1895", "(1895-1943).", True, "1895"),
    ("Smith", "Smith's", False, "Smith"),
    # Alignment impossible: the whole original span comes back.
    ("xyz", "Foo bar", True, "Foo bar"),
])
def test_get_final_text(pred, orig, lower, expected):
  assert run_squad.get_final_text(pred, orig, lower) == expected


def _hand_example():
  """One example and one feature laid out by hand (12 positions, 11 real tokens)."""
  example = run_squad.SquadExample("q", "who?", ["Rollo", "swore", "fealty", "in", "911."])
  tokens = ["[CLS]", "who", "?", "[SEP]", "rollo", "swore", "fealty", "in", "911", ".", "[SEP]"]
  feature = run_squad.InputFeatures(
      unique_id=7, example_index=0, doc_span_index=0, tokens=tokens,
      token_to_orig_map={4: 0, 5: 1, 6: 2, 7: 3, 8: 4, 9: 4},
      token_is_max_context={i: True for i in range(4, 10)},
      input_ids=None, input_mask=None, segment_ids=None)
  return example, feature


def _predict(start, end, n_best_size=20, v2=False, threshold=0.0, features=None):
  example, feature = _hand_example()
  features = features or [feature]
  results = [run_squad.RawResult(f.unique_id, s, e) for f, s, e in zip(features, start, end)]
  return run_squad.compute_predictions([example], features, results, n_best_size, 30, True,
                                       version_2_with_negative=v2,
                                       null_score_diff_threshold=threshold)


def _logits(**values):
  out = [0.0] * 12
  for index, value in values.items():
    out[int(index[1:])] = value
  return out


def test_predictions_nbest_v1():
  start = _logits(i8=5.0, i4=3.0)
  end = _logits(i8=4.0, i9=1.0)
  preds, nbest, odds = _predict([start], [end], n_best_size=2)
  # Top-2 starts {8, 4}, ends {8, 9}: (8,8)=9 "911", (4,8)=7, (8,9)=6 "911.", (4,9)=4.
  assert preds == {"q": "911"}
  assert [e["text"] for e in nbest["q"]] == ["911", "Rollo swore fealty in 911"]
  # softmax([9, 7]) = [1, e^-2] / (1 + e^-2)
  assert nbest["q"][0]["probability"] == pytest.approx(1.0 / (1.0 + np.exp(-2.0)))
  assert nbest["q"][1]["start_logit"] == 3.0 and nbest["q"][1]["end_logit"] == 4.0
  assert odds == {}


def test_predictions_one_entry_nbest_and_no_valid_span():
  start = _logits(i8=5.0, i4=3.0)
  end = _logits(i8=4.0, i9=1.0)
  preds, nbest, _ = _predict([start], [end], n_best_size=1)
  assert preds == {"q": "911"} and len(nbest["q"]) == 1
  assert nbest["q"][0]["probability"] == 1.0
  # Only invalid candidates (question tokens, padding index 11 >= len(tokens)).
  start = _logits(i1=9.0, i11=10.0)
  end = _logits(i2=9.0, i11=10.0)
  preds, nbest, _ = _predict([start], [end], n_best_size=2)
  assert preds == {"q": "empty"} and [e["text"] for e in nbest["q"]] == ["empty"]
  # v2: the official code crashes here (n-best = [""], no best non-null entry).
  preds, nbest, odds = _predict([start], [end], n_best_size=2, v2=True)
  assert preds == {"q": ""} and [e["text"] for e in nbest["q"]] == [""]
  assert odds == {"q": run_squad.NO_SPAN_NULL_ODDS}
  # v2 with a one-entry n-best that is a span: "" is appended, the span is predicted.
  preds, nbest, odds = _predict([_logits(i8=5.0)], [_logits(i8=4.0)], n_best_size=1, v2=True)
  assert preds == {"q": "911"} and [e["text"] for e in nbest["q"]] == ["911", ""]
  assert odds["q"] == pytest.approx(0.0 - 9.0)


def test_predictions_null_threshold():
  start = _logits(i0=3.0, i8=2.0)
  end = _logits(i0=3.0, i8=2.0)
  # null = 3 + 3 = 6; best span (8, 8) = 2 + 2 = 4; diff = 2.
  for threshold, expected in ((0.0, ""), (1.9, ""), (2.0, "911"), (2.5, "911")):
    preds, nbest, odds = _predict([start], [end], v2=True, threshold=threshold)
    assert preds == {"q": expected}, threshold
    assert odds["q"] == pytest.approx(2.0)
    assert nbest["q"][0]["text"] == "" and nbest["q"][1]["text"] == "911"


def test_predictions_several_features_null_and_max_context():
  example, f1 = _hand_example()
  f2 = run_squad.InputFeatures(
      unique_id=8, example_index=0, doc_span_index=1, tokens=list(f1.tokens),
      token_to_orig_map=dict(f1.token_to_orig_map),
      # In the second window, "rollo" (4) is not max-context: its spans cannot start there.
      token_is_max_context={i: i != 4 for i in range(4, 10)},
      input_ids=None, input_mask=None, segment_ids=None)
  start1, end1 = _logits(i0=3.0, i8=1.0), _logits(i0=3.0, i8=1.0)     # null 6, span 2
  start2, end2 = _logits(i0=0.5, i4=9.0, i6=2.0), _logits(i0=0.5, i6=2.0)  # null 1
  preds, nbest, odds = _predict([start1, start2], [end1, end2], v2=True, features=[f1, f2])
  # Null score = min over features = 1. Best valid span: (6, 6) in f2 = 4 ((4, x) in f2 is
  # not max context); diff = 1 - 4 = -3 <= 0 -> "fealty".
  assert preds == {"q": "fealty"}
  assert odds["q"] == pytest.approx(-3.0)
  # No candidate starts at f2's "rollo" (start logit 9), although it has the largest logit.
  assert all(e["start_logit"] != 9.0 for e in nbest["q"])


def test_gold_logits_give_gold_answers(tokenizer):
  """Features -> one-hot logits at the gold positions -> predictions equal the gold text."""
  examples = run_squad.read_squad_examples(V1_FILE, is_training=True)
  features = _features(examples, tokenizer, is_training=True)
  results = []
  for f in features:
    start, end = np.zeros(64), np.zeros(64)
    if f.start_position > 0:
      start[f.start_position] = 10.0
      end[f.end_position] = 10.0
    results.append(run_squad.RawResult(f.unique_id, start, end))
  preds, _, _ = run_squad.compute_predictions(examples, features, results, 20, 30, True)
  gold = _gold_texts()
  for e in examples:
    assert preds[e.qas_id] == gold[e.qas_id][0], e.qas_id


def test_write_predictions_files(tmp_path):
  example, feature = _hand_example()
  results = [run_squad.RawResult(7, _logits(i0=3.0, i8=2.0), _logits(i0=3.0, i8=2.0))]
  paths = [str(tmp_path / n) for n in ("p.json", "n.json", "o.json")]
  run_squad.write_predictions([example], [feature], results, 20, 30, True, *paths,
                              version_2_with_negative=True, null_score_diff_threshold=2.0)
  assert json.loads(open(paths[0]).read()) == {"q": "911"}
  assert json.loads(open(paths[2]).read()) == {"q": 2.0}
  assert json.loads(open(paths[1]).read())["q"][0]["text"] == ""
  assert sorted(os.listdir(tmp_path)) == ["n.json", "o.json", "p.json"]


# ----------------------------------------------------------------------------------------------
# End to end: train + predict + score + export, in subprocesses
# ----------------------------------------------------------------------------------------------

_EXPORT_CHECK = r"""
import sys
import numpy as np
import tensorflow as tf
export_dir, record_file, out_file = sys.argv[1:]
serve = tf.saved_model.load(export_dir).signatures["serving_default"]
spec = {k: tf.io.FixedLenFeature([64], tf.int64)
        for k in ("input_ids", "input_mask", "segment_ids")}
spec["unique_ids"] = tf.io.FixedLenFeature([], tf.int64)
ids, starts, ends = [], [], []
for batch in tf.data.TFRecordDataset(record_file).map(
    lambda r: tf.io.parse_single_example(r, spec)).batch(3):
  out = serve(**{k: tf.cast(batch[k], tf.int32)
                 for k in ("input_ids", "input_mask", "segment_ids")})
  ids.append(batch["unique_ids"].numpy())
  starts.append(out["start_logits"].numpy())
  ends.append(out["end_logits"].numpy())
np.savez(out_file, unique_ids=np.concatenate(ids), start_logits=np.concatenate(starts),
         end_logits=np.concatenate(ends))
"""


@pytest.mark.slow
def test_end_to_end_train_predict_score_export(tmp_path):
  config = TINY_BERT_CONFIG
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(config))
  out_dir = tmp_path / "out"
  export_dir = tmp_path / "export"
  common_args = ["--vocab_file=%s" % os.path.join(REPO_DIR, "data", "vocab.txt"),
                 "--bert_config_file=%s" % config_file, "--max_seq_length=64",
                 "--doc_stride=32", "--max_query_length=16", "--residual_attention=sum"]
  # SQuAD 2.0: train 5 examples, batch 2, 2 epochs = 5 steps; predict, score, export.
  proc = run_tool("run_squad.py", common_args + [
      "--output_dir=%s" % out_dir, "--train_file=%s" % V2_FILE, "--predict_file=%s" % V2_FILE,
      "--version_2_with_negative", "--do_train", "--do_predict", "--train_batch_size=2",
      "--num_train_epochs=2", "--learning_rate=1e-3", "--save_checkpoints_steps=100",
      "--predict_batch_size=4", "--export_dir=%s" % export_dir, "--output_raw_logits",
      "--padding=longest"])
  assert "train: step 5/5" in proc.stderr
  files = set(os.listdir(out_dir))
  for name in ("train.tf_record", "eval.tf_record", "predictions.json",
               "nbest_predictions.json", "null_odds.json", "eval_results.json",
               "eval_results.txt", "raw_logits.npz", "bert_config.json"):
    assert name in files, name
  assert not [n for n in files if ".tmp-" in n]
  assert "model.ckpt-5.index" in files
  assert json.loads((out_dir / "bert_config.json").read_text())["residual_attention"] == "sum"

  preds = json.loads((out_dir / "predictions.json").read_text())
  gold = _gold_texts()
  assert sorted(preds) == sorted(k for k in gold if k[0] in "op")
  odds = json.loads((out_dir / "null_odds.json").read_text())
  assert sorted(odds) == sorted(preds)
  # The run's threshold is 0: "" exactly where null odds > 0.
  assert all((preds[k] == "") == (odds[k] > 0.0) for k in preds)
  results = json.loads((out_dir / "eval_results.json").read_text())
  assert sorted(results) == sorted([
      "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
      "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1",
      "best_f1_thresh", "num_duplicate_question_ids", "global_step", "num_train_steps",
      "checkpoint", "checkpoint_step"])
  assert results["total"] == 5 and results["HasAns_total"] == 3
  # The step reached and the target, for a reader that checks the job ran to its end.
  assert results["global_step"] == results["num_train_steps"] == 5
  # Which checkpoint produced them: in eval_results, and beside every predictions file.
  record = {"checkpoint": str(out_dir / "model.ckpt-5"), "global_step": 5}
  assert (results["checkpoint"], results["checkpoint_step"]) == (record["checkpoint"], 5)
  for name in ("predictions.json", "nbest_predictions.json", "null_odds.json", "raw_logits.npz"):
    assert json.loads((out_dir / (name + ".checkpoint.json")).read_text()) == record, name
  assert results["num_duplicate_question_ids"] == 0
  # The scores are those of the written files, by the independent scorer.
  with open(V2_FILE, encoding="utf-8") as f:
    data = json.load(f)["data"]
  rescored = squad_scoring.evaluate_v2(data, preds, na_probs=odds, na_prob_thresh=0.0)
  assert results["exact"] == pytest.approx(rescored["exact"])
  assert results["best_f1"] == pytest.approx(rescored["best_f1"])

  # The SavedModel (fixed length), loaded in a fresh process, gives the Estimator's logits
  # computed with --padding=longest, at every position computed (-inf beyond a batch's longest
  # window: padding only, and the short contexts here have some).
  assert {"saved_model.pb", "variables", "bert_config.json", "vocab.txt"} <= set(
      os.listdir(export_dir))
  served_file = tmp_path / "served.npz"
  run_tool(None, ["-c", _EXPORT_CHECK, export_dir, out_dir / "eval.tf_record", served_file])
  served = np.load(served_file)
  raw = np.load(out_dir / "raw_logits.npz")
  assert served["start_logits"].shape == raw["start_logits"].shape == (5, 64)
  np.testing.assert_array_equal(served["unique_ids"], raw["unique_ids"])
  masks = np.array([tf.train.Example.FromString(r).features.feature["input_mask"].int64_list.value
                    for r in tf.compat.v1.io.tf_record_iterator(str(out_dir / "eval.tf_record"))])
  computed = np.isfinite(raw["start_logits"])
  np.testing.assert_array_equal(computed, np.isfinite(raw["end_logits"]))
  assert computed[masks == 1].all() and not computed.all()
  for name in ("start_logits", "end_logits"):
    np.testing.assert_allclose(served[name][computed], raw[name][computed], rtol=1e-5, atol=1e-5)

  # SQuAD 1.1 prediction only, from the fine-tuned checkpoint: several doc spans per long
  # context, v1.1 scoring keys.
  out_v1 = tmp_path / "out_v1"
  run_tool("run_squad.py", common_args + [
      "--output_dir=%s" % out_v1, "--predict_file=%s" % V1_FILE, "--do_predict",
      "--init_checkpoint=%s" % (out_dir / "model.ckpt-5")])
  preds = json.loads((out_v1 / "predictions.json").read_text())
  assert len(preds) == 9 and not os.path.exists(out_v1 / "null_odds.json")
  results = json.loads((out_v1 / "eval_results.json").read_text())
  assert sorted(results) == ["checkpoint", "checkpoint_step", "exact_match", "f1",
                             "num_duplicate_question_ids"]
  # Predicted from --init_checkpoint (nothing in --output_dir): that is the record.
  assert (results["checkpoint"], results["checkpoint_step"]) == (str(out_dir / "model.ckpt-5"), 5)
  assert 0.0 <= results["exact_match"] <= results["f1"] <= 100.0


def test_bad_flags_are_one_line_errors(tmp_path):
  proc = run_tool("run_squad.py", [
      "--vocab_file=%s" % os.path.join(REPO_DIR, "data", "vocab.txt"),
      "--bert_config_file=%s" % os.path.join(REPO_DIR, "configs", "bert_tiny_post_ln.json"),
      "--output_dir=%s" % tmp_path, "--do_predict", "--predict_file=%s" % V1_FILE,
      "--max_seq_length=64", "--max_query_length=64"], expect_rc=2, timeout=120)
  assert last_error_line(proc) == (
      "error: --max_seq_length=64 must be greater than --max_query_length (64) + 3")


# ----------------------------------------------------------------------------------------------
# Safety: duplicate ids, --export_dir targets, --output_dir, resuming another model, signals
# ----------------------------------------------------------------------------------------------

VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")


def _squad_checkpoint(config_file, prefix):
  """Saves a random BERT with the SQuAD head (as a fine-tuned run would) and its state file."""
  import modeling  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf1 = tf.compat.v1
  config = modeling.BertConfig.from_json_file(str(config_file))
  with tf.Graph().as_default():
    tf1.set_random_seed(3)
    ids = tf1.placeholder(tf.int32, [None, 8])
    run_squad.create_model(config, False, ids, tf.ones_like(ids), tf.zeros_like(ids), False)
    saver = tf1.train.Saver()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return saver.save(sess, str(prefix))


def _squad_cmd(config_file, out_dir, extra):
  """run_squad.py flags for the tiny model."""
  return ["--vocab_file=%s" % VOCAB,
          "--bert_config_file=%s" % config_file, "--output_dir=%s" % out_dir,
          "--max_seq_length=64", "--doc_stride=32", "--max_query_length=16"] + list(extra)


def _run_squad(args, expect_rc):
  """Runs run_squad.py, checks its exit status and that it failed (if it did) without a
  traceback."""
  proc = run_tool("run_squad.py", args, expect_rc=expect_rc)
  assert "Traceback" not in proc.stderr
  return proc


@pytest.fixture
def tiny_squad(tmp_path):
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(TINY_BERT_CONFIG))
  checkpoint = _squad_checkpoint(config_file, tmp_path / "finetuned" / "model.ckpt")
  return config_file, checkpoint


@pytest.mark.slow
def test_duplicate_question_ids_and_reexport(tmp_path, tiny_squad):
  config_file, checkpoint = tiny_squad
  # Two questions share the id "q1" (in different paragraphs).
  data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": "Paris is the capital of France.",
       "qas": [{"id": "q1", "question": "What is the capital of France?",
                "answers": [{"text": "Paris", "answer_start": 0}]},
               {"id": "q2", "question": "Paris is the capital of what?",
                "answers": [{"text": "France", "answer_start": 24}]}]},
      {"context": "Rome is in Italy.",
       "qas": [{"id": "q1", "question": "Where is Rome?",
                "answers": [{"text": "Italy", "answer_start": 11}]}]}]}]}
  predict_file = tmp_path / "dup.json"
  predict_file.write_text(json.dumps(data))
  out_dir, export_dir = tmp_path / "out", tmp_path / "export"
  log = _run_squad(_squad_cmd(config_file, out_dir, [
      "--do_predict", "--predict_file=%s" % predict_file, "--init_checkpoint=%s" % checkpoint,
      "--export_dir=%s" % export_dir]), 0).stderr
  assert ("warning: --predict_file=%s: 1 question(s) repeat an earlier question's id "
          "(first: q1); predictions.json keeps one answer per id" % predict_file) in log
  assert sorted(json.loads((out_dir / "predictions.json").read_text())) == ["q1", "q2"]
  results = json.loads((out_dir / "eval_results.json").read_text())
  assert results["num_duplicate_question_ids"] == 1
  assert (export_dir / "saved_model.pb").exists()
  # Our own export is replaced only with --overwrite.
  export_only = _squad_cmd(config_file, tmp_path / "out2", [
      "--init_checkpoint=%s" % checkpoint, "--export_dir=%s" % export_dir])
  last = last_error_line(_run_squad(export_only, 2))
  assert last.startswith("error: --export_dir=%s: already holds " % export_dir), last
  assert "pass --overwrite" in last
  _run_squad(export_only + ["--overwrite"], 0)
  assert (export_dir / "saved_model.pb").exists()
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_one_line_errors_for_output_and_export_dirs(tmp_path, tiny_squad):
  config_file, checkpoint = tiny_squad
  # A directory that holds a fine-tuned checkpoint (and the config it was trained with).
  out_dir = tmp_path / "run"
  _squad_checkpoint(config_file, out_dir / "model.ckpt")
  (out_dir / "bert_config.json").write_text(json.dumps(TINY_BERT_CONFIG))
  listing = sorted(os.listdir(out_dir))
  # Resuming it with another hidden size: refused before anything is written.
  other = tmp_path / "other_config.json"
  other.write_text(json.dumps(dict(TINY_BERT_CONFIG, hidden_size=16, intermediate_size=32)))
  last = last_error_line(_run_squad(_squad_cmd(other, out_dir, [
      "--do_train", "--train_file=%s" % V1_FILE]), 2))
  assert last.startswith("error: --output_dir=%s: its checkpoint model.ckpt has " % out_dir)
  assert "[32]" in last and "[16]" in last
  assert json.loads((out_dir / "bert_config.json").read_text()) == TINY_BERT_CONFIG
  assert sorted(os.listdir(out_dir)) == listing
  # --export_dir at the parent of --output_dir (which it would delete).
  last = last_error_line(_run_squad(_squad_cmd(config_file, out_dir, [
      "--export_dir=%s" % tmp_path, "--overwrite"]), 2))
  assert last.startswith("error: --export_dir=%s: would replace " % tmp_path), last
  assert sorted(os.listdir(out_dir)) == listing
  # --output_dir that is a file.
  stray = tmp_path / "stray.txt"
  stray.write_text("x")
  last = last_error_line(_run_squad(_squad_cmd(config_file, stray, [
      "--do_predict", "--predict_file=%s" % V1_FILE]), 2))
  assert last == "error: --output_dir=%s: is a file, expected a directory" % stray
  # Prediction / export from no trained weights: an --init_checkpoint of another model (here a
  # checkpoint without any variable of BERT) counts as none with --allow_unmatched_init.
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("decoder/embeddings", [3, 2])
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      foreign = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "foreign" / "x.ckpt"))
  fresh = tmp_path / "fresh"
  last = last_error_line(_run_squad(_squad_cmd(config_file, fresh, [
      "--do_predict", "--predict_file=%s" % V1_FILE, "--export_dir=%s" % (tmp_path / "e"),
      "--init_checkpoint=%s" % foreign, "--allow_unmatched_init"]), 2))
  assert last == (
      "error: --do_predict/--export_dir: no trained weights (no checkpoint in --output_dir=%s), "
      "so it would score a randomly initialised model; give --init_checkpoint, or pass "
      "--allow_random_eval to do that deliberately" % fresh)
  assert not fresh.exists()
  # --do_lower_case=False with the uncased vocab: the tokenizer check now runs here too.
  last = last_error_line(_run_squad(_squad_cmd(config_file, tmp_path / "o", [
      "--do_predict", "--predict_file=%s" % V1_FILE, "--do_lower_case=false"]), 2))
  assert last.startswith("error: --do_lower_case=False: vocab %s has no upper-case" % VOCAB)


@pytest.mark.slow
def test_sigterm_stops_training_without_results(tmp_path):
  import signal  # pylint: disable=g-import-not-at-top
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(json.dumps(TINY_BERT_CONFIG))
  out_dir, export_dir = tmp_path / "out", tmp_path / "export"
  # 5 questions, batch 1, 400 epochs: 2000 steps, far more than run before the signal.
  args = _squad_cmd(config_file, out_dir, [
      "--do_train", "--do_predict", "--train_file=%s" % V2_FILE, "--predict_file=%s" % V2_FILE,
      "--version_2_with_negative", "--train_batch_size=1", "--num_train_epochs=400",
      "--save_checkpoints_steps=100000", "--export_dir=%s" % export_dir])
  proc = start_tool("run_squad.py", args)
  # Reading stderr line by line has no timeout of its own: a hung run is killed, which ends it.
  watchdog = threading.Timer(300, proc.kill)
  watchdog.start()
  lines = []
  try:
    for line in proc.stderr:
      lines.append(line)
      # The CheckpointSaverHook writes step 0 after the hooks' begin(): training has started.
      if "Saving checkpoints for 0 into" in line:
        proc.send_signal(signal.SIGTERM)
        break
    lines.append(proc.communicate(timeout=120)[1] or "")
  finally:
    watchdog.cancel()
    if proc.poll() is None:
      proc.kill()
  log = "".join(lines)
  assert proc.returncode == 143, log[-3000:]
  assert "interrupted (signal 15)" in log
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  latest = tf.train.latest_checkpoint(str(out_dir))
  assert 0 < int(tf.train.load_checkpoint(latest).get_tensor("global_step")) < 2000
  for name in ("eval_results.json", "predictions.json", ".lock-local"):
    assert not (out_dir / name).exists(), name
  assert not export_dir.exists()
