"""export_translation.py (translation_serving.py): the raw-text translation SavedModel against
run_translation's decoder.

A tiny model over a tiny joint SentencePiece model (trained here on 300 Multi30k lines a side)
and a random checkpoint; the SavedModel, loaded in a fresh process, must give what
run_translation.translate_graph gives in a tf.compat.v1 Session on the same checkpoint, with the
ids of run_translation.encode_sources (SentencePiece + eos, cut to max_source_length) and
run_translation.translate_lines' decoding (ids[:length] without eos, sp.decode): the same
strings, lengths, scores and cut flags.
"""

import gzip
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import last_error_line, run_tool, shared_path
from realformer_tf import common
from realformer_tf import vocab_building
from translation import nmt_modeling
from translation import run_translation
from translation import translation_records
from translation import translation_serving

tf1 = tf.compat.v1

TINY_NMT_CONFIG = {"hidden_size": 16, "num_encoder_layers": 2, "num_decoder_layers": 2,
                   "num_attention_heads": 2, "intermediate_size": 32,
                   "residual_attention": "sum", "layer_norm_type": "admin"}
SPM_VOCAB_SIZE = 200
MAX_DECODE_LENGTH = 10
MAX_SOURCE_LENGTH = 48
LENGTH_PENALTY = 0.6

# Loads each export in a fresh process (nothing of the exporter's process leaks in) and prints
# its outputs on the sentences as JSON.
_LOAD_AND_TRANSLATE = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the SentencePiece ops
sentences = json.load(open(sys.argv[1], encoding="utf-8"))
results = {}
for path in sys.argv[2:]:
  translate = tf.saved_model.load(path).signatures["translate"]
  out = translate(source=tf.constant(sentences))
  empty = translate(source=tf.constant([], tf.string))
  results[path] = {
      "translation": [t.decode("utf-8") for t in out["translation"].numpy()],
      "score": out["score"].numpy().tolist(), "length": out["length"].numpy().tolist(),
      "reached_max_length": out["reached_max_length"].numpy().tolist(),
      "source_truncated": out["source_truncated"].numpy().tolist(),
      "dtypes": {k: v.dtype.name for k, v in out.items()},
      "empty_batch": {k: list(v.shape) for k, v in empty.items()}}
print("RESULTS " + json.dumps(results))
"""


def _first_lines(path, count):
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return [next(f).rstrip("\n") for _ in range(count)]


def write_random_nmt_checkpoint(config, prefix, seed=3, eos_percentile=70.0):
  """Saves the model's variables (NmtModel graph, tf.compat.v1 Saver) with random values.

  Every variable gets noise on top of its initial value (omega and LayerNorm too), so an export
  that used the initialisers instead of the checkpoint would translate differently. The eos row
  of the shared embeddings is then pointed along the mean decoder state, scaled so that eos
  would beat the best token at about (100 - eos_percentile)% of teacher-forced positions: a
  random model then ends some hypotheses after a few pieces and runs others to the length limit.
  """
  rng = np.random.RandomState(seed)
  with tf.Graph().as_default():
    tf1.set_random_seed(seed)
    ids = tf1.placeholder(tf.int32, [None, None])
    model = nmt_modeling.NmtModel(config, False, ids, ids)
    saver = tf1.train.Saver()
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      # One run reads every variable, one writes them back (a run per variable costs ~15 ms).
      variables = tf1.global_variables()
      sess.run([var.initializer for var in variables],
               {var.initial_value: value + rng.normal(0.0, 0.2, value.shape).astype(np.float32)
                for var, value in zip(variables, sess.run(variables))})
      table = [v for v in tf1.global_variables() if v.op.name == "embeddings/word_embeddings"][0]
      batch = rng.randint(nmt_modeling.EOS_ID + 1, config.vocab_size, [16, 12]).astype(np.int32)
      for _ in range(2):  # eos is also an input: its new row changes the states a little
        states, logits, embeddings = sess.run([model.decoder_states, model.logits, table],
                                              {ids: batch})
        states = states.reshape(-1, config.hidden_size)
        direction = states.mean(0) / np.linalg.norm(states.mean(0))
        best = logits.reshape(-1, config.vocab_size).max(-1)
        scale = np.percentile(best / np.maximum(states.dot(direction), 1e-3), eos_percentile)
        embeddings[nmt_modeling.EOS_ID] = scale * direction
        sess.run(table.initializer, {table.initial_value: embeddings})
      return saver.save(sess, prefix)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
  """(config, checkpoint prefix, spm model path, test sentences, work dir)."""
  work = tmp_path_factory.mktemp("nmt_export")
  en = _first_lines(shared_path("nmt", "multi30k", "train.en.gz"), 300)
  de = _first_lines(shared_path("nmt", "multi30k", "train.de.gz"), 300)
  text = work / "train.txt"
  text.write_text("\n".join(en + de) + "\n", encoding="utf-8")
  spm_model = str(work / "spm.model")
  vocab_building.build_sentencepiece([str(text)], SPM_VOCAB_SIZE, spm_model, do_lower_case=False,
                                  log_fn=lambda s: None, id_layout="nmt")
  config = nmt_modeling.NmtConfig.from_dict(dict(TINY_NMT_CONFIG, vocab_size=SPM_VOCAB_SIZE))
  model_dir = work / "model"
  model_dir.mkdir()
  (model_dir / run_translation.CONFIG_NAME).write_text(config.to_json_string())
  prefix = write_random_nmt_checkpoint(config, str(model_dir / "model.ckpt"))
  # The last sentence is far over MAX_SOURCE_LENGTH: the export cuts it.
  sentences = (_first_lines(shared_path("nmt", "multi30k", "val.en.gz"), 5) +
               _first_lines(shared_path("nmt", "multi30k", "val.de.gz"), 2) +
               ["", "Zwei Männer, 日本 und ein Hund!", " ".join(en[:40])])
  return config, prefix, spm_model, sentences, work


def reference_translations(config, prefix, spm_model, sentences, beam_size):
  """run_translation's decoding of the sentences in one padded batch, in a Session."""
  sp = translation_records.load_spm(spm_model)
  ids, _ = run_translation.encode_sources(sp, sentences, MAX_SOURCE_LENGTH)
  width = max(len(x) for x in ids)
  padded = np.array([x + [nmt_modeling.PAD_ID] * (width - len(x)) for x in ids], np.int32)
  with tf.Graph().as_default():
    source = tf1.placeholder(tf.int32, [None, None])
    # The teacher-forced model first creates the variables the decoder loop reuses.
    nmt_modeling.NmtModel(config, False, source, source)
    best = run_translation.translate_graph(config, source, beam_size, LENGTH_PENALTY,
                                           MAX_DECODE_LENGTH)
    saver = tf1.train.Saver()
    with tf1.Session() as sess:
      saver.restore(sess, prefix)
      result = sess.run(best, {source: padded})
  translations, cut = [], []
  for row, length in zip(result["ids"], result["length"]):
    row = [int(i) for i in row[:length]]
    ended = bool(row) and row[-1] == nmt_modeling.EOS_ID
    translations.append(sp.decode(row[:-1] if ended else row))
    cut.append(not ended)
  return {"translation": translations, "score": result["score"].tolist(),
          "length": result["length"].tolist(), "reached_max_length": cut,
          "source_truncated": [len(sp.encode(s)) + 1 > MAX_SOURCE_LENGTH for s in sentences]}


@pytest.mark.slow
def test_saved_model_translates_as_run_translation(tiny_model):
  config, prefix, spm_model, sentences, work = tiny_model
  # Beam 3 through export(), beam 1 through the command line (config: the nmt_config.json
  # beside the checkpoint).
  exports = {1: str(work / "export_beam1"), 3: str(work / "export_beam3")}
  returned = translation_serving.export(
      config, os.path.dirname(prefix), spm_model, exports[3], beam_size=3,
      length_penalty=LENGTH_PENALTY, max_decode_length=MAX_DECODE_LENGTH,
      max_source_length=MAX_SOURCE_LENGTH)
  assert returned == prefix
  cli_args = ["--checkpoint=%s" % os.path.dirname(prefix), "--spm_model=%s" % spm_model,
              "--export_dir=%s" % exports[1], "--beam_size=1",
              "--length_penalty=%g" % LENGTH_PENALTY, "--max_decode_length=%d" % MAX_DECODE_LENGTH,
              "--max_source_length=%d" % MAX_SOURCE_LENGTH]
  run_tool("translation/export_translation.py", cli_args, timeout=240)
  sentences_file = work / "sentences.json"
  sentences_file.write_text(json.dumps(sentences), encoding="utf-8")
  proc = run_tool(None, ["-c", _LOAD_AND_TRANSLATE, sentences_file] + list(exports.values()),
                  timeout=240)
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS ")][-1]
  loaded = json.loads(line[len("RESULTS "):])
  for beam_size, path in exports.items():
    got = loaded[path]
    want = reference_translations(config, prefix, spm_model, sentences, beam_size)
    assert got["dtypes"] == {"translation": "string", "score": "float32", "length": "int32",
                             "reached_max_length": "bool", "source_truncated": "bool"}
    assert got["translation"] == want["translation"], beam_size
    assert got["length"] == want["length"], beam_size
    assert got["reached_max_length"] == want["reached_max_length"], beam_size
    assert got["source_truncated"] == want["source_truncated"], beam_size
    assert want["source_truncated"][-1] and not all(want["source_truncated"])
    np.testing.assert_allclose(got["score"], want["score"], rtol=1e-5, atol=1e-6)
    assert got["empty_batch"] == {"translation": [0], "score": [0], "length": [0],
                                  "reached_max_length": [0], "source_truncated": [0]}
    # The test has power: some hypotheses end with eos (stripped), others are cut.
    assert set(want["reached_max_length"]) == {True, False}, want
    if beam_size == 1:
      assert len(set(want["translation"])) > 3, want
      assert any(length > 2 and not cut for length, cut in
                 zip(want["length"], want["reached_max_length"])), want
    else:
      assert all(score < 0 for score in want["score"]), want
  # Self-contained: the SentencePiece model, the configs and the marker are in the export.
  export = exports[3]
  with open(spm_model, "rb") as want_spm, \
      open(os.path.join(export, "assets", "spm.model"), "rb") as got_spm:
    assert got_spm.read() == want_spm.read()
  saved_config = nmt_modeling.NmtConfig.from_json_file(
      os.path.join(export, translation_serving.CONFIG_NAME))
  assert saved_config.to_dict() == config.to_dict()
  with open(os.path.join(export, translation_serving.TRANSLATION_CONFIG_NAME)) as f:
    decoding = json.load(f)
  assert (decoding["beam_size"], decoding["max_decode_length"], decoding["max_source_length"]) \
      == (3, MAX_DECODE_LENGTH, MAX_SOURCE_LENGTH)
  assert os.path.exists(os.path.join(export, common.EXPORT_MARKER))
  # An earlier export is replaced only with --overwrite: one line, exit status 2.
  proc = run_tool("translation/export_translation.py", cli_args, expect_rc=2)
  assert last_error_line(proc) == (
      "error: --export_dir=%s: already holds an earlier output of this project; pass "
      "--overwrite to replace it" % exports[1])


def test_refuses_bad_decoding_settings(tiny_model):
  config, prefix, spm_model, _, work = tiny_model
  with pytest.raises(common.UsageError, match=r"^--beam_size=0: must be an integer >= 1$"):
    translation_serving.export(config, prefix, spm_model, str(work / "z"), beam_size=0)
  with pytest.raises(common.UsageError, match=r"^--max_decode_length=0: must be"):
    translation_serving.export(config, prefix, spm_model, str(work / "z"), max_decode_length=0)
  with pytest.raises(common.UsageError, match=r"^--max_source_length=1: must be an integer >= 2"):
    translation_serving.export(config, prefix, spm_model, str(work / "z"), max_source_length=1)
  assert not (work / "z").exists()


def test_refuses_a_directory_that_is_not_an_export(tiny_model):
  config, prefix, spm_model, _, work = tiny_model
  target = work / "not_an_export"
  target.mkdir()
  (target / "notes.txt").write_text("keep me")
  with pytest.raises(common.UsageError, match="was not written by this project"):
    translation_serving.export(config, prefix, spm_model, str(target), overwrite=True)
  assert (target / "notes.txt").read_text() == "keep me"
  with pytest.raises(common.UsageError, match="would replace"):
    translation_serving.export(config, prefix, spm_model, os.path.dirname(prefix))


def test_refuses_an_spm_model_of_another_vocab_size(tiny_model):
  config, prefix, spm_model, _, work = tiny_model
  other = nmt_modeling.NmtConfig.from_dict(dict(config.to_dict(), vocab_size=SPM_VOCAB_SIZE + 1))
  with pytest.raises(common.UsageError) as e:
    translation_serving.export(other, prefix, spm_model, str(work / "x"))
  assert str(e.value) == "--spm_model=%s: %d pieces, the model's vocab_size is %d" % (
      spm_model, SPM_VOCAB_SIZE, SPM_VOCAB_SIZE + 1)
  assert not (work / "x").exists()


def test_refuses_a_checkpoint_of_another_model(tiny_model):
  config, prefix, spm_model, _, work = tiny_model
  wider = nmt_modeling.NmtConfig.from_dict(dict(config.to_dict(), intermediate_size=48))
  with pytest.raises(common.UsageError) as e:
    translation_serving.export(wider, prefix, spm_model, str(work / "y"))
  assert "variable encoder/layer_0/intermediate/dense/kernel has shape [16, 32] there but " \
         "[16, 48]" in str(e.value)
  deeper = nmt_modeling.NmtConfig.from_dict(dict(config.to_dict(), num_decoder_layers=3))
  with pytest.raises(common.UsageError, match="lacks .* decoder/layer_2/"):
    translation_serving.export(deeper, prefix, spm_model, str(work / "y"))
  assert not (work / "y").exists()
