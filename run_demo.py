# coding=utf-8
"""End-to-end demo on the data shipped in data/: text -> TFRecords -> pre-train a small
RealFormer -> evaluate on held-out text -> fine-tune on a sentiment slice -> export -> report.

Run with `bash run.sh demo` (sets up the environment first) or `python run_demo.py`. Each stage
is skipped when its outputs already exist, so a killed demo resumes where it stopped; pre-training
itself resumes from its last checkpoint. About 10 minutes on 2 CPU cores.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import json
import os
import subprocess
import sys
import time

from absl import app
from absl import flags

import common

REPO_DIR = os.path.dirname(os.path.abspath(__file__))

def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("output_dir", os.path.join(REPO_DIR, "output", "demo"),
                      "Where the demo writes data, checkpoints, exports and report.md.")
  flags.DEFINE_string("bert_config_file",
                      os.path.join(REPO_DIR, "configs", "bert_tiny_realformer.json"),
                      "Model to pre-train (default: a 2-layer, 128-wide RealFormer).")
  flags.DEFINE_enum("residual_attention", None, ["none", "sum", "mean"],
                    "Overrides residual_attention of --bert_config_file.")
  flags.DEFINE_string("train_text", os.path.join(REPO_DIR, "data", "demo_corpus", "train.txt"),
                      "Pre-training text (one sentence per line, blank line between documents).")
  flags.DEFINE_string("heldout_text",
                      os.path.join(REPO_DIR, "data", "demo_corpus", "heldout.txt"),
                      "Held-out text for the MLM / NSP evaluation.")
  flags.DEFINE_string("vocab_file", os.path.join(REPO_DIR, "data", "vocab.txt"),
                      "WordPiece vocabulary (bert-base-uncased).")
  flags.DEFINE_string("sentiment_dir", os.path.join(REPO_DIR, "data", "sst2_slice"),
                      "SST-2-layout fine-tuning data (train.tsv, dev.tsv).")
  flags.DEFINE_integer("max_seq_length", 128, "Pre-training sequence length.")
  flags.DEFINE_integer("pretrain_steps", 1200, "Pre-training steps.")
  flags.DEFINE_integer("pretrain_batch_size", 32, "Pre-training batch size.")
  flags.DEFINE_float("pretrain_learning_rate", 1e-3, "Peak pre-training learning rate.")
  flags.DEFINE_integer("finetune_epochs", 3, "Fine-tuning epochs on the sentiment slice.")
  flags.DEFINE_bool("finetune", True, "Fine-tune and export a classifier after pre-training.")


FLAGS = flags.FLAGS


def _run_stage(name, args, done_marker):
  """Runs `python args...` unless done_marker exists; streams its progress lines."""
  if os.path.exists(done_marker):
    print("[demo] %s: done already (%s)" % (name, done_marker))
    return 0.0
  print("[demo] %s ..." % name, flush=True)
  start = time.time()
  log_path = os.path.join(FLAGS.output_dir, "logs", name.replace(" ", "_") + ".log")
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  with open(log_path, "w") as log:
    proc = subprocess.Popen([sys.executable] + args, cwd=REPO_DIR, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
      log.write(line)
      if _is_progress(line):
        print("    " + line.split("] ")[-1].replace("INFO:tensorflow:", "").rstrip(), flush=True)
    proc.wait()
  if proc.returncode != 0:
    with open(log_path) as log:
      tail = log.read().strip().splitlines()[-1:]
    common.fail("stage '%s' failed (exit %d): %s; full log: %s" %
                (name, proc.returncode, tail[0] if tail else "", log_path))
  elapsed = time.time() - start
  print("[demo] %s: %.0f s" % (name, elapsed), flush=True)
  return elapsed


def _is_progress(line):
  keys = ("remaining", "MB/s", "Training done", "error:", "Wrote ", "accuracy =",
          "eval_accuracy", "Exported")
  return any(k in line for k in keys)


def _path(*parts):
  return os.path.join(FLAGS.output_dir, *parts)


def main(_):
  for flag_name in ("train_text", "heldout_text", "vocab_file", "bert_config_file"):
    common.require_file(getattr(FLAGS, flag_name), flag_name)
  os.makedirs(FLAGS.output_dir, exist_ok=True)
  timings = {}
  seq = FLAGS.max_seq_length
  preds = max(1, int(round(seq * 0.15)))
  data_args = ["--vocab_file=%s" % FLAGS.vocab_file, "--do_lower_case=true",
               "--max_seq_length=%d" % seq, "--max_predictions_per_seq=%d" % preds,
               "--masked_lm_prob=0.15", "--random_seed=12345"]
  timings["create data (train)"] = _run_stage(
      "create data train",
      ["create_pretraining_data.py", "--input_file=%s" % FLAGS.train_text,
       "--output_file=%s" % _path("data", "train.tfrecord"), "--dupe_factor=5"] + data_args,
      _path("data", "train.tfrecord.summary.json"))
  timings["create data (held-out)"] = _run_stage(
      "create data heldout",
      ["create_pretraining_data.py", "--input_file=%s" % FLAGS.heldout_text,
       "--output_file=%s" % _path("data", "heldout.tfrecord"), "--dupe_factor=1"] + data_args,
      _path("data", "heldout.tfrecord.summary.json"))

  with open(_path("data", "heldout.tfrecord.summary.json")) as f:
    heldout_instances = json.load(f)["instances"]
  eval_batch = 32
  pretrain_dir = _path("pretrain")
  pretrain_args = [
      "run_pretraining.py", "--bert_config_file=%s" % FLAGS.bert_config_file,
      "--input_file=%s" % _path("data", "train.tfrecord"),
      "--eval_input_file=%s" % _path("data", "heldout.tfrecord"),
      "--output_dir=%s" % pretrain_dir, "--do_train", "--do_eval",
      "--max_seq_length=%d" % seq, "--max_predictions_per_seq=%d" % preds,
      "--train_batch_size=%d" % FLAGS.pretrain_batch_size, "--eval_batch_size=%d" % eval_batch,
      "--num_train_steps=%d" % FLAGS.pretrain_steps,
      "--num_warmup_steps=%d" % max(1, FLAGS.pretrain_steps // 10),
      "--learning_rate=%g" % FLAGS.pretrain_learning_rate,
      "--save_checkpoints_steps=%d" % max(100, FLAGS.pretrain_steps // 4),
      "--max_eval_steps=%d" % max(1, heldout_instances // eval_batch)]
  if FLAGS.residual_attention:
    pretrain_args.append("--residual_attention=%s" % FLAGS.residual_attention)
  timings["pre-train + eval"] = _run_stage("pretrain", pretrain_args,
                                           os.path.join(pretrain_dir, "eval_results.json"))

  with open(os.path.join(pretrain_dir, "eval_results.json")) as f:
    pretrain_eval = json.load(f)
  with open(os.path.join(pretrain_dir, "train_summary_local.json")) as f:
    train_summary = json.load(f)
  with open(os.path.join(pretrain_dir, "bert_config.json")) as f:
    used_config = json.load(f)

  classifier = None
  if FLAGS.finetune:
    classifier_dir = _path("sst2")
    export_dir = _path("sst2_export")
    timings["fine-tune + export"] = _run_stage(
        "finetune sst2",
        ["run_classifier.py", "--task_name=sst-2", "--data_dir=%s" % FLAGS.sentiment_dir,
         "--vocab_file=%s" % FLAGS.vocab_file, "--do_lower_case=true",
         "--bert_config_file=%s" % os.path.join(pretrain_dir, "bert_config.json"),
         "--init_checkpoint=%s" % train_summary["checkpoint"],
         "--output_dir=%s" % classifier_dir, "--do_train", "--do_eval",
         "--max_seq_length=64", "--train_batch_size=32", "--learning_rate=1e-4",
         "--num_train_epochs=%d" % FLAGS.finetune_epochs, "--save_checkpoints_steps=1000",
         "--export_dir=%s" % export_dir],
        os.path.join(classifier_dir, "eval_results.json"))
    with open(os.path.join(classifier_dir, "eval_results.json")) as f:
      classifier = json.load(f)
    classifier["export_dir"] = export_dir

  report = _report(used_config, pretrain_eval, train_summary, classifier, timings)
  with common.atomic_output(_path("report.md")) as f:
    f.write(report)
  print(report)
  print("[demo] report written to %s" % _path("report.md"))


def _report(config, pretrain_eval, train_summary, classifier, timings):
  """The short markdown report printed at the end."""
  lines = [
      "# RealFormer demo report", "",
      "Model: %d layers, hidden %d, %d heads, residual_attention=%s, layer_norm_type=%s" % (
          config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
          config["residual_attention"], config["layer_norm_type"]), "",
      "| pre-training (held-out text) | value |", "|---|---|",
      "| MLM accuracy | %.2f%% |" % (100 * pretrain_eval["masked_lm_accuracy"]),
      "| MLM loss | %.3f |" % pretrain_eval["masked_lm_loss"],
      "| NSP accuracy | %.2f%% |" % (100 * pretrain_eval["next_sentence_accuracy"]),
      "| steps | %d |" % pretrain_eval["global_step"],
      "| speed | %s steps/s, %s examples/s |" % (train_summary.get("train_steps_per_sec"),
                                                train_summary.get("train_examples_per_sec")),
      "| checkpoint | %s |" % train_summary.get("checkpoint"), ""]
  if classifier:
    lines += ["| sentiment fine-tuning (data/sst2_slice dev) | value |", "|---|---|",
              "| accuracy | %.2f%% |" % (100 * classifier.get("eval_accuracy", float("nan"))),
              "| exported SavedModel | %s |" % classifier["export_dir"], ""]
  lines += ["Stage times: " + ", ".join("%s %.0f s" % (k, v) for k, v in timings.items() if v),
            ""]
  return "\n".join(lines)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv))
