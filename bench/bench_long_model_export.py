"""Latency of etc_model.export_long_model's raw-text SavedModel on CPU (one cloze request).

Builds an ETC of all-MiniLM-L6-v2's shape (6 layers, hidden 384, 12 heads, intermediate 1536;
local_radius 84, relative ids, hard g2l mask, residual attention sum) with random weights and a
random cloze head (latency does not depend on the values), exports it for L / G / C of the flags,
loads it with tf.saved_model.load and times serving_default on one document of the novels file
(its first --sentences sentences of a chapter, the question and 4 candidates), batch 1: the
median wall time and process CPU time per request over --requests calls after 2 warm-up calls
(tokenisation, packing, side inputs, encoder and head: the whole signature).

Usage: .venv/bin/python bench/bench_long_model_export.py [--max_seq_length=512] [--requests=20]
"""

import argparse
import os
import sys
import tempfile
import time

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_DIR)
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow_text  # pylint: disable=g-import-not-at-top,wrong-import-position,unused-import

from realformer_tf import common  # pylint: disable=g-import-not-at-top,wrong-import-position
from etc_model import etc_modeling  # pylint: disable=g-import-not-at-top,wrong-import-position
from etc_model import export_long_model  # pylint: disable=g-import-not-at-top,wrong-import-position

tf1 = tf.compat.v1
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
CONFIG = {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
          "num_attention_heads": 12, "intermediate_size": 1536, "local_radius": 84,
          "relative_pos_max_distance": 12, "relative_vocab_size": 32,
          "residual_attention": "sum", "use_hard_g2l_mask": True,
          "max_absolute_position_embeddings": 4096}


def document(num_sentences):
  """The first num_sentences lines after the first "CHAPTER" of the novels file."""
  path = os.path.join(common.shared_data_dir(), "corpus",
                      "novels_austen_melville_wells_verne_dickens.txt")
  lines = []
  with open(path, encoding="utf-8") as f:
    started = False
    for line in f:
      started = started or line.startswith("CHAPTER")
      if started and line.strip() and not line.startswith("CHAPTER"):
        lines.append(line.strip())
        if len(lines) == num_sentences:
          break
  return lines


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--max_seq_length", type=int, default=512)
  parser.add_argument("--max_global_seq_length", type=int, default=48)
  parser.add_argument("--max_candidates", type=int, default=10)
  parser.add_argument("--sentences", type=int, default=40)
  parser.add_argument("--requests", type=int, default=20)
  args = parser.parse_args()
  config = etc_modeling.EtcConfig.from_dict(CONFIG)
  vocab = dict((t.rstrip("\n"), i) for i, t in enumerate(open(VOCAB, encoding="utf-8")))
  settings = {"max_seq_length": args.max_seq_length,
              "max_global_seq_length": args.max_global_seq_length,
              "max_candidates": args.max_candidates, "max_candidate_pieces": 4,
              "global_token_id": vocab["[unused0]"], "candidate_token_id": vocab["[unused1]"],
              "blank_token": "[MASK]", "blank_token_id": vocab["[MASK]"]}
  work = tempfile.mkdtemp(prefix="bench_long_export_")
  with tf.Graph().as_default():
    export_long_model._placeholder_build("cloze", config, settings, None)  # pylint: disable=protected-access
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      checkpoint = tf1.train.Saver().save(sess, os.path.join(work, "model.ckpt"))
  start = time.time()
  export_long_model.export_long_model("cloze", checkpoint, config, settings, VOCAB, True,
                                      os.path.join(work, "export"))
  export_seconds = time.time() - start
  loaded = tf.saved_model.load(os.path.join(work, "export"))
  serve = loaded.signatures["serving_default"]
  inputs = {"sentences": tf.constant([document(args.sentences)]),
            "question": tf.constant(["Then [MASK] said nothing more about it."]),
            "candidates": tf.constant([["Elizabeth", "Darcy", "Jane", "Bingley"]])}
  features = loaded.signatures["features"](**inputs)
  pieces = int(np.sum(features["token_ids"].numpy() > 0))
  globals_ = int(np.sum(features["global_token_ids"].numpy() > 0))
  for _ in range(2):
    serve(**inputs)
  walls, cpus = [], []
  for _ in range(args.requests):
    wall, cpu = time.perf_counter(), time.process_time()
    out = serve(**inputs)
    out["scores"].numpy()
    walls.append(time.perf_counter() - wall)
    cpus.append(time.process_time() - cpu)
  print("export %.1f s; request: %d word pieces, %d global tokens (%d context sentences read) "
        "of L=%d, G=%d" % (export_seconds, pieces, globals_, int(out["context_sentences"][0]),
                            args.max_seq_length, args.max_global_seq_length))
  print("latency per request (batch 1, median of %d): wall %.1f ms, process CPU %.1f ms; "
        "load average %s" % (args.requests, 1000 * np.median(walls), 1000 * np.median(cpus),
                             " ".join("%.1f" % l for l in os.getloadavg())))


if __name__ == "__main__":
  main()
