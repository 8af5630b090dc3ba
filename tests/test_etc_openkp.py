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

from conftest import REPO_DIR, TINY_BERT_CONFIG, run_tool
from conftest import train_bert_windows, write_random_bert_checkpoint
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


# ------------------------------------------------------------------------- documents and features
WORDS = ["Deep", "learning", "rocks", "", "The", "cat", "sat"]


def _document(url="u1", key_phrases=(("the", "cat"), ("deep", "learning"), ("missing",),
                                     ("a", "b", "c", "d", "e", "f")), words=WORDS,
              elements=((0, 3), (3, 7))):
  vdom = [{"Id": 0, "text": " ".join(words[s:e]), "feature": [0.0] * 20, "start_idx": s,
           "end_idx": e} for s, e in elements]
  line = {"url": url, "text": " ".join(words), "VDOM": json.dumps(vdom)}
  if key_phrases is not None:
    line["KeyPhrases"] = [list(p) for p in key_phrases]
  return line


@pytest.fixture(scope="module")
def tokenizer():
  from realformer_tf import pretraining_data
  return pretraining_data.make_tokenizer(VOCAB, True)


def _pieces(tokenizer, words):
  return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w)) for w in words]


def _convert(tokenizer, line, is_training=False, **settings):
  document = openkp.parse_document(line, require_key_phrases="KeyPhrases" in line)
  settings = dict({"max_seq_length": 16, "max_global_seq_length": 4}, **settings)
  from etc_model import long_tasks
  return openkp.convert_document(document, long_tasks.make_tokenize_word(tokenizer), settings,
                                 is_training=is_training)


def test_features_and_labels_of_a_hand_made_document(tokenizer):
  record, info = _convert(tokenizer, _document())
  pieces = _pieces(tokenizer, WORDS)
  ids = [i for p in pieces for i in p]
  n = len(ids)
  assert record["token_ids"] == ids + [0] * (16 - n)
  assert record["word_ids"][:n] == [w for w, p in enumerate(pieces) for _ in p]
  first = sum(len(p) for p in pieces[:3])
  assert record["sentence_ids"] == [0] * first + [1] * (16 - first)
  assert record["long_breakpoints"] == [0] * (n - 1) + [1] + [0] * (16 - n)
  assert record["global_token_ids"] == [1, 1, 0, 0]
  assert record["global_breakpoints"] == [0, 1, 0, 0]
  assert record["num_words"] == [7]
  # Sorted keyphrases per element: "deep learning" in the first, "the cat" (word 4, after the
  # empty word) in the second; "missing" and the six words are not in the text.
  assert (record["label_start"], record["label_length"]) == ([0, 4, -1], [2, 2, -1])
  assert (info["key_phrases_not_in_input"], info["records"], info["words"]) == (2, 1, WORDS)
  assert list(record) == [name for name, _ in openkp.FEATURES]
  record, _ = _convert(tokenizer, _with_visual(_document()))
  for i, name in enumerate(openkp.VISUAL_FEATURES):
    assert record[name] == [0, VISUAL[i], 0, 0], name


# An element's 20 floats (x, width, y, height, block, inline, heading, leaf, font size, bold,
# then its parent's) and what they become (openkp.VISUAL_FEATURES): font 16.5 rounds to 16 (id
# 9: cut-offs 0, 8, 9, ..., 24, 29, ...), the parent's 60 is past the last cut-off (id 23); the
# cross of block 1, heading 1, bold 0 is 4 + 2; coordinates in hundredths of a pixel.
FLOATS = [10.5, 200.0, -3.257, 40.0, 1.0, 0.0, 1.0, 1.0, 16.5, 0.0,
          0.0, 1000.0, 0.0, 5000.0, 1.0, 0.0, 0.0, 0.0, 60.0, 1.0]
VISUAL = (9, 23, 6, 1050, -326, 20000, 4000, 0, 0, 100000, 500000, 0, 1, 0, 0, 1)


def test_visual_features_of_an_element():
  assert openkp.element_visual_features(FLOATS) == VISUAL
  assert [openkp.font_size_to_font_id(size) for size in (0, 8, 24, 25, 49, 50)] == [
      0, 1, 17, 18, 22, 23]
  assert openkp.FONT_ID_VOCAB_SIZE == 24
  with pytest.raises(ValueError, match="feature: block is 0.5, not 0 or 1"):
    openkp.element_visual_features([0.0] * 4 + [0.5] + [0.0] * 15)
  with pytest.raises(ValueError, match="the parent's bold is 2"):
    openkp.element_visual_features([0.0] * 19 + [2.0])
  with pytest.raises(ValueError, match="feature is not a list of 20 finite numbers"):
    openkp.element_visual_features([0.0] * 19)


def test_cuts_are_counted_by_cause(tokenizer):
  record, info = _convert(tokenizer, _document(), max_global_seq_length=1)
  assert (info["cut_by_global_length"], info["elements_cut"], info["words_cut"]) == (1, 1, 4)
  assert (record["label_start"], record["num_words"], info["words"]) == (
      [0, -1, -1], [3], WORDS[:3])
  first = sum(len(p) for p in _pieces(tokenizer, WORDS[:3]))
  record, info = _convert(tokenizer, _document(), max_seq_length=first + 1)
  assert (info["cut_by_long_length"], info["cut_by_global_length"], info["words_cut"]) == (
      1, 0, 4)
  # A keyphrase of six words present in the text is too long for the head.
  long_words = ["a", "b", "c", "d", "e", "f", "g"]
  record, info = _convert(tokenizer, _document(words=long_words, elements=((0, 7),)))
  assert (info["key_phrases_too_long"], info["without_label"]) == (1, 1)
  assert record["label_start"] == [-1, -1, -1]
  # Training leaves out a document without a label; no piece at all: no record anywhere.
  assert _convert(tokenizer, _document(key_phrases=[["missing"]]), is_training=True)[0] is None
  record, info = _convert(tokenizer, _document(), max_seq_length=1)
  assert record is None and info["without_pieces"] == 1 and info["words"] == []


def test_reading_checks_name_the_file_and_the_line(tmp_path):
  def refused(line, require=True):
    path = _write_jsonl(tmp_path / "bad.jsonl", [_document("ok"), line])
    documents, _ = openkp.iter_split_documents(path, "--dev_file=" + path, require)
    with pytest.raises(common.UsageError) as error:
      list(documents)
    return str(error.value)[len("--dev_file=%s: " % (tmp_path / "bad.jsonl")):]

  changed = json.loads(_document()["VDOM"])
  changed[0]["feature"] = [0.0] * 4 + [0.5] + [0.0] * 15
  assert refused(dict(_document(), VDOM=json.dumps(changed))) == (
      "line 2: url u1: VDOM element 0: feature: block is 0.5, not 0 or 1")
  bad_vdom = _document(elements=((0, 3), (4, 7)))
  assert refused(bad_vdom) == ("line 2: url u1: VDOM element 1 spans words [4, 7), expected a "
                               "span from 3 within the 7 words of text")
  changed = json.loads(_document()["VDOM"])
  changed[1]["text"] = "other"
  assert refused(dict(_document(), VDOM=json.dumps(changed))) == (
      "line 2: url u1: VDOM element 1's text is not the text's words 3 .. 6")
  assert refused(_document(elements=((0, 3),))) == (
      "line 2: url u1: the VDOM elements end at word 3 of the text's 7")
  assert refused(_document(key_phrases=None)) == "line 2: url u1: has no KeyPhrases"
  assert refused(_document(key_phrases=[[""]])) == (
      "line 2: url u1: has no keyphrase that is not empty (the official scorer cannot score it)")
  # The test split may lack KeyPhrases; a repeated url counts by its last line.
  path = _write_jsonl(tmp_path / "test.jsonl", [_document("a", None), _document("b", None),
                                                _document("a", [["cat"]])])
  documents, duplicates = openkp.iter_split_documents(path, "--test_file", False)
  assert [(d.url, d.key_phrases) for d in documents] == [("b", None), ("a", [["cat"]])]
  assert duplicates == 1


def test_decoding_takes_the_best_distinct_ngrams_inside_the_words():
  words = ["The", "cat", "the", "Cat", "sat"]
  logits = np.full([openkp.MAX_PHRASE_WORDS, 8], -1.0)
  logits[1, 0] = 5    # "the cat"
  logits[1, 2] = 4    # "the cat" again: one keyphrase
  logits[0, 4] = 3    # "sat"
  logits[4, 3] = 10   # five words from word 3: past the document's end, never a candidate
  logits[0, 1] = logits[0, 3] = 2  # "cat" twice
  # Then the -1 ones in order (length, start): "the", "cat the".
  assert openkp.predict_keyphrases(logits, words) == [
      ("the cat", 5.0), ("sat", 3.0), ("cat", 2.0), ("the", -1.0), ("cat the", -1.0)]
  assert openkp.predict_keyphrases(logits, []) == []
  lines = [{"url": "x", "record": 0, "words": words, "key_phrases": [["Sat"], ["dog"]]},
           {"url": "y", "record": None, "words": [], "key_phrases": [["dog"]]}]
  predictions, metrics = openkp.split_metrics(logits[None], lines)
  assert predictions[1] == {"url": "y", "KeyPhrases": [], "scores": []}
  assert predictions[0]["KeyPhrases"][:2] == [["the cat"], ["sat"]]
  # x: "sat" second of two references: P@1 0, P@3 1/3, R@3 1/2; y: 0.
  assert metrics["F1@3"] == pytest.approx((2 * (1 / 3) * 0.5 / (1 / 3 + 0.5)) / 2)
  assert metrics["P@1"] == 0.0 and metrics["examples"] == 2


# ----------------------------------------------------------------------------- the head
def test_head_logits_mask_and_the_official_smoothed_labels():
  import tensorflow as tf
  from etc_model import etc_modeling
  from etc_model import long_task_heads as heads
  tf1 = tf.compat.v1
  config = etc_modeling.EtcConfig(vocab_size=10, hidden_size=4, num_hidden_layers=1,
                                  num_attention_heads=1, intermediate_size=4)
  length = 6
  with tf.Graph().as_default():
    long_output = tf.constant(np.random.RandomState(0).randn(1, length, 4), tf.float32)
    # Pieces of words 0, 0, 1, 2 (word 3 has none); breakpoint at the 4th piece.
    features = {"word_ids": tf.constant([[0, 0, 1, 2, 0, 0]]),
                "long_breakpoints": tf.constant([[0, 0, 0, 1, 0, 0]]),
                "num_words": tf.constant([[4]]), "label_start": tf.constant([[1, -1, -1]]),
                "label_length": tf.constant([[2, -1, -1]])}
    loss, per_example, logits = heads.openkp_head(long_output, features, config, False)
    vectors = heads.word_vectors(long_output, features["word_ids"],
                                 features["long_breakpoints"])
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      got, loss, per_example, vectors, out = sess.run(
          [logits["ngram_logits"], loss, per_example, vectors, long_output])
    names = sorted(v.op.name for v in tf1.global_variables())
  assert "cls/long_tasks/openkp/2gram_conv/kernel" in names
  assert "cls/long_tasks/openkp/logit_dense4/kernel" in names
  assert "cls/long_tasks/openkp/word_emb_layer_norm/gamma" in names
  np.testing.assert_allclose(vectors[0, 0], out[0, 0] + out[0, 1], rtol=1e-6)
  np.testing.assert_allclose(vectors[0, 3:], 0.0)
  # n-gram k from word s is inside the 4 words when s + k <= 4.
  for k in range(5):
    for s in range(length):
      assert (got[0, k, s] == -10000.0) == (s + k + 1 > 4), (k, s)
  # The official labels: mass 1 on (2 words, from word 1), 1e-4 spread over the 30 n-grams.
  labels = np.full(5 * length, 1e-4 / 30)
  labels[1 * length + 1] += 1 / (1 + 1e-6)
  labels /= labels.sum()
  flat = got[0].reshape(-1).astype(np.float64)
  log_probs = flat - flat.max() - np.log(np.exp(flat - flat.max()).sum())
  assert per_example[0] == pytest.approx(-(labels * log_probs).sum(), rel=1e-5)
  assert loss == pytest.approx(per_example[0])


def test_visual_embeddings_are_the_official_sums_and_reach_the_long_tokens():
  import tensorflow as tf
  from etc_model import etc_modeling
  from etc_model import long_task_heads as heads
  tf1 = tf.compat.v1
  config = etc_modeling.EtcConfig(vocab_size=10, hidden_size=4, num_hidden_layers=1,
                                  num_attention_heads=1, intermediate_size=4)
  # Two elements: VISUAL, then one at x = 3000 px (clipped to 1500) and all else 0.
  other = [0] * len(VISUAL)
  other[openkp.VISUAL_FEATURES.index("x_coords")] = 300000
  with tf.Graph().as_default():
    features = {name: tf.constant([[VISUAL[i], other[i]]])
                for i, name in enumerate(openkp.VISUAL_FEATURES)}
    features["sentence_ids"] = tf.constant([[1, 0, 0]])
    long_adder, global_adder = heads.openkp_embedding_adders(features, config)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      long_adder, global_adder, variables = sess.run(
          [long_adder, global_adder,
           {v.op.name[len("cls/long_tasks/openkp/"):]: v for v in tf1.global_variables()}])

  def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

  def dense(x, name):
    return gelu(x @ variables[name + "/kernel"] + variables[name + "/bias"])

  def expected(values):
    v = dict(zip(openkp.VISUAL_FEATURES, values))
    scaled = []
    for name in openkp.COORDINATE_FEATURES:
      low, high = openkp.COORDINATE_RANGES[name.replace("parent_", "")]
      pixels = np.clip(v[name] / 100.0, low, high)
      scaled.append((pixels - (high + low) / 2) / ((high - low) / 2))
    x = np.array(scaled + [v[name] for name in openkp.DENSE_INDICATORS], np.float32)
    return (variables["indicator_cross_emb_lookup/embedding_table"][v["indicator_cross"]] +
            variables["font_id_emb_lookup/embedding_table"][v["font_ids"]] +
            variables["parent_font_id_emb_lookup/embedding_table"][v["parent_font_ids"]] +
            dense(dense(x, "dense_feature_projection"), "dense_feature_layer2"))

  np.testing.assert_allclose(global_adder[0, 0], expected(VISUAL), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(global_adder[0, 1], expected(other), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(long_adder[0], global_adder[0][[1, 0, 0]])
  assert variables["font_id_emb_lookup/embedding_table"].shape == (24, 4)
  assert variables["indicator_cross_emb_lookup/embedding_table"].shape == (8, 4)


# ------------------------------------------------------------------ create_openkp, run_long_tasks
TINY_ETC_CONFIG = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1,
                   "num_attention_heads": 2, "intermediate_size": 64, "local_radius": 4,
                   "relative_pos_max_distance": 4, "relative_vocab_size": 12,
                   "residual_attention": "sum"}
L, G = 32, 8
def _with_visual(line):
  vdom = json.loads(line["VDOM"])
  vdom[1]["feature"] = FLOATS
  return dict(line, VDOM=json.dumps(vdom))


DEV = [_document("d1"), _with_visual(_document("d2", [["cat", "sat"], ["rocks"]])),
       _document("d3", [["dog"]])]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
  """create_openkp's records of three small splits, an ETC config and a BERT checkpoint (the
  sliding-window baseline's)."""
  root = tmp_path_factory.mktemp("openkp_run")
  files = {"train": _write_jsonl(root / "train.jsonl", [
               _document("t1"), _document("t2", [["cat"]]), _document("t3", [["missing"]])]),
           "dev": _write_jsonl(root / "OpenKPDev.jsonl.gz", DEV, compress=True),
           "test": _write_jsonl(root / "test.jsonl", [_document("e1", None)] * 2)}
  result = run_tool(None, ["-m", "etc_model.create_openkp", "--vocab_file=" + VOCAB,
                           "--output_dir=%s" % (root / "data"), "--max_seq_length=%d" % L,
                           "--max_global_seq_length=%d" % G] +
                    ["--%s_file=%s" % (split, path) for split, path in files.items()])
  (root / "etc_config.json").write_text(json.dumps(TINY_ETC_CONFIG))
  (root / "bert_config.json").write_text(json.dumps(TINY_BERT_CONFIG))
  write_random_bert_checkpoint(str(root / "bert_config.json"), str(root / "bert.ckpt"))
  return {"root": root, "files": files, "output": result.stdout}


def test_create_openkp_writes_records_examples_and_counts(job, tokenizer, tmp_path):
  data = job["root"] / "data"
  summary = json.loads((data / "openkp.json").read_text())
  train = summary["splits"]["train"]
  # t3's only keyphrase is not in its text: no training record.
  assert (train["documents"], train["records"], train["without_label"]) == (3, 2, 1)
  assert summary["splits"]["dev"]["records"] == 3
  # The test file has e1 twice: its last line counts.
  assert (summary["splits"]["test"]["records"], summary["splits"]["test"]["duplicate_urls"]) == (
      1, 1)
  from etc_model import long_task_heads as heads
  assert summary["features"] == heads.feature_lengths("openkp", L, G, 1)
  lines = openkp.read_split_examples(str(data), "dev", 3)
  assert [(l["url"], l["record"]) for l in lines] == [("d1", 0), ("d2", 1), ("d3", 2)]
  assert lines[1]["key_phrases"] == [["cat", "sat"], ["rocks"]] and lines[0]["words"] == WORDS
  train = openkp.read_split_examples(str(data), "train", 2)[0]
  assert train["key_phrases"] is None and train["words"] is None
  with pytest.raises(common.UsageError, match="lists 3 records but openkp_dev.tfrecord has 4"):
    openkp.read_split_examples(str(data), "dev", 4)
  # A rerun writes the same bytes; a stop leaves nothing.
  from etc_model import create_openkp
  from realformer_tf import pretraining_data
  settings = {"max_seq_length": L, "max_global_seq_length": G, "do_lower_case": True}
  create_openkp.create_openkp({"dev": job["files"]["dev"]}, str(tmp_path / "again"), tokenizer,
                              settings)
  for name in ("openkp_dev.tfrecord", "openkp_dev.examples.jsonl"):
    assert (tmp_path / "again" / name).read_bytes() == (data / name).read_bytes(), name
  with pytest.raises(pretraining_data.Stopped):
    create_openkp.create_openkp({"dev": job["files"]["dev"]}, str(tmp_path / "stopped"),
                                tokenizer, settings, should_stop=lambda: True)
  assert os.listdir(str(tmp_path / "stopped")) == []


def _args(job, out, extra=()):
  root = job["root"]
  return ["-m", "etc_model.run_long_tasks", "--task=openkp", "--data_dir=%s" % (root / "data"),
          "--etc_config_file=%s" % (root / "etc_config.json"), "--output_dir=%s" % out,
          "--max_seq_length=%d" % L, "--max_global_seq_length=%d" % G,
          "--train_batch_size=2", "--predict_batch_size=2", "--learning_rate=1e-3"] + list(extra)


@pytest.mark.slow
def test_train_eval_predict_scores_the_official_way(job, tmp_path):
  from etc_model import openkp_evaluate as evaluate
  out = tmp_path / "out"
  run_tool(None, _args(job, out, ["--do_train", "--do_eval", "--do_predict",
                                  "--num_train_steps=2"]))
  results = json.loads((out / "eval_results.json").read_text())
  assert results["task"] == "openkp" and results["global_step"] == 2
  assert (results["examples"], results["records"]) == (3, 3)
  for key in ("F1@1", "F1@3", "F1@5", "P@3", "R@3", "best_ngram_accuracy"):
    assert 0.0 <= results[key] <= 1.0, key
  # dev_predictions.jsonl is the official candidate format; the official scorer agrees.
  dev = [json.loads(line) for line in (out / "dev_predictions.jsonl").read_text().splitlines()]
  assert [p["url"] for p in dev] == ["d1", "d2", "d3"]
  assert all(len(p["KeyPhrases"]) == 5 for p in dev)
  scored = evaluate.evaluate_files(job["files"]["dev"], str(out / "dev_predictions.jsonl"))
  for key in ("F1@1", "P@1", "R@1", "F1@3", "P@3", "R@3", "F1@5", "P@5", "R@5", "examples"):
    assert results[key] == pytest.approx(scored[key]), key
  test = [json.loads(line) for line in (out / "test_predictions.jsonl").read_text().splitlines()]
  assert [p["url"] for p in test] == ["e1"] and len(test[0]["KeyPhrases"]) == 5
  assert json.loads((out / "test_results.json").read_text())["examples"] == 0
  error = run_tool(None, _args(job, tmp_path / "other", ["--do_eval", "--padding=longest"]),
                   expect_rc=2)
  assert "--padding=longest: not with --task=openkp" in error.stderr


@pytest.mark.slow
def test_bert_windows_train_eval_predict(job, tmp_path):
  """The sliding-window BERT baseline on OpenKP: BERT's weights over windows of 12 of the 32
  long tokens, the ETC head and visual-feature embeddings under cls/long_tasks_bert, the official
  keyphrases and scores."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from etc_model import long_task_heads as heads  # pylint: disable=g-import-not-at-top
  root, out = job["root"], tmp_path / "out"
  # Head and visual embeddings: ETC's openkp variables, under the baseline's scope.
  with tf.Graph().as_default():
    features = {name: tf.compat.v1.placeholder(tf.int32, [1, length]) for name, length in
                heads.feature_lengths("openkp", L, G, 1).items()}
    config = types.SimpleNamespace(hidden_size=32, initializer_range=0.02)
    long_output = tf.zeros([1, L, 32])
    heads.openkp_embedding_adders(features, config)
    heads.openkp_head(long_output, features, config, False)
    etc_names = sorted(v.op.name for v in tf.compat.v1.global_variables())
  train_bert_windows(_args(job, out), root,
                     "%d not in checkpoint: cls/long_tasks_bert/openkp/" % len(etc_names),
                     window_length=14, window_stride=6)
  results = json.loads((out / "eval_results.json").read_text())
  assert (results["model"], results["task"], results["global_step"]) == (
      "bert_windows", "openkp", 2)
  assert (results["examples"], results["records"], results["window_length"]) == (3, 3, 14)
  dev = [json.loads(line) for line in (out / "dev_predictions.jsonl").read_text().splitlines()]
  assert [p["url"] for p in dev] == ["d1", "d2", "d3"]
  scored = openkp_evaluate.evaluate_files(job["files"]["dev"], str(out / "dev_predictions.jsonl"))
  for key in ("F1@1", "F1@3", "F1@5", "P@3", "R@3", "examples"):
    assert results[key] == pytest.approx(scored[key]), key
  test = [json.loads(line) for line in (out / "test_predictions.jsonl").read_text().splitlines()]
  assert [p["url"] for p in test] == ["e1"]


@pytest.mark.slow
def test_record_export_serves_run_long_tasks_predictions(job, tmp_path):
  # The SavedModel of serialized records, loaded in a fresh process: run_long_tasks' n-gram
  # logits on the dev records (the visual features' embeddings in the graph), the same
  # keyphrases decoded.
  from test_etc_export_long_model import check_record_export
  data_dir = str(job["root"] / "data")
  served, expected = check_record_export("openkp", data_dir,
                                         str(job["root"] / "etc_config.json"), tmp_path)
  lines = openkp.read_split_examples(data_dir, "dev", len(served["ngram_logits"]))
  decoded = [openkp.split_predictions(outputs["ngram_logits"], lines)
             for outputs in (served, expected)]
  assert [p["KeyPhrases"] for p in decoded[0]] == [p["KeyPhrases"] for p in decoded[1]]
  assert all(len(p["KeyPhrases"]) == 5 for p in decoded[0])
  for served_line, expected_line in zip(*decoded):
    np.testing.assert_allclose(served_line["scores"], expected_line["scores"], atol=1e-4)
