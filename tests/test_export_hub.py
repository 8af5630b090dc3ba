"""Tests for export_hub.py: TF-Hub style encoder / preprocessor / raw-text classifier exports.

The exports are reloaded in a fresh Python process (tf.saved_model.load, hub.KerasLayer) and
compared with the graph-mode modeling.BertModel / run_classifier.create_model on the same
checkpoint, and the preprocessor with tokenization.FullTokenizer + the official truncation.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, last_error_line, run_tool, shared_path
from realformer_tf import checkpoint_utils
from realformer_tf import classifier_features
from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import serving
import modeling
import run_classifier
import run_pretraining
import tokenization

tf1 = tf.compat.v1

# Every residual_attention and every layer_norm_type value; the last one also exports the MLM
# head and the attention outputs.
KINDS = [("none", "post"), ("mean", "pre"), ("sum", "pre")]
EXTRAS = len(KINDS) - 1
VOCAB_FILE = os.path.join(REPO_DIR, "data", "vocab.txt")

TRICKY = [
    "", "   ", "Héllo Wörld! Ça va? naïve café", "日本語のテキスト、中文字符。한국어",
    "a" * 201, "b" * 200, "x" * 150 + "é" * 60, "Hello\x00wor\x07ld\u200b zero\ufeffwidth\ufffd",
    "tab\there\nnew\rline\u00a0nbsp\u3000ideo\u2028ls\u2029ps", "ΣΊΣΥΦΟΣ ΟΔΟΣ",
    "İstanbul ǅemal ß ﬁne ½ ² Ⅻ", "$100^2 `code` ~tilde| <a href='x'>",
    "e\u0301 combining \u0301only", "emoji 😀👍🏽 🇫🇷", "mixed\u00adsoft hyphen", "Ω Å K ℃",
    "don't stop-believing...", "supercalifragilisticexpialidocious antidisestablishment",
]
TRICKY_BYTES = [t.encode("utf-8") for t in TRICKY] + [b"bad \xff\xfe utf8 \xc3"]


def _tiny_config(residual_attention="none", layer_norm_type="post", vocab_size=30522):
  return modeling.BertConfig(
      vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
      intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
      residual_attention=residual_attention, layer_norm_type=layer_norm_type)


def _inputs(batch=3, seq=11, vocab_size=30522, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, vocab_size, size=(batch, seq)).astype(np.int32)
  mask = np.ones((batch, seq), np.int32)
  mask[1, 7:] = 0
  mask[2, 4:] = 0
  ids[mask == 0] = 0
  type_ids = np.zeros((batch, seq), np.int32)
  type_ids[0, 5:] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": type_ids}


def _randomize_layer_norms(sess):
  """LayerNorm gamma/beta start at 1/0; random values catch a swapped or missing one."""
  rng = np.random.RandomState(1)
  for var in tf1.global_variables():
    if var.op.name.endswith(("/gamma", "/beta")):
      var.load(rng.normal(1.0 if var.op.name.endswith("gamma") else 0.0, 0.2,
                          size=var.shape.as_list()).astype(np.float32), sess)


def make_checkpoint(model_dir, config, inputs, num_labels=None, with_mlm=False,
                    positions=None, is_multilabel=False):
  """Saves a random checkpoint and returns the graph-mode reference outputs on `inputs`."""
  os.makedirs(model_dir, exist_ok=True)
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    ph = {k: tf1.placeholder(tf.int32, [None, None]) for k in serving.ENCODER_INPUTS}
    fetch = {}
    if num_labels:
      ph_ids, ph_mask, ph_type = (ph["input_word_ids"], ph["input_mask"], ph["input_type_ids"])
      _, _, _, outputs = run_classifier.create_model(
          config, False, ph_ids, ph_mask, ph_type, None, num_labels, False,
          is_regression=num_labels == 1 and not is_multilabel, is_multilabel=is_multilabel)
      fetch["outputs"] = outputs
    else:
      model = modeling.BertModel(config, False, ph["input_word_ids"], ph["input_mask"],
                                 ph["input_type_ids"])
      fetch.update(pooled_output=model.get_pooled_output(),
                   sequence_output=model.get_sequence_output(),
                   encoder_outputs=model.get_all_encoder_layers(),
                   attention_scores=model.get_attention_scores(),
                   attention_probs=model.get_attention_probs())
      if with_mlm:
        ph["masked_lm_positions"] = tf1.placeholder(tf.int32, [None, None])
        n = positions.shape[1]
        _, _, log_probs = run_pretraining.get_masked_lm_output(
            config, model.get_sequence_output(), model.get_embedding_table(),
            ph["masked_lm_positions"], tf.zeros_like(ph["masked_lm_positions"]),
            tf.ones(tf.shape(ph["masked_lm_positions"]), tf.float32))
        fetch["mlm_log_probs"] = tf.reshape(log_probs, [-1, n, config.vocab_size])
    tf1.train.get_or_create_global_step()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      _randomize_layer_norms(sess)
      feed = {ph[k]: v for k, v in inputs.items() if k in ph}
      if with_mlm:
        feed[ph["masked_lm_positions"]] = positions
      reference = sess.run(fetch, feed)
      prefix = tf1.train.Saver().save(sess, os.path.join(model_dir, "model.ckpt"),
                                      global_step=7)
  with open(os.path.join(model_dir, "bert_config.json"), "w") as f:
    f.write(config.to_json_string())
  return prefix, reference


def run_fresh(code, tmp_path, name="child"):
  """Runs `code` in a fresh Python process (TF_USE_LEGACY_KERAS=1 for hub.KerasLayer)."""
  script = tmp_path / ("%s.py" % name)
  script.write_text("import sys\nsys.path.insert(0, %r)\n" % REPO_DIR + code)
  return run_tool(None, [script], env={"TF_USE_LEGACY_KERAS": "1"}, timeout=300).stdout


CHILD = r"""
import json, numpy as np, tensorflow as tf, tensorflow_text, tensorflow_hub as hub
import tf_keras as keras
args = json.load(open(sys.argv[0].replace(".py", ".json")))
out = {}

# Encoders: tf.saved_model.load, __call__, serving_default, the mlm sub-object.
inputs = {k: tf.constant(np.array(v, np.int32)) for k, v in args["inputs"].items()}
for i, path in enumerate(args["encoders"]):
  m = tf.saved_model.load(path)
  o = m(inputs)
  assert list(m.signatures) == ["serving_default"], list(m.signatures)
  s = m.signatures["serving_default"](**inputs)
  out["%d/pooled_output" % i] = o["pooled_output"].numpy()
  out["%d/default" % i] = o["default"].numpy()
  out["%d/sequence_output" % i] = o["sequence_output"].numpy()
  out["%d/sig_pooled_output" % i] = s["pooled_output"].numpy()
  out["%d/sig_encoder_outputs_1" % i] = s["encoder_outputs_1"].numpy()
  for j, t in enumerate(o["encoder_outputs"]):
    out["%d/encoder_outputs/%d" % (i, j)] = t.numpy()
  for key in ("attention_scores", "attention_probs"):
    for j, t in enumerate(o.get(key, [])):
      out["%d/%s/%d" % (i, key, j)] = t.numpy()
  if hasattr(m, "mlm"):
    mlm_in = dict(inputs, masked_lm_positions=tf.constant(np.array(args["positions"], np.int32)))
    out["%d/mlm_logits" % i] = m.mlm(mlm_in)["mlm_logits"].numpy()
  out["%d/num_variables" % i] = np.array([len(m.variables), len(m.trainable_variables)])

# hub.KerasLayer(trainable=True) in a small Keras model: one training step.
layer = hub.KerasLayer(args["encoders"][1], trainable=True)
k_in = {k: keras.Input([None], dtype=tf.int32, name=k)
        for k in ("input_word_ids", "input_mask", "input_type_ids")}
model = keras.Model(k_in, keras.layers.Dense(2)(layer(k_in)["pooled_output"]))
x = {"input_word_ids": np.array([[2, 7, 9, 3], [2, 5, 3, 0]], np.int32),
     "input_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]], np.int32),
     "input_type_ids": np.zeros([2, 4], np.int32)}
with tf.GradientTape() as tape:
  loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
      np.array([1, 0]), model(x, training=True), from_logits=True))
grads = tape.gradient(loss, layer.trainable_variables)
before = [v.numpy().copy() for v in layer.trainable_variables]
keras.optimizers.SGD(0.5).apply_gradients(zip(grads, layer.trainable_variables))
out["keras/num_trainable"] = np.array(len(before))
out["keras/none_grads"] = np.array(sum(g is None for g in grads))
out["keras/changed"] = np.array(sum(not np.array_equal(a, v.numpy())
                                    for a, v in zip(before, layer.trainable_variables)))

# Preprocessor: call, bert_pack_inputs with a seq_length, signature, the TF-Hub Keras way.
p = tf.saved_model.load(args["preprocessor"])
a = tf.constant([t.encode("latin-1") for t in args["a"]])
b = tf.constant([t.encode("latin-1") for t in args["b"]])
for k, v in p(a).items(): out["pre_single/" + k] = v.numpy()
for k, v in p.bert_pack_inputs([p.tokenize(a), p.tokenize(b)], seq_length=args["seq"]).items():
  out["pre_pair/" + k] = v.numpy()
for k, v in p.signatures["serving_default"](text=a).items(): out["pre_sig/" + k] = v.numpy()
# --padding=bucket (seq_length 64): a call padded to its longest input's bucket; a fixed-length
# reference of the same length from bert_pack_inputs.
bucketed = tf.saved_model.load(args["preprocessor_bucket"])
for i, texts in enumerate((a, a[:2], tf.constant(["word " * 40]))):
  for k, v in bucketed(texts).items(): out["pre_bucket%d/%s" % (i, k)] = v.numpy()
  for k, v in p.bert_pack_inputs([p.tokenize(texts)], seq_length=64).items():
    out["pre_full%d/%s" % (i, k)] = v.numpy()
pack = hub.KerasLayer(p.bert_pack_inputs, arguments=dict(seq_length=args["seq"]))
tokenize = hub.KerasLayer(p.tokenize)
for k, v in pack([tokenize(a), tokenize(b)]).items(): out["pre_keras/" + k] = v.numpy()

# Raw-text classifiers.
for name, path in args["classifiers"].items():
  m = tf.saved_model.load(path)
  ca, cb = tf.constant(args["ca"]), tf.constant(args["cb"])
  for kind, o in (("single", m({"sentence": ca})), ("pair", m({"sentence": ca, "sentence2": cb})),
                  ("sig_pair", m.signatures["serving_pair"](sentence=ca, sentence2=cb)),
                  ("default", m.signatures["serving_default"](sentence=ca)),
                  # Short requests: the bucketed export runs them at 16, not seq_length.
                  ("short", m({"sentence": ca[:2]})),
                  ("one", m.signatures["serving_single"](sentence=ca[1:2]))):
    for k, v in o.items(): out["%s/%s/%s" % (name, kind, k)] = v.numpy()
  out[name + "/signatures"] = np.array(sorted(m.signatures))
  # serving_ids: run_classifier's int32 features of the same texts.
  ids_fn = m.signatures["serving_ids"]
  for kind, features in args["features"].items():
    inputs = {k: tf.constant(np.array(v, np.int32)) for k, v in features.items()}
    for k, v in ids_fn(**inputs).items(): out["%s/ids_%s/%s" % (name, kind, k)] = v.numpy()
  try:
    ids_fn(**dict(inputs, segment_ids=inputs["segment_ids"] + 2))
    out[name + "/ids_bad_segment"] = np.array("accepted")
  except tf.errors.InvalidArgumentError as e:
    out[name + "/ids_bad_segment"] = np.array(e.message)
np.savez(sys.argv[0].replace(".py", ".npz"), **out)
"""

CLASSIFIER_A = ["A gripping, beautifully shot film.", "Dull.", "Ça m'a plu — 日本 ok", "word " * 40]
CLASSIFIER_B = ["It was not good at all, sadly; the plot dragged " * 3, "", "great", "x y z"]
CLASSIFIER_SEQ = 24
POSITIONS = np.array([[1, 3], [2, 0], [0, 1]], np.int32)


def _classifier_features(tokenizer):
  """run_classifier's features of CLASSIFIER_A (single) and CLASSIFIER_A + B (pair) at
  CLASSIFIER_SEQ: {kind: {input_word_ids, input_mask, input_type_ids: int32 arrays}}."""
  features = {}
  for kind, texts_b in (("single", [None] * len(CLASSIFIER_A)), ("pair", CLASSIFIER_B)):
    rows = [_official_features(tokenizer, a, b, CLASSIFIER_SEQ)
            for a, b in zip(CLASSIFIER_A, texts_b)]
    features[kind] = {"input_word_ids": np.array([r[0] for r in rows], np.int32),
                      "input_mask": np.array([r[1] for r in rows], np.int32),
                      "input_type_ids": np.array([r[2] for r in rows], np.int32)}
  return features


def _classifier_checkpoint(tmp_dir, name, num_labels, tokenizer, is_multilabel=False):
  """A run_classifier-style checkpoint; returns (prefix, config, reference single, pair)."""
  config = _tiny_config("sum", "pre")
  features = _classifier_features(tokenizer)
  model_dir = os.path.join(tmp_dir, name)
  prefix, ref_single = make_checkpoint(model_dir, config, features["single"],
                                       num_labels=num_labels, is_multilabel=is_multilabel)
  with open(os.path.join(model_dir, "labels.txt"), "w") as f:
    f.write("neg\nneutral\npos\n")
  # The pair reference: the same checkpoint restored into a second graph.
  with tf.Graph().as_default():
    ph = [tf1.placeholder(tf.int32, [None, CLASSIFIER_SEQ]) for _ in range(3)]
    _, _, _, outputs = run_classifier.create_model(config, False, ph[0], ph[1], ph[2], None,
                                                   num_labels, False, num_labels == 1,
                                                   is_multilabel=is_multilabel)
    with tf1.Session() as sess:
      tf1.train.Saver().restore(sess, prefix)
      ref_pair = sess.run(outputs, dict(zip(ph, [features["pair"][k] for k in
                                                 serving.ENCODER_INPUTS])))
  return prefix, config, ref_single["outputs"], ref_pair


# Its tests are marked slow: exporting every kind and reloading them takes ~45 s.
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """Exports every kind of model once, reloads all in one fresh process; returns both sides."""
  tmp_path = tmp_path_factory.mktemp("export_hub")
  inputs = _inputs()
  encoders, references = [], []
  for i, (residual, ln_type) in enumerate(KINDS):
    config = _tiny_config(residual, ln_type)
    with_extras = i == EXTRAS
    prefix, ref = make_checkpoint(str(tmp_path / ("m%d" % i)), config, inputs,
                                  with_mlm=with_extras, positions=POSITIONS)
    path = str(tmp_path / ("hub%d" % i))
    serving.export_encoder(config, prefix, path, with_mlm=with_extras,
                           with_attention=with_extras)
    assert os.path.exists(os.path.join(path, "saved_model.pb"))
    encoders.append(path)
    references.append(ref)
  preprocessor = str(tmp_path / "pre")
  serving.export_preprocessor(preprocessor, VOCAB_FILE, True, None, seq_length=16)
  preprocessor_bucket = str(tmp_path / "pre_bucket")
  serving.export_preprocessor(preprocessor_bucket, VOCAB_FILE, True, None, seq_length=64,
                              padding="bucket")
  tokenizer = tokenization.FullTokenizer(VOCAB_FILE, True)
  classifiers, classifier_refs = {}, {}
  prefix, config, ref_single, ref_pair = _classifier_checkpoint(str(tmp_path), "cls", 3,
                                                                tokenizer)
  classifier_refs["cls"] = (ref_single, ref_pair)
  classifiers["cls"] = str(tmp_path / "export_cls")
  serving.export_classifier(config, prefix, classifiers["cls"], VOCAB_FILE, True, None,
                            CLASSIFIER_SEQ)
  # A multi-label run: recognised from what its output directory records (the
  # feature cache's reader options, the tuned threshold for this checkpoint's step).
  prefix, config, ref_single, ref_pair = _classifier_checkpoint(str(tmp_path), "ml", 3,
                                                                tokenizer, is_multilabel=True)
  threshold = float(np.median(np.concatenate([ref_single, ref_pair])))
  with open(os.path.join(str(tmp_path), "ml", "train.tf_record.json"), "w") as f:
    json.dump({"inputs": {"reader_options": {"task_type": "multilabel",
                                             "label_separator": "|"}}}, f)
  with open(os.path.join(str(tmp_path), "ml", "threshold.json"), "w") as f:
    json.dump({"threshold": threshold, "checkpoint_step": checkpoint_utils.checkpoint_step(
        prefix)}, f)
  classifier_refs["ml"] = (ref_single, ref_pair, threshold, prefix)
  classifiers["ml"] = str(tmp_path / "export_ml")
  # --padding=max_length: the fixed-length model (cls above is bucketed, the default).
  serving.export_classifier(config, prefix, classifiers["ml"], VOCAB_FILE, True, None,
                            CLASSIFIER_SEQ, padding="max_length")
  # The regression head is checked in this process (saving works the same way).
  prefix, config, ref_single, ref_pair = _classifier_checkpoint(str(tmp_path), "reg", 1,
                                                                tokenizer)
  classifier_refs["reg"] = (ref_single, ref_pair)
  regressor, is_regression, _ = serving.build_classifier(
      config, prefix, serving.BertPreprocessor(VOCAB_FILE, True, None, CLASSIFIER_SEQ))
  assert is_regression
  ca, cb = tf.constant(CLASSIFIER_A), tf.constant(CLASSIFIER_B)
  regression = {"reg/single/" + k: v.numpy() for k, v in regressor({"sentence": ca}).items()}
  regression.update({"reg/pair/" + k: v.numpy()
                     for k, v in regressor({"sentence": ca, "sentence2": cb}).items()})
  regression["reg/short/predictions"] = regressor({"sentence": ca[:2]})["predictions"].numpy()
  for kind, features in _classifier_features(tokenizer).items():
    regression["reg/ids_%s/predictions" % kind] = regressor.serve_ids(
        *[tf.constant(features[name]) for name in serving.ENCODER_INPUTS])["predictions"].numpy()
  # The length a request is packed to: its longest input's bucket (16 or CLASSIFIER_SEQ).
  regression["reg/widths"] = np.array([
      regressor.encoder_inputs(request)["input_mask"].shape[1] for request in (
          {"sentence": ca[:2]}, {"sentence": ca[1:2]}, {"sentence": ca},
          {"sentence": ca[1:2], "sentence2": cb[2:3]})])
  texts_a = [t.decode("latin-1") for t in TRICKY_BYTES]
  (tmp_path / "child.json").write_text(json.dumps({
      "encoders": encoders, "inputs": {k: v.tolist() for k, v in inputs.items()},
      "positions": POSITIONS.tolist(), "preprocessor": preprocessor, "a": texts_a,
      "preprocessor_bucket": preprocessor_bucket,
      "b": list(reversed(texts_a)), "seq": 20, "classifiers": classifiers,
      "ca": CLASSIFIER_A, "cb": CLASSIFIER_B,
      # serving_ids takes them under run_classifier's names.
      "features": {kind: {id_name: features[encoder_name].tolist() for id_name, encoder_name
                          in zip(serving.ID_INPUTS, serving.ENCODER_INPUTS)}
                   for kind, features in _classifier_features(tokenizer).items()}}))
  run_fresh(CHILD, tmp_path)
  got = dict(np.load(str(tmp_path / "child.npz"), allow_pickle=True))
  got.update(regression)
  return {"got": got, "references": references, "classifier_refs": classifier_refs,
          "tokenizer": tokenizer}


@pytest.mark.slow
def test_encoder_export_matches_graph_mode(exported):
  """Every residual_attention x layer_norm_type: reloaded export == graph-mode BertModel."""
  got, references = exported["got"], exported["references"]
  for i, ref in enumerate(references):
    for key in ("pooled_output", "sequence_output"):
      np.testing.assert_allclose(got["%d/%s" % (i, key)], ref[key], rtol=0, atol=1e-5,
                                 err_msg="%s %s" % (KINDS[i], key))
    np.testing.assert_allclose(got["%d/default" % i], ref["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(got["%d/sig_pooled_output" % i], ref["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(got["%d/sig_encoder_outputs_1" % i], ref["encoder_outputs"][1],
                               atol=1e-5)
    for j in range(2):
      np.testing.assert_allclose(got["%d/encoder_outputs/%d" % (i, j)],
                                 ref["encoder_outputs"][j], atol=1e-5,
                                 err_msg="%s layer %d" % (KINDS[i], j))
    # 5 embedding + 16 per layer + 2 pooler (+ final LayerNorm for Pre-LN), all trainable.
    expected = 5 + 16 * 2 + 2 + (2 if KINDS[i][1] == "pre" else 0)
    assert list(got["%d/num_variables" % i]) == [expected, expected]
  # Attention outputs and the MLM head of the export with extras.
  ref = references[EXTRAS]
  for key in ("attention_scores", "attention_probs"):
    for j in range(2):
      np.testing.assert_allclose(got["%d/%s/%d" % (EXTRAS, key, j)], ref[key][j], atol=1e-5)
  logits = got["%d/mlm_logits" % EXTRAS]
  assert logits.shape == (3, 2, 30522)
  top = logits.max(-1, keepdims=True)
  log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
  np.testing.assert_allclose(log_probs, ref["mlm_log_probs"], atol=1e-4)
  assert "0/attention_scores/0" not in got and "0/mlm_logits" not in got


@pytest.mark.slow
def test_hub_keras_layer_fine_tunes(exported):
  """hub.KerasLayer(trainable=True): gradients for every weight, one step changes them."""
  got = exported["got"]
  assert int(got["keras/num_trainable"]) == 41  # KINDS[1] is Pre-LN
  assert int(got["keras/none_grads"]) == 0
  assert int(got["keras/changed"]) >= 30


def test_encoder_missing_variable_and_mlm_errors(tmp_path):
  config = _tiny_config()
  prefix, _ = make_checkpoint(str(tmp_path / "m"), config, _inputs())
  with pytest.raises(ValueError, match="cls/predictions"):
    serving.build_encoder(config, prefix, with_mlm=True)
  with pytest.raises(ValueError, match="final_layer_norm"):
    serving.build_encoder(_tiny_config(layer_norm_type="pre"), prefix)
  with pytest.raises(ValueError, match="shape"):
    serving.build_encoder(_tiny_config(vocab_size=100), prefix)
  # A checkpoint of another model: no trained weights, said in one line.
  with tf.Graph().as_default():
    tf1.Variable(tf.zeros([4, 4]), name="encoder/layer_0/kernel")
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      foreign = tf1.train.Saver().save(sess, str(tmp_path / "nmt" / "model.ckpt"))
  with pytest.raises(common.UsageError) as e:
    serving.build_encoder(config, foreign)
  assert str(e.value).startswith("--init_checkpoint=%s: supplies none of the model's 39 "
                                 "variables" % foreign)
  # Random weights, only with --allow_random_eval (main() checks it): seeded, the model's own
  # initialisers, the same on every run.
  def build():
    serving.encoder_graph(config, {k: tf1.placeholder(tf.int32, [None, None])
                                      for k in serving.ENCODER_INPUTS})
  first, second = [export_utils.model_variables(build, None) for _ in range(2)]
  assert len(first) == 39
  for name, variable in first.items():
    np.testing.assert_array_equal(variable.numpy(), second[name].numpy())
  assert np.all(first["bert/embeddings/LayerNorm/gamma"].numpy() == 1.0)
  assert 0.01 < first["bert/embeddings/word_embeddings"].numpy().std() < 0.03   # stddev 0.02


def test_document_windows_equal_run_classifier_windows():
  """The graph's windows (serving.document_windows) are classifier_features'
  (convert_example_to_windows: text_b cut to (seq - 3) // 2 tokens in every window, text_a
  windowed in what is left), for every stride, with and without a text_b, empty texts too."""
  rng = np.random.RandomState(0)
  for seq in (4, 5, 9, 24):
    for pair in (False, True):
      for stride in range(1, seq + 2):
        lengths_a = [0, 1] + rng.randint(0, 3 * seq, size=6).tolist()
        lengths_b = [3, 0] + rng.randint(0, seq, size=6).tolist()
        texts_a = [list(range(100 * i, 100 * i + n)) for i, n in enumerate(lengths_a)]
        texts_b = [list(range(-100 * i - n, -100 * i)) for i, n in enumerate(lengths_b)]
        ragged_b = tf.RaggedTensor.from_row_lengths(
            tf.constant(sum(texts_b, []), tf.int32), lengths_b) if pair else None
        windows_a, windows_b, documents = serving.document_windows(
            tf.RaggedTensor.from_row_lengths(tf.constant(sum(texts_a, []), tf.int32),
                                             lengths_a), ragged_b, seq, stride)
        want_a, want_b, want_documents = [], [], []
        for i, (a, b) in enumerate(zip(texts_a, texts_b)):
          b = b[:(seq - 3) // 2] if pair else None
          window_length = classifier_features.window_length_for(seq, pair) - len(b or [])
          for window in classifier_features.document_windows(len(a), window_length, stride):
            want_a.append(a[window.start:window.start + window.length])
            want_b.append(b)
            want_documents.append(i)
        assert windows_a.to_list() == want_a, (seq, pair, stride)
        assert documents.numpy().tolist() == want_documents
        assert windows_b is None if not pair else windows_b.to_list() == want_b


def test_round_robin_trimmer_equals_official_truncation():
  """pack_inputs keeps exactly the tokens run_classifier._truncate_seq_pair keeps."""
  import tensorflow_text  # pylint: disable=unused-import
  cases = [(a, b) for a in range(0, 14) for b in range(0, 14)]
  seq_length = 12  # budget 9 for pairs, 10 for singles
  seg_a = tf.ragged.constant([[100 + i for i in range(a)] for a, _ in cases], tf.int32)
  seg_b = tf.ragged.constant([[200 + i for i in range(b)] for _, b in cases], tf.int32)
  packed = serving.pack_inputs([seg_a, seg_b], seq_length, 2, 3)
  single = serving.pack_inputs([seg_a], seq_length, 2, 3)
  for k, (a, b) in enumerate(cases):
    ids_a, ids_b = [100 + i for i in range(a)], [200 + i for i in range(b)]
    run_classifier._truncate_seq_pair(ids_a, ids_b, seq_length - 3)
    expected = [2] + ids_a + [3] + (ids_b + [3] if ids_b else [])
    types = [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1 if ids_b else 0)
    pad = seq_length - len(expected)
    assert packed["input_word_ids"][k].numpy().tolist() == expected + [0] * pad, (a, b)
    assert packed["input_type_ids"][k].numpy().tolist() == types + [0] * pad, (a, b)
    assert packed["input_mask"][k].numpy().tolist() == [1] * len(expected) + [0] * pad
    expected_single = [2] + [100 + i for i in range(min(a, seq_length - 2))] + [3]
    assert single["input_word_ids"][k].numpy().tolist()[:len(expected_single)] == expected_single


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_tokenize_matches_full_tokenizer(vocab_file, do_lower_case):
  """Tricky text and the first 3,000 lines of the shared corpus sample: no mismatch."""
  reference = tokenization.FullTokenizer(vocab_file, do_lower_case)
  preprocessor = serving.BertPreprocessor(vocab_file, do_lower_case, None, 128)
  texts = list(TRICKY_BYTES)
  try:
    with open(shared_path("sample_1mb.txt"), "rb") as f:
      texts += f.read().split(b"\n")[:3000]
  except pytest.skip.Exception:
    pass
  got = preprocessor.tokenize(tf.constant(texts))
  assert got.shape.rank == 3
  got = got.merge_dims(-2, -1).to_list()
  mismatches = [(t, reference.tokenize(t)) for t, g in zip(texts, got)
                if g != reference.tokenize_to_ids(t)]
  assert not mismatches, mismatches[:3]
  # The long word and unknown characters really became [UNK] (a check on the check).
  unk = reference.vocab["[UNK]"]
  assert got[TRICKY.index("a" * 201)] == [unk]
  assert got[TRICKY.index("")] == []


def _official_features(tokenizer, text_a, text_b, seq_length):
  example = run_classifier.InputExample("x", text_a, text_b, None)
  feature = run_classifier.convert_single_example(10, example, None, seq_length, tokenizer)
  return feature.input_ids, feature.input_mask, feature.segment_ids


@pytest.mark.slow
def test_preprocessor_saved_model_matches_run_classifier(exported):
  got, tokenizer = exported["got"], exported["tokenizer"]
  for i, (a, b) in enumerate(zip(TRICKY_BYTES, reversed(TRICKY_BYTES))):
    ids, mask, types = _official_features(tokenizer, a, None, 16)
    for prefix in ("pre_single/", "pre_sig/"):
      assert got[prefix + "input_word_ids"][i].tolist() == ids, (prefix, a)
      assert got[prefix + "input_mask"][i].tolist() == mask
      assert got[prefix + "input_type_ids"][i].tolist() == types
    ids, mask, types = _official_features(tokenizer, a, b, 20)
    for prefix in ("pre_pair/", "pre_keras/"):
      assert got[prefix + "input_word_ids"][i].tolist() == ids, (prefix, a, b)
      assert got[prefix + "input_mask"][i].tolist() == mask
      assert got[prefix + "input_type_ids"][i].tolist() == types


@pytest.mark.slow
def test_preprocessor_bucket_padding(exported):
  """--padding=bucket: a call's inputs are the fixed-length ones cut to the call's longest
  input rounded up to a bucket (16, 32, 64 here); only padding is cut."""
  got = exported["got"]
  widths = []
  for i in range(3):
    full = got["pre_full%d/input_mask" % i]
    n = got["pre_bucket%d/input_mask" % i].shape[1]
    widths.append(n)
    longest = int(full.sum(axis=1).max())
    assert n == min(b for b in (16, 32, 64) if b >= longest) and not full[:, n:].any()
    for k in ("input_word_ids", "input_mask", "input_type_ids"):
      np.testing.assert_array_equal(got["pre_bucket%d/%s" % (i, k)],
                                    got["pre_full%d/%s" % (i, k)][:, :n], err_msg=k)
  assert widths[2] == 64 and min(widths) < 64


def test_sentencepiece_preprocessor(tmp_path):
  import sentencepiece as spm
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("\n".join(["The quick brown fox jumps over the lazy dog %d times." % i
                               for i in range(200)] + TRICKY[2:]))
  model = str(tmp_path / "spm.model")
  spm.SentencePieceTrainer.train(
      input=str(corpus), model_prefix=model[:-len(".model")], vocab_size=120,
      pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]", unk_piece="[UNK]",
      control_symbols=["[CLS]", "[SEP]", "[MASK]"], character_coverage=1.0, minloglevel=2,
      num_threads=1)
  reference = tokenization.FullTokenizer(None, True, spm_model_file=model)
  preprocessor = serving.BertPreprocessor(None, True, model, seq_length=24)
  assert (preprocessor.cls_id, preprocessor.sep_id) == (2, 3)
  texts = [t.encode("utf-8") for t in TRICKY] + [b"THE QUICK brown fox"]
  # Documented difference: tensorflow_text's SentencePiece op ends the text at a NUL character.
  nul = [i for i, t in enumerate(texts) if b"\x00" in t]
  assert nul == [TRICKY.index("Hello\x00wor\x07ld\u200b zero\ufeffwidth\ufffd")]
  got = preprocessor.tokenize(tf.constant(texts)).to_list()
  assert got[nul[0]] == reference.tokenize_to_ids(b"Hello")
  texts[nul[0]] = texts[nul[0]].replace(b"\x00", b" ")
  got = preprocessor.tokenize(tf.constant(texts)).to_list()
  assert got == [reference.tokenize_to_ids(t) for t in texts]
  packed = preprocessor(tf.constant(texts))
  for i, text in enumerate(texts):
    ids, mask, types = _official_features(reference, text, None, 24)
    assert packed["input_word_ids"][i].numpy().tolist() == ids
    assert packed["input_mask"][i].numpy().tolist() == mask
  path = str(tmp_path / "pre")
  serving.export_preprocessor(path, None, True, model, seq_length=24)
  assert os.path.exists(os.path.join(path, "assets", "spm.model"))


@pytest.mark.slow
def test_classifier_export_end_to_end(exported):
  """Strings in; probabilities equal run_classifier.create_model on the official features."""
  got = exported["got"]
  ref_single, ref_pair = exported["classifier_refs"]["cls"]
  np.testing.assert_allclose(got["cls/single/probabilities"], ref_single, atol=1e-5)
  np.testing.assert_allclose(got["cls/default/probabilities"], ref_single, atol=1e-5)
  np.testing.assert_allclose(got["cls/pair/probabilities"], ref_pair, atol=1e-5)
  np.testing.assert_allclose(got["cls/sig_pair/probabilities"], ref_pair, atol=1e-5)
  # Bucketed (the default; ml is the --padding=max_length export): short requests at 16.
  for name in ("cls", "ml"):
    np.testing.assert_allclose(got[name + "/short/probabilities"],
                               exported["classifier_refs"][name][0][:2], atol=1e-5)
    np.testing.assert_allclose(got[name + "/one/probabilities"],
                               exported["classifier_refs"][name][0][1:2], atol=1e-5)
    with open(os.path.join(os.path.dirname(exported["classifier_refs"]["ml"][3]), os.pardir,
                           "export_" + name, serving.EXPORT_INFO)) as f:
      assert json.load(f)["padding"] == {"cls": "bucket", "ml": "max_length"}[name]
  assert got["reg/widths"].tolist() == [16, 16, CLASSIFIER_SEQ, 16]
  # serving_ids beside them: the same model on run_classifier's int32 features, with the
  # outputs of run_classifier's former integer export.
  for name in ("cls", "ml"):
    assert got[name + "/signatures"].tolist() == ["serving_default", "serving_ids",
                                                  "serving_pair", "serving_single"]
    assert "segment_ids must be in [0, type_vocab_size=2)" in str(
        got[name + "/ids_bad_segment"]), got[name + "/ids_bad_segment"]
  ref_single, ref_pair = exported["classifier_refs"]["cls"]
  for kind, ref in (("single", ref_single), ("pair", ref_pair)):
    np.testing.assert_allclose(got["cls/ids_%s/probabilities" % kind], ref, atol=1e-5)
    assert got["cls/ids_%s/predicted_label" % kind].tolist() == ref.argmax(-1).tolist()
    assert not [k for k in got if k.startswith("cls/ids_%s/" % kind) and "name" in k]
  names = np.array(["neg", "neutral", "pos"])
  assert [x.decode() for x in got["cls/pair/predicted_label_name"]] == list(
      names[ref_pair.argmax(-1)])
  assert got["cls/pair/predicted_label"].tolist() == ref_pair.argmax(-1).tolist()
  assert got["cls/single/label_names"].shape == (4, 3)
  assert [x.decode() for x in got["cls/single/label_names"][0]] == list(names)
  ref_single, ref_pair = exported["classifier_refs"]["reg"]
  np.testing.assert_allclose(got["reg/single/predictions"], ref_single, atol=1e-5)
  np.testing.assert_allclose(got["reg/pair/predictions"], ref_pair, atol=1e-5)
  np.testing.assert_allclose(got["reg/short/predictions"], ref_single[:2], atol=1e-5)
  np.testing.assert_allclose(got["reg/ids_single/predictions"], ref_single, atol=1e-5)
  np.testing.assert_allclose(got["reg/ids_pair/predictions"], ref_pair, atol=1e-5)
  assert "reg/single/probabilities" not in got


@pytest.mark.slow
def test_multilabel_classifier_export(exported):
  """A multi-label run exports sigmoid probabilities and its tuned threshold (it
  was exported as a softmax single-label classifier)."""
  got = exported["got"]
  ref_single, ref_pair, threshold, prefix = exported["classifier_refs"]["ml"]
  names = ["neg", "neutral", "pos"]
  for kind, ref in (("single", ref_single), ("default", ref_single), ("pair", ref_pair),
                    ("sig_pair", ref_pair)):
    probabilities = got["ml/%s/probabilities" % kind]
    np.testing.assert_allclose(probabilities, ref, atol=1e-5)   # the checkpoint's sigmoids
    chosen = probabilities >= threshold
    assert got["ml/%s/predicted_labels" % kind].tolist() == chosen.astype(int).tolist()
    assert [x.decode() for x in got["ml/%s/predicted_label_names" % kind]] == [
        "|".join(n for n, c in zip(names, row) if c) for row in chosen]
    assert "ml/%s/predicted_label" % kind not in got
  for kind, ref in (("single", ref_single), ("pair", ref_pair)):
    np.testing.assert_allclose(got["ml/ids_%s/probabilities" % kind], ref, atol=1e-5)
    assert got["ml/ids_%s/predicted_labels" % kind].tolist() == (ref >= threshold).astype(
        int).tolist()
  assert 0 < (np.concatenate([ref_single, ref_pair]) >= threshold).mean() < 1
  export_dir = os.path.join(os.path.dirname(os.path.dirname(prefix)), "export_ml")
  with open(os.path.join(export_dir, serving.EXPORT_INFO)) as f:
    info = json.load(f)
  assert info["task_type"] == "multilabel" and info["labels"] == names
  assert info["threshold"] == threshold and info["label_separator"] == "|"
  assert info["threshold_source"].endswith("threshold.json (tuned on dev)")
  assert info["checkpoint"] == prefix and info["mode"] == "classifier"


def test_classifier_task_from_run_records(tmp_path):
  """What a run_classifier output directory records decides the head."""
  out = tmp_path / "out"
  out.mkdir()
  # Only the head's shapes are read.
  with tf.Graph().as_default():
    tf1.Variable(tf.zeros([3, 32]), name="output_weights")
    tf1.Variable(tf.zeros([3]), name="output_bias")
    tf1.Variable(tf.constant(7, tf.int64), name="global_step")
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      prefix = tf1.train.Saver().save(sess, str(out / "model.ckpt"), global_step=7)
  step = checkpoint_utils.checkpoint_step(prefix)
  assert step == 7
  task = serving.resolve_classifier_task(prefix)
  assert (task["task_type"], task["threshold"]) == ("classification", None)
  for kwargs, message in (
      (dict(task_type="regression"), "--task_type=regression: the checkpoint's head has 3 "
                                     "outputs (regression has 1)"),
      (dict(threshold=0.4), "--multilabel_threshold=0.4: only for a multi-label classifier "
                            "(this one is classification)"),
      (dict(task_type="multilabel", threshold=1.5), "--multilabel_threshold=1.5: must be in "
                                                    "[0, 1]")):
    with pytest.raises(common.UsageError) as e:
      serving.resolve_classifier_task(prefix, **kwargs)
    assert str(e.value) == message
  # Multi-label evaluation results: the threshold it was evaluated with.
  (out / "eval_results.json").write_text(json.dumps({"eval_micro_f1": 0.5,
                                                     "eval_threshold": 0.4}))
  task = serving.resolve_classifier_task(prefix)
  assert (task["task_type"], task["threshold"], task["label_separator"]) == (
      "multilabel", 0.4, ",")
  assert task["evidence"] == str(out / "eval_results.json")
  # A threshold tuned for another checkpoint is not used; one tuned for this one is.
  (out / "threshold.json").write_text(json.dumps({"threshold": 0.3, "checkpoint_step": -1}))
  assert serving.resolve_classifier_task(prefix)["threshold"] == 0.4
  (out / "threshold.json").write_text(json.dumps({"threshold": 0.3, "checkpoint_step": step}))
  assert serving.resolve_classifier_task(prefix)["threshold"] == 0.3
  assert serving.resolve_classifier_task(prefix, threshold=0.7)["threshold"] == 0.7
  # A --task_type that contradicts the run: one line.
  with pytest.raises(common.UsageError) as e:
    serving.resolve_classifier_task(prefix, task_type="classification")
  assert str(e.value) == ("--task_type=classification: the checkpoint's run was a multilabel "
                          "task (%s)" % (out / "threshold.json"))
  # A --keep_best copy (out/best/): the records and labels.txt of its run.
  (out / "labels.txt").write_text("x\ny\nz\n")
  best = out / "best"
  best.mkdir()
  for name in os.listdir(str(out)):
    if name.startswith(os.path.basename(prefix) + "."):
      os.link(str(out / name), str(best / name))
  (best / "best.json").write_text(json.dumps({"metric": "micro_f1", "step": step}))
  task = serving.resolve_classifier_task(str(best / os.path.basename(prefix)))
  assert (task["task_type"], task["labels"], task["threshold"]) == (
      "multilabel", ["x", "y", "z"], 0.3)
  # Random weights (--allow_random_eval): the classes come from --label_list.
  with pytest.raises(common.UsageError, match="--label_list is required"):
    serving.resolve_classifier_task(None)
  task = serving.resolve_classifier_task(None, "a,b", task_type="multilabel")
  assert (task["num_labels"], task["labels"], task["threshold"]) == (2, ["a", "b"], 0.5)


def test_classifier_windowing_from_run_records(tmp_path):
  """export_hub's --long_document: the flags, else what a --long_document=window run records
  (eval_results.json), else truncation; bad strides are one line."""
  out = tmp_path / "out"
  out.mkdir()
  prefix = str(out / "model.ckpt-7")
  assert serving.resolve_windowing(prefix, 24) == (None, "mean", "default")
  assert serving.resolve_windowing(prefix, 24, long_document="window") == (11, "mean", "default")
  # A pair: the window is what text_b leaves, (24 - 3) - (24 - 3) // 2 = 11.
  assert serving.resolve_windowing(prefix, 24, True, "window")[0] == 5
  (out / "eval_results.json").write_text(json.dumps(
      {"eval_accuracy": 0.5, "long_document": "window", "doc_stride": 8,
       "window_pooling": "max"}))
  assert serving.resolve_windowing(prefix, 24) == (8, "max", str(out / "eval_results.json"))
  assert serving.resolve_windowing(prefix, 24, doc_stride=4, window_pooling="mean") == (
      4, "mean", "flags")
  assert serving.resolve_windowing(prefix, 24, long_document="truncate")[0] is None
  for kwargs, message in (
      (dict(long_document="truncate", doc_stride=4),
       "--doc_stride=4: only with --long_document=window"),
      (dict(doc_stride=23), "--doc_stride=23: larger than the window (22 tokens of text_a at "
                            "--seq_length=24), which would skip text between windows"),
      (dict(doc_stride=0), "--doc_stride=0: must be >= 1")):
    with pytest.raises(common.UsageError) as e:
      serving.resolve_windowing(prefix, 24, **kwargs)
    assert str(e.value) == message
  with pytest.raises(common.UsageError, match=r"--doc_stride=8 \(.*eval_results.json\): larger "
                                              r"than the window \(6 tokens"):
    serving.resolve_windowing(prefix, 8)


def test_classifier_label_list_errors(tmp_path, vocab_file):
  config = _tiny_config()
  prefix, _ = make_checkpoint(str(tmp_path / "m"), config, _inputs(), num_labels=2)
  with pytest.raises(ValueError, match="3 labels"):
    serving.read_label_names("a,b,c", prefix, 2)
  assert serving.read_label_names(None, prefix, 2) == ["0", "1"]
  encoder_prefix, _ = make_checkpoint(str(tmp_path / "e"), config, _inputs())
  preprocessor = serving.BertPreprocessor(vocab_file, True, None, 16)
  with pytest.raises(ValueError, match="output_weights"):
    serving.build_classifier(config, encoder_prefix, preprocessor)


@pytest.mark.slow
def test_cli_several_modes_and_bad_flags(tmp_path, vocab_file):
  config = _tiny_config()
  prefix, _ = make_checkpoint(str(tmp_path / "m"), config, _inputs())
  bad = run_tool("export_hub.py", ["--mode=encoder,decoder", "--export_dir=unused_export_dir"],
                 expect_rc=2, timeout=120)
  assert last_error_line(bad).startswith("error: --mode=encoder,decoder")
  out = str(tmp_path / "hub")
  run_tool("export_hub.py", ["--mode=encoder,preprocessor",
                             "--init_checkpoint=%s" % os.path.dirname(prefix),
                             "--vocab_file=%s" % vocab_file, "--export_dir=%s" % out,
                             "--seq_length=32", "--residual_attention=mean"])
  for mode in ("encoder", "preprocessor"):
    assert os.path.exists(os.path.join(out, mode, "saved_model.pb"))
  with open(os.path.join(out, "encoder", "bert_config.json")) as f:
    assert json.load(f)["residual_attention"] == "mean"
  with open(os.path.join(out, "encoder", serving.EXPORT_INFO)) as f:
    info = json.load(f)
  assert (info["mode"], info["checkpoint"], info["global_step"]) == ("encoder", prefix, 0)
  # No trained weights: one line naming the flag, before any work.
  bad = run_tool("export_hub.py", ["--mode=encoder", "--export_dir=%s" % (tmp_path / "new"),
                                   "--bert_config_file=%s" % os.path.join(
                                       os.path.dirname(prefix), "bert_config.json")],
                 expect_rc=2, timeout=120)
  assert last_error_line(bad).startswith("error: export_hub.py --mode=encoder: no trained "
                                         "weights")
  assert "--allow_random_eval" in last_error_line(bad)
  assert not os.path.exists(str(tmp_path / "new"))
  assert not [x for x in os.listdir(out) if ".tmp-" in x]


@pytest.mark.slow
def test_cli_classifier_windows_as_the_run_did(tmp_path, vocab_file):
  """A --long_document=window run's directory: export_hub --mode=classifier windows and pools
  as it did (from eval_results.json), and says so in export_info.json."""
  config = _tiny_config()
  prefix, _ = make_checkpoint(str(tmp_path / "run"), config, _inputs(), num_labels=2)
  (tmp_path / "run" / "eval_results.json").write_text(json.dumps(
      {"eval_accuracy": 0.5, "long_document": "window", "doc_stride": 5,
       "window_pooling": "max"}))
  export = tmp_path / "export"
  proc = run_tool("export_hub.py", ["--mode=classifier", "--init_checkpoint=%s" % prefix,
                                    "--vocab_file=%s" % vocab_file, "--seq_length=16",
                                    "--export_dir=%s" % export], timeout=180)
  assert "Long texts: windows 5 tokens apart, max-pooled (%s)" % (
      tmp_path / "run" / "eval_results.json") in proc.output
  info = json.loads((export / serving.EXPORT_INFO).read_text())
  assert (info["long_document"], info["doc_stride"], info["window_pooling"]) == (
      "window", 5, "max")
  assert info["id_outputs"] == ["predicted_label", "probabilities"]
  bad = run_tool("export_hub.py", ["--mode=encoder", "--init_checkpoint=%s" % prefix,
                                   "--doc_stride=4", "--export_dir=%s" % (tmp_path / "e")],
                 expect_rc=2, timeout=120)
  assert last_error_line(bad) == "error: --doc_stride: only for --mode=classifier"


def test_export_never_deletes_what_it_did_not_write(tmp_path, vocab_file):
  """An existing --export_dir that is not our export (or holds the checkpoint) is refused."""
  config = _tiny_config()
  model_dir = str(tmp_path / "m")
  prefix, _ = make_checkpoint(model_dir, config, _inputs())
  before = sorted(os.listdir(model_dir))
  # The model directory itself and its parent: refused, nothing deleted.
  for target in (model_dir, str(tmp_path)):
    with pytest.raises(ValueError, match="--export_dir=.*(would replace|holds checkpoints)"):
      serving.export_encoder(config, prefix, target, overwrite=True)
  assert sorted(os.listdir(model_dir)) == before
  # A directory of the user's own, and a file: refused even with overwrite.
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "notes.txt").write_text("keep")
  with pytest.raises(ValueError, match="not written by this project"):
    serving.export_preprocessor(str(mine), vocab_file, overwrite=True)
  assert (mine / "notes.txt").read_text() == "keep"
  (tmp_path / "f").write_text("x")
  with pytest.raises(ValueError, match="is a file"):
    serving.export_preprocessor(str(tmp_path / "f"), vocab_file, overwrite=True)
  # Our own export is replaced only with overwrite.
  out = str(tmp_path / "pre")
  serving.export_preprocessor(out, vocab_file, seq_length=16)
  with pytest.raises(ValueError, match="pass --overwrite"):
    serving.export_preprocessor(out, vocab_file, seq_length=16)
  serving.export_preprocessor(out, vocab_file, seq_length=16, overwrite=True)
  assert os.path.exists(os.path.join(out, "saved_model.pb"))
  assert not [x for x in os.listdir(str(tmp_path)) if ".tmp-" in x]


def test_encoder_fails_requests_outside_its_tables():
  """A token type id >= type_vocab_size selected no embedding and answered as if it were
  right; such ids, token ids >= vocab_size and sequences longer than the position table fail
  the request with a message naming the input."""
  config = _tiny_config()

  def build():
    ids = tf.zeros([1, 4], tf.int32)
    modeling.BertModel(config, False, ids, ids, ids, scope="bert")

  variables = export_utils.random_variables(build, export_utils.collect_variable_specs(build))
  encoder = serving.BertEncoder(config, variables)
  # serving_default's function: [batch, seq] of any length, as in the SavedModel.
  serve = encoder.serve.get_concrete_function(
      *[tf.TensorSpec([None, None], tf.int32, name=name) for name in serving.ENCODER_INPUTS])
  inputs = {k: tf.constant(v) for k, v in _inputs(batch=3, seq=8).items()}
  assert serve(**inputs)["pooled_output"].shape == (3, 32)
  assert serve(**{k: v[:0] for k, v in inputs.items()})["pooled_output"].shape == (0, 32)
  bad_requests = [
      (dict(inputs, input_type_ids=inputs["input_type_ids"] + 2),
       r"input_type_ids must be in \[0, type_vocab_size=2\)"),
      (dict(inputs, input_word_ids=inputs["input_word_ids"] + 30522),
       r"input_word_ids must be in \[0, vocab_size=30522\)"),
      ({k: tf.ones([1, 65], tf.int32) for k in inputs},
       r"input_word_ids: the sequence length must be <= max_position_embeddings=64"),
  ]
  for request, message in bad_requests:
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
      serve(**request)
