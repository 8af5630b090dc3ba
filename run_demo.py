# coding=utf-8
"""End-to-end demo on the data shipped in data/: text -> TFRecords -> pre-train a small
RealFormer -> evaluate on held-out text -> fine-tune on a sentiment slice -> export -> report.

Run with `bash run.sh demo` (sets up the environment first) or `python run_demo.py`. Each stage
is skipped when it is complete (pre-training: train_summary_local.json at the requested step and
its evaluation written; fine-tuning: trained to its last step, evaluated and exported), so a
stopped demo resumes where it stopped; pre-training itself resumes from its last checkpoint.
An --output_dir holding a run of other flags or input files (demo_settings.json records the flags
and the sha256 of every input file, so an input edited in place is noticed too) is refused in
one line: no stage reuses another run's outputs. One demo at a time per --output_dir (lock file
.lock-run_demo): a second one fails in one line naming the running one.
SIGINT / SIGTERM stop the running stage cleanly (exit 130 / 143); a stage that fails stops the
demo with one line naming it (exit 1). It states its recipe when it starts; 6-10 minutes on a
2-core Xeon shared with other jobs (9 minutes of CPU time; docs/benchmarks.md). Every stage is
seeded (--seed): the same flags give the same bytes on the same CPU, and on another CPU the same
learning with other last digits (docs/demo.md). docs/demo.md has the sweeps that chose the
recipe (an 8,000-entry vocab built from the 2.9 MB of training text, sequences of 64;
configs/bert_demo_ffn256.json pre-trained without dropout for 5,000 steps of batch 32 at 1e-3
with the fused optimizer; fine-tuning 4 epochs of batch 32 at 2e-4 on 9,065 sentences) and the
fill-mask prompts.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import functools
import json
import os
import sys

from absl import app
from absl import flags

from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
from realformer_tf import common
from realformer_tf import reproduction
from realformer_tf import subprocess_utils
from realformer_tf import text_input

REPO_DIR = os.path.dirname(os.path.abspath(__file__))

def define_flags():
  """Defines this tool's flags (only when it runs as a script, so modules import cleanly)."""
  flags.DEFINE_string("output_dir", os.path.join(REPO_DIR, "output", "demo"),
                      "Where the demo writes data, checkpoints, exports and report.md.")
  flags.DEFINE_string("bert_config_file",
                      os.path.join(REPO_DIR, "configs", "bert_demo_ffn256.json"),
                      "Model to pre-train and fine-tune (default: a 2-layer, 128-wide RealFormer "
                      "with a 256-wide feed-forward layer over an 8,000-entry vocab).")
  flags.DEFINE_enum("residual_attention", None, ["none", "sum", "mean"],
                    "Overrides residual_attention of --bert_config_file.")
  flags.DEFINE_string("train_text", os.path.join(REPO_DIR, "data", "demo_corpus", "train.txt"),
                      "Pre-training text (one sentence per line, blank line between documents).")
  flags.DEFINE_string("heldout_text",
                      os.path.join(REPO_DIR, "data", "demo_corpus", "heldout.txt"),
                      "Held-out text for the MLM / NSP evaluation.")
  flags.DEFINE_string("vocab_file", None,
                      "WordPiece vocabulary (e.g. data/vocab.txt, bert-base-uncased, with "
                      "--bert_config_file=configs/bert_tiny_realformer.json). Default: the "
                      "demo's first stage builds one from --train_text (build_vocab.py) with "
                      "the config's vocab_size entries.")
  flags.DEFINE_string("sentiment_dir", os.path.join(REPO_DIR, "data", "sst2_slice"),
                      "SST-2-layout fine-tuning data (train.tsv, dev.tsv).")
  flags.DEFINE_bool("domain_adaptive", False,
                    "Domain-adaptive pre-training: add the sentences of --sentiment_dir's "
                    "train.tsv (text only: no labels, never dev.tsv), each as its own document, "
                    "to the pre-training text (and to the text the vocab is built from).")
  # The recipe (docs/demo.md has the sweep that chose it).
  flags.DEFINE_integer("max_seq_length", 64,
                       "Pre-training sequence length (the corpus' sentences are short: 64 "
                       "gives more updates per minute than 128).")
  flags.DEFINE_integer("pretrain_steps", 5000, "Pre-training steps.")
  flags.DEFINE_integer("pretrain_batch_size", 32, "Pre-training batch size.")
  flags.DEFINE_float("pretrain_learning_rate", 1e-3, "Peak pre-training learning rate.")
  flags.DEFINE_float("pretrain_dropout", 0.0,
                     "Dropout of the pre-training (hidden_dropout_prob and "
                     "attention_probs_dropout_prob of the model it trains; fine-tuning keeps "
                     "--bert_config_file's). A short pre-training underfits: without dropout it "
                     "learned more (held-out MLM 16.1% against 15.5% with 0.1) and a step costs "
                     "~14% less CPU time.")
  flags.DEFINE_bool("pretrain_fused_optimizer", True,
                    "Pre-train with run_pretraining's --fused_optimizer (one Adam kernel per "
                    "variable: 3-7% less CPU time per step, updates equal to ~6e-6 relatively).")
  flags.DEFINE_integer("pretrain_warmup_steps", None,
                       "Linear warm-up steps of pre-training (default: a tenth of the steps).")
  flags.DEFINE_float("finetune_learning_rate", 2e-4,
                     "Peak fine-tuning learning rate (10% linear warm-up, then linear decay).")
  flags.DEFINE_integer("finetune_epochs", 4, "Fine-tuning epochs on the sentiment slice.")
  flags.DEFINE_integer("finetune_batch_size", 32, "Fine-tuning batch size.")
  flags.DEFINE_bool("finetune", True, "Fine-tune and export a classifier after pre-training.")
  flags.DEFINE_integer("seed", 12345,
                       "Seed of every stage (data creation, initialisation, dropout, shuffling): "
                       "the same seed and flags give the same report on the same machine.")


FLAGS = flags.FLAGS

# Shown at the end of the demo: what the pre-trained model fills in, and what the exported
# raw-text classifier answers. The fill-mask prompts were chosen, before any model's answers
# were seen, for a content word that the training text cues strongly (docs/demo.md has
# the counts): "became the X of" is "father" 67 times of 70, "sons and X" "daughters" 18 of
# 21, "the X of egypt" "land" 18 of 22, "bore a X" "son" 12 of 15.
FILL_MASK_SENTENCES = ("he lived many years , and became the [MASK] of three sons .",
                       "she had other sons and [MASK] .",
                       "the people went out of the [MASK] of egypt .",
                       "his wife bore a [MASK] .")
CLASSIFIER_SENTENCES = ("a warm , funny and wonderfully acted film .",
                        "a dull , lifeless mess that wastes its cast .")


def run_stage(name, args, is_done, log_dir, python=None):
  """Runs `python args...` unless is_done() says the stage is complete; streams progress lines.

  The child runs in its own process group (subprocess_utils.run_child): a SIGINT / SIGTERM of
  the demo is forwarded to it (pre-training then saves a checkpoint) and the demo exits
  130 / 143. A stage that exits non-zero, or exits 0 without completing, stops the demo with
  one line naming the stage (exit 1); rerunning the demo resumes.

  Args:
    name: stage name (also the log file name).
    args: the script and its flags.
    is_done: function () -> (done, why): whether the stage's outputs are complete, and a short
      description of what was found.
    log_dir: directory of the stage logs.
    python: interpreter (default: this one).

  Returns:
    Seconds the stage took (0.0 when it was done already).
  """
  done, why = is_done()
  if done:
    print("[demo] %s: done already (%s)" % (name, why))
    return 0.0
  print("[demo] %s ..." % name, flush=True)
  os.makedirs(log_dir, exist_ok=True)
  log_path = os.path.join(log_dir, name.replace(" ", "_") + ".log")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")

  def show(line):
    if _is_progress(line):
      print("    " + line.split("] ")[-1].replace("INFO:tensorflow:", "").rstrip(), flush=True)

  cmd = [python or sys.executable] + list(args)
  result = subprocess_utils.run_child(cmd, log_path, cwd=REPO_DIR, env=env, line_fn=show)
  resume = "rerun the same command to resume (finished stages are skipped)"
  common.STOP_SIGNALS.exit_if_stopped("demo stopped in stage '%s'; %s" % (name, resume))
  if not result.ok:
    with open(log_path, errors="replace") as log:
      tail = [l for l in log.read().strip().splitlines() if l.strip()][-1:]
    _stage_failed("stage '%s' failed (%s): %s; log %s; %s" % (
        name, result.describe(), tail[0].strip() if tail else "", log_path, resume))
  done, why = is_done()
  if not done:
    _stage_failed("stage '%s' exited 0 but is not complete (%s); log %s; %s" % (
        name, why, log_path, resume))
  print("[demo] %s: %.0f s" % (name, result.seconds), flush=True)
  return result.seconds


def _stage_failed(message):
  sys.stderr.write("error: %s\n" % message)
  sys.stderr.flush()
  sys.exit(1)


def _read_json(path):
  """The JSON object in `path`, or None when it is missing or unreadable."""
  try:
    with open(path) as f:
      value = json.load(f)
  except (OSError, ValueError):
    return None
  return value if isinstance(value, dict) else None


def file_done(path):
  """is_done for a stage whose one output is written atomically when the stage completes.

  Args:
    path: the output.

  Returns:
    (done, why).
  """
  if os.path.exists(path):
    return True, path
  return False, "no %s" % path


def pretrain_done(pretrain_dir, num_steps):
  """Whether pre-training reached num_steps and its evaluation was written.

  Args:
    pretrain_dir: run_pretraining.py --output_dir.
    num_steps: the requested --num_train_steps.

  Returns:
    (done, why): why names the step reached when it is short.
  """
  summary = _read_json(os.path.join(pretrain_dir, "train_summary_local.json"))
  if summary is None:
    return False, "no train_summary_local.json"
  if summary.get("global_step") != num_steps:
    return False, "train_summary_local.json: global_step %s of %d" % (
        summary.get("global_step"), num_steps)
  results = _read_json(os.path.join(pretrain_dir, "eval_results.json"))
  if results is None:
    return False, "trained %d steps, no eval_results.json" % num_steps
  if results.get("global_step") != num_steps:
    return False, "eval_results.json: global_step %s of %d" % (results.get("global_step"),
                                                               num_steps)
  return True, "%d steps, evaluated" % num_steps


# Written by the raw-text classifier export (serving.EXPORT_INFO), not by the integer-only
# export of earlier versions, which the fine-tuning stage then replaces (--overwrite).
RAW_TEXT_EXPORT_FILE = "export_info.json"


def classifier_done(classifier_dir, export_dir):
  """Whether fine-tuning trained to its last step, was evaluated, and was exported.

  Args:
    classifier_dir: run_classifier.py --output_dir.
    export_dir: its --export_dir.

  Returns:
    (done, why).
  """
  results = _read_json(os.path.join(classifier_dir, "eval_results.json"))
  if results is None:
    return False, "no eval_results.json"
  target = results.get("num_train_steps")
  if target is not None and not (isinstance(results.get("global_step"), (int, float)) and
                                 results["global_step"] >= target):
    return False, "eval_results.json: global_step %s of %s" % (results.get("global_step"),
                                                               target)
  if not os.path.exists(os.path.join(export_dir, common.EXPORT_MARKER)):
    return False, "evaluated, not exported"
  if not os.path.exists(os.path.join(export_dir, RAW_TEXT_EXPORT_FILE)):
    return False, "exported by an earlier version (integer inputs only)"
  return True, "global_step %s, exported" % results.get("global_step")


# In --output_dir: what its outputs were made from (demo_settings), and the outputs a demo writes
# (sst2_text_export: earlier versions' separate raw-text export).
SETTINGS_FILE = "demo_settings.json"
DEMO_OUTPUTS = ("vocab.txt", "domain_text.txt", "pretrain_config.json", "data", "pretrain",
                "sst2", "sst2_export", "sst2_text_export", "report.md")
# The lock file's label in --output_dir (.lock-run_demo): one demo at a time writes there.
LOCK_LABEL = "run_demo"


def demo_settings(flag_values, warmup_steps):
  """The recipe's flags that every output of a demo run depends on.

  Args:
    flag_values: the parsed flags.
    warmup_steps: the pre-training warm-up steps in effect (the flag or its default).

  Returns:
    dict: flag name -> value.
  """
  settings = {name: getattr(flag_values, name) for name in (
      "residual_attention", "domain_adaptive", "max_seq_length", "pretrain_steps",
      "pretrain_batch_size", "pretrain_learning_rate", "pretrain_dropout",
      "pretrain_fused_optimizer", "finetune_learning_rate", "finetune_epochs",
      "finetune_batch_size", "seed")}
  settings["pretrain_warmup_steps"] = warmup_steps
  return settings


def demo_inputs(flag_values):
  """The demo's input files (recorded by the sha256 of their contents, paths left out).

  Args:
    flag_values: the parsed flags.

  Returns:
    list of reproduction.InputFile: --train_text, --heldout_text, --bert_config_file,
    --vocab_file (when given) and the train.tsv / dev.tsv of --sentiment_dir that exist.
  """
  inputs = [reproduction.input_file(name, getattr(flag_values, name))
            for name in ("train_text", "heldout_text", "bert_config_file", "vocab_file")
            if getattr(flag_values, name) is not None]
  for name in ("train.tsv", "dev.tsv"):
    path = os.path.join(flag_values.sentiment_dir, name)
    if os.path.isfile(path):
      inputs.append(reproduction.input_file("sentiment_dir", path, name))
  return inputs


def check_output_dir_settings(output_dir, settings, inputs):
  """Refuses an --output_dir that holds another demo run's outputs; records this run in it.

  A stage counts as done when its outputs exist, so outputs of other settings or data (an
  earlier recipe, another or edited --train_text) would be reused as if they were this run's.
  The same settings and input contents resume.

  Args:
    output_dir: --output_dir (exists, locked).
    settings: demo_settings() of this run.
    inputs: demo_inputs() of this run.
  """
  if not os.path.exists(os.path.join(output_dir, SETTINGS_FILE)):
    found = [name for name in DEMO_OUTPUTS if os.path.exists(os.path.join(output_dir, name))]
    if found:
      common.fail("--output_dir=%s holds a demo run's outputs (%s) but no %s (a run of an "
                  "earlier version, or not a demo's): pass another --output_dir, or delete it "
                  "to start over" % (output_dir, ", ".join(found), SETTINGS_FILE))
  reproduction.check_settings_record(output_dir, settings, SETTINGS_FILE, write=True,
                                     inputs=inputs)


def write_domain_text(train_tsv, output_path):
  """Writes the sentences of an SST-2-layout train.tsv as pre-training text, without labels.

  Each sentence becomes its own document (a blank line before it): the review snippets are
  unrelated, so none is a "next sentence" of another, and the file can follow any other
  pre-training text without joining its last document.

  Args:
    train_tsv: the fine-tuning training file (header `sentence<TAB>label`; read with quoting
      disabled, as run_classifier.py reads it). Only its `sentence` column is read.
    output_path: the text file to write (atomically).

  Returns:
    The number of sentences written.
  """
  if not os.path.isfile(train_tsv):
    common.fail("--sentiment_dir=%s: no train.tsv (or pass --nodomain_adaptive)" %
                os.path.dirname(train_tsv))
  with open(train_tsv, encoding="utf-8", errors="replace") as f:
    rows = [line.rstrip("\r\n").split("\t") for line in f]
  header = rows[0] if rows else []
  if "sentence" not in header:
    common.fail("--sentiment_dir=%s: train.tsv has no 'sentence' column in its header (%s)" % (
        os.path.dirname(train_tsv), "\t".join(header)[:80]))
  column = header.index("sentence")
  sentences = [row[column].strip() for row in rows[1:]
               if len(row) > column and row[column].strip()]
  with common.atomic_output(output_path) as out:
    for sentence in sentences:
      out.write("\n%s\n" % sentence)
  return len(sentences)


def write_pretrain_config(config_file, dropout, output_path):
  """Writes config_file with its dropout probabilities set to `dropout` (for pre-training).

  Args:
    config_file: --bert_config_file.
    dropout: the pre-training's hidden and attention-probabilities dropout.
    output_path: the config to write (atomically).
  """
  config = _read_json(config_file)
  if config is None:
    common.fail("--bert_config_file=%s: not a JSON object" % config_file)
  config.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
  common.write_json_atomic(output_path, config)


def _config_vocab_size(config_file):
  """vocab_size of a BERT config file (a one-line error when it has none)."""
  config = _read_json(config_file)
  size = (config or {}).get("vocab_size")
  if not isinstance(size, int) or isinstance(size, bool) or size < 6:
    common.fail("--bert_config_file=%s: no usable vocab_size (%r) to build the vocab with; "
                "or pass --vocab_file" % (config_file, size))
  return size


def _is_progress(line):
  keys = ("remaining", "MB/s", "Training done", "error:", "Wrote ", "accuracy =",
          "eval_accuracy", "Exported")
  return any(k in line for k in keys)


def main(_):
  for flag_name in ("train_text", "heldout_text", "bert_config_file"):
    common.require_file(getattr(FLAGS, flag_name), flag_name)
  if FLAGS.vocab_file is not None:
    common.require_file(FLAGS.vocab_file, "vocab_file")
  if FLAGS.pretrain_steps < 1:
    common.fail("--pretrain_steps=%d: must be >= 1" % FLAGS.pretrain_steps)
  for flag_name in ("max_seq_length", "pretrain_batch_size", "finetune_epochs",
                    "finetune_batch_size"):
    if getattr(FLAGS, flag_name) < 1:
      common.fail("--%s=%d: must be >= 1" % (flag_name, getattr(FLAGS, flag_name)))
  warmup_steps = FLAGS.pretrain_warmup_steps
  if warmup_steps is None:
    warmup_steps = max(1, FLAGS.pretrain_steps // 10)
  elif not 0 <= warmup_steps <= FLAGS.pretrain_steps:
    common.fail("--pretrain_warmup_steps=%d: must be in [0, --pretrain_steps=%d]" % (
        warmup_steps, FLAGS.pretrain_steps))
  for flag_name in ("pretrain_learning_rate", "finetune_learning_rate"):
    if not getattr(FLAGS, flag_name) > 0:
      common.fail("--%s=%s: must be > 0" % (flag_name, getattr(FLAGS, flag_name)))
  if FLAGS.pretrain_dropout is not None and not 0 <= FLAGS.pretrain_dropout < 1:
    common.fail("--pretrain_dropout=%s: must be in [0, 1)" % FLAGS.pretrain_dropout)
  if FLAGS.vocab_file is None:
    vocab_size = _config_vocab_size(FLAGS.bert_config_file)
  # One demo per directory, before anything is read or written there: a second one would take
  # the running demo's stage children for orphans and train in their place.
  common.OutputDirLock(FLAGS.output_dir, "output_dir", label=LOCK_LABEL).acquire()
  settings = demo_settings(FLAGS, warmup_steps)
  output_path = functools.partial(os.path.join, FLAGS.output_dir)
  check_output_dir_settings(FLAGS.output_dir, settings, demo_inputs(FLAGS))
  # What the demo will do, before the minutes it takes (the report repeats it).
  model = _read_json(FLAGS.bert_config_file) or {}
  print("[demo] recipe: %s" % recipe_text(
      settings, FLAGS.vocab_file, FLAGS.finetune, model.get("vocab_size"),
      model.get("hidden_dropout_prob", 0.1)  # (BertConfig's default)
      if FLAGS.pretrain_dropout is None else FLAGS.pretrain_dropout), flush=True)
  # SIGINT / SIGTERM: the running stage saves and stops, the demo exits 130 / 143.
  subprocess_utils.install_signal_forwarding()
  log_dir = output_path("logs")
  timings = {}
  pretrain_text = [FLAGS.train_text]
  if FLAGS.domain_adaptive:
    # Domain-adaptive pre-training on the fine-tuning task's unlabelled training sentences.
    domain_text = output_path("domain_text.txt")
    if not os.path.exists(domain_text):  # written atomically: its existence marks it done
      write_domain_text(os.path.join(FLAGS.sentiment_dir, "train.tsv"), domain_text)
    pretrain_text.append(domain_text)
  vocab_file = FLAGS.vocab_file
  if vocab_file is None:
    # A vocab of the corpus: the 30,522-entry bert-base-uncased one makes the MLM softmax and
    # the embedding update most of a step's time, and ~2/3 of its rows never occur in the text.
    vocab_file = output_path("vocab.txt")  # written atomically: its existence marks the stage done
    timings["build vocab"] = run_stage(
        "build vocab",
        ["build_vocab.py", "--input_file=%s" % ",".join(pretrain_text),
         "--output_file=%s" % vocab_file,
         "--vocab_size=%d" % vocab_size, "--do_lower_case=true"],
        lambda: file_done(vocab_file), log_dir)
  seq = FLAGS.max_seq_length
  preds = max(1, int(round(seq * 0.15)))
  data_args = ["--vocab_file=%s" % vocab_file, "--do_lower_case=true",
               "--max_seq_length=%d" % seq, "--max_predictions_per_seq=%d" % preds,
               "--masked_lm_prob=0.15", "--random_seed=%d" % FLAGS.seed,
               # In-process (a 3 MB corpus takes seconds): no forked pool.
               "--num_workers=1"]
  # create_pretraining_data.py writes its summary JSON last: the stage's marker.
  timings["create data (train)"] = run_stage(
      "create data train",
      ["create_pretraining_data.py", "--input_file=%s" % ",".join(pretrain_text),
       "--output_file=%s" % output_path("data", "train.tfrecord"), "--dupe_factor=10"] + data_args,
      lambda: file_done(text_input.summary_path_for(output_path("data", "train.tfrecord"))),
      log_dir)
  timings["create data (held-out)"] = run_stage(
      "create data heldout",
      ["create_pretraining_data.py", "--input_file=%s" % FLAGS.heldout_text,
       "--output_file=%s" % output_path("data", "heldout.tfrecord"), "--dupe_factor=1"] + data_args,
      lambda: file_done(text_input.summary_path_for(output_path("data", "heldout.tfrecord"))),
      log_dir)

  with open(text_input.summary_path_for(output_path("data", "heldout.tfrecord"))) as f:
    heldout_instances = json.load(f)["instances"]
  eval_batch = 32
  pretrain_dir = output_path("pretrain")
  steps = FLAGS.pretrain_steps
  summary = _read_json(os.path.join(pretrain_dir, "train_summary_local.json")) or {}
  # Trained but not evaluated (stopped during the evaluation): evaluate only, so the training
  # summary (speed) of the real training process is kept.
  train_flag = "--nodo_train" if summary.get("global_step") == steps else "--do_train"
  pretrain_config = FLAGS.bert_config_file
  if FLAGS.pretrain_dropout is not None:
    pretrain_config = output_path("pretrain_config.json")
    write_pretrain_config(FLAGS.bert_config_file, FLAGS.pretrain_dropout, pretrain_config)
  pretrain_args = [
      "run_pretraining.py", "--bert_config_file=%s" % pretrain_config,
      "--input_file=%s" % output_path("data", "train.tfrecord"),
      "--eval_input_file=%s" % output_path("data", "heldout.tfrecord"),
      "--output_dir=%s" % pretrain_dir, train_flag, "--do_eval",
      "--max_seq_length=%d" % seq, "--max_predictions_per_seq=%d" % preds,
      "--train_batch_size=%d" % FLAGS.pretrain_batch_size, "--eval_batch_size=%d" % eval_batch,
      "--num_train_steps=%d" % steps,
      "--num_warmup_steps=%d" % warmup_steps, "--seed=%d" % FLAGS.seed,
      "--learning_rate=%g" % FLAGS.pretrain_learning_rate,
      "--save_checkpoints_steps=%d" % max(100, steps // 4),
      "--max_eval_steps=%d" % max(1, heldout_instances // eval_batch)]
  if FLAGS.pretrain_fused_optimizer:
    pretrain_args.append("--fused_optimizer")
  # The model's own overrides, for fine-tuning too.
  model_args = (["--residual_attention=%s" % FLAGS.residual_attention]
                if FLAGS.residual_attention else [])
  pretrain_args += model_args
  timings["pre-train + eval"] = run_stage("pretrain", pretrain_args,
                                          lambda: pretrain_done(pretrain_dir, steps), log_dir)

  pretrain_eval = _read_json(os.path.join(pretrain_dir, "eval_results.json"))
  train_summary = _read_json(os.path.join(pretrain_dir, "train_summary_local.json"))
  with open(os.path.join(pretrain_dir, "bert_config.json")) as f:
    used_config = json.load(f)

  classifier = None
  if FLAGS.finetune:
    classifier_dir = output_path("sst2")
    export_dir = output_path("sst2_export")
    timings["fine-tune + export"] = run_stage(
        "finetune sst2",
        ["run_classifier.py", "--task_name=sst-2", "--data_dir=%s" % FLAGS.sentiment_dir,
         "--vocab_file=%s" % vocab_file, "--do_lower_case=true",
         # The model's config (its dropout), not the pre-training's (pretrain_dropout).
         "--bert_config_file=%s" % FLAGS.bert_config_file] + model_args + [
         "--init_checkpoint=%s" % train_summary["checkpoint"],
         "--output_dir=%s" % classifier_dir, "--do_train", "--do_eval",
         "--max_seq_length=64", "--train_batch_size=%d" % FLAGS.finetune_batch_size,
         "--learning_rate=%g" % FLAGS.finetune_learning_rate,
         "--num_train_epochs=%d" % FLAGS.finetune_epochs, "--save_checkpoints_steps=100000",
         "--seed=%d" % FLAGS.seed,
         "--export_dir=%s" % export_dir, "--overwrite"],
        lambda: classifier_done(classifier_dir, export_dir), log_dir)
    classifier = _read_json(os.path.join(classifier_dir, "eval_results.json"))
    classifier["export_dir"] = export_dir
    classifier["answers"] = ask_text_classifier(export_dir, CLASSIFIER_SENTENCES)

  fill_mask_file = output_path("fill_mask-%d.jsonl" % steps)  # named by the step it was filled at
  timings["fill-mask"] = run_stage(
      "fill mask",
      ["predict_masked.py", "--init_checkpoint=%s" % train_summary["checkpoint"],
       "--vocab_file=%s" % vocab_file, "--do_lower_case=true", "--top_k=3",
       "--output_file=%s" % fill_mask_file] + ["--text=%s" % t for t in FILL_MASK_SENTENCES],
      lambda: file_done(fill_mask_file), log_dir)
  with open(fill_mask_file) as f:
    fill_mask = [json.loads(line) for line in f if line.strip()]

  recipe = recipe_text(settings, FLAGS.vocab_file, FLAGS.finetune, used_config["vocab_size"],
                       used_config["hidden_dropout_prob"])
  report = _report(used_config, pretrain_eval, train_summary, classifier, timings, fill_mask,
                   recipe=recipe)
  with common.atomic_output(output_path("report.md")) as f:
    f.write(report)
  print(report)
  print("[demo] report written to %s" % output_path("report.md"))


def recipe_text(settings, vocab_file, finetune, vocab_size, pretrain_dropout):
  """The recipe in one line, as the demo states it when it starts and in its report.

  Args:
    settings: demo_settings() of the run.
    vocab_file: --vocab_file (None: the demo builds the vocab).
    finetune: --finetune.
    vocab_size: the pre-trained model's vocab_size.
    pretrain_dropout: the pre-training's dropout probability.

  Returns:
    str.
  """
  recipe = ("vocab: %s (%s entries); pre-training: %s, sequences of %d, %d steps of batch %d, "
            "peak learning rate %g, %d warm-up steps, dropout %g%s; seed %d" % (
                "built from the pre-training text" if vocab_file is None else
                _shown(vocab_file), vocab_size,
                "the text + the sentiment slice's unlabelled training sentences "
                "(domain-adaptive)" if settings["domain_adaptive"] else "the text only",
                settings["max_seq_length"], settings["pretrain_steps"],
                settings["pretrain_batch_size"], settings["pretrain_learning_rate"],
                settings["pretrain_warmup_steps"], pretrain_dropout,
                ", fused optimizer" if settings["pretrain_fused_optimizer"] else "",
                settings["seed"]))
  if finetune:
    recipe += "; fine-tuning: %d epochs of batch %d, peak learning rate %g" % (
        settings["finetune_epochs"], settings["finetune_batch_size"],
        settings["finetune_learning_rate"])
  return recipe


def _shown(path):
  """A path as the report shows it: relative to the repository when inside it (no machine path)."""
  if not path:
    return path
  relative = os.path.relpath(path, REPO_DIR)
  return path if relative.startswith("..") else relative


def ask_text_classifier(export_dir, sentences):
  """The exported raw-text classifier's answers: [(sentence, label name, probability)].

  Args:
    export_dir: a raw-text classifier SavedModel (run_classifier.py --export_dir).
    sentences: raw sentences.

  Returns:
    list of (sentence, predicted label name, its probability).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  (registers the ops)
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  outputs = serve(sentence=tf.constant(list(sentences)))
  names = [n.decode("utf-8") for n in outputs["predicted_label_name"].numpy()]
  probabilities = outputs["probabilities"].numpy().max(axis=-1)
  return list(zip(sentences, names, [float(p) for p in probabilities]))


def _report(config, pretrain_eval, train_summary, classifier, timings, fill_mask=(),
            recipe=None):
  """The short markdown report printed at the end."""
  lines = [
      "# RealFormer demo report", "",
      "Model: %d layers, hidden %d, %d heads, feed-forward %d, residual_attention=%s, "
      "layer_norm_type=%s" % (
          config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
          config["intermediate_size"], config["residual_attention"], config["layer_norm_type"]),
      ""]
  if recipe:
    lines += ["Recipe: " + recipe, ""]
  lines += [
      "| pre-training (held-out text) | value |", "|---|---|",
      "| MLM accuracy | %.2f%% |" % (100 * pretrain_eval["masked_lm_accuracy"]),
      "| MLM loss | %.3f |" % pretrain_eval["masked_lm_loss"],
      "| NSP accuracy | %.2f%% |" % (100 * pretrain_eval["next_sentence_accuracy"]),
      "| steps | %d |" % pretrain_eval["global_step"],
      "| speed | %s steps/s, %s examples/s |" % (train_summary.get("train_steps_per_sec"),
                                                train_summary.get("train_examples_per_sec")),
      "| checkpoint | %s |" % _shown(train_summary.get("checkpoint")), ""]
  if classifier:
    lines += ["| sentiment fine-tuning (data/sst2_slice dev) | value |", "|---|---|",
              "| accuracy | %.2f%% |" % (100 * classifier.get("eval_accuracy", float("nan"))),
              "| exported SavedModel (raw text; `serving_ids`: token ids) | %s |" % _shown(
                  classifier["export_dir"]), ""]
    if classifier.get("answers"):
      lines += ["The raw-text classifier (label 1 = positive) answers:", ""]
      lines += ["- \"%s\" -> %s (p=%.3f)" % answer for answer in classifier["answers"]]
      lines += [""]
  if fill_mask:
    lines += ["Fill-mask from the pre-trained model (predict_masked.py, top 3 per [MASK]):", ""]
    for record in fill_mask:
      candidates = "; ".join(", ".join("%s %.3f" % (c["token"], c["probability"])
                                       for c in mask["candidates"]) for mask in record["masks"])
      lines.append("- %s -> %s" % (record["text"], candidates))
    lines += [""]
  lines += ["Stage times: " + ", ".join("%s %.0f s" % (k, v) for k, v in timings.items() if v),
            ""]
  return "\n".join(lines)


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
