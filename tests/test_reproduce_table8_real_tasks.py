"""Tests for paper/reproduce_table8.py on the paper's own tasks (WikiHop, HotpotQA, Natural
Questions, OpenKP) from their official files: the plan, the checks, the record, the report
(stages stubbed), and tiny runs of the real tools on official-format files
(tests/fixtures/wikihop, the NQ and OpenKP files of tests/test_etc_nq.py and
tests/test_etc_openkp.py)."""

import json
import os
import re
import shutil

import pytest

from conftest import REPO_DIR, TINY_BERT_CONFIG, last_error_line, run_tool
from conftest import write_random_bert_checkpoint
from realformer_tf import common
from paper import reproduce_table8 as rt8
from test_etc_reproduce_table8 import MACHINE_PATH, StubStages, _settings, _touch, _write_json

FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "wikihop")
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")


def _real_settings(tmp_path, tasks=("wikihop",), **overrides):
  """Settings of a run of the paper's tasks, their official files in tmp_path/<task>/."""
  files = {}
  for task in tasks:
    files[task] = {}
    for split in rt8.REAL_SPLITS:
      path = tmp_path / task / ("%s.json" % split)
      if not path.exists():
        os.makedirs(str(path.parent), exist_ok=True)
        path.write_text("[]")
      files[task][split] = str(path)
  os.makedirs(str(tmp_path / "hf"), exist_ok=True)
  (tmp_path / "plays.txt").write_text("To be.\n")
  values = dict(tasks=list(tasks), seeds=[1, 2, 3, 4, 5], real_task_files=files,
                nq_doc_stride=128 if "nq" in tasks else None)
  values.update(overrides)
  return _settings(tmp_path, **values)


# Dev metrics per (system, seed) of the stub: sum above none on seeds 1, 2, 4.
REAL_SCORES = {"etc_none": [0.40, 0.42, 0.50, 0.38, 0.45],
               "etc_sum": [0.44, 0.43, 0.47, 0.40, 0.45],
               "bert_windows": [0.30, 0.31, 0.29, 0.33, 0.28]}


# The dev counts of the stub's data stages (the data tools' summaries, nq.json and openkp.json
# in their own form).
STUB_DATA_COUNTS = {
    "wikihop": {"examples": 10, "records": 9, "skipped": {"more_candidates": 1},
                "most_mentioned_accuracy": 0.3},
    "nq": {"examples": 4, "windows": 9, "records": 9, "null_windows_dropped": 0,
           "question_pieces_cut": 2, "candidates_without_global_token": 0,
           "answers_without_pieces": 1, "answer_types": {"null": 1, "yes": 0, "no": 0,
                                                         "long": 1, "short": 2},
           "mean_document_pieces": 700.5, "max_document_pieces": 1200},
    "openkp": {"documents": 5, "records": 4, "cut_by_global_length": 2,
               "cut_by_long_length": 0, "words_cut": 30, "key_phrases_not_in_input": 3,
               "without_pieces": 1, "duplicate_urls": 0}}


class RealStubStages(StubStages):
  """StubStages with the files of the paper's tasks' data and fine-tuning stages."""

  def __call__(self, runner, settings, out_dir, stage):
    if stage.kind == "task_data":
      self.calls.append(stage.name)
      task = stage.params["task"]
      for path in rt8.task_data_outputs(settings, out_dir, task)[:-1]:
        _touch(path)
      _write_json(rt8.task_data_outputs(settings, out_dir, task)[-1],
                  {"splits": {"dev": STUB_DATA_COUNTS.get(task, STUB_DATA_COUNTS["wikihop"])}})
    elif stage.kind == "finetune" and stage.params["task"] in rt8.REAL_TASKS:
      self.calls.append(stage.name)
      system, task, seed = (stage.params[k] for k in ("system", "task", "seed"))
      value = REAL_SCORES[system][seed - 1]
      _write_json(os.path.join(stage.output, rt8.EVAL_RESULTS),
                  {"accuracy": value, "joint_f1": value, "f1": value + 0.2,
                   "sp_f1": value + 0.3, "long-best-threshold-f1": value + 0.1,
                   "short-best-threshold-f1": value - 0.1, "F1@3": value - 0.2,
                   "F1@1": value - 0.3, "F1@5": value - 0.25, "best_step": 2})
    else:
      super(RealStubStages, self).__call__(runner, settings, out_dir, stage)


def test_defaults_follow_the_files_given():
  assert rt8.default_tasks({}) == ["supporting", "classify"]   # the cloze: --tasks only
  assert rt8.default_tasks({"hotpotqa": {}, "wikihop": {}}) == ["wikihop", "hotpotqa"]
  # The paper's protocol: five fine-tuning seeds per setting.
  assert rt8.default_seeds(["wikihop"]) == "1,2,3,4,5"
  assert rt8.default_seeds(["cloze", "hotpotqa"]) == "1,2,3,4,5"
  assert rt8.default_seeds(["cloze", "supporting"]) == "1,2,3"


def test_plan_and_commands_of_the_papers_tasks(tmp_path, monkeypatch):
  monkeypatch.setattr(rt8, "real_task_available", lambda task: True)
  settings = _real_settings(tmp_path, tasks=("wikihop", "hotpotqa"))
  out = str(tmp_path / "out")
  rt8.check_settings(settings)
  names = [s.name for s in rt8.stage_plan(settings, out)]
  # No corpus tasks: no long_tasks stage; every system on both tasks.
  assert names[:8] == ["bert", "data_wikihop", "data_hotpotqa", "pretraining_data",
                       "lift_none", "lift_sum", "pretrain_none", "pretrain_sum"]
  assert names[8:14] == ["finetune_etc_none_wikihop_seed1", "finetune_etc_sum_wikihop_seed1",
                         "finetune_bert_windows_wikihop_seed1",
                         "finetune_etc_none_hotpotqa_seed1", "finetune_etc_sum_hotpotqa_seed1",
                         "finetune_bert_windows_hotpotqa_seed1"]
  assert len(names) == 8 + 3 * 2 * 5
  bert = rt8.finetune_args(settings, out, "bert_windows", "wikihop", 2)
  assert "--model=bert_windows" in bert and "--task=wikihop" in bert
  assert "--data_dir=%s" % os.path.join(out, "data", "wikihop") in bert
  files = settings.real_task_files
  assert rt8.task_data_args(settings, out, "wikihop") == [
      "--train_file=%s" % files["wikihop"]["train"], "--dev_file=%s" % files["wikihop"]["dev"],
      "--output_dir=%s" % os.path.join(out, "data", "wikihop"),
      "--vocab_file=%s" % os.path.join(out, "bert", "vocab.txt"), "--max_seq_length=256",
      "--max_global_seq_length=32", "--max_candidates=8"]
  assert rt8.task_data_args(settings, out, "hotpotqa")[-1] == "--max_global_seq_length=32"
  ft = rt8.finetune_args(settings, out, "etc_sum", "hotpotqa", 3)
  assert "--task=hotpotqa" in ft and "--data_dir=%s" % os.path.join(out, "data", "hotpotqa") in ft
  # Dev-selected, no test split (the official test answers are hidden).
  assert "--keep_best" in ft and "--do_eval" in ft and "--do_predict" not in ft
  assert "--do_predict" in rt8.finetune_args(settings, out, "etc_sum", "cloze", 3)
  # Corpus and paper's tasks together: both data stages, BERT windows on each.
  mixed = _real_settings(tmp_path, tasks=("cloze", "wikihop"), seeds=[1])
  assert [s.name for s in rt8.stage_plan(mixed, out)][:3] == ["bert", "long_tasks",
                                                              "data_wikihop"]
  assert [s.name for s in rt8.stage_plan(mixed, out) if "bert_windows" in s.name] == [
      "finetune_bert_windows_cloze_seed1", "finetune_bert_windows_wikihop_seed1"]


def test_checks_of_the_papers_tasks(tmp_path, monkeypatch):
  assert rt8.real_task_available("wikihop")
  assert rt8.real_task_available("hotpotqa") == os.path.exists(
      os.path.join(REPO_DIR, "etc_model", "create_hotpotqa.py"))
  # Every system runs every task: BERT windows have a model of each.
  from etc_model import bert_windows  # pylint: disable=g-import-not-at-top
  from etc_model import long_task_heads  # pylint: disable=g-import-not-at-top
  assert set(bert_windows.TASKS) == set(long_task_heads.TASKS)
  settings = _real_settings(tmp_path)
  for overrides, message in (
      (dict(real_task_files={"wikihop": {"train": settings.real_task_files["wikihop"]["train"]}}),
       "--tasks=wikihop: wikihop needs its official files: give --wikihop_dev_file ("),
      (dict(tasks=["cloze"]), "--wikihop_train_file given, but --tasks=cloze leaves wikihop out"),
      (dict(max_candidates=32), "--max_candidates=32: must be < --max_global_seq_length=32"),
  ):
    with pytest.raises(common.UsageError, match="^" + re.escape(message)):
      rt8.check_settings(settings._replace(**overrides), check_files=False)
  os.remove(settings.real_task_files["wikihop"]["dev"])
  with pytest.raises(common.UsageError, match="^--wikihop_dev_file="):
    rt8.check_settings(settings)
  # A checkout without the HotpotQA tools: one line naming them.
  monkeypatch.setattr(rt8, "real_task_available", lambda task: task != "hotpotqa")
  hotpot = _real_settings(tmp_path, tasks=("hotpotqa",))
  with pytest.raises(common.UsageError, match=re.escape(
      "--tasks=hotpotqa: this checkout has no etc_model/create_hotpotqa.py or run_long_tasks "
      "--task=hotpotqa; leave hotpotqa out")):
    rt8.check_settings(hotpot, check_files=False)


def test_the_official_files_are_recorded_and_an_edited_one_refused(tmp_path):
  settings = _real_settings(tmp_path, pretrain_steps=0)
  out = str(tmp_path / "out")
  os.makedirs(out)
  # Neither the corpus (no corpus task) nor the pre-training text (no pre-training) is needed.
  os.remove(str(tmp_path / "plays.txt"))
  rt8.check_settings(settings)
  (tmp_path / "hf" / "vocab.txt").write_text("[PAD]\n")
  rt8.check_record(out, settings, write=True)
  record = json.load(open(os.path.join(out, rt8.RECORD_NAME)))
  # The corpus is not read without the corpus tasks.
  assert sorted(record["inputs"]) == ["hf_dir/vocab.txt", "wikihop_dev_file",
                                      "wikihop_train_file"]
  assert set(record["inputs"]["wikihop_dev_file"]) == {"sha256", "size"}
  assert record["settings"]["real_task_files"] == {"wikihop": {"train": "train.json",
                                                               "dev": "dev.json"}}
  dev = tmp_path / "wikihop" / "dev.json"
  dev.write_text('[{"id": "x"}]')
  with pytest.raises(common.UsageError) as e:
    rt8.check_record(out, settings, write=True)
  assert "\n" not in str(e.value)
  assert str(e.value).startswith(
      "--output_dir=%s holds a run of other settings or input files: --wikihop_dev_file file "
      "%s: other contents" % (out, dev))


def test_report_puts_the_papers_numbers_beside_ours(tmp_path, monkeypatch):
  monkeypatch.setattr(rt8, "real_task_available", lambda task: True)
  settings = _real_settings(tmp_path, tasks=("wikihop", "hotpotqa", "cloze"), seeds=[1, 2, 3],
                            pretrain_steps=0)
  out = str(tmp_path / "out")
  stub = RealStubStages()
  rt8.run_all(settings, out, runner=None, run_fn=stub)
  assert "data_hotpotqa" in stub.calls
  assert rt8.run_all(settings, out, runner=None, run_fn=stub) == []   # resumed: all done
  text = rt8.report_text(settings, out)
  assert "All 27 fine-tuning runs finished" in text   # 3 systems x 3 tasks x 3 seeds
  # Medians over seeds 1-3: none 42 (40, 42, 50), sum 44 (44, 43, 47).
  assert "| ETC | wikihop | accuracy | 42.0 | s1 40.0 @2, s2 42.0 @2, s3 50.0 @2 | n/a |" in text
  assert "| ETC + residual attention (sum) | hotpotqa | supporting-fact F1 | 74.0 |" in text
  assert ("| WikiHop accuracy | 78.92 | 79.21 | +0.29 | 42.00 | 44.00 | +2.00 | 3 / 3 |"
          in text)
  assert "| HotpotQA answer F1 | 80.38 | 80.86 | +0.48 | 62.00 | 64.00 | +2.00 | 3 / 3 |" in text
  assert "| NQ long-answer F1 | 77.70 | 77.93 | +0.23 | not run |" in text
  # sum - none: dev only for the paper's tasks, each of the paper's metrics.
  assert "| wikihop | accuracy | dev | +2.0 | s1 +4.0, s2 +1.0, s3 -3.0 |" in text
  assert "| hotpotqa | supporting-fact F1 | dev |" in text
  assert "| wikihop | accuracy | test |" not in text and "| cloze | accuracy | test |" in text
  assert "| BERT, sliding windows | wikihop | accuracy | 30.0 |" in text
  assert "| BERT, sliding windows | hotpotqa | joint F1 | 30.0 |" in text
  assert ("WikiHop dev: 10 examples, 9 records; no record (counted wrong): 1 more_candidates; "
          "the most-mentioned candidate is right on 30.0% of the records with an answer.") in text
  assert "WikiHop from the official train train.json, dev dev.json: L=256, G=32, at most 8" in text
  assert not MACHINE_PATH.search(text), MACHINE_PATH.search(text)
  # A fine-tuning run of one of the paper's tasks needs only its dev results.
  stage = [s for s in rt8.stage_plan(settings, out) if s.name.endswith("wikihop_seed1")][0]
  os.remove(os.path.join(stage.output, rt8.EVAL_RESULTS))
  with pytest.raises(common.UsageError, match="without <output_dir>/runs/etc_none_wikihop_seed1/"
                     "eval_results.json"):
    rt8.check_stage_outputs(settings, out, stage)


def _nq_openkp_settings(tmp_path, **overrides):
  """Settings of an NQ and OpenKP run; NQ's dev files are a glob of two (official-style) files."""
  settings = _real_settings(tmp_path, tasks=("nq", "openkp"), max_global_seq_length=48,
                            **overrides)
  nq_dir = tmp_path / "nq"
  for name in ("nq-dev-00.jsonl.gz", "nq-dev-01.jsonl.gz"):
    (nq_dir / name).write_text("{}")
  files = dict(settings.real_task_files)
  files["nq"] = {"train": files["nq"]["train"], "dev": str(nq_dir / "nq-dev-0?.jsonl.gz")}
  return settings._replace(real_task_files=files)


def test_plan_commands_and_checks_of_nq_and_openkp(tmp_path, monkeypatch):
  assert rt8.real_task_available("nq") and rt8.real_task_available("openkp")
  assert rt8.default_tasks({"openkp": {}, "nq": {}, "wikihop": {}}) == ["wikihop", "nq",
                                                                         "openkp"]
  assert rt8.default_seeds(["openkp"]) == "1,2,3,4,5"
  settings = _nq_openkp_settings(tmp_path)
  out = str(tmp_path / "out")
  rt8.check_settings(settings)
  names = [s.name for s in rt8.stage_plan(settings, out)]
  assert names[:3] == ["bert", "data_nq", "data_openkp"]
  assert names[8:14] == ["finetune_etc_none_nq_seed1", "finetune_etc_sum_nq_seed1",
                         "finetune_bert_windows_nq_seed1", "finetune_etc_none_openkp_seed1",
                         "finetune_etc_sum_openkp_seed1", "finetune_bert_windows_openkp_seed1"]
  assert len(names) == 8 + 3 * 2 * 5
  bert = rt8.finetune_args(settings, out, "bert_windows", "openkp", 2)
  assert "--model=bert_windows" in bert and "--task=openkp" in bert
  nq_dev = settings.real_task_files["nq"]["dev"]
  # create_nq reads the glob itself (the official dev set is five files); the question length,
  # the stride (half of L by default) and the down-sampling seed are the driver's.
  assert rt8.task_data_args(settings, out, "nq") == [
      "--train_file=%s" % settings.real_task_files["nq"]["train"], "--dev_file=%s" % nq_dev,
      "--output_dir=%s" % os.path.join(out, "data", "nq"),
      "--vocab_file=%s" % os.path.join(out, "bert", "vocab.txt"), "--max_seq_length=256",
      "--max_global_seq_length=48", "--doc_stride=128", "--max_question_length=32",
      "--seed=12345"]
  assert rt8.task_data_args(settings, out, "openkp")[2:] == [
      "--output_dir=%s" % os.path.join(out, "data", "openkp"),
      "--vocab_file=%s" % os.path.join(out, "bert", "vocab.txt"), "--max_seq_length=256",
      "--max_global_seq_length=48"]
  for task in ("nq", "openkp"):
    ft = rt8.finetune_args(settings, out, "etc_sum", task, 2)
    assert "--task=%s" % task in ft and "--keep_best" in ft and "--do_predict" not in ft
  assert rt8.task_data_outputs(settings, out, "openkp")[-1] == os.path.join(
      out, "data", "openkp", "openkp.json")
  for overrides, message in (
      (dict(max_global_seq_length=32), "--max_global_seq_length=32: NQ needs at least "
       "--nq_max_question_length + 2 = 34 global tokens"),
      (dict(nq_max_question_length=-1), "--nq_max_question_length=-1: must be >= 0"),
      (dict(nq_doc_stride=222), "--nq_doc_stride=222: must be in [1, 221] (--max_seq_length - "
       "--nq_max_question_length - 3"),
  ):
    with pytest.raises(common.UsageError, match="^" + re.escape(message)):
      rt8.check_settings(settings._replace(**overrides), check_files=False)
  with pytest.raises(common.UsageError, match="^--tasks=nq,openkp: openkp needs its official "
                     "files: give --openkp_dev_file"):
    rt8.check_settings(settings._replace(real_task_files=dict(
        settings.real_task_files, openkp={"train": "x"})), check_files=False)
  # A glob that matches nothing: one line naming the flag.
  missing = dict(settings.real_task_files, nq={"train": settings.real_task_files["nq"]["train"],
                                               "dev": str(tmp_path / "nq" / "dev-*.jsonl")})
  with pytest.raises(common.UsageError, match="^--nq_dev_file: .*dev-\\*.jsonl matches no file"):
    rt8.check_settings(settings._replace(real_task_files=missing))


def test_nq_files_are_recorded_one_by_one_and_an_edited_one_refused(tmp_path):
  settings = _nq_openkp_settings(tmp_path, pretrain_steps=0)
  out = str(tmp_path / "out")
  os.makedirs(out)
  (tmp_path / "hf" / "vocab.txt").write_text("[PAD]\n")
  rt8.check_record(out, settings, write=True)
  record = json.load(open(os.path.join(out, rt8.RECORD_NAME)))
  assert sorted(record["inputs"]) == [
      "hf_dir/vocab.txt", "nq_dev_file/nq-dev-00.jsonl.gz", "nq_dev_file/nq-dev-01.jsonl.gz",
      "nq_train_file/train.json", "openkp_dev_file", "openkp_train_file"]
  assert record["settings"]["real_task_files"]["nq"] == {"train": "train.json",
                                                         "dev": "nq-dev-0?.jsonl.gz"}
  # NQ's own settings are recorded when NQ runs (only then: earlier records stay valid).
  assert (record["settings"]["nq_doc_stride"], record["settings"]["nq_max_question_length"]) == (
      128, 32)
  assert "nq_doc_stride" not in rt8.settings_record(_real_settings(tmp_path))
  with pytest.raises(common.UsageError, match="holds a run of other settings or input files: "
                     "nq_doc_stride 128 -> 64"):
    rt8.check_record(out, settings._replace(nq_doc_stride=64), write=False)
  dev = tmp_path / "nq" / "nq-dev-01.jsonl.gz"
  dev.write_text('{"example_id": 1}')
  with pytest.raises(common.UsageError) as e:
    rt8.check_record(out, settings, write=True)
  assert "\n" not in str(e.value)
  assert str(e.value).startswith(
      "--output_dir=%s holds a run of other settings or input files: --nq_dev_file file "
      "%s: other contents" % (out, dev))


def test_report_fills_the_nq_and_openkp_rows(tmp_path, monkeypatch):
  settings = _nq_openkp_settings(tmp_path, seeds=[1, 2, 3], pretrain_steps=0)
  out = str(tmp_path / "out")
  rt8.run_all(settings, out, runner=None, run_fn=RealStubStages())
  text = rt8.report_text(settings, out)
  assert "All 18 fine-tuning runs finished" in text   # 3 systems x 2 tasks x 3 seeds
  assert "| BERT, sliding windows | nq | long-answer F1 |" in text
  assert "| BERT, sliding windows | openkp | F1@3 |" in text
  # Medians over seeds 1-3 of the stub: none 42 + 10 / - 10 / - 20, sum 44 + the same.
  assert "| NQ long-answer F1 | 77.70 | 77.93 | +0.23 | 52.00 | 54.00 | +2.00 | 3 / 3 |" in text
  assert "| NQ short-answer F1 | 58.54 | 59.10 | +0.56 | 32.00 | 34.00 | +2.00 | 3 / 3 |" in text
  assert "| OpenKP F1@3 | 44.06 | 44.27 | +0.21 | 22.00 | 24.00 | +2.00 | 3 / 3 |" in text
  assert "| WikiHop accuracy | 78.92 | 79.21 | +0.29 | not run |" in text
  assert "| ETC | nq | short-answer F1 | 32.0 | s1 30.0 @2, s2 32.0 @2, s3 40.0 @2 | n/a |" in text
  assert "| ETC + residual attention (sum) | openkp | F1@5 | 19.0 |" in text
  assert "| nq | long-answer F1 | dev | +2.0 | s1 +4.0, s2 +1.0, s3 -3.0 |" in text
  assert "| openkp | F1@3 | dev | +2.0 |" in text and "| openkp | F1@1 | dev |" not in text
  assert ("NQ dev: 4 examples, 9 windows, 9 records (documents of 700.5 pieces on average, 1200 "
          "at most); answer types 1 null, 1 long, 2 short; 2 question pieces cut, 1 answers "
          "without a word piece in the input (no answer label).") in text
  assert ("OpenKP dev: 5 documents, 4 records; no record for 1 (they predict nothing, scored "
          "0); 2 documents cut by G (VDOM elements), 30 words left out, 3 keyphrases not in "
          "the input.") in text
  assert ("NQ from the official train train.json, dev nq-dev-0?.jsonl.gz: L=256, G=48, windows "
          "128 pieces apart, questions of at most 32 pieces; OpenKP from the official train "
          "train.json, dev dev.json: L=256, G=48 |") in text
  assert not MACHINE_PATH.search(text), MACHINE_PATH.search(text)


def _tiny_bert(directory):
  """A tiny random BERT directory (bert_model.ckpt, bert_config.json, the repository's vocab)."""
  os.makedirs(directory)
  _write_json(os.path.join(directory, "bert_config.json"), TINY_BERT_CONFIG)
  shutil.copy(VOCAB, os.path.join(directory, "vocab.txt"))
  write_random_bert_checkpoint(os.path.join(directory, "bert_config.json"),
                               os.path.join(directory, "bert_model.ckpt"))


@pytest.mark.slow
def test_tiny_wikihop_and_hotpotqa_run_resume_and_an_edited_dev_file(tmp_path):
  """The real tools end to end on official-format WikiHop and HotpotQA files, in one run (the
  lifted checkpoints shared): one seed, 2 steps, the default systems (BERT over windows on
  both)."""
  data = tmp_path / "qangaroo_v1.1" / "wikihop"
  hotpot = tmp_path / "hotpotqa"
  os.makedirs(str(data))
  os.makedirs(str(hotpot))
  for split in rt8.REAL_SPLITS:
    shutil.copy(os.path.join(FIXTURES, split + ".json"), str(data / (split + ".json")))
    shutil.copy(os.path.join(REPO_DIR, "tests", "fixtures", "hotpotqa", split + ".json"),
                str(hotpot / (split + ".json")))
  _tiny_bert(str(tmp_path / "bert"))
  out = tmp_path / "out"
  args = ["--output_dir=%s" % out, "--bert_checkpoint=%s" % (tmp_path / "bert"),
          "--wikihop_train_file=%s" % (data / "train.json"),
          "--wikihop_dev_file=%s" % (data / "dev.json"),
          "--hotpotqa_train_file=%s" % (hotpot / "train.json"),
          "--hotpotqa_dev_file=%s" % (hotpot / "dev.json"),
          "--seeds=1", "--max_seq_length=128", "--max_global_seq_length=32",
          "--max_candidates=6", "--local_radius=8", "--pretrain_steps=0", "--finetune_steps=2",
          "--eval_every_steps=2", "--finetune_batch_size=2", "--predict_batch_size=4",
          "--window_length=48", "--window_stride=24"]
  dry = run_tool("paper/reproduce_table8.py", args + ["--dry_run"])
  assert re.search(r"Plan: 11 stages; systems etc_none,etc_sum,bert_windows; tasks "
                   r"wikihop,hotpotqa; seeds 1;", dry.stdout), dry.stdout
  assert "data_wikihop" in dry.stdout and "data_hotpotqa" in dry.stdout
  assert not os.path.exists(str(out / rt8.RECORD_NAME))
  zero = run_tool("paper/reproduce_table8.py", args + ["--parallel_runs=0"], expect_rc=2)
  assert last_error_line(zero) == "error: --parallel_runs=0: must be >= 1"
  # Two fine-tuning runs at a time: the same report as one at a time.
  run = run_tool("paper/reproduce_table8.py", args + ["--parallel_runs=2"])
  finetune_lines = [line for line in run.stderr.splitlines() if "stage finetune_" in line]
  assert not any("done in" in line for line in finetune_lines[:2]), finetune_lines  # together
  report = (out / "report.md").read_text()
  assert "All 6 fine-tuning runs finished" in report
  assert re.search(r"\| WikiHop accuracy \| 78\.92 \| 79\.21 \| \+0\.29 \| \d+\.\d\d \| \d+\.\d\d "
                   r"\| [+-]\d+\.\d\d \| 1 / 1 \|", report)
  for name in ("HotpotQA supporting-fact F1", "HotpotQA answer F1", "HotpotQA joint F1"):
    assert re.search(r"\| %s \| [\d.]+ \| [\d.]+ \| \+[\d.]+ \| \d+\.\d\d \| \d+\.\d\d \| "
                     r"[+-]\d+\.\d\d \| 1 / 1 \|" % name, report), name
  # The dev fixture has 4 examples, one with more candidates than C = 6 (no record, wrong).
  assert "WikiHop dev: 4 examples, 3 records; no record (counted wrong): 1 " in report
  # The driver's accuracy is the official scorer's on the run's dev predictions.
  from etc_model import wikihop_evaluate  # pylint: disable=g-import-not-at-top
  run = out / "runs" / "etc_sum_wikihop_seed1"
  results = json.loads((run / rt8.EVAL_RESULTS).read_text())
  official = wikihop_evaluate.evaluate_files(str(data / "dev.json"),
                                             str(run / "dev_predictions.json"))
  assert results["accuracy"] == official["accuracy"] and official["examples"] == 4
  assert results["scored_checkpoint"] == "best" and results["residual_attention"] == "sum"
  run = out / "runs" / "bert_windows_wikihop_seed1"
  results = json.loads((run / rt8.EVAL_RESULTS).read_text())
  official = wikihop_evaluate.evaluate_files(str(data / "dev.json"),
                                             str(run / "dev_predictions.json"))
  assert results["accuracy"] == official["accuracy"] and results["model"] == "bert_windows"
  results = json.loads((out / "runs" / "etc_none_hotpotqa_seed1" / rt8.EVAL_RESULTS).read_text())
  assert {"f1", "sp_f1", "joint_f1"} <= set(results)
  # Rerun: every stage is done, nothing runs.
  again = run_tool("paper/reproduce_table8.py", args)
  assert "11/11 stages done" in again.stdout and "reproduce_table8: stage" not in again.stderr
  # An official file edited in place: refused in one line before any stage.
  with open(str(data / "dev.json")) as f:
    examples = json.load(f)
  examples[0]["supports"][0] += " It is long."
  (data / "dev.json").write_text(json.dumps(examples))
  refused = run_tool("paper/reproduce_table8.py", args, expect_rc=2)
  assert last_error_line(refused).startswith(
      "error: --output_dir=%s holds a run of other settings or input files: --wikihop_dev_file "
      "file %s: other contents" % (out, data / "dev.json"))


@pytest.mark.slow
def test_tiny_nq_and_openkp_run(tmp_path):
  """The real tools end to end on official-format NQ and OpenKP files (those of
  tests/test_etc_nq.py and tests/test_etc_openkp.py; NQ's dev set as a glob of two gzipped
  files): ETC + residual attention, one seed of 1 step (both systems would double the
  fine-tuning time; the WikiHop run has both), the paper's rows filled and the figures checked
  against the official scorers (25-35 s on 2 shared cores)."""
  import test_etc_nq as nq_files  # pylint: disable=g-import-not-at-top
  import test_etc_openkp as openkp_files  # pylint: disable=g-import-not-at-top
  from etc_model import nq_evaluate  # pylint: disable=g-import-not-at-top
  from etc_model import openkp_evaluate  # pylint: disable=g-import-not-at-top
  data = tmp_path / "official"
  os.makedirs(str(data))
  nq_train = nq_files._write_jsonl(data / "simplified-nq-train.jsonl", [
      nq_files._record(1), nq_files._record(2, question="is it delta", long=(5, 9), short=(),
                                            yes_no="YES")])
  nq_files._write_jsonl(data / "nq-dev-00.jsonl.gz", nq_files.DEV[:2], compress=True)
  nq_files._write_jsonl(data / "nq-dev-01.jsonl.gz", nq_files.DEV[2:], compress=True)
  openkp_train = openkp_files._write_jsonl(data / "OpenKPTrain.jsonl", [
      openkp_files._document("t1"), openkp_files._document("t2", [["cat"]])])
  openkp_dev = openkp_files._write_jsonl(data / "OpenKPDev.jsonl", openkp_files.DEV)
  _tiny_bert(str(tmp_path / "bert"))
  out = tmp_path / "out"
  args = ["--output_dir=%s" % out, "--bert_checkpoint=%s" % (tmp_path / "bert"),
          "--nq_train_file=%s" % nq_train, "--nq_dev_file=%s" % (data / "nq-dev-0?.jsonl.gz"),
          "--openkp_train_file=%s" % openkp_train, "--openkp_dev_file=%s" % openkp_dev,
          "--systems=etc_sum", "--seeds=1", "--max_seq_length=32",
          "--max_global_seq_length=16", "--nq_max_question_length=8", "--nq_doc_stride=8",
          "--local_radius=4", "--pretrain_steps=0", "--finetune_steps=1", "--eval_every_steps=1",
          "--finetune_batch_size=2", "--predict_batch_size=4"]
  dry = run_tool("paper/reproduce_table8.py", args + ["--dry_run"])
  assert re.search(r"Plan: 6 stages; systems etc_sum; tasks nq,openkp; seeds 1;", dry.stdout)
  assert "data_nq" in dry.stdout and "data_openkp" in dry.stdout
  assert not os.path.exists(str(out / rt8.RECORD_NAME))
  run_tool("paper/reproduce_table8.py", args)
  report = (out / "report.md").read_text()
  assert "All 2 fine-tuning runs finished" in report
  # Ours beside the paper's: ETC + residual attention only (ETC not run, no difference).
  for name in ("NQ long-answer F1", "NQ short-answer F1", "OpenKP F1@3"):
    assert re.search(r"\| %s \| [\d.]+ \| [\d.]+ \| \+[\d.]+ \| n/a \| \d+\.\d\d \| n/a \| "
                     r"0 / 1 \|" % name, report), name
  assert "NQ dev: 3 examples, 3 windows, 3 records" in report
  assert "OpenKP dev: 3 documents, 3 records" in report
  # The driver's figures are the official scorers' on the runs' dev predictions.
  nq_run = out / "runs" / "etc_sum_nq_seed1"
  results = json.loads((nq_run / rt8.EVAL_RESULTS).read_text())
  official = nq_evaluate.evaluate_files(str(data / "nq-dev-0?.jsonl.gz"),
                                        str(nq_run / "dev_predictions.json"))
  for key in ("long-best-threshold-f1", "short-best-threshold-f1"):
    assert results[key] == pytest.approx(official[key]), key
  assert results["residual_attention"] == "sum" and results["scored_checkpoint"] == "best"
  openkp_run = out / "runs" / "etc_sum_openkp_seed1"
  results = json.loads((openkp_run / rt8.EVAL_RESULTS).read_text())
  official = openkp_evaluate.evaluate_files(openkp_dev, str(openkp_run / "dev_predictions.jsonl"))
  assert results["F1@3"] == pytest.approx(official["F1@3"]) and official["examples"] == 3
  # An NQ dev file edited in place: refused in one line before any stage.
  nq_files._write_jsonl(data / "nq-dev-01.jsonl.gz", nq_files.DEV[1:], compress=True)
  refused = run_tool("paper/reproduce_table8.py", args, expect_rc=2)
  assert last_error_line(refused).startswith(
      "error: --output_dir=%s holds a run of other settings or input files: --nq_dev_file "
      "file %s: other contents" % (out, data / "nq-dev-01.jsonl.gz"))
