# coding=utf-8
r"""CPU-scale reproduction of the RealFormer paper's Table 8 (long inputs, ETC).

The paper (§4.3, Table 8) lifts RoBERTa into ETC-Large with and without residual attention
(sum), gives both the same long-document pre-training, fine-tunes each five times per task and
reports the best median. Here the same comparison runs at CPU scale, on the paper's own tasks
when their official files are given (--wikihop_train_file / --wikihop_dev_file: QAngaroo
WikiHop, the official accuracy; --hotpotqa_train_file / --hotpotqa_dev_file: HotpotQA
distractor, answer / supporting-fact / joint F1; --nq_train_file / --nq_dev_file: Natural
Questions, nq_eval's long- and short-answer F1 at the best threshold; --openkp_train_file /
--openkp_dev_file: OpenKP, F1@3 of the official evaluate.py), else on the long-context tasks of
etc_model/create_long_tasks.py built from a corpus (by default supporting sentences, HotpotQA's
supporting-fact form, and long-document classification by book; --tasks=cloze adds a long-range
cloze with candidate global tokens, WikiHop's form, which these small models do not learn), with
BERT over sliding windows (run_long_tasks --model=bert_windows) as the baseline users would
otherwise pick, on every task.

Stages (each skipped when its done marker <output_dir>/stages/<stage>.json exists, so a killed
run resumes by rerunning the same command; SIGINT / SIGTERM stop the running child cleanly and
exit 130 / 143). <output_dir>/reproduce_table8.json keeps the settings of the first invocation
and the sha256 and size of every input file (cheap identities of the BERT weights): a rerun with
other flags, or after an input was edited in place, is refused in one line. --bert_checkpoint
is resolved to one checkpoint prefix before any stage and every stage reads that one.
  bert              convert_hf_checkpoint.py of --hf_dir (or --bert_checkpoint as given), and
                    the BERT config cut to --num_layers layers (bert/bert_config_cut.json).
  long_tasks        etc_model.create_long_tasks: cloze / supporting / classify TFRecords
                    (data/long_tasks); only with those tasks.
  data_wikihop, data_hotpotqa, data_nq, data_openkp
                    etc_model.create_wikihop / create_hotpotqa / create_nq / create_openkp of
                    the official train and dev files at the driver's L and G (data/<task>);
                    only with those tasks.
  pretraining_data  etc_model.create_pretraining_data on --pretraining_input_file (only with
                    --pretrain_steps > 0).
  lift_none, lift_sum
                    etc_model.lift_bert_checkpoint of the same BERT weights, same seed.
  pretrain_none, pretrain_sum
                    etc_model.run_pretraining: the same data, steps, batch and seed (only with
                    --pretrain_steps > 0).
  finetune_<system>_<task>_seed<s>
                    etc_model.run_long_tasks --do_train --do_eval --do_predict with evaluation
                    every --eval_every_steps and --keep_best: the dev-selected checkpoint's dev
                    and test results (eval_results.json, test_results.json); the paper's tasks
                    have no public test answers, so --do_train --do_eval only (the paper's
                    figures are dev ones too). Seed by seed, so a partial run has every system
                    for the first seeds; --parallel_runs of them at a time.
The report (<output_dir>/report.md) is rewritten after every fine-tuning run (marked partial
until all are done): for each system and task the median over seeds of the dev-selected result
(the paper's "best median"), every seed, the test figures, the cloze accuracy by distance
beside the most-frequent / most-recent baselines, sum - none against the seeds' spread, the
paper's Table 8 beside ours for the same metric, and the run time of every stage.

  python -m paper.reproduce_table8 --output_dir=output/table8 --parallel_runs=2
  python -m paper.reproduce_table8 --output_dir=output/table8_wikihop \
      --wikihop_train_file=qangaroo_v1.1/wikihop/train.json \
      --wikihop_dev_file=qangaroo_v1.1/wikihop/dev.json          # the paper's task, 5 seeds
  python -m paper.reproduce_table8 --output_dir=output/table8 --dry_run      # the stages
  python -m paper.reproduce_table8 --output_dir=output/table8 --report_only
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import glob
import os
import re
import shutil
import sys
import threading
import time

from absl import app
from absl import flags
from realformer_tf import tf_startup  # pylint: disable=unused-import  (before TensorFlow)
import numpy as np

from realformer_tf import common
from realformer_tf import export_utils
from realformer_tf import reproduction
from realformer_tf import subprocess_utils

REPO_DIR = common.REPO_DIR
FLAGS = flags.FLAGS

# system -> (label, model, residual_attention): ETC lifted from BERT without / with residual
# attention (the paper's two rows), and BERT over sliding windows (the baseline).
SYSTEMS = collections.OrderedDict([
    ("etc_none", ("ETC", "etc", "none")),
    ("etc_sum", ("ETC + residual attention (sum)", "etc", "sum")),
    ("bert_windows", ("BERT, sliding windows", "bert_windows", "none")),
])
# The tasks built from a corpus by etc_model.create_long_tasks.
TASKS = ("cloze", "supporting", "classify")
# --tasks' default without the paper's files: the corpus tasks the CPU-scale models learn. The
# cloze is left out (--tasks=cloze,... runs it): no setting tried gets it past its
# most-frequent-candidate baseline at this scale (paper/table8.md).
DEFAULT_CORPUS_TASKS = ("supporting", "classify")
# --hard_g2l_tasks' default: the tasks whose ETC runs use the hard g2l mask (measured at CPU
# scale: the supporting-sentence task learns faster with it; paper/table8.md).
DEFAULT_HARD_G2L_TASKS = ("supporting",)


class RealTask(collections.namedtuple("RealTask", [
    "label",         # the paper's name of the task
    "data_tool",     # the tool writing its records from the official files (--train_file, ...)
    "summary_name",  # the tool's summary in its --output_dir
    "data_flags",    # (the data tool's flag, the Settings field giving it), beside L and G
    "files",         # what the official train / dev files are (flag help, messages)
    "file_lists",    # True: a file flag takes a comma list or globs (the data tool reads them)
    "data_line",     # (label, split, the summary's counts of the split) -> the report's line
])):
  """One of the paper's tasks, run from its official files."""
  __slots__ = ()


def _examples_data_line(label, split, stats):
  """WikiHop's and HotpotQA's data counts: examples, records, no record by reason."""
  skipped = stats.get("skipped") or {}
  text = "%s %s: %s examples, %s records" % (label, split, stats.get("examples"),
                                             stats.get("records"))
  if skipped:
    text += "; no record%s: %s" % (
        " (counted wrong)" if split != "train" else " (not trained on)", ", ".join(
            "%s %s" % (count, reason) for reason, count in skipped.items()))
  if stats.get("truncated_examples"):
    text += "; %s examples cut to L / G" % stats["truncated_examples"]
  if stats.get("most_mentioned_accuracy") is not None:
    text += "; the most-mentioned candidate is right on %s%% of the records with an answer" % (
        _pct(stats["most_mentioned_accuracy"]))
  return text


def _nonzero_counts(stats, names):
  """"3 question pieces cut, 1 ..." of the counts that are not 0 ([(key, words)])."""
  return ", ".join("%s %s" % (stats[key], words) for key, words in names if stats.get(key))


def _nq_data_line(label, split, stats):
  """Natural Questions' data counts: examples, windows, records, answer types, cuts."""
  text = "%s %s: %s examples, %s windows, %s records (documents of %s pieces on average, %s " \
         "at most)" % (label, split, stats.get("examples"), stats.get("windows"),
                       stats.get("records"), stats.get("mean_document_pieces"),
                       stats.get("max_document_pieces"))
  types = stats.get("answer_types") or {}
  if types:
    text += "; answer types %s" % ", ".join("%s %s" % (count, name)
                                            for name, count in types.items() if count)
  cuts = _nonzero_counts(stats, (
      ("null_windows_dropped", "windows without an answer left out (the official "
       "down-sampling)"),
      ("question_pieces_cut", "question pieces cut"),
      ("candidates_without_global_token", "candidates without their own global token"),
      ("answers_without_pieces", "answers without a word piece in the input (no answer label)")))
  return text + ("; " + cuts if cuts else "")


def _openkp_data_line(label, split, stats):
  """OpenKP's data counts: documents, records, cuts by G / L, keyphrases without a label."""
  text = "%s %s: %s documents, %s records" % (label, split, stats.get("documents"),
                                              stats.get("records"))
  missing = (stats.get("documents") or 0) - (stats.get("records") or 0)
  if missing > 0:
    text += "; no record for %d (%s)" % (missing, "not trained on" if split == "train" else
                                         "they predict nothing, scored 0")
  cuts = _nonzero_counts(stats, (
      ("cut_by_global_length", "documents cut by G (VDOM elements)"),
      ("cut_by_long_length", "cut by L (pieces or words)"),
      ("words_cut", "words left out"),
      ("key_phrases_not_in_input", "keyphrases not in the input"),
      ("key_phrases_too_long", "keyphrases of more than 5 words"),
      ("key_phrases_beyond_labels", "keyphrases beyond the 3 labels"),
      ("duplicate_urls", "lines repeating a url (the last one counts)")))
  return text + ("; " + cuts if cuts else "")


# The paper's tasks this driver runs when their official files are given (--<task>_train_file,
# --<task>_dev_file); run_long_tasks --task=<task> fine-tunes and scores them.
REAL_TASKS = collections.OrderedDict([
    ("wikihop", RealTask("WikiHop", "etc_model/create_wikihop.py", "wikihop.json",
                         (("max_candidates", "max_candidates"),),
                         "QAngaroo WikiHop JSON (qangaroo_v1.1/wikihop/train.json, dev.json)",
                         False, _examples_data_line)),
    ("hotpotqa", RealTask("HotpotQA", "etc_model/create_hotpotqa.py", "hotpotqa.json", (),
                          "HotpotQA JSON (hotpot_train_v1.1.json, "
                          "hotpot_dev_distractor_v1.json)", False, _examples_data_line)),
    ("nq", RealTask("NQ", "etc_model/create_nq.py", "nq.json",
                    (("doc_stride", "nq_doc_stride"),
                     ("max_question_length", "nq_max_question_length"),
                     ("seed", "data_seed")),
                    "Natural Questions JSON lines, a comma list or a quoted glob "
                    "(simplified-nq-train.jsonl.gz, \"v1.0/dev/nq-dev-0?.jsonl.gz\")",
                    True, _nq_data_line)),
    ("openkp", RealTask("OpenKP", "etc_model/create_openkp.py", "openkp.json", (),
                        "OpenKP JSON lines (OpenKPTrain.jsonl, OpenKPDev.jsonl)", False,
                        _openkp_data_line)),
])
REAL_SPLITS = ("train", "dev")   # the official test answers are hidden
# task -> [(metric key, label)]: the first is the dev selection metric (run_long_tasks').
TASK_METRICS = {"cloze": [("accuracy", "accuracy")],
                "supporting": [("f1", "sentence F1"), ("exact_match", "exact match"),
                               ("best_threshold_f1", "sentence F1, threshold chosen on dev"),
                               ("r_precision", "R-precision")],
                "classify": [("accuracy", "accuracy"), ("macro_f1", "macro F1")],
                "wikihop": [("accuracy", "accuracy")],
                "hotpotqa": [("joint_f1", "joint F1"), ("f1", "answer F1"),
                             ("sp_f1", "supporting-fact F1"), ("joint_em", "joint EM"),
                             ("em", "answer EM"), ("sp_em", "supporting-fact EM")],
                # nq_eval's F1 at the best score threshold, the figures the paper reports.
                "nq": [("long-best-threshold-f1", "long-answer F1"),
                       ("short-best-threshold-f1", "short-answer F1")],
                "openkp": [("F1@3", "F1@3"), ("F1@1", "F1@1"), ("F1@5", "F1@5")]}
# A metric whose test figure has another key: supporting's F1 at the best dev threshold is
# best_threshold_f1 on dev and, on test, the F1 at that dev threshold (run_long_tasks).
TEST_METRIC_KEYS = {"best_threshold_f1": "f1_at_dev_threshold"}
# The corpus tasks' sum - none table: the main metric and these (supporting: the figures that do
# not depend on the 0.5 threshold, which the two systems' calibrations cross differently).
SPREAD_METRICS = {"supporting": ("best_threshold_f1", "r_precision")}
DEFAULT_SEEDS = {"substitute": "1,2,3", "real": "1,2,3,4,5"}
# The paper's Table 8 (dev, ETC-Large vs + residual attention), for the report's context.
PAPER_TABLE8 = [("WikiHop accuracy", 78.92, 79.21), ("HotpotQA supporting-fact F1", 89.07, 89.21),
                ("HotpotQA answer F1", 80.38, 80.86), ("HotpotQA joint F1", 73.12, 73.57),
                ("NQ long-answer F1", 77.70, 77.93), ("NQ short-answer F1", 58.54, 59.10),
                ("OpenKP F1@3", 44.06, 44.27)]
# PAPER_TABLE8 row -> (task, metric key) of ours that measure the same (the official scorers).
PAPER_METRICS = {"WikiHop accuracy": ("wikihop", "accuracy"),
                 "HotpotQA supporting-fact F1": ("hotpotqa", "sp_f1"),
                 "HotpotQA answer F1": ("hotpotqa", "f1"),
                 "HotpotQA joint F1": ("hotpotqa", "joint_f1"),
                 "NQ long-answer F1": ("nq", "long-best-threshold-f1"),
                 "NQ short-answer F1": ("nq", "short-best-threshold-f1"),
                 "OpenKP F1@3": ("openkp", "F1@3")}
# --nq_max_question_length's default: the official create_nq's (etc_model.nq).
NQ_MAX_QUESTION_LENGTH = 32
# The flags that set one task's data: given without the task, they are refused.
TASK_ONLY_FLAGS = {"nq_doc_stride": "nq", "nq_max_question_length": "nq"}

REPORT_NAME = "report.md"
# create_long_tasks' summary in data/long_tasks (etc_model.long_tasks.SUMMARY_NAME; a test keeps
# them equal: that module is not imported here, it loads TensorFlow).
LONG_TASKS_SUMMARY = "long_tasks.json"
RECORD_NAME = "reproduce_table8.json"   # the settings and input contents of the first invocation
LOCK_LABEL = "reproduce_table8"          # the lock file .lock-reproduce_table8 in --output_dir
STAGE_DIR = "stages"
EVAL_RESULTS = "eval_results.json"
TEST_RESULTS = "test_results.json"


def define_flags():
  """Defines the command-line flags; called by __main__ only, so tests can import the module."""
  flags.DEFINE_string("output_dir", None, "Work directory: bert/, data/, lifted/, pretrained/, "
                      "runs/, stages/, report.md.")
  flags.DEFINE_string("hf_dir", None, "Hugging Face BERT-architecture model converted in the "
                      "bert stage (default: checkpoints/all-MiniLM-L6-v2 of the shared data).")
  flags.DEFINE_string("bert_checkpoint", None, "A BERT checkpoint directory (bert_model.ckpt, "
                      "bert_config.json, vocab.txt: the layout of Google's BERT releases, or "
                      "one with a `checkpoint` state file: its latest), or a checkpoint prefix "
                      "in such a directory, used instead of converting --hf_dir.")
  flags.DEFINE_integer("num_layers", 2, "Layers of the BERT kept (its first ones) for every "
                       "system; 0: all.")
  flags.DEFINE_string("task_input_file", None, "Comma list of corpus files of the long tasks "
                      "(default: the novels file of the shared corpus).")
  flags.DEFINE_string("pretraining_input_file", None, "Comma list of the long-document "
                      "pre-training text (default: the shared Shakespeare file, which the "
                      "tasks do not use).")
  flags.DEFINE_string("systems", ",".join(SYSTEMS), "Ordered comma list of %s." %
                      ", ".join(SYSTEMS))
  for task, real in REAL_TASKS.items():
    for split in REAL_SPLITS:
      flags.DEFINE_string("%s_%s_file" % (task, split), None,
                          "The official %s file of %s: %s; with its pair, the run has the "
                          "task %s." % (split, real.label, real.files, task))
  flags.DEFINE_string("tasks", None, "Comma list of %s (default: the paper's tasks whose "
                      "official files are given, else %s)." % (
                          ", ".join(TASKS + tuple(REAL_TASKS)), ",".join(DEFAULT_CORPUS_TASKS)))
  flags.DEFINE_string("seeds", None, "Comma list of fine-tuning seeds (>= 3 for a median; "
                      "default %s with one of the paper's tasks, as the paper, else %s)." % (
                          DEFAULT_SEEDS["real"], DEFAULT_SEEDS["substitute"]))
  flags.DEFINE_integer("max_seq_length", 256, "Long input length L (word pieces).")
  flags.DEFINE_integer("max_global_seq_length", 32, "Global input length G.")
  flags.DEFINE_integer("max_candidates", 8, "Cloze candidates C.")
  flags.DEFINE_integer("min_context_tokens", 128, "create_long_tasks --min_context_tokens.")
  flags.DEFINE_integer("nq_doc_stride", None, "NQ: document word pieces between the starts of "
                       "two windows (create_nq --doc_stride; default: half of --max_seq_length, "
                       "as the official 2048 of 4096).")
  flags.DEFINE_integer("nq_max_question_length", NQ_MAX_QUESTION_LENGTH, "NQ: the most "
                       "question word pieces (create_nq --max_question_length, the official "
                       "default); --max_global_seq_length must be at least this + 2.")
  flags.DEFINE_integer("local_radius", 32, "ETC local_radius of the lifted models.")
  flags.DEFINE_string("hard_g2l_tasks", ",".join(DEFAULT_HARD_G2L_TASKS), "Comma list of the "
                      "tasks whose ETC fine-tuning runs use the hard g2l mask (run_long_tasks "
                      "--use_hard_g2l_mask: a global token attends only to its own long "
                      "tokens); the others attend to every long token. Empty: none.")
  flags.DEFINE_integer("window_length", 128, "bert_windows: tokens per window.")
  flags.DEFINE_integer("window_stride", 64, "bert_windows: tokens between window starts.")
  flags.DEFINE_integer("pretrain_steps", 0, "Long-document pre-training updates per ETC "
                       "system (0: fine-tune the lifted checkpoints directly; at CPU scale a "
                       "nominal pre-training measured worse than none, paper/table8.md).")
  flags.DEFINE_integer("pretrain_batch_size", 8, "Pre-training batch size.")
  flags.DEFINE_float("pretrain_learning_rate", 1e-4, "Pre-training peak learning rate.")
  flags.DEFINE_integer("max_predictions_per_seq", 40, "Masked positions per pre-training "
                       "record.")
  flags.DEFINE_integer("finetune_steps", 600, "Fine-tuning updates per run.")
  flags.DEFINE_integer("finetune_batch_size", 8, "Fine-tuning batch size.")
  flags.DEFINE_float("finetune_learning_rate", 3e-4, "Fine-tuning peak learning rate.")
  flags.DEFINE_integer("eval_every_steps", 150, "Dev evaluations during fine-tuning; the best "
                       "checkpoint (--keep_best) gives the dev and test results.")
  flags.DEFINE_integer("predict_batch_size", 32, "Batch of the dev / test scoring.")
  flags.DEFINE_integer("data_seed", 12345, "Seed of the task splits, the masks and the lifted "
                       "models' new variables.")
  flags.DEFINE_bool("dry_run", False, "List the stages, what is done and the time left; run "
                    "nothing, write nothing.")
  flags.DEFINE_bool("report_only", False, "Write the report from the finished runs.")
  flags.DEFINE_integer("parallel_runs", 1, "Fine-tuning runs at a time (subprocesses). One run "
                       "of the default small model does not keep 2 CPU cores busy: there 2 at "
                       "a time finish about 1.3 times as fast (paper/table8.md). Not a setting "
                       "of the results: a rerun may change it.")


# ---------------------------------------------------------------------------------------------
# Settings.
# ---------------------------------------------------------------------------------------------


class Settings(collections.namedtuple("Settings", [
    "hf_dir", "bert_checkpoint", "num_layers", "task_input_files", "pretraining_input_files",
    "systems", "tasks", "seeds", "max_seq_length", "max_global_seq_length", "max_candidates",
    "min_context_tokens", "local_radius", "window_length", "window_stride", "pretrain_steps",
    "pretrain_batch_size", "pretrain_learning_rate", "max_predictions_per_seq",
    "finetune_steps", "finetune_batch_size", "finetune_learning_rate", "eval_every_steps",
    "predict_batch_size", "data_seed", "bert_init_checkpoint", "real_task_files",
    "nq_doc_stride", "nq_max_question_length", "hard_g2l_tasks"],
    defaults=(None, None, None, NQ_MAX_QUESTION_LENGTH, ()))):
  """What the reproduction runs (the flags of the same names; paths absolute, lists as lists).

  bert_checkpoint is the directory of --bert_checkpoint (config and vocab); bert_init_checkpoint
  the checkpoint prefix resolved in it once, before any stage (resolve_bert_checkpoint), that
  every stage reads; both None with --hf_dir (the bert stage converts it). real_task_files:
  {task: {split: path}} of the --<task>_<split>_file flags given (None or {}: none; a task of
  file_lists: a comma list of absolute paths or globs). nq_doc_stride: resolved from
  --max_seq_length when the flag is not given (None only when NQ is not run). hard_g2l_tasks:
  the tasks of the run whose ETC runs use the hard g2l mask.
  """
  __slots__ = ()


# The settings every invocation of one output directory shares (more seeds are fine).
RECORDED_KEYS = ("num_layers", "max_seq_length", "max_global_seq_length", "max_candidates",
                 "min_context_tokens", "local_radius", "window_length", "window_stride",
                 "pretrain_steps", "pretrain_batch_size", "pretrain_learning_rate",
                 "max_predictions_per_seq", "finetune_steps", "finetune_batch_size",
                 "finetune_learning_rate", "eval_every_steps", "data_seed", "hard_g2l_tasks")


def split_list(text):
  """"a, b,,c" -> ["a", "b", "c"]."""
  return [x.strip() for x in (text or "").split(",") if x.strip()]


def _abs_list(text, default):
  return [os.path.abspath(p) for p in (split_list(text) or default)]


def real_task_file(task, value):
  """A --<task>_<split>_file value made absolute (each entry of a comma list of file_lists)."""
  if REAL_TASKS[task].file_lists:
    return ",".join(os.path.abspath(p) for p in split_list(value))
  return os.path.abspath(value)


def real_task_files_from_flags():
  """{task: {split: absolute path (or comma list)}} of the --<task>_<split>_file flags given."""
  files = collections.OrderedDict()
  for task in REAL_TASKS:
    given = collections.OrderedDict(
        (split, real_task_file(task, getattr(FLAGS, "%s_%s_file" % (task, split))))
        for split in REAL_SPLITS if getattr(FLAGS, "%s_%s_file" % (task, split)))
    if given:
      files[task] = given
  return files


def real_task_paths(task, split, value):
  """The files a --<task>_<split>_file value names: itself, or a file_lists' matches in order
  (one line naming the flag when a pattern matches nothing)."""
  if REAL_TASKS[task].file_lists:
    return common.expand_input_files(value, "%s_%s_file" % (task, split))
  return [value]


def file_names(value):
  """The base names of a file flag's value (each entry of a comma list)."""
  return ",".join(os.path.basename(p) for p in split_list(value))


def default_tasks(real_task_files):
  """--tasks' default: the paper's tasks whose files are given, else DEFAULT_CORPUS_TASKS."""
  return [task for task in REAL_TASKS if task in real_task_files] or list(DEFAULT_CORPUS_TASKS)


def default_seeds(tasks):
  """--seeds' default: five with one of the paper's tasks (the paper's protocol), else three."""
  return DEFAULT_SEEDS["real" if any(t in REAL_TASKS for t in tasks) else "substitute"]


def settings_from_flags():
  """The Settings the flags ask for, checked (one-line errors)."""
  real_task_files = real_task_files_from_flags()
  tasks = split_list(FLAGS.tasks) if FLAGS.tasks is not None else default_tasks(
      real_task_files)
  seeds_text = FLAGS.seeds if FLAGS.seeds is not None else default_seeds(tasks)
  try:
    seeds = [int(x) for x in split_list(seeds_text)]
  except ValueError:
    common.fail("--seeds=%s: not a comma list of integers" % seeds_text)
  check_task_only_flags(tasks, [name for name in TASK_ONLY_FLAGS if FLAGS[name].present])
  corpus = os.path.join(common.shared_data_dir(), "corpus")
  bert_checkpoint, bert_init_checkpoint = resolve_bert_checkpoint(FLAGS.bert_checkpoint)
  settings = Settings(
      hf_dir=os.path.abspath(FLAGS.hf_dir or os.path.join(
          common.shared_data_dir(), "checkpoints", "all-MiniLM-L6-v2")),
      bert_checkpoint=bert_checkpoint, bert_init_checkpoint=bert_init_checkpoint,
      num_layers=FLAGS.num_layers,
      task_input_files=_abs_list(FLAGS.task_input_file, [os.path.join(
          corpus, "novels_austen_melville_wells_verne_dickens.txt")]),
      pretraining_input_files=_abs_list(FLAGS.pretraining_input_file, [os.path.join(
          corpus, "shakespeare_gutenberg.txt")]),
      systems=split_list(FLAGS.systems), tasks=tasks, seeds=seeds,
      max_seq_length=FLAGS.max_seq_length, max_global_seq_length=FLAGS.max_global_seq_length,
      max_candidates=FLAGS.max_candidates, min_context_tokens=FLAGS.min_context_tokens,
      local_radius=FLAGS.local_radius, window_length=FLAGS.window_length,
      window_stride=FLAGS.window_stride, pretrain_steps=FLAGS.pretrain_steps,
      pretrain_batch_size=FLAGS.pretrain_batch_size,
      pretrain_learning_rate=FLAGS.pretrain_learning_rate,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      finetune_steps=FLAGS.finetune_steps, finetune_batch_size=FLAGS.finetune_batch_size,
      finetune_learning_rate=FLAGS.finetune_learning_rate,
      eval_every_steps=FLAGS.eval_every_steps, predict_batch_size=FLAGS.predict_batch_size,
      data_seed=FLAGS.data_seed, real_task_files=real_task_files,
      nq_doc_stride=(FLAGS.nq_doc_stride if FLAGS.nq_doc_stride is not None else
                     FLAGS.max_seq_length // 2) if "nq" in tasks else None,
      nq_max_question_length=FLAGS.nq_max_question_length,
      hard_g2l_tasks=hard_g2l_tasks_from_flag(FLAGS.hard_g2l_tasks, tasks,
                                              FLAGS["hard_g2l_tasks"].present))
  check_settings(settings)
  return settings


def check_task_only_flags(tasks, given_flags):
  """One line when a flag of one task (TASK_ONLY_FLAGS) is given but the run leaves the task out
  (it would change nothing)."""
  for name in given_flags:
    if TASK_ONLY_FLAGS[name] not in tasks:
      common.fail("--%s: only with the %s task (--tasks=%s)" % (
          name, TASK_ONLY_FLAGS[name], ",".join(tasks)))


def hard_g2l_tasks_from_flag(value, tasks, given):
  """--hard_g2l_tasks as the list of the run's tasks it names (one line for an unknown task, or
  for a task the run leaves out when the flag was given)."""
  names = split_list(value)
  known = TASKS + tuple(REAL_TASKS)
  for name in names:
    if name not in known:
      common.fail("--hard_g2l_tasks=%s: unknown task %s (known: %s)" % (
          value, name, ", ".join(known)))
    if given and name not in tasks:
      common.fail("--hard_g2l_tasks=%s: %s is not among --tasks=%s" % (
          value, name, ",".join(tasks)))
  return [task for task in tasks if task in names]


def resolve_bert_checkpoint(path):
  """--bert_checkpoint as (its directory, the checkpoint prefix every stage reads).

  Resolved once, before any stage, by export_utils.resolve_checkpoint: a directory with a
  `checkpoint` state file gives its latest, one without (Google's BERT releases:
  bert_model.ckpt.index / .data-*) its one checkpoint, a prefix itself; anything else is one
  line naming the flag.

  Args:
    path: --bert_checkpoint, or None (--hf_dir is converted instead).

  Returns:
    (absolute directory, absolute prefix), or (None, None).
  """
  if not path:
    return None, None
  prefix = os.path.abspath(export_utils.resolve_checkpoint(path, "bert_checkpoint"))
  directory = os.path.abspath(path) if os.path.isdir(path) else os.path.dirname(prefix)
  return directory, prefix


def check_settings(settings, check_files=True):
  """Fails with one line naming the flag when a setting is out of range or an input is missing."""
  for name, known, given in (("systems", SYSTEMS, settings.systems),
                             ("tasks", TASKS + tuple(REAL_TASKS), settings.tasks)):
    unknown = [x for x in given if x not in known]
    if unknown or not given:
      common.fail("--%s=%s: unknown %s (known: %s)" % (
          name, ",".join(given), ",".join(unknown) or "(empty)", ", ".join(known)))
    if len(set(given)) != len(given):
      common.fail("--%s=%s: repeated entry" % (name, ",".join(given)))
  if not settings.seeds:
    common.fail("--seeds is empty")
  if len(set(settings.seeds)) != len(settings.seeds):
    common.fail("--seeds=%s: repeated seed" % ",".join(map(str, settings.seeds)))
  for key in ("max_seq_length", "max_global_seq_length", "max_candidates", "local_radius",
              "window_length", "window_stride", "pretrain_batch_size",
              "max_predictions_per_seq", "finetune_steps", "finetune_batch_size",
              "eval_every_steps", "predict_batch_size"):
    if getattr(settings, key) < 1:
      common.fail("--%s=%d: must be >= 1" % (key, getattr(settings, key)))
  for key in ("num_layers", "pretrain_steps", "min_context_tokens"):
    if getattr(settings, key) < 0:
      common.fail("--%s=%d: must be >= 0" % (key, getattr(settings, key)))
  for key in ("pretrain_learning_rate", "finetune_learning_rate"):
    if getattr(settings, key) <= 0:
      common.fail("--%s=%g: must be > 0" % (key, getattr(settings, key)))
  check_real_tasks(settings)
  if (substitute_tasks(settings) and
      settings.min_context_tokens >= settings.max_seq_length):
    common.fail("--min_context_tokens=%d: must be below --max_seq_length=%d" % (
        settings.min_context_tokens, settings.max_seq_length))
  if settings.window_stride > settings.window_length - 2:
    common.fail("--window_stride=%d: more than --window_length=%d minus [CLS] and [SEP] "
                "leaves tokens unseen" % (settings.window_stride, settings.window_length))
  if settings.eval_every_steps > settings.finetune_steps:
    common.fail("--eval_every_steps=%d: more than --finetune_steps=%d" % (
        settings.eval_every_steps, settings.finetune_steps))
  if "bert_windows" in settings.systems and not bert_windows_available():
    common.fail("--systems=%s: this checkout's etc_model/run_long_tasks.py has no "
                "--model=bert_windows; leave bert_windows out" % ",".join(settings.systems))
  if "nq" in settings.tasks:
    check_nq_settings(settings)
  if ({"cloze", "wikihop"} & set(settings.tasks) and
      settings.max_candidates >= settings.max_global_seq_length):
    common.fail("--max_candidates=%d: must be < --max_global_seq_length=%d (a candidate's "
                "global token each)" % (settings.max_candidates,
                                        settings.max_global_seq_length))
  if not check_files:
    return
  if settings.bert_checkpoint:
    for name in ("bert_config.json", "vocab.txt"):
      common.require_file(os.path.join(settings.bert_checkpoint, name), "bert_checkpoint")
  elif not os.path.isdir(settings.hf_dir):
    common.fail("--hf_dir=%s: not a directory" % settings.hf_dir)
  if substitute_tasks(settings):
    for path in settings.task_input_files:
      common.require_file(path, "task_input_file")
  for task, files in (settings.real_task_files or {}).items():
    for split, value in files.items():
      for path in real_task_paths(task, split, value):
        common.require_file(path, "%s_%s_file" % (task, split))
  if etc_residuals(settings) and settings.pretrain_steps:  # the pretraining_data stage
    for path in settings.pretraining_input_files:
      common.require_file(path, "pretraining_input_file")


def check_nq_settings(settings):
  """One line when create_nq would refuse the question length or the stride (before any stage)."""
  question = settings.nq_max_question_length
  if question < 0:
    common.fail("--nq_max_question_length=%d: must be >= 0" % question)
  if settings.max_global_seq_length < question + 2:
    common.fail("--max_global_seq_length=%d: NQ needs at least --nq_max_question_length + 2 = "
                "%d global tokens ([CLS], the question's pieces, [SEP]); raise it or lower "
                "--nq_max_question_length" % (settings.max_global_seq_length, question + 2))
  window = settings.max_seq_length - question - 3
  if not 1 <= settings.nq_doc_stride <= window:
    common.fail("--nq_doc_stride=%d: must be in [1, %d] (--max_seq_length - "
                "--nq_max_question_length - 3: windows leave no document piece out)" % (
                    settings.nq_doc_stride, window))


def substitute_tasks(settings):
  """The tasks of the run built from a corpus by create_long_tasks (cloze, supporting, classify)."""
  return [t for t in settings.tasks if t in TASKS]


def real_tasks(settings):
  """The paper's tasks of the run (run from their official files)."""
  return [t for t in settings.tasks if t in REAL_TASKS]


def real_task_available(task):
  """Whether this checkout has the task's data tool and run_long_tasks --task=<task>."""
  if not os.path.exists(os.path.join(REPO_DIR, REAL_TASKS[task].data_tool)):
    return False
  with open(os.path.join(REPO_DIR, "etc_model", "long_task_heads.py")) as f:
    return "\"%s\"" % task in f.read()


def check_real_tasks(settings):
  """One line when one of the paper's tasks lacks its files or tools, or files lack the task."""
  files = settings.real_task_files or {}
  for task in real_tasks(settings):
    missing = [s for s in REAL_SPLITS if s not in files.get(task, {})]
    if missing:
      common.fail("--tasks=%s: %s needs its official files: give %s (%s; paper/table8.md "
                  "says where they come from)" % (
                      ",".join(settings.tasks), task, " and ".join(
                          "--%s_%s_file" % (task, s) for s in missing), REAL_TASKS[task].files))
    if not real_task_available(task):
      common.fail("--tasks=%s: this checkout has no %s or run_long_tasks --task=%s; leave %s "
                  "out" % (",".join(settings.tasks), REAL_TASKS[task].data_tool, task, task))
  for task in files:
    if task not in settings.tasks:
      common.fail("--%s_%s_file given, but --tasks=%s leaves %s out" % (
          task, next(iter(files[task])), ",".join(settings.tasks), task))


def bert_windows_available():
  """Whether run_long_tasks has the sliding-window BERT baseline (--model=bert_windows)."""
  with open(os.path.join(REPO_DIR, "etc_model", "run_long_tasks.py")) as f:
    return "\"bert_windows\"" in f.read()


def settings_record(settings):
  """The JSON record of the settings an output directory was made with."""
  record = {key: getattr(settings, key) for key in RECORDED_KEYS}
  # Base names: the record must not depend on where the shared data is mounted.
  record["bert"] = os.path.basename(settings.bert_checkpoint or settings.hf_dir)
  record["task_input_files"] = [os.path.basename(p) for p in settings.task_input_files]
  record["pretraining_input_files"] = [os.path.basename(p)
                                       for p in settings.pretraining_input_files]
  if settings.real_task_files:  # absent otherwise: records of corpus-task runs stay valid
    record["real_task_files"] = {task: {split: file_names(path)
                                        for split, path in files.items()}
                                 for task, files in settings.real_task_files.items()}
  for task in real_tasks(settings):  # a task's own data settings, only when it runs
    for _, field in REAL_TASKS[task].data_flags:
      if field not in RECORDED_KEYS:
        record[field] = getattr(settings, field)
  return record


HF_FILES = ("config.json", "vocab.txt", "tokenizer.json", "model.safetensors.index.json")


def bert_input_files(settings):
  """The BERT files the stages read: --bert_checkpoint's, or those of --hf_dir converted.

  The weights get a cheap identity (a checkpoint's .index digest and data file sizes, a
  safetensors file's size and mtime; see reproduction.InputFile): they can be GBs and are
  checked on every rerun.
  """
  if settings.bert_checkpoint:
    return [reproduction.input_file("bert_checkpoint", settings.bert_init_checkpoint,
                                    kind="checkpoint")] + [
        reproduction.input_file("bert_checkpoint", os.path.join(settings.bert_checkpoint, name),
                                name) for name in ("bert_config.json", "vocab.txt")]
  inputs = [reproduction.input_file("hf_dir", os.path.join(settings.hf_dir, name), name)
            for name in HF_FILES if os.path.isfile(os.path.join(settings.hf_dir, name))]
  weights = sorted(glob.glob(os.path.join(settings.hf_dir, "*.safetensors")))
  return inputs + [reproduction.input_file("hf_dir", path, os.path.basename(path), "weights")
                   for path in weights]


def input_files(settings):
  """Every input file the stages read (recorded with the settings, see check_record)."""
  inputs = bert_input_files(settings)
  if substitute_tasks(settings):  # the long_tasks stage
    inputs += reproduction.input_files("task_input_file", settings.task_input_files)
  for task, files in (settings.real_task_files or {}).items():  # the data_<task> stages
    for split, value in files.items():
      flag = "%s_%s_file" % (task, split)
      inputs += (reproduction.input_files(flag, real_task_paths(task, split, value))
                 if REAL_TASKS[task].file_lists else [reproduction.input_file(flag, value)])
  if etc_residuals(settings) and settings.pretrain_steps:  # the pretraining_data stage
    inputs += reproduction.input_files("pretraining_input_file",
                                       settings.pretraining_input_files)
  return inputs


def check_record(out_dir, settings, write):
  """Fails when out_dir was made with other settings or input contents; records them if new.

  An input file edited in place since the first invocation is refused too: the finished stages
  were made from its old contents.
  """
  reproduction.check_settings_record(out_dir, settings_record(settings), RECORD_NAME, write,
                                     inputs=input_files(settings))


# ---------------------------------------------------------------------------------------------
# Layout and the stage plan.
# ---------------------------------------------------------------------------------------------


def paths_of(out_dir):
  """The fixed places of the work directory."""
  return {
      "bert": os.path.join(out_dir, "bert"),
      "bert_config_cut": os.path.join(out_dir, "bert", "bert_config_cut.json"),
      "long_tasks": os.path.join(out_dir, "data", "long_tasks"),
      "pretraining_data": os.path.join(out_dir, "data", "pretraining", "train.tfrecord"),
  }


def bert_dir(settings, out_dir):
  """The BERT directory every system starts from (its bert_config.json and vocab.txt)."""
  return settings.bert_checkpoint or paths_of(out_dir)["bert"]


def bert_prefix(settings, out_dir):
  """The BERT checkpoint prefix every stage reads: --bert_checkpoint's, resolved once before
  any stage, or the one the bert stage converts --hf_dir into."""
  return settings.bert_init_checkpoint or os.path.join(paths_of(out_dir)["bert"],
                                                       "bert_model.ckpt")


def task_data_dir(out_dir, task):
  """The records of a task: data/long_tasks for the corpus tasks, data/<task> for the paper's."""
  return os.path.join(out_dir, "data", task if task in REAL_TASKS else "long_tasks")


def lifted_dir(out_dir, residual_attention):
  return os.path.join(out_dir, "lifted", residual_attention)


def pretrained_dir(out_dir, residual_attention):
  return os.path.join(out_dir, "pretrained", residual_attention)


def run_name(system, task, seed):
  return "%s_%s_seed%d" % (system, task, seed)


def run_dir_of(out_dir, system, task, seed):
  """<output_dir>/runs/<system>_<task>_seed<seed>."""
  return os.path.join(out_dir, "runs", run_name(system, task, seed))


Stage = collections.namedtuple("Stage", [
    "name",      # unique; the done marker is stages/<name>.json
    "kind",      # bert, long_tasks, task_data, pretraining_data, lift, pretrain, finetune
    "output",    # the directory (or file) it writes
    "resumable",  # True: rerun in place (the tool resumes); False: the output is removed first
    "params",    # dict: residual_attention / task / system, task, seed
])


def etc_residuals(settings):
  """The residual_attention values of the ETC systems asked for, in order."""
  return [SYSTEMS[s][2] for s in settings.systems if SYSTEMS[s][1] == "etc"]


def finetune_order(settings):
  """[(system, task, seed)]: seed by seed, every task, every system."""
  return [(system, task, seed) for seed in settings.seeds for task in settings.tasks
          for system in settings.systems]


def stage_plan(settings, out_dir):
  """Every stage in run order (see the module docstring)."""
  paths = paths_of(out_dir)
  stages = [
      # With --bert_checkpoint the stage writes only the cut config.
      Stage("bert", "bert", paths["bert_config_cut"] if settings.bert_checkpoint
            else paths["bert"], False, {}),
  ]
  if substitute_tasks(settings):
    stages.append(Stage("long_tasks", "long_tasks", paths["long_tasks"], False, {}))
  for task in real_tasks(settings):
    stages.append(Stage("data_" + task, "task_data", task_data_dir(out_dir, task), False,
                        {"task": task}))
  residuals = etc_residuals(settings)
  if residuals and settings.pretrain_steps:
    stages.append(Stage("pretraining_data", "pretraining_data", paths["pretraining_data"],
                        False, {}))
  for ra in residuals:
    stages.append(Stage("lift_" + ra, "lift", lifted_dir(out_dir, ra), False,
                        {"residual_attention": ra}))
  if settings.pretrain_steps:
    for ra in residuals:
      stages.append(Stage("pretrain_" + ra, "pretrain", pretrained_dir(out_dir, ra), True,
                          {"residual_attention": ra}))
  for system, task, seed in finetune_order(settings):
    stages.append(Stage("finetune_" + run_name(system, task, seed), "finetune",
                        run_dir_of(out_dir, system, task, seed), True,
                        {"system": system, "task": task, "seed": seed}))
  return stages


def marker_path(out_dir, stage):
  return os.path.join(out_dir, STAGE_DIR, stage.name + ".json")


def stage_done(out_dir, stage):
  """The done marker: written (atomically) only after the stage's outputs were checked."""
  return os.path.exists(marker_path(out_dir, stage))


def stage_seconds(out_dir, stage):
  """Wall seconds of a finished stage (its marker), or None."""
  marker = reproduction.read_json(marker_path(out_dir, stage))
  return None if marker is None else marker.get("seconds")


def estimate_seconds_left(stages, seconds_of, parallel_runs=1):
  """Estimated wall seconds of the stages not done, from the measured ones.

  A stage not done takes the mean of the finished stages of its kind (fine-tuning: of the same
  system and task if any, else of the kind); a kind with none measured is left out. The
  fine-tuning runs left share parallel_runs at a time (each run's own wall time is what a
  marker holds).

  Args:
    stages: the plan.
    seconds_of: {stage name: seconds} of the finished stages.
    parallel_runs: fine-tuning runs at a time.

  Returns:
    (seconds, number of stages left, number of them without an estimate).
  """
  by_key = collections.defaultdict(list)
  for stage in stages:
    if stage.name in seconds_of and seconds_of[stage.name] is not None:
      by_key[stage.kind].append(seconds_of[stage.name])
      if stage.kind == "finetune":
        by_key[(stage.params["system"], stage.params["task"])].append(seconds_of[stage.name])
  total, finetune_total, finetune_left, left, unknown = 0.0, 0.0, 0, 0, 0
  for stage in stages:
    if stage.name in seconds_of:
      continue
    left += 1
    key = (stage.params["system"], stage.params["task"]) if stage.kind == "finetune" else None
    values = by_key.get(key) or by_key.get(stage.kind)
    if not values:
      unknown += 1
    elif stage.kind == "finetune":
      finetune_total += float(np.mean(values))
      finetune_left += 1
    else:
      total += float(np.mean(values))
  total += finetune_total / max(1, min(parallel_runs, finetune_left))
  return total, left, unknown


def progress_line(stages, seconds_of, parallel_runs=1):
  """"k/N stages done; M left, about T (U not yet measured)"; parallel_runs: fine-tuning runs
  at a time."""
  seconds, left, unknown = estimate_seconds_left(stages, seconds_of, parallel_runs)
  done = len(stages) - left
  text = "%d/%d stages done" % (done, len(stages))
  if left and unknown == left:
    text += "; %d left, time left unknown until one of a kind is measured" % left
  elif left:
    text += "; %d left, about %s" % (left, common.format_duration(seconds))
    if unknown:
      text += " + %d stage%s of a kind not yet measured" % (unknown, "s" * (unknown != 1))
  return text


def finished_seconds(stages, out_dir):
  """{name: seconds} of the stages with a done marker."""
  return {s.name: stage_seconds(out_dir, s) for s in stages if stage_done(out_dir, s)}


def plan_lines(settings, out_dir, parallel_runs=1):
  """The --dry_run listing: every stage, its state and the time left (parallel_runs:
  fine-tuning runs at a time)."""
  stages = stage_plan(settings, out_dir)
  seconds_of = finished_seconds(stages, out_dir)
  lines = ["Plan: %d stages; systems %s; tasks %s; seeds %s; L=%d G=%d; %d BERT layers" % (
      len(stages), ",".join(settings.systems), ",".join(settings.tasks),
      ",".join(map(str, settings.seeds)), settings.max_seq_length,
      settings.max_global_seq_length, settings.num_layers)]
  for stage in stages:
    if stage.name in seconds_of:
      state = "done (%s)" % common.format_duration(seconds_of[stage.name] or 0)
    elif os.path.exists(stage.output):
      state = "started" + (" (resumes)" if stage.resumable else " (redone)")
    else:
      state = "to run"
    lines.append("  %-40s %s" % (stage.name, state))
  lines.append(progress_line(stages, seconds_of, parallel_runs))
  return lines


# ---------------------------------------------------------------------------------------------
# The stages' commands.
# ---------------------------------------------------------------------------------------------


def long_task_args(settings, out_dir):
  """etc_model.create_long_tasks flags."""
  return ["--input_file=%s" % ",".join(settings.task_input_files),
          "--output_dir=%s" % paths_of(out_dir)["long_tasks"],
          "--vocab_file=%s" % os.path.join(bert_dir(settings, out_dir), "vocab.txt"),
          "--max_seq_length=%d" % settings.max_seq_length,
          "--max_global_seq_length=%d" % settings.max_global_seq_length,
          "--max_candidates=%d" % settings.max_candidates,
          "--min_context_tokens=%d" % settings.min_context_tokens,
          "--random_seed=%d" % settings.data_seed]


def task_data_args(settings, out_dir, task):
  """The data tool's flags (create_wikihop, ...): the official train and dev files at L and G,
  and the task's data_flags."""
  args = ["--%s_file=%s" % (split, path)
          for split, path in settings.real_task_files[task].items()]
  args += ["--output_dir=%s" % task_data_dir(out_dir, task),
           "--vocab_file=%s" % os.path.join(bert_dir(settings, out_dir), "vocab.txt"),
           "--max_seq_length=%d" % settings.max_seq_length,
           "--max_global_seq_length=%d" % settings.max_global_seq_length]
  return args + ["--%s=%s" % (flag, getattr(settings, field))
                 for flag, field in REAL_TASKS[task].data_flags]


def task_data_outputs(settings, out_dir, task):
  """The files a task's data stage leaves for fine-tuning (records of train and dev, summary)."""
  directory = task_data_dir(out_dir, task)
  if task in REAL_TASKS:
    return [os.path.join(directory, "%s_%s.tfrecord" % (task, split))
            for split in REAL_SPLITS] + [os.path.join(directory, REAL_TASKS[task].summary_name)]
  return [os.path.join(directory, "%s_%s.tfrecord" % (task, split))
          for split in ("train", "dev", "test")]


def pretraining_data_args(settings, out_dir):
  """etc_model.create_pretraining_data flags."""
  return ["--input_file=%s" % ",".join(settings.pretraining_input_files),
          "--output_file=%s" % paths_of(out_dir)["pretraining_data"],
          "--vocab_file=%s" % os.path.join(bert_dir(settings, out_dir), "vocab.txt"),
          "--max_seq_length=%d" % settings.max_seq_length,
          "--max_global_seq_length=%d" % settings.max_global_seq_length,
          "--max_predictions_per_seq=%d" % settings.max_predictions_per_seq,
          "--random_seed=%d" % settings.data_seed]


def lift_args(settings, out_dir, residual_attention):
  """etc_model.lift_bert_checkpoint flags: the same weights and seed for every system."""
  return ["--bert_checkpoint=%s" % bert_prefix(settings, out_dir),
          "--bert_config_file=%s" % paths_of(out_dir)["bert_config_cut"],
          "--output_dir=%s" % lifted_dir(out_dir, residual_attention),
          "--local_radius=%d" % settings.local_radius,
          "--residual_attention=%s" % residual_attention,
          "--seed=%d" % settings.data_seed, "--overwrite"]


def pretrain_args(settings, out_dir, residual_attention):
  """etc_model.run_pretraining flags: the same data, steps, batch and seed for every system."""
  lifted = lifted_dir(out_dir, residual_attention)
  return ["--etc_config_file=%s" % os.path.join(lifted, "etc_config.json"),
          "--init_checkpoint=%s" % os.path.join(lifted, "model.ckpt"),
          "--input_file=%s" % paths_of(out_dir)["pretraining_data"],
          "--output_dir=%s" % pretrained_dir(out_dir, residual_attention),
          "--do_train", "--residual_attention=%s" % residual_attention,
          "--max_seq_length=%d" % settings.max_seq_length,
          "--max_global_seq_length=%d" % settings.max_global_seq_length,
          "--max_predictions_per_seq=%d" % settings.max_predictions_per_seq,
          "--train_batch_size=%d" % settings.pretrain_batch_size,
          "--num_train_steps=%d" % settings.pretrain_steps,
          "--num_warmup_steps=%d" % (settings.pretrain_steps // 10),
          "--learning_rate=%g" % settings.pretrain_learning_rate,
          "--save_checkpoints_steps=%d" % settings.pretrain_steps,
          "--seed=%d" % settings.data_seed]


def etc_start_checkpoint(settings, out_dir, residual_attention):
  """The checkpoint ETC fine-tuning starts from: pre-trained, or lifted without pre-training."""
  if settings.pretrain_steps:
    return os.path.join(pretrained_dir(out_dir, residual_attention),
                        "model.ckpt-%d" % settings.pretrain_steps)
  return os.path.join(lifted_dir(out_dir, residual_attention), "model.ckpt")


def finetune_args(settings, out_dir, system, task, seed):
  """etc_model.run_long_tasks flags of one fine-tuning run."""
  _, model, residual_attention = SYSTEMS[system]
  args = ["--task=%s" % task, "--data_dir=%s" % task_data_dir(out_dir, task),
          "--output_dir=%s" % run_dir_of(out_dir, system, task, seed),
          "--max_seq_length=%d" % settings.max_seq_length,
          "--max_global_seq_length=%d" % settings.max_global_seq_length,
          "--max_candidates=%d" % settings.max_candidates,
          "--do_train", "--do_eval"] + ([] if task in REAL_TASKS else ["--do_predict"]) + [
          "--num_train_steps=%d" % settings.finetune_steps,
          "--train_batch_size=%d" % settings.finetune_batch_size,
          "--learning_rate=%g" % settings.finetune_learning_rate,
          "--eval_every_steps=%d" % settings.eval_every_steps, "--keep_best",
          "--predict_batch_size=%d" % settings.predict_batch_size,
          "--seed=%d" % seed]
  if model == "etc":
    args += ["--etc_config_file=%s" % os.path.join(lifted_dir(out_dir, residual_attention),
                                                   "etc_config.json"),
             "--residual_attention=%s" % residual_attention,
             "--init_checkpoint=%s" % etc_start_checkpoint(settings, out_dir,
                                                           residual_attention)]
    if task in settings.hard_g2l_tasks:
      args.append("--use_hard_g2l_mask")
  else:
    args += ["--model=bert_windows",
             "--bert_config_file=%s" % paths_of(out_dir)["bert_config_cut"],
             "--init_checkpoint=%s" % bert_prefix(settings, out_dir),
             "--window_length=%d" % settings.window_length,
             "--window_stride=%d" % settings.window_stride]
  return args


def write_cut_config(settings, out_dir):
  """bert/bert_config_cut.json: the BERT config with its first --num_layers layers."""
  source = os.path.join(bert_dir(settings, out_dir), "bert_config.json")
  config = reproduction.read_json(source)
  layers = config["num_hidden_layers"]
  if settings.num_layers > layers:
    common.fail("--num_layers=%d: the BERT (%s) has %d layers" % (
        settings.num_layers, reproduction.display_path(source), layers))
  config["num_hidden_layers"] = settings.num_layers or layers
  os.makedirs(paths_of(out_dir)["bert"], exist_ok=True)
  common.write_json_atomic(paths_of(out_dir)["bert_config_cut"], config)


def check_stage_outputs(settings, out_dir, stage):
  """Fails when a stage's tool exited 0 without the outputs the next stages read."""
  if stage.kind == "bert":
    needed = [paths_of(out_dir)["bert_config_cut"], bert_prefix(settings, out_dir) + ".index"]
  elif stage.kind == "long_tasks":
    needed = [path for task in substitute_tasks(settings)
              for path in task_data_outputs(settings, out_dir, task)]
  elif stage.kind == "task_data":
    needed = task_data_outputs(settings, out_dir, stage.params["task"])
  elif stage.kind == "pretraining_data":
    needed = [stage.output]
  elif stage.kind == "lift":
    needed = [os.path.join(stage.output, name) for name in ("etc_config.json",
                                                            "model.ckpt.index")]
  elif stage.kind == "pretrain":
    needed = [etc_start_checkpoint(settings, out_dir, stage.params["residual_attention"]) +
              ".index"]
  elif stage.params["task"] in REAL_TASKS:  # no public test answers: dev only
    needed = [os.path.join(stage.output, EVAL_RESULTS)]
  else:
    needed = [os.path.join(stage.output, name) for name in (EVAL_RESULTS, TEST_RESULTS)]
  missing = [p for p in needed if not os.path.exists(p)]
  if missing:
    common.fail("stage %s exited 0 without %s; rerun to redo it" % (
        stage.name, reproduction.display_path(missing[0], output_dir=out_dir)))


def run_stage(runner, settings, out_dir, stage):
  """Runs one stage's tool(s) (a non-resumable stage's earlier partial output removed first)."""
  if not stage.resumable and os.path.exists(stage.output):
    if os.path.isdir(stage.output):
      shutil.rmtree(stage.output)
    else:
      os.remove(stage.output)
  if stage.kind == "bert":
    if not settings.bert_checkpoint:
      runner.run("bert", "convert_hf_checkpoint.py", [
          "--hf_dir=%s" % settings.hf_dir, "--output_dir=%s" % stage.output, "--overwrite"])
    write_cut_config(settings, out_dir)
  elif stage.kind == "long_tasks":
    runner.run(stage.name, "etc_model/create_long_tasks.py", long_task_args(settings, out_dir))
  elif stage.kind == "task_data":
    task = stage.params["task"]
    runner.run(stage.name, REAL_TASKS[task].data_tool, task_data_args(settings, out_dir, task))
  elif stage.kind == "pretraining_data":
    os.makedirs(os.path.dirname(stage.output), exist_ok=True)
    runner.run(stage.name, "etc_model/create_pretraining_data.py",
               pretraining_data_args(settings, out_dir))
  elif stage.kind == "lift":
    runner.run(stage.name, "etc_model/lift_bert_checkpoint.py",
               lift_args(settings, out_dir, stage.params["residual_attention"]))
  elif stage.kind == "pretrain":
    runner.run(stage.name, "etc_model/run_pretraining.py",
               pretrain_args(settings, out_dir, stage.params["residual_attention"]))
  else:
    runner.run(stage.name, "etc_model/run_long_tasks.py", finetune_args(
        settings, out_dir, stage.params["system"], stage.params["task"],
        stage.params["seed"]))


def _log(message):
  sys.stderr.write("reproduce_table8: %s\n" % message)
  sys.stderr.flush()


def run_all(settings, out_dir, runner, run_fn=run_stage, report_fn=None, parallel_runs=1):
  """Runs every stage not done, in order; writes each done marker after checking outputs.

  The fine-tuning runs are independent of one another: with parallel_runs > 1 that many run at
  a time (the stages before them one at a time). A failed or stopped run starts no further
  one; the runs already going are waited for and each one that finishes is kept (its marker;
  reproduction.run_in_parallel).

  Args:
    settings: Settings.
    out_dir: --output_dir.
    runner: reproduction.Runner (logs in <output_dir>/logs).
    run_fn: run_stage (tests pass a stub with the same arguments).
    report_fn: called after each newly finished fine-tuning run (the partial report).
    parallel_runs: fine-tuning runs at a time (--parallel_runs).

  Returns:
    The names of the stages run now, in the order they finished.
  """
  stages = stage_plan(settings, out_dir)
  seconds_of = finished_seconds(stages, out_dir)
  todo = [stage for stage in stages if stage.name not in seconds_of]
  # Guards seconds_of and the progress lines across the runs' threads.
  log_lock = threading.Lock()

  def run_one(stage):
    common.STOP_SIGNALS.exit_if_stopped(reproduction.RESUME_MESSAGE)
    with log_lock:
      _log("stage %s (%s)" % (stage.name, progress_line(stages, seconds_of, parallel_runs)))
    start = time.time()
    run_fn(runner, settings, out_dir, stage)
    common.STOP_SIGNALS.exit_if_stopped(reproduction.RESUME_MESSAGE)
    check_stage_outputs(settings, out_dir, stage)
    return round(time.time() - start, 1)

  def finish(stage, seconds):
    os.makedirs(os.path.join(out_dir, STAGE_DIR), exist_ok=True)
    common.write_json_atomic(marker_path(out_dir, stage), {"seconds": seconds,
                                                           "finished": time.time()})
    with log_lock:
      seconds_of[stage.name] = seconds
      _log("stage %s done in %s; %s" % (stage.name, common.format_duration(seconds),
                                        progress_line(stages, seconds_of, parallel_runs)))
    ran.append(stage.name)
    if stage.kind == "finetune" and report_fn is not None:
      report_fn()

  ran = []
  for group in _stage_groups(todo):
    reproduction.run_in_parallel(group, run_one, parallel_runs, on_done=finish)
  return ran


def _stage_groups(stages):
  """The stages in order as [[stage]]: each consecutive run of fine-tuning stages one group
  (they may run together), every other stage a group of its own."""
  groups = []
  for stage in stages:
    if groups and stage.kind == "finetune" and groups[-1][-1].kind == "finetune":
      groups[-1].append(stage)
    else:
      groups.append([stage])
  return groups


# ---------------------------------------------------------------------------------------------
# Results: the best median.
# ---------------------------------------------------------------------------------------------


def median(values):
  """The median of the values that are not None (None when there are none)."""
  values = [v for v in values if v is not None]
  return float(np.median(values)) if values else None


def collect_results(settings, out_dir):
  """{(system, task): OrderedDict {seed: {"dev": eval_results, "test": test_results}}} of the
  finished fine-tuning runs (a run whose stage marker is missing is left out)."""
  results = collections.OrderedDict()
  for system, task, seed in finetune_order(settings):
    stage = Stage("finetune_" + run_name(system, task, seed), "finetune", None, True, {})
    per_seed = results.setdefault((system, task), collections.OrderedDict())
    if not stage_done(out_dir, stage):
      continue
    run_dir = run_dir_of(out_dir, system, task, seed)
    per_seed[seed] = {"dev": reproduction.read_json(os.path.join(run_dir, EVAL_RESULTS)) or {},
                      "test": reproduction.read_json(os.path.join(run_dir, TEST_RESULTS)) or {}}
  return results


def best_median(per_seed, metric, split="dev"):
  """The paper's "best median": the median over seeds of each seed's dev-selected result.

  Each seed's result is already the dev-selected one (run_long_tasks --keep_best scores the
  checkpoint with the best dev metric); `split` "test" gives the median of those checkpoints'
  test figures (under the metric's test key, TEST_METRIC_KEYS).

  Args:
    per_seed: {seed: {"dev": results dict, "test": results dict}}.
    metric: a key of the dev results ("accuracy", "f1", "distance_0-127_accuracy", ...).
    split: "dev" or "test".

  Returns:
    (median or None, [(seed, value or None)] in seed order).
  """
  if split == "test":
    metric = TEST_METRIC_KEYS.get(metric, metric)
  pairs = [(seed, (r.get(split) or {}).get(metric)) for seed, r in per_seed.items()]
  return median([v for _, v in pairs]), pairs


def distance_buckets(results):
  """The cloze distance buckets present in any result, in order ("0-127", "128-511", ...)."""
  found = set()
  for per_seed in results.values():
    for r in per_seed.values():
      for split in ("dev", "test"):
        for key in (r.get(split) or {}):
          if key.startswith("distance_") and key.endswith("_examples"):
            found.add(key[len("distance_"):-len("_examples")])
  return sorted(found, key=lambda b: int(b.split("-")[0].rstrip("+")))


# ---------------------------------------------------------------------------------------------
# The report.
# ---------------------------------------------------------------------------------------------


def _pct(x):
  return "n/a" if x is None else "%.1f" % (100.0 * x)


def _seeds_cell(pairs):
  return ", ".join("s%d %s" % (seed, _pct(v)) for seed, v in pairs) or "n/a"


def _label(system):
  return SYSTEMS[system][0]


def _main_table(settings, results):
  lines = [
      "## Results: median over seeds of the dev-selected run (the paper's best median)\n",
      "Each run keeps its best dev checkpoint (dev scored every %d of %d steps, "
      "`--keep_best`); its dev and test figures are that checkpoint's (@ the step selected). "
      "The median is over the finished seeds; every seed follows. Percent.\n" % (
          settings.eval_every_steps, settings.finetune_steps),
      "| system | task | metric | dev median | dev per seed | test median | test per seed |"
      " seeds |",
      "|---|---|---|---|---|---|---|---|",
  ]
  for task in settings.tasks:
    for system in settings.systems:
      per_seed = results.get((system, task)) or {}
      for metric, label in TASK_METRICS[task]:
        dev, dev_pairs = best_median(per_seed, metric, "dev")
        test, test_pairs = best_median(per_seed, metric, "test")
        steps = {seed: r["dev"].get("best_step") for seed, r in per_seed.items()}
        dev_cell = ", ".join("s%d %s%s" % (seed, _pct(v), "" if steps.get(seed) is None else
                                           " @%d" % steps[seed])
                             for seed, v in dev_pairs) or "n/a"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %d/%d |" % (
            _label(system), task, label, _pct(dev), dev_cell, _pct(test),
            _seeds_cell(test_pairs), len(per_seed), len(settings.seeds)))
  lines.append("")
  if real_tasks(settings):
    lines.append("%s: the official scorer's figures over every dev example (an example "
                 "without a record counts as wrong); no test figures (the official test "
                 "answers are hidden).\n" % ", ".join(REAL_TASKS[t].label
                                                     for t in real_tasks(settings)))
  return lines


def supporting_all_inserted(path):
  """Supporting metrics of predicting every sentence inserted, from a TFRecord of the task.

  Args:
    path: <task data>/supporting_<split>.tfrecord.

  Returns:
    long_task_heads.supporting_metrics of that prediction and random_r_precision (the
    R-precision a random order of the sentences scores on average), or None when the file is
    missing.
  """
  if not os.path.exists(path):
    return None
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from etc_model import long_task_heads  # pylint: disable=g-import-not-at-top
  labels, global_ids = [], []
  for record in tf.compat.v1.io.tf_record_iterator(path):
    example = tf.train.Example.FromString(record)
    labels.append(list(example.features.feature["sentence_labels"].int64_list.value))
    global_ids.append(list(example.features.feature["global_token_ids"].int64_list.value))
  if not labels:
    return None
  labels, global_ids = np.array(labels), np.array(global_ids)
  metrics = long_task_heads.supporting_metrics(np.ones(np.shape(labels)), labels, global_ids)
  # A random order's expected R-precision: per example, its inserted share.
  real = (global_ids > 0).sum(axis=1)
  inserted = ((labels > 0) & (global_ids > 0)).sum(axis=1)
  shares = inserted[inserted > 0] / real[inserted > 0].astype(np.float64)
  metrics["random_r_precision"] = float(shares.mean()) if len(shares) else None
  return metrics


def _baseline_lines(settings, results, out_dir=None):
  lines = ["## Baselines\n"]
  if "cloze" in settings.tasks:
    any_run = next((r for (s, t), per in results.items() if t == "cloze"
                    for r in per.values()), None)
    if any_run:
      lines += ["| cloze baseline | dev | test |", "|---|---|---|"]
      for key, label in (("most_frequent_accuracy", "most frequent candidate"),
                         ("most_recent_accuracy", "most recent candidate")):
        lines.append("| %s | %s | %s |" % (label, _pct(any_run["dev"].get(key)),
                                           _pct(any_run["test"].get(key))))
      lines.append("")
      lines.append("Cloze examples: dev %s, test %s.\n" % (any_run["dev"].get("examples"),
                                                         any_run["test"].get("examples")))
  if "supporting" in settings.tasks:
    any_run = next((r for (s, t), per in results.items() if t == "supporting"
                    for r in per.values()), None)
    if any_run:
      lines.append("Supporting sentences: %s dev / %s test examples; %s%% of the dev "
                   "sentences are inserted (predicting none gives F1 0, sentence accuracy "
                   "%s%%).\n" % (any_run["dev"].get("examples"), any_run["test"].get("examples"),
                                 _pct(any_run["dev"].get("inserted_share")),
                                 _pct(None if any_run["dev"].get("inserted_share") is None
                                      else 1 - any_run["dev"]["inserted_share"])))
      every = [supporting_all_inserted(os.path.join(paths_of(out_dir)["long_tasks"],
                                                    "supporting_%s.tfrecord" % split))
               if out_dir else None for split in ("dev", "test")]
      if all(every):
        lines.append("Predicting every sentence inserted: sentence F1 %s dev / %s test, exact "
                     "match %s / %s (a per-example F1 rewards recall: exact match and "
                     "sentence accuracy show what a model learnt beyond it). A random order "
                     "of the sentences: R-precision %s dev / %s test.\n" % (
                         _pct(every[0]["f1"]), _pct(every[1]["f1"]),
                         _pct(every[0]["exact_match"]), _pct(every[1]["exact_match"]),
                         _pct(every[0]["random_r_precision"]),
                         _pct(every[1]["random_r_precision"])))
  if "classify" in settings.tasks:
    lines += _classify_baseline_lines(out_dir)
  for task in real_tasks(settings):
    lines += _task_data_lines(task, out_dir)
  if len(lines) == 1:
    lines.append("_No finished run yet._\n")
  return lines


def _classify_baseline_lines(out_dir):
  """The classification task's labels and majority baseline (create_long_tasks' summary)."""
  summary = reproduction.read_json(os.path.join(
      paths_of(out_dir)["long_tasks"], LONG_TASKS_SUMMARY)) if out_dir else None
  baselines = (summary or {}).get("classify_baselines")
  if not baselines or not all(split in baselines for split in ("train", "dev", "test")):
    return []
  return ["Classification by %s: %d labels; %s train / %s dev / %s test examples; always the "
          "train split's most frequent label (%s) scores %s%% dev / %s%% test.\n" % (
              summary.get("classify_label", "book"), len(summary.get("classify_labels") or []),
              baselines["train"]["examples"], baselines["dev"]["examples"],
              baselines["test"]["examples"], baselines["train"]["majority_label"],
              _pct(baselines["dev"]["majority_accuracy"]),
              _pct(baselines["test"]["majority_accuracy"]))]


def _task_data_lines(task, out_dir):
  """What the data stage of one of the paper's tasks kept, split by split (the task's data_line:
  examples, records, what has no record and is counted wrong by the official scorer, cuts)."""
  summary = reproduction.read_json(os.path.join(
      task_data_dir(out_dir, task), REAL_TASKS[task].summary_name)) if out_dir else None
  if not summary:
    return []
  return [REAL_TASKS[task].data_line(REAL_TASKS[task].label, split, stats) + ".\n"
          for split, stats in (summary.get("splits") or {}).items()]


def _distance_lines(settings, results):
  if "cloze" not in settings.tasks:
    return []
  cloze = collections.OrderedDict((s, results.get((s, "cloze")) or {}) for s in settings.systems)
  buckets = distance_buckets(cloze)
  lines = ["## Cloze accuracy by distance to the answer's last mention (test, median over "
           "seeds)\n"]
  if not buckets:
    return lines + ["_No finished cloze run yet._\n"]
  lines += ["| | " + " | ".join("%s pieces" % b for b in buckets) + " |",
            "|---|" + "---|" * len(buckets)]
  any_run = next((r for per in cloze.values() for r in per.values()), None)
  lines.append("| test examples | " + " | ".join(
      str(any_run["test"].get("distance_%s_examples" % b, "n/a")) for b in buckets) + " |")
  for system, per_seed in cloze.items():
    cells = []
    for b in buckets:
      value, pairs = best_median(per_seed, "distance_%s_accuracy" % b, "test")
      cells.append("%s (%s)" % (_pct(value), ", ".join(_pct(v) for _, v in pairs))
                   if pairs else "n/a")
    lines.append("| %s | %s |" % (_label(system), " | ".join(cells)))
  for key, label in (("most_frequent_accuracy", "most frequent"),
                     ("most_recent_accuracy", "most recent")):
    lines.append("| baseline: %s | %s |" % (label, " | ".join(
        _pct(any_run["test"].get("distance_%s_%s" % (b, key))) for b in buckets)))
  return lines + ["", "Per system: median over seeds (each seed's value in brackets).\n"]


def difference_lines(settings, results):
  """sum - none per task: the difference of the medians beside the seeds' spread."""
  lines = ["## ETC + residual attention (sum) − ETC, against the seeds' spread\n"]
  if not {"etc_none", "etc_sum"} <= set(settings.systems):
    return lines + ["_Not measured: --systems lacks etc_none or etc_sum._\n"]
  lines += ["| task | metric | split | median sum − median none | paired by seed | std over "
            "seeds (none / sum) |", "|---|---|---|---|---|---|"]
  for task in settings.tasks:
    metrics = ([m for m in TASK_METRICS[task] if (task, m[0]) in PAPER_METRICS.values()]
               if task in REAL_TASKS else TASK_METRICS[task][:1] + [
                   m for m in TASK_METRICS[task] if m[0] in SPREAD_METRICS.get(task, ())])
    for metric, label in metrics:
      for split in ("dev",) if task in REAL_TASKS else ("dev", "test"):
        none_med, none_pairs = best_median(results.get(("etc_none", task)) or {}, metric, split)
        sum_med, sum_pairs = best_median(results.get(("etc_sum", task)) or {}, metric, split)
        a, b = dict(sum_pairs), dict(none_pairs)
        paired = ["s%d %s" % (s, _points(a[s] - b[s])) for s in a
                  if s in b and a[s] is not None and b[s] is not None]
        stds = [reproduction.mean_std([v for _, v in pairs])[1]
                for pairs in (none_pairs, sum_pairs)]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            task, label, split,
            "n/a" if none_med is None or sum_med is None else _points(sum_med - none_med),
            ", ".join(paired) or "n/a",
            " / ".join("n/a" if s is None else "%.1f" % (100 * s) for s in stds)))
  return lines + [""]


def _points(difference, digits=1):
  """A difference of fractions in signed percentage points, "+1.2" ("+0.0", never "-0.0")."""
  return "%+.*f" % (digits, round(100 * difference, digits) + 0.0)


# The loss of a training step in a tool's log: the Estimator's "Loss for final step: 6.49." (TF
# 2.15) and the TF2 engine's "loss = 6.4912, step = 100" (TF >= 2.16, tf2_training.Engine).
ESTIMATOR_FINAL_LOSS = re.compile(r"Loss for final step: (\S+?)\.?$")
ENGINE_STEP_LOSS = re.compile(r"\bloss = (\S+), step = (\d+)$")


def final_loss(log_path, final_step):
  """The training loss at the last step from a tool's log, or None.

  Args:
    log_path: the log of a training process (run on either engine).
    final_step: the step the training ends at (the engine logs the loss of that step).

  Returns:
    The last "Loss for final step" of the Estimator, else the engine's loss logged at
    final_step; None when the log has neither.
  """
  if not os.path.exists(log_path):
    return None
  found = {}
  with open(log_path, errors="replace") as f:
    for line in f:
      line = line.rstrip()
      estimator = ESTIMATOR_FINAL_LOSS.search(line)
      engine = ENGINE_STEP_LOSS.search(line)
      try:
        if estimator:
          found["estimator"] = float(estimator.group(1))
        elif engine and int(engine.group(2)) == final_step:
          found["engine"] = float(engine.group(1))
      except ValueError:
        pass
  return found.get("estimator", found.get("engine"))


def _pretrain_lines(settings, out_dir):
  residuals = etc_residuals(settings)
  if not settings.pretrain_steps or not residuals:
    return []
  lines = ["## Long-document pre-training\n",
           "| ETC | steps | masked-LM loss at the last step (one batch) | steady steps/s |",
           "|---|---|---|---|"]
  for ra in residuals:
    summary = reproduction.read_json(os.path.join(pretrained_dir(out_dir, ra),
                                     "train_summary_local.json")) or {}
    loss = final_loss(os.path.join(out_dir, "logs", "pretrain_%s.log" % ra),
                      settings.pretrain_steps)
    lines.append("| residual attention %s | %s | %s | %s |" % (
        ra, summary.get("global_step", "not done"), "n/a" if loss is None else "%.3f" % loss,
        summary.get("steady_steps_per_sec", "n/a")))
  return lines + [""]


def _time_lines(settings, out_dir):
  stages = stage_plan(settings, out_dir)
  seconds_of = finished_seconds(stages, out_dir)
  lines = ["## Run times\n", "Wall seconds of each stage (the machine's other load included).\n",
           "| stage | wall time |", "|---|---|"]
  finetune = collections.defaultdict(list)
  for stage in stages:
    if stage.kind == "finetune":
      if stage.name in seconds_of:
        finetune[stage.params["system"], stage.params["task"]].append(seconds_of[stage.name])
      continue
    lines.append("| %s | %s |" % (stage.name, "not done" if stage.name not in seconds_of
                                  else common.format_duration(seconds_of[stage.name] or 0)))
  for (system, task), secs in finetune.items():
    lines.append("| fine-tuning %s, %s (per seed) | %s |" % (
        _label(system), task, ", ".join(common.format_duration(s or 0) for s in secs)))
  total = sum(s or 0 for s in seconds_of.values())
  lines.append("| **all finished stages** | **%s** |" % common.format_duration(total))
  return lines + ["", progress_line(stages, seconds_of) + ".\n"]


# The settings table's words for a data flag of the paper's tasks (the seed is not shown).
DATA_FLAG_WORDS = {"max_candidates": "at most %d candidates",
                   "doc_stride": "windows %d pieces apart",
                   "max_question_length": "questions of at most %d pieces"}


def _task_descriptions(settings):
  """The settings table's description of each kind of task of the run."""
  texts = []
  if substitute_tasks(settings):
    # Of the corpus tasks only the cloze has candidates (--max_candidates).
    candidates = (", " + DATA_FLAG_WORDS["max_candidates"] % settings.max_candidates
                  if "cloze" in settings.tasks else "")
    texts.append("%s from %s: L=%d, G=%d%s, contexts >= %d pieces" % (
        ", ".join(substitute_tasks(settings)), ", ".join(
            reproduction.display_path(p, "task_input_file") for p in settings.task_input_files),
        settings.max_seq_length, settings.max_global_seq_length, candidates,
        settings.min_context_tokens))
  for task in real_tasks(settings):
    texts.append("%s from the official %s: L=%d, G=%d%s" % (
        REAL_TASKS[task].label, ", ".join(
            "%s %s" % (split, file_names(path))
            for split, path in settings.real_task_files[task].items()),
        settings.max_seq_length, settings.max_global_seq_length, "".join(
            ", " + DATA_FLAG_WORDS[flag] % getattr(settings, field)
            for flag, field in REAL_TASKS[task].data_flags if flag in DATA_FLAG_WORDS)))
  return texts


def _settings_lines(settings, out_dir):
  bert_config = reproduction.read_json(paths_of(out_dir)["bert_config_cut"]) or {}
  rows = [
      ("BERT", "%s, first %s of its layers (hidden %s, %s heads)" % (
          reproduction.display_path(settings.bert_checkpoint or settings.hf_dir,
                                    "bert_checkpoint" if settings.bert_checkpoint else "hf_dir"),
          bert_config.get("num_hidden_layers", "?"), bert_config.get("hidden_size", "?"),
          bert_config.get("num_attention_heads", "?"))),
      ("tasks", "; ".join(_task_descriptions(settings))),
      ("ETC", "lifted from the same BERT weights (seed %d), local_radius %d; residual "
              "attention %s; hard g2l mask on %s" % (
                  settings.data_seed, settings.local_radius,
                  " / ".join(etc_residuals(settings)) or "n/a",
                  ", ".join(settings.hard_g2l_tasks) or "no task")),
      ("pre-training", "none" if not settings.pretrain_steps else
       "%d steps of batch %d, LR %g, %d masked positions per record, on %s (the same for "
       "each ETC system)" % (settings.pretrain_steps, settings.pretrain_batch_size,
                             settings.pretrain_learning_rate, settings.max_predictions_per_seq,
                             ", ".join(reproduction.display_path(p, "pretraining_input_file")
                                       for p in settings.pretraining_input_files))),
      ("BERT baseline", "windows of %d tokens, stride %d, from the BERT weights (no "
                        "long-document pre-training)" % (settings.window_length,
                                                         settings.window_stride)),
      ("fine-tuning", "%d steps of batch %d, LR %g, dev every %d steps, best checkpoint kept; "
                      "seeds %s" % (settings.finetune_steps, settings.finetune_batch_size,
                                    settings.finetune_learning_rate, settings.eval_every_steps,
                                    ", ".join(map(str, settings.seeds)))),
  ]
  lines = ["## Settings\n", "| setting | value |", "|---|---|"]
  return lines + ["| %s | %s |" % row for row in rows] + [""]


def _paper_lines(settings, results):
  """The paper's Table 8 beside ours (dev medians over seeds) for the same task and metric."""
  lines = ["## The paper's Table 8 beside ours (dev; ETC without / with residual attention)\n",
           "| task | paper: ETC | paper: + residual attention | paper: sum − none | ours: ETC "
           "| ours: + residual attention | ours: sum − none | ours: seeds |",
           "|---|---|---|---|---|---|---|---|"]
  for name, paper_none, paper_sum in PAPER_TABLE8:
    task, metric = PAPER_METRICS.get(name, (None, None))
    ours = [best_median(results.get((system, task)) or {}, metric, "dev")
            for system in ("etc_none", "etc_sum")] if task in settings.tasks else []
    if ours and any(pairs for _, pairs in ours):
      (none_med, none_pairs), (sum_med, sum_pairs) = ours
      cells = [_pct_points(none_med), _pct_points(sum_med),
               "n/a" if none_med is None or sum_med is None else _points(
                   sum_med - none_med, digits=2),
               "%d / %d" % (len(none_pairs), len(sum_pairs))]
    else:
      cells = ["not run"] * 3 + ["0"]
    lines.append("| %s | %.2f | %.2f | %+.2f | %s |" % (
        name, paper_none, paper_sum, paper_sum - paper_none, " | ".join(cells)))
  return lines + ["", "The paper: ETC-Large lifted from RoBERTa, 4,096 long tokens, real "
                  "long-document pre-training, five fine-tuning seeds, the best median. Ours: "
                  "the settings above; compare directions against the seeds' spread, not "
                  "values.\n"]


def _pct_points(x):
  return "n/a" if x is None else "%.2f" % (100.0 * x)


def report_text(settings, out_dir, results=None):
  """The markdown report (no path of this machine)."""
  results = results if results is not None else collect_results(settings, out_dir)
  done = sum(len(per) for per in results.values())
  total = len(finetune_order(settings))
  header = ["# Reproducing Table 8 (long inputs, ETC) at CPU scale\n",
            "Written by `paper/reproduce_table8.py` from `<output_dir>/runs/<system>_<task>_"
            "seed<seed>/` (eval_results.json, test_results.json) and the stage markers.\n"]
  if done == total:
    header.append("All %d fine-tuning runs finished.\n" % total)
  else:
    header.append("**Partial report: %d of %d fine-tuning runs finished.** Medians are over "
                  "the finished seeds; rerun the same command to resume.\n" % (done, total))
  lines = (header + _main_table(settings, results) + _baseline_lines(settings, results, out_dir) +
           _distance_lines(settings, results) + difference_lines(settings, results) +
           _pretrain_lines(settings, out_dir) + _time_lines(settings, out_dir) +
           _settings_lines(settings, out_dir) + _paper_lines(settings, results))
  return reproduction.portable_text("\n".join(lines) + "\n", out_dir)


def write_report(settings, out_dir):
  """Writes <output_dir>/report.md atomically; returns its path."""
  path = os.path.join(out_dir, REPORT_NAME)
  text = report_text(settings, out_dir)
  with common.atomic_output(path) as f:
    f.write(text)
  return path


# ---------------------------------------------------------------------------------------------
# Main.
# ---------------------------------------------------------------------------------------------


def main(_):
  if not FLAGS.output_dir:
    common.fail("--output_dir is required")
  if FLAGS.dry_run and FLAGS.report_only:
    common.fail("--dry_run and --report_only: give one of them")
  if FLAGS.parallel_runs < 1:
    common.fail("--parallel_runs=%d: must be >= 1" % FLAGS.parallel_runs)
  settings = settings_from_flags()
  out_dir = os.path.abspath(FLAGS.output_dir)
  common.check_output_dir(out_dir)
  if FLAGS.dry_run:  # reads, writes nothing: no lock
    check_record(out_dir, settings, write=False)
    print("\n".join(plan_lines(settings, out_dir, FLAGS.parallel_runs)))
    return
  # The lock before anything is read or written there (the record, the report, a stage).
  common.OutputDirLock(out_dir, "output_dir", label=LOCK_LABEL).acquire()
  if FLAGS.report_only:
    check_record(out_dir, settings, write=False)
    print("Wrote %s" % write_report(settings, out_dir))
    return
  subprocess_utils.install_signal_forwarding()
  check_record(out_dir, settings, write=True)
  print("\n".join(plan_lines(settings, out_dir, FLAGS.parallel_runs)))
  sys.stdout.flush()
  runner = reproduction.Runner(os.path.join(out_dir, "logs"))
  run_all(settings, out_dir, runner, report_fn=lambda: write_report(settings, out_dir),
          parallel_runs=FLAGS.parallel_runs)
  common.STOP_SIGNALS.exit_if_stopped(reproduction.RESUME_MESSAGE)
  print("Wrote %s" % write_report(settings, out_dir))


if __name__ == "__main__":
  define_flags()
  app.run(lambda argv: common.run_main(main, argv), flags_parser=common.flags_parser(FLAGS))
