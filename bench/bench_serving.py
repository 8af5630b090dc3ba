# coding=utf-8
"""Serving latency/throughput: the classifier SavedModel (raw text or ids) vs Estimator.predict.

Builds a classifier checkpoint from an encoder checkpoint (default: the converted MiniLM,
`python convert_hf_checkpoint.py --hf_dir=../shared/data/checkpoints/all-MiniLM-L6-v2
--output_dir=out/minilm_tf`; else a random tiny model) plus a random 2-class head, exports it
with serving.export_classifier (what run_classifier --export_dir and export_hub --mode=classifier
write), and times on the same raw sentences:

  * SavedModel: loaded = tf.saved_model.load(path); loaded({"sentence": strings}) (tokenisation
    inside the graph), batch 1 latency and batch 32 throughput;
  * its serving_ids signature: the sentences tokenised by FullTokenizer in Python
    (run_classifier.convert_single_example, counted in the time), ids in;
  * Estimator: run_classifier's model_fn; each request is one estimator.predict call with the
    examples tokenised by FullTokenizer (the graph is rebuilt and the checkpoint restored on
    every call, as Estimator.predict does).

  python bench/bench_serving.py [--encoder_dir=out/minilm_tf] [--seq_length=128]
"""

import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
import numpy as np
import tensorflow as tf

from realformer_tf import checkpoint_slimming
from realformer_tf import serving
import modeling
import run_classifier
import tokenization

tf1 = tf.compat.v1

flags.DEFINE_string("encoder_dir", "out/minilm_tf",
                    "Directory with bert_config.json, vocab.txt and a checkpoint (else tiny).")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("repeats", 20, "Timed batch-1 requests (SavedModel).")
flags.DEFINE_integer("estimator_repeats", 5, "Timed requests through Estimator.predict.")
flags.DEFINE_string("work_dir", None, "Where to write the checkpoint and export (default tmp).")
FLAGS = flags.FLAGS

SENTENCES = [
    "A gripping, beautifully shot film with a script that never quite catches up.",
    "Dull, overlong and oddly proud of it.",
    "The performances are wonderful, but the plot is a mess.",
    "I laughed, I cried, I checked my watch twice.",
]


def _make_checkpoint(work_dir):
  """Encoder weights + a random 2-class head; returns (prefix, config, vocab_file, name)."""
  rng = np.random.RandomState(0)
  src = FLAGS.encoder_dir
  prefix = tf1.train.latest_checkpoint(src) if src and os.path.isdir(src) else None
  if prefix:
    config = modeling.BertConfig.from_json_file(os.path.join(src, "bert_config.json"))
    vocab_file = os.path.join(src, "vocab.txt")
    reader = tf.train.load_checkpoint(prefix)
    values = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()
              if n.startswith("bert/")}
    name = "MiniLM-L6-H384 (%s)" % src
  else:
    vocab_file = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "data", "vocab.txt")
    config = modeling.BertConfig(vocab_size=30522, hidden_size=128, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=512)
    with tf.Graph().as_default():
      modeling.BertModel(config, False, tf1.placeholder(tf.int32, [None, 8]))
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        values = {v.op.name: sess.run(v) for v in tf1.global_variables()}
    name = "random tiny L2-H128"
  values["output_weights"] = rng.normal(0, 0.02, [2, config.hidden_size]).astype(np.float32)
  values["output_bias"] = np.zeros([2], np.float32)
  values["global_step"] = np.array(0, np.int64)  # Estimator.predict restores it.
  model_dir = os.path.join(work_dir, "classifier")
  os.makedirs(model_dir, exist_ok=True)
  out = os.path.join(model_dir, "model.ckpt")
  checkpoint_slimming.write_checkpoint(values, out)
  with open(os.path.join(model_dir, "bert_config.json"), "w") as f:
    f.write(config.to_json_string())
  return out, config, vocab_file, name


def _batch(n):
  return [SENTENCES[i % len(SENTENCES)] + " #%d" % i for i in range(n)]


def _time_saved_model(path):
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  loaded = tf.saved_model.load(path)
  one, many = tf.constant(_batch(1)), tf.constant(_batch(32))
  loaded({"sentence": one})  # warm-up (first call loads the functions)
  loaded({"sentence": many})
  latencies = []
  for _ in range(FLAGS.repeats):
    start = time.perf_counter()
    loaded({"sentence": one})["probabilities"].numpy()
    latencies.append(time.perf_counter() - start)
  start = time.perf_counter()
  n_batches = max(3, FLAGS.repeats // 4)
  for _ in range(n_batches):
    loaded({"sentence": many})["probabilities"].numpy()
  throughput = 32 * n_batches / (time.perf_counter() - start)
  probs = loaded({"sentence": many})["probabilities"].numpy()
  return float(np.median(latencies)), throughput, probs


def _features(sentences, tokenizer):
  """run_classifier's int32 features of the sentences: {input_ids, input_mask, segment_ids}."""
  feats = [run_classifier.convert_single_example(
      10, run_classifier.InputExample("x", s), {"0": 0, "1": 1}, FLAGS.seq_length, tokenizer)
           for s in sentences]
  return {name: np.array([getattr(f, name) for f in feats], np.int32)
          for name in serving.ID_INPUTS}


def _time_id_signature(path, vocab_file):
  """serving_ids with the client's tokenisation (FullTokenizer) inside each timed request."""
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  tokenizer = tokenization.FullTokenizer(vocab_file, True)
  serve = tf.saved_model.load(path).signatures[serving.ID_SIGNATURE]

  def request(sentences):
    inputs = {k: tf.constant(v) for k, v in _features(sentences, tokenizer).items()}
    return serve(**inputs)["probabilities"].numpy()
  request(_batch(1))  # warm-up
  request(_batch(32))
  latencies = []
  for _ in range(FLAGS.repeats):
    start = time.perf_counter()
    request(_batch(1))
    latencies.append(time.perf_counter() - start)
  start = time.perf_counter()
  n_batches = max(3, FLAGS.repeats // 4)
  for _ in range(n_batches):
    request(_batch(32))
  throughput = 32 * n_batches / (time.perf_counter() - start)
  return float(np.median(latencies)), throughput, request(_batch(32))


def _time_estimator(prefix, config, vocab_file):
  tokenizer = tokenization.FullTokenizer(vocab_file, True)
  model_fn = run_classifier.model_fn_builder(
      bert_config=config, num_labels=2, init_checkpoint=None, learning_rate=1e-5,
      num_train_steps=1, num_warmup_steps=0, use_tpu=False, use_one_hot_embeddings=False)

  def estimator_model_fn(features, labels, mode, params):
    return model_fn(features, labels, mode, params).as_estimator_spec()
  estimator = tf1.estimator.Estimator(estimator_model_fn, model_dir=os.path.dirname(prefix),
                                      params={"batch_size": 32})

  def predict(sentences):
    arrays = _features(sentences, tokenizer)
    arrays.update(label_ids=np.zeros([len(sentences)], np.int32),
                  is_real_example=np.ones([len(sentences)], np.int32))

    def input_fn(params):
      del params
      return tf.data.Dataset.from_tensor_slices(arrays).batch(32)
    return np.array([p["probabilities"] for p in estimator.predict(
        input_fn, checkpoint_path=prefix, yield_single_examples=True)])

  predict(_batch(1))  # warm-up
  latencies = []
  for _ in range(FLAGS.estimator_repeats):
    start = time.perf_counter()
    predict(_batch(1))
    latencies.append(time.perf_counter() - start)
  start = time.perf_counter()
  for _ in range(FLAGS.estimator_repeats):
    probs = predict(_batch(32))
  throughput = 32 * FLAGS.estimator_repeats / (time.perf_counter() - start)
  return float(np.median(latencies)), throughput, probs


def main(_):
  tf1.logging.set_verbosity(tf1.logging.ERROR)
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_serving_")
  try:
    prefix, config, vocab_file, name = _make_checkpoint(work_dir)
    export_dir = os.path.join(work_dir, "export")
    start = time.time()
    serving.export_classifier(config, prefix, export_dir, vocab_file, True, None,
                              FLAGS.seq_length, label_list="neg,pos")
    export_seconds = time.time() - start
    sm_latency, sm_throughput, sm_probs = _time_saved_model(export_dir)
    ids_latency, ids_throughput, ids_probs = _time_id_signature(export_dir, vocab_file)
    est_latency, est_throughput, est_probs = _time_estimator(prefix, config, vocab_file)
    print("model: %s, seq_length %d, %d CPU threads visible; export took %.1f s" %
          (name, FLAGS.seq_length, os.cpu_count(), export_seconds))
    print("max |p_savedmodel - p_estimator| on the batch of 32: raw text %.2e, serving_ids "
          "%.2e" % (np.abs(sm_probs - est_probs).max(), np.abs(ids_probs - est_probs).max()))
    print("%-34s %14s %18s" % ("", "batch 1 latency", "batch 32 throughput"))
    print("%-34s %11.1f ms %13.1f ex/s" % ("SavedModel, raw text", sm_latency * 1e3,
                                           sm_throughput))
    print("%-34s %11.1f ms %13.1f ex/s" % ("SavedModel serving_ids + tokenizer",
                                           ids_latency * 1e3, ids_throughput))
    print("%-34s %11.1f ms %13.1f ex/s" % ("Estimator.predict (per call)", est_latency * 1e3,
                                           est_throughput))
    print("ratio (Estimator / SavedModel): latency x%.1f, throughput x%.1f" %
          (est_latency / sm_latency, sm_throughput / est_throughput))
  finally:
    if not FLAGS.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  app.run(main)
