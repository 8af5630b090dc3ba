"""Tests of etc_model.long_tasks / etc_model.create_long_tasks: chapters and seeded splits, a
hand-made cloze example (answer, candidates, distance, both baselines known), the inserted-
sentence labels, byte-identical reruns and a one-line error."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tokenization
from conftest import REPO_DIR, last_error_line, run_tool, shared_path, tool_env
from etc_model import create_long_tasks
from etc_model import long_tasks
from realformer_tf import pretraining_data

L, G = 128, 16


def _tokenizer(vocab_file):
  return tokenization.FullTokenizer(vocab_file, do_lower_case=True)


def _settings(tokenizer, **overrides):
  settings = {"max_seq_length": L, "max_global_seq_length": G, "max_candidates": 4,
              "max_candidate_pieces": 4, "min_name_count": 2, "min_context_tokens": 0,
              "inserted_sentences": 2, "dev_fraction": 0.25, "test_fraction": 0.25,
              "random_seed": 3, "global_token_id": tokenizer.vocab["[unused0]"],
              "candidate_token_id": tokenizer.vocab["[unused1]"],
              "blank_token_id": tokenizer.vocab["[MASK]"], "max_bad_fraction": 0.01,
              "max_line_chars": 100000}
  settings.update(overrides)
  return settings


def test_chapters_cut_at_headings_books_at_bylines_and_splits_keep_chapters_whole():
  documents = [["THE FIRST BOOK", "By Ann Writer", "CHAPTER 1.", "a b.", "c d.", "CHAPTER 2.",
                "e f."],
               ["g h.", "Chapter IV", "i j."],
               ["By Ann Writer", "k l."],
               ["SCENE 2.", "m n.", "Part of it."]]
  chapters = long_tasks.documents_to_chapters([["x y."]] + documents, "file.txt")
  assert [(c.book, c.index, c.sentences) for c in chapters] == [
      ("file.txt", 0, ["x y."]),  # before the first title page
      ("THE FIRST BOOK / By Ann Writer", 0, ["THE FIRST BOOK", "By Ann Writer"]),
      ("THE FIRST BOOK / By Ann Writer", 1, ["a b.", "c d."]),
      ("THE FIRST BOOK / By Ann Writer", 2, ["e f."]),
      ("THE FIRST BOOK / By Ann Writer", 3, ["g h."]),
      ("THE FIRST BOOK / By Ann Writer", 4, ["i j."]),
      ("By Ann Writer", 0, ["By Ann Writer", "k l."]),
      ("By Ann Writer", 1, ["m n.", "Part of it."])]  # "Part of" is no heading
  many = [long_tasks.Chapter("book%d" % (i % 2), i // 2, ["s%d." % i]) for i in range(40)]
  splits = long_tasks.split_chapters(many, 0.1, 0.2, seed=5)
  assert splits == long_tasks.split_chapters(many, 0.1, 0.2, seed=5)
  assert splits != long_tasks.split_chapters(many, 0.1, 0.2, seed=6)
  # Per book: 20 chapters -> 4 test, 2 dev, 14 train; one split per chapter.
  counts = long_tasks.split_counts(many, splits)
  assert counts["book0"] == {"train": 14, "dev": 2, "test": 4}
  assert counts["total"] == {"train": 28, "dev": 4, "test": 8}
  # A book's split does not depend on the other books.
  alone = [c for c in many if c.book == "book1"]
  assert long_tasks.split_chapters(alone, 0.1, 0.2, 5) == [
      s for c, s in zip(many, splits) if c.book == "book1"]


CLOZE_CHAPTER = ["Anna met Boris at the market.",
                 "Boris gave Anna a red apple and Boris smiled.",
                 "Then Clara and Boris walked home.",
                 "The rain fell on Anna.",
                 "Later that night the cat thought of Clara."]


def test_cloze_example_by_hand(vocab_file):
  tokenizer = _tokenizer(vocab_file)
  settings = _settings(tokenizer)
  chapter = long_tasks.Chapter("b", 0, CLOZE_CHAPTER)
  # Title-case words seen >= 2 times, not only sentence-initially, never in lower case.
  names, sentences = long_tasks.tokenize_chapter(chapter, tokenizer.tokenize_to_ids, 2)
  assert names == ["Anna", "Boris", "Clara"]
  examples = long_tasks.make_cloze_examples(chapter, sentences, settings, 3)
  assert len(examples) == 1
  ex = examples[0]
  # The question is the last sentence; only Clara is in it and seen before.
  assert ex["answer"] == "Clara" and sorted(ex["candidates"]) == ["Anna", "Boris", "Clara"]
  assert ex["candidates"][ex["label"][0]] == "Clara"
  # Context counts: Anna 3, Boris 4, Clara 1; last mentions: Boris and Clara in sentence 3,
  # Anna in sentence 4.
  assert ex["candidates"][ex["most_frequent"][0]] == "Boris"
  assert ex["candidates"][ex["most_recent"][0]] == "Anna"
  pieces = [tokenizer.tokenize(s) for s in CLOZE_CHAPTER]
  prefix = sum(len(tokenizer.tokenize(c)) for c in ex["candidates"])
  last_clara = prefix + len(pieces[0]) + len(pieces[1]) + pieces[2].index("clara")
  blank = prefix + sum(map(len, pieces[:4])) + pieces[4].index("clara")
  assert ex["blank_position"] == [blank]
  assert ex["answer_distance"] == [blank - last_clara]
  ids = np.array(ex["token_ids"])
  assert ids[blank] == tokenizer.vocab["[MASK]"]
  assert (ids != 0).sum() == sum(map(len, pieces)) + prefix
  # The candidates: the first global tokens, each over its name's pieces.
  sentence_ids = np.array(ex["sentence_ids"])
  for i, name in enumerate(ex["candidates"]):
    assert tokenizer.convert_ids_to_tokens(ids[(sentence_ids == i) & (ids != 0)].tolist()) == [
        name.lower()]
  assert ex["global_token_ids"][:3] == [settings["candidate_token_id"]] * 3
  assert ex["global_token_ids"][3:9] == [settings["global_token_id"]] * 5 + [0]
  assert ex["candidate_mask"] == [1, 1, 1, 0]
  assert ex["global_breakpoints"][7] == 1 and sum(ex["global_breakpoints"]) == 1


def test_cloze_window_stride_asks_more_questions_of_overlapping_windows(vocab_file):
  tokenizer = _tokenizer(vocab_file)
  # G 8 with 4 candidates: 4 sentences a window.
  settings = _settings(tokenizer, max_global_seq_length=8)
  chapter = long_tasks.Chapter("b", 0, ["Anna met Boris.", "Boris saw Clara.", "Clara met Anna.",
                                        "Anna saw Boris.", "Boris met Clara.", "Clara saw Anna.",
                                        "Anna met Boris.", "Boris saw Clara."])
  _, sentences = long_tasks.tokenize_chapter(chapter, tokenizer.tokenize_to_ids, 2)

  # Windows 0-3 and 4-7, each asking its latest sentence with a name seen before in it.
  plain = long_tasks.make_cloze_examples(chapter, sentences, settings, 3)
  assert len(plain) == 2
  # A window every sentence: questions 3, 4, 5, 6, 7 (windows from 5 on would ask 7 again).
  strided = long_tasks.make_cloze_examples(
      chapter, sentences, dict(settings, cloze_window_stride=1), 3)
  assert len(strided) == 5
  blanked = [tuple(ex["token_ids"]) for ex in strided]
  assert len(set(blanked)) == 5
  assert strided[0]["token_ids"] == plain[0]["token_ids"]


def test_inserted_sentence_labels(vocab_file):
  tokenizer = _tokenizer(vocab_file)
  settings = _settings(tokenizer)
  own = long_tasks.Chapter("b", 0, ["one cat sat.", "two cats sat.", "three dogs ran.",
                                    "four birds flew.", "five fish swam."])
  donor = long_tasks.Chapter("b", 1, ["red house.", "blue house.", "green house."])
  _, own_sentences = long_tasks.tokenize_chapter(own, tokenizer.tokenize_to_ids, 2)
  _, donor_sentences = long_tasks.tokenize_chapter(donor, tokenizer.tokenize_to_ids, 2)
  examples = long_tasks.make_supporting_examples(own, own_sentences,
                                                 [(donor, donor_sentences)], settings, 3)
  assert len(examples) == 1
  ex = examples[0]
  at = ex["inserted_start"][0]
  labels = ex["sentence_labels"]
  assert labels == [0] * at + [1, 1] + [0] * (G - at - 2)
  ids, sentence_ids = np.array(ex["token_ids"]), np.array(ex["sentence_ids"])
  words = [" ".join(tokenizer.convert_ids_to_tokens(ids[(sentence_ids == g) & (ids != 0)]
                                                    .tolist())) for g in range(5)]
  kept = [w for w, label in zip(words, labels) if not label]
  inserted = [w for w, label in zip(words, labels) if label]
  original = ["one cat sat .", "two cats sat .", "three dogs ran .", "four birds flew .",
              "five fish swam ."]
  assert kept == original[:at] + original[at + 2:]
  assert " ".join(inserted) in ("red house . blue house .", "blue house . green house .")


def _corpus(path):
  """Two books of named sentences, with chapter headings."""
  rng = np.random.RandomState(0)
  names = ["Anna", "Boris", "Clara", "David", "Elena"]
  words = "the old man walked to the river and saw a small boat near home".split()
  lines = []
  for book in range(2):
    lines += ["TALE %d" % book, "By Some Author", ""]
    for chapter in range(6):
      lines.append("CHAPTER %d." % (chapter + 1))
      for _ in range(14):
        lines.append(" ".join([names[rng.randint(5)]] + list(rng.choice(words, 5)) +
                              ["with", names[rng.randint(5)]]) + ".")
      lines.append("")
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")


def test_rerun_is_byte_identical_and_counted(tmp_path, vocab_file):
  corpus = str(tmp_path / "corpus.txt")
  _corpus(corpus)
  tokenizer = pretraining_data.make_tokenizer(vocab_file, True)
  settings = _settings(tokenizer, max_seq_length=64, max_global_seq_length=12)
  contents = []
  for run in ("a", "b"):
    out = str(tmp_path / run)
    summary = create_long_tasks.create_long_tasks([corpus], out, tokenizer, settings)
    contents.append({name: open(os.path.join(out, name), "rb").read()
                     for name in sorted(os.listdir(out))})
  assert contents[0] == contents[1]
  assert len(contents[0]) == 10
  # Per book 7 chapters (the title page and 6): 2 dev, 2 test (0.25 * 7 rounded), 3 train.
  for book in ("TALE 0 / By Some Author", "TALE 1 / By Some Author"):
    assert summary["chapters_per_split"][book] == {"train": 3, "dev": 2, "test": 2}
  assert summary["chapters_per_split"]["total"] == {"train": 6, "dev": 4, "test": 4}
  for task in ("cloze", "supporting", "classify"):
    for split in ("train", "dev", "test"):
      records = pretraining_data.read_examples(os.path.join(str(tmp_path / "a"),
                                                            "%s_%s.tfrecord" % (task, split)))
      assert len(records) == summary["examples"][task][split]
  assert summary["examples"]["cloze"]["train"] > 0
  assert summary["examples"]["supporting"]["train"] > 0
  assert min(summary["examples"]["classify"].values()) > 0
  # Inserted sentences come from a chapter of the same split (nothing crosses a split).
  chapters, splits, examples, labels = create_long_tasks.build_examples([corpus], tokenizer,
                                                                        settings)
  split_of = {(c.book, c.index): s for c, s in zip(chapters, splits)}
  for split, split_examples in examples["supporting"].items():
    assert all(split_of[e["donor"]] == split for e in split_examples)
  # Classification: one example per window, labelled with its chapter's book; the label counts
  # and the majority baselines recomputed.
  assert labels == summary["classify_labels"] == ["TALE 0 / By Some Author",
                                                   "TALE 1 / By Some Author"]
  by_chapter = {}
  for split, split_examples in examples["classify"].items():
    for e in split_examples:
      assert labels[e["label"][0]] == e["book"] and len(e["token_ids"]) == 64
      by_chapter.setdefault((e["book"], split), []).append(e)
  counts = summary["classify_label_counts"]
  assert {split: sum(c[split] for c in counts.values()) for split in ("train", "dev", "test")} == \
      summary["examples"]["classify"]
  for split in ("train", "dev", "test"):
    n = summary["examples"]["classify"][split]
    own = max(c[split] for c in counts.values())
    assert summary["classify_baselines"][split]["split_majority_share"] == round(own / n, 4)
  train = [c["train"] for c in counts.values()]
  majority = labels[train.index(max(train))]
  assert summary["classify_baselines"]["dev"]["majority_label"] == majority
  # The title pages ("TALE 0", "By Some Author") are in no window.
  assert not any(tokenizer.vocab["author"] in e["token_ids"]
                 for split_examples in examples["classify"].values() for e in split_examples)
  # The train records are shuffled (seeded): in chapter order the labels would be sorted.
  train_labels = [e["label"][0] for e in examples["classify"]["train"]]
  assert train_labels != sorted(train_labels)
  assert summary["classify_baselines"]["dev"]["majority_accuracy"] == round(
      counts[majority]["dev"] / float(summary["examples"]["classify"]["dev"]), 4)


def test_classify_labels_by_book_or_author_without_the_title_page(vocab_file):
  assert [long_tasks.book_author(b) for b in (
      "PRIDE AND PREJUDICE / By Jane Austen", "By Jane Austen #2", "Jane Austen (1803)",
      "The War of the Worlds / by H. G. Wells [1898]", "by Charles Dickens",
      "This etext was done by a number of volunteers.", "novels.txt")] == [
          "Jane Austen", "Jane Austen", "Jane Austen", "H. G. Wells", "Charles Dickens",
          "This etext was done by a number of volunteers.", "novels.txt"]
  chapter = long_tasks.Chapter("EMMA / By Jane Austen #2", 0, [
      "EMMA", "By Jane Austen", "Emma Woodhouse was clever.", "She had lived long."])
  assert long_tasks.chapter_label(chapter, "book") == "EMMA / By Jane Austen #2"
  assert long_tasks.chapter_label(chapter, "author") == "Jane Austen"
  assert long_tasks.title_page_lines(chapter.sentences) == 2
  assert long_tasks.title_page_lines(chapter.sentences[2:]) == 0
  tokenizer = _tokenizer(vocab_file)
  _, sentences = long_tasks.tokenize_chapter(chapter._replace(sentences=chapter.sentences[2:]),
                                             tokenizer.tokenize_to_ids, 2)
  # Sentences of 6 and 5 pieces: one window of both at L=16; at L=8 a window each.
  settings = _settings(tokenizer, max_seq_length=16, max_global_seq_length=4,
                       min_context_tokens=0)
  (example,) = long_tasks.make_classify_examples(chapter, sentences, 7, settings)
  assert example["label"] == [7]
  assert tokenizer.convert_ids_to_tokens([i for i in example["token_ids"] if i]) == (
      "emma wood ##house was clever . she had lived long .".split())
  assert example["sentence_ids"][:12] == [0] * 6 + [1] * 5 + [0]
  assert example["global_token_ids"] == [settings["global_token_id"]] * 2 + [0, 0]
  settings["max_seq_length"] = 8
  assert [e["window"] for e in long_tasks.make_classify_examples(
      chapter, sentences, 7, settings)] == [0, 1]
  settings["max_seq_length"], settings["min_context_tokens"] = 16, 12
  assert long_tasks.make_classify_examples(chapter, sentences, 7, settings) == []


def test_bad_flag_is_one_line(tmp_path, vocab_file):
  corpus = str(tmp_path / "corpus.txt")
  _corpus(corpus)
  proc = run_tool(None, ["-m", "etc_model.create_long_tasks", "--input_file=" + corpus,
                         "--output_dir=" + str(tmp_path / "out"), "--vocab_file=" + vocab_file,
                         "--dev_fraction=0.5", "--test_fraction=0.5"], expect_rc=2)
  assert last_error_line(proc) == (
      "error: --dev_fraction=0.5: plus --test_fraction=0.5 leaves no training chapters")
  assert not os.path.exists(str(tmp_path / "out"))
  proc = run_tool(None, ["-m", "etc_model.create_long_tasks", "--input_file=" + corpus,
                         "--output_dir=" + str(tmp_path / "out"), "--vocab_file=" + vocab_file,
                         "--cloze_window_stride=-1"], expect_rc=2)
  assert last_error_line(proc) == "error: --cloze_window_stride=-1: must be >= 0"


def test_huge_lengths_refused_in_one_line_before_any_work(tmp_path, vocab_file):
  corpus = str(tmp_path / "corpus.txt")
  _corpus(corpus)
  base = ["-m", "etc_model.create_long_tasks", "--input_file=" + corpus,
          "--output_dir=" + str(tmp_path / "out"), "--vocab_file=" + vocab_file]
  proc = run_tool(None, base + ["--max_seq_length=100000000"], expect_rc=2, timeout=60)
  assert last_error_line(proc) == (
      "error: --max_seq_length=100000000: over 65536, where every record padded to it costs "
      "memory and time in proportion; pass --allow_long_inputs if it is meant")
  assert not os.path.exists(str(tmp_path / "out"))


def test_directory_input_is_one_line(tmp_path, vocab_file):
  (tmp_path / "corpus").mkdir()
  _corpus(str(tmp_path / "corpus" / "a.txt"))
  proc = run_tool(None, ["-m", "etc_model.create_long_tasks",
                         "--input_file=%s" % (tmp_path / "corpus"),
                         "--output_dir=" + str(tmp_path / "out"), "--vocab_file=" + vocab_file],
                  expect_rc=2, timeout=120)
  assert last_error_line(proc) == (
      "error: --input_file=%s/corpus: is a directory (give files or a glob like %s/corpus/*)" %
      (tmp_path, tmp_path))
  assert "Traceback" not in proc.stderr


def test_stop_request_leaves_no_temporary_and_no_summary(tmp_path, vocab_file):
  corpus = str(tmp_path / "corpus.txt")
  _corpus(corpus)
  tokenizer = pretraining_data.make_tokenizer(vocab_file, True)
  settings = _settings(tokenizer, max_seq_length=64, max_global_seq_length=12)
  out = str(tmp_path / "out")
  polls = []
  full = create_long_tasks.create_long_tasks([corpus], str(tmp_path / "full"), tokenizer, settings,
                                             should_stop=lambda: polls.append(1) and False)
  assert sum(sum(split.values()) for split in full["examples"].values()) > 0
  # A stop while reading the lines, while making the chapters' examples, while writing.
  for polls_before_stop in (len(polls) // 10, len(polls) // 2, len(polls) - 2):
    calls = []

    def should_stop():
      calls.append(1)
      return len(calls) > polls_before_stop  # pylint: disable=cell-var-from-loop

    with pytest.raises(pretraining_data.Stopped):
      create_long_tasks.create_long_tasks([corpus], out, tokenizer, settings,
                                          should_stop=should_stop)
    left = sorted(os.listdir(out)) if os.path.exists(out) else []
    assert create_long_tasks.SUMMARY_NAME not in left
    assert not [name for name in left if ".tmp-" in name], left


@pytest.mark.slow
def test_sigterm_stops_within_seconds(tmp_path, vocab_file):
  text = open(shared_path("sample_1mb.txt"), encoding="utf-8").read()
  (tmp_path / "corpus.txt").write_text(text * 3, encoding="utf-8")
  out = tmp_path / "out"
  # Run as a module (as the README says); every wait below has a timeout.
  proc = subprocess.Popen(
      [sys.executable, "-m", "etc_model.create_long_tasks",
       "--input_file=%s" % (tmp_path / "corpus.txt"), "--output_dir=%s" % out,
       "--vocab_file=" + vocab_file, "--max_seq_length=512", "--max_global_seq_length=64",
       "--min_context_tokens=128"],
      cwd=REPO_DIR, env=tool_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 60
  while "*** Reading 1 input file(s)" not in proc.stderr.readline():
    assert proc.poll() is None and time.time() < deadline, "the tool ended or hung at start"
  time.sleep(0.5)
  assert proc.poll() is None, "the tool ended before it could be signalled"
  proc.send_signal(signal.SIGTERM)
  sent = time.time()
  try:
    _, err = proc.communicate(timeout=60)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.communicate(timeout=60)
    raise
  assert proc.returncode == 143, err[-2000:]
  assert "interrupted (signal 15)" in err and "Traceback" not in err
  assert time.time() - sent < 5
  left = sorted(os.listdir(out)) if out.exists() else []
  assert create_long_tasks.SUMMARY_NAME not in left
  assert not [name for name in left if ".tmp-" in name], left


def test_tokenize_word_cache_is_bounded():
  calls = []

  class Tokenizer(object):
    def tokenize(self, word):
      calls.append(word)
      return list(word)

    def convert_tokens_to_ids(self, pieces):
      return [ord(p) for p in pieces]

  tokenize_word = long_tasks.make_tokenize_word(Tokenizer(), cache_size=2)
  assert [tokenize_word(w) for w in ("ab", "ab", "c", "d", "ab")] == [
      [97, 98], [97, 98], [99], [100], [97, 98]]
  # "ab" is tokenised again once two other words have pushed it out of the cache.
  assert calls == ["ab", "c", "d", "ab"]
  assert tokenize_word.cache_info().currsize == 2
