# coding=utf-8
r"""Translation latency of the raw-text SavedModel (export_translation.py), per beam and batch.

Loads each export with tf.saved_model.load and times its `translate` signature on raw source
sentences (tokenisation, encoder, beam search and detokenisation all inside the graph): for
each beam size and batch size, the median of --runs calls after a warm-up call, as ms per call
and ms per sentence, with the pieces generated per sentence (a random model mostly decodes to
--max_decode_length: scale by the pieces of a real model's translations).

  bash run.sh bench bench_translation_latency              # a random model of the
      # configs/nmt_multi30k_6l.json shape (6+6 layers, width 128), exported at beam 1 and 4
  bash run.sh bench bench_translation_latency --checkpoint=out/nmt --spm_model=spm.model \
      [--config_file=...] [--beam_sizes=1,4]               # a trained model, exported here
  bash run.sh bench bench_translation_latency --export_dir=out/export_b1,out/export_b4

Sentences: the Multi30k validation sources (../shared/data/nmt/multi30k/val.en.gz) or
--source_file, cycled for batch 1 (a different sentence per run) and taken 32 at a time.
"""

import gzip
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import vocab_building
from translation import nmt_modeling
from translation import translation_serving

tf1 = tf.compat.v1
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_string("export_dir", None, "Comma-separated existing exports to time (their beam "
                    "sizes are read from translation_config.json).")
flags.DEFINE_string("checkpoint", None, "Export this checkpoint at each --beam_sizes and time it "
                    "(default: a random model).")
flags.DEFINE_string("spm_model", None, "SentencePiece model of --checkpoint.")
flags.DEFINE_string("config_file", None, "NmtConfig of --checkpoint (default: beside it).")
flags.DEFINE_string("beam_sizes", "1,4", "Beam sizes to export and time.")
flags.DEFINE_string("batch_sizes", "1,32", "Batch sizes to time.")
flags.DEFINE_integer("runs", 10, "Timed calls per (beam, batch); the median is reported.")
flags.DEFINE_integer("max_decode_length", 32, "Most generated pieces of the exports made here.")
flags.DEFINE_float("length_penalty", 0.6, "GNMT alpha of the exports made here.")
flags.DEFINE_string("source_file", None, "Source sentences, one a line (default: Multi30k val).")
flags.DEFINE_string("work_dir", None, "Where to write the model and exports (default tmp).")
FLAGS = flags.FLAGS

# The shape of configs/nmt_multi30k_6l.json, over a smaller SentencePiece vocab trained here.
RANDOM_MODEL = {"hidden_size": 128, "num_encoder_layers": 6, "num_decoder_layers": 6,
                "num_attention_heads": 4, "intermediate_size": 512, "residual_attention": "mean",
                "layer_norm_type": "admin"}
RANDOM_MODEL_VOCAB = 2000
MULTI30K = ("nmt", "multi30k")
FALLBACK_SENTENCES = [
    "A man in an orange hat starring at something.",
    "A Boston Terrier is running on lush green grass in front of a white fence.",
    "A girl in karate uniform breaking a stick with a front kick.",
    "Five people wearing winter jackets and helmets stand in the snow.",
    "People are fixing the roof of a house.",
]


def _read_lines(path, limit=None):
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    lines = []
    for line in f:
      if line.strip():
        lines.append(line.rstrip("\n"))
      if limit and len(lines) >= limit:
        break
  return lines


def _sentences():
  path = FLAGS.source_file or os.path.join(common.shared_data_dir(), *MULTI30K, "val.en.gz")
  if os.path.exists(path):
    return _read_lines(path, 256), os.path.relpath(path, REPO)
  return FALLBACK_SENTENCES, "built-in sentences"


def _random_model(work_dir):
  """A random checkpoint of RANDOM_MODEL over a SentencePiece model trained on Multi30k."""
  data = os.path.join(common.shared_data_dir(), *MULTI30K)
  text = os.path.join(work_dir, "spm_train.txt")
  lines = []
  for name in ("train.en.gz", "train.de.gz"):
    path = os.path.join(data, name)
    if not os.path.exists(path):
      common.fail("no %s to train the random model's SentencePiece model on: give --checkpoint "
                  "and --spm_model, or --export_dir" % path)
    lines += _read_lines(path, 5000)
  with open(text, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  spm_model = os.path.join(work_dir, "spm.model")
  vocab_building.build_sentencepiece([text], RANDOM_MODEL_VOCAB, spm_model, do_lower_case=False,
                                  log_fn=lambda s: None, id_layout="nmt")
  config = nmt_modeling.NmtConfig.from_dict(dict(RANDOM_MODEL, vocab_size=RANDOM_MODEL_VOCAB))
  with tf.Graph().as_default():
    tf1.set_random_seed(1)
    ids = tf1.placeholder(tf.int32, [None, None])
    nmt_modeling.NmtModel(config, False, ids, ids)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      prefix = tf1.train.Saver().save(sess, os.path.join(work_dir, "model", "model.ckpt"))
  return config, prefix, spm_model, "random %d+%d layers, width %d, vocab %d" % (
      config.num_encoder_layers, config.num_decoder_layers, config.hidden_size,
      config.vocab_size)


def _make_exports(work_dir):
  """[(beam_size, export_dir)] of --export_dir, or exported here; and the model's name."""
  if FLAGS.export_dir:
    exports = []
    for path in FLAGS.export_dir.split(","):
      with open(os.path.join(path, translation_serving.TRANSLATION_CONFIG_NAME)) as f:
        exports.append((json.load(f)["beam_size"], path))
    return exports, FLAGS.export_dir
  if FLAGS.checkpoint:
    prefix = export_utils.resolve_checkpoint(FLAGS.checkpoint, "checkpoint")
    config = translation_serving.load_config(FLAGS.config_file, prefix)
    spm_model, name = FLAGS.spm_model, prefix
  else:
    config, prefix, spm_model, name = _random_model(work_dir)
  exports = []
  for beam_size in [int(b) for b in FLAGS.beam_sizes.split(",")]:
    path = os.path.join(work_dir, "export_beam%d" % beam_size)
    start = time.time()
    translation_serving.export(config, prefix, spm_model, path, beam_size=beam_size,
                               length_penalty=FLAGS.length_penalty,
                               max_decode_length=FLAGS.max_decode_length, overwrite=True)
    print("exported beam %d in %.1f s" % (beam_size, time.time() - start))
    exports.append((beam_size, path))
  return exports, name


def _time(translate, sentences, batch_size):
  """(median seconds per call, pieces per sentence, cut fraction) over --runs calls."""
  def batch(run):
    start = run * batch_size
    return tf.constant([sentences[(start + i) % len(sentences)] for i in range(batch_size)])
  translate(source=batch(0))  # warm-up: the first call builds the kernels
  seconds, pieces, cut = [], [], []
  for run in range(FLAGS.runs):
    source = batch(run)
    start = time.perf_counter()
    out = translate(source=source)
    lengths = out["length"].numpy()
    seconds.append(time.perf_counter() - start)
    pieces.extend(lengths.tolist())
    cut.extend(out["reached_max_length"].numpy().tolist())
  return float(np.median(seconds)), float(np.mean(pieces)), float(np.mean(cut))


def main(_):
  logging.set_verbosity(logging.ERROR)  # not the SavedModel writer's INFO lines
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_translation_")
  try:
    exports, name = _make_exports(work_dir)
    sentences, source = _sentences()
    batch_sizes = [int(b) for b in FLAGS.batch_sizes.split(",")]
    rows = []
    for beam_size, path in exports:
      translate = tf.saved_model.load(path).signatures["translate"]
      for batch_size in batch_sizes:
        rows.append((beam_size, batch_size) + _time(translate, sentences, batch_size))
    devices = [d.device_type for d in tf.config.list_physical_devices() if d.device_type != "CPU"]
    print("model: %s; sentences: %s; %d CPU threads visible%s; median of %d calls" % (
        name, source, os.cpu_count(), ", " + "+".join(devices) if devices else "", FLAGS.runs))
    print("%5s %6s %12s %15s %14s %17s %6s" % ("beam", "batch", "ms / call", "ms / sentence",
                                                "sentences/s", "pieces/sentence", "cut"))
    for beam_size, batch_size, seconds, pieces, cut in rows:
      print("%5d %6d %12.1f %15.2f %14.1f %17.1f %5.0f%%" % (
          beam_size, batch_size, seconds * 1e3, seconds * 1e3 / batch_size,
          batch_size / seconds, pieces, cut * 100))
    by_key = {(r[0], r[1]): r[2] / r[1] for r in rows}
    for beam_size, _ in exports:
      if (beam_size, 1) in by_key and (beam_size, 32) in by_key:
        print("beam %d: batch 32 is x%.1f faster per sentence than batch 1" % (
            beam_size, by_key[(beam_size, 1)] / by_key[(beam_size, 32)]))
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
