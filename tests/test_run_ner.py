"""run_ner / ner_metrics: CoNLL readers on hand-made files of every layout and scheme, scheme
conversions, the conlleval rules on hand-made cases (hand-computed scores), windows that never
lose or duplicate a word (property test, Python and graph), and whole jobs on a slice of the real
WNUT 2017 data with a tiny random BERT: train / eval / predict / export, the raw-text export equal
to Estimator.predict in a fresh process, bad inputs as one-line errors, SIGTERM -> 143 without
results and an exact resume."""

import io
import json
import os
import random
import signal
import textwrap
import types
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO_DIR, TINY_BERT_CONFIG, run_tool, shared_path, start_tool
from conftest import last_error_line, write_random_bert_checkpoint

from realformer_tf import common
from realformer_tf import export_utils
import modeling
from realformer_tf import batch_padding
from realformer_tf import ner_metrics as nm
import run_ner
import run_squad
from paper import sweep
import tokenization

FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "ner")
VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")


def _fixture(name):
  return os.path.join(FIXTURES, name)


# ----------------------------------------------------------------------------------------------
# Readers.


def test_read_every_layout():
  bio = run_ner.read_conll(_fixture("bio_tab.conll"), "train_file")
  assert [s.words for s in bio.sentences] == [["EU", "rejects", "German", "call", "."],
                                              ["Peter", "Blackburn"],
                                              ["New", "York", "is", "big"]]
  assert bio.sentences[1].tags == ["B-PER", "I-PER"]
  # A "\t" line separates sentences like an empty one; line numbers are the file's.
  assert [s.line_numbers for s in bio.sentences] == [[1, 2, 3, 4, 5], [7, 8], [10, 11, 12, 13]]
  assert (bio.tagged, bio.num_columns, bio.num_docstarts) == (True, 2, 0)

  iob1 = run_ner.read_conll(_fixture("iob1_space.txt"), "train_file")
  assert iob1.sentences[0].tags == ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "O"]
  assert iob1.sentences[1].words == ["The", "European", "Commission", "said"]

  conll03 = run_ner.read_conll(_fixture("conll2003.txt"), "train_file")
  assert conll03.num_columns == 4 and conll03.num_docstarts == 2
  assert [s.words for s in conll03.sentences] == [
      ["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"],
      ["BRUSSELS", "1996-08-22"]]
  # The tag is the last column, not the chunk tag (I-NP).
  assert conll03.sentences[0].tags == ["I-ORG", "O", "I-MISC", "O", "O"]

  bioes = run_ner.read_conll(_fixture("bioes.tsv"), "dev_file")  # CRLF line ends
  assert bioes.sentences[0].tags[:4] == ["B-PER", "E-PER", "O", "S-PER"]
  assert bioes.sentences[1].words == ["Berlin"]

  untagged = run_ner.read_conll(_fixture("untagged.txt"), "test_file", allow_untagged=True)
  assert not untagged.tagged and untagged.sentences[0].tags is None
  assert untagged.sentences[0].words == ["Peter", "Blackburn", "visited", "S\u00e3o", "Paulo"]
  assert untagged.sentences[1].words == ["@paulwalk", "it", "'s", "here", "\U0001f602", "\ufe0f"]


def test_schemes_detected_and_validated():
  files = {name: run_ner.read_conll(_fixture(name), "train_file") for name in
           ("bio_tab.conll", "iob1_space.txt", "conll2003.txt", "bioes.tsv")}
  assert {name: run_ner.resolve_scheme("auto", [f]) for name, f in files.items()} == {
      "bio_tab.conll": "bio", "iob1_space.txt": "iob1", "conll2003.txt": "iob1",
      "bioes.tsv": "bioes"}
  assert run_ner.resolve_scheme("bio", [files["bioes.tsv"]]) == "bio"  # the flag wins
  # No tagged file: the scheme recorded by training, else BIO.
  untagged = run_ner.read_conll(_fixture("untagged.txt"), "test_file", allow_untagged=True)
  assert run_ner.resolve_scheme("auto", [untagged], "iob1") == "iob1"
  assert run_ner.resolve_scheme("auto", [untagged]) == "bio"
  with pytest.raises(common.UsageError) as e:
    run_ner.check_tags(files["bioes.tsv"], "bio", detected=False)
  assert str(e.value) == (
      "%s:2: tag 'E-PER' is not a BIO (IOB2) tag (O, B-<type>, I-<type>); --tag_scheme=bio" %
      _fixture("bioes.tsv"))
  for f in files.values():
    run_ner.check_tags(f, "bioes", detected=True)  # B/I/O tags are BIOES tags too


def test_stray_i_tag_does_not_switch_a_bio_file_to_iob1(tmp_path, monkeypatch):
  # A BIO file (every entity starts with B-) with one stray I- at a sentence start.
  lines = []
  for i in range(6):
    lines += ["John\tB-PER", "Smith\tI-PER", "in\tO", "Paris\tB-LOC", ""]
  lines[10:10] = ["Mary\tI-PER", "went\tO", ""]
  (tmp_path / "train.conll").write_text("\n".join(lines) + "\n")
  conll = run_ner.read_conll(str(tmp_path / "train.conll"), "train_file")
  warnings = []
  monkeypatch.setattr(run_ner.tf1.logging, "warning",
                      lambda msg, *args: warnings.append(msg % args))
  assert run_ner.resolve_scheme("auto", [conll]) == "bio"
  assert len(warnings) == 1 and "%s: 1 (first at line 11)" % conll.path in warnings[0]
  assert "--tag_scheme=iob1" in warnings[0]
  assert nm.scheme_evidence(s.tags for s in conll.sentences) == {
      "bioes": 0, "b": 12, "i_starts": 1, "first_i_start": (2, 0)}
  # An IOB1 file (CoNLL-2003's: I- starts, B- only between adjacent entities) stays IOB1,
  # without a warning; the flag still decides.
  warnings[:] = []
  iob1 = run_ner.read_conll(_fixture("iob1_space.txt"), "train_file")
  assert run_ner.resolve_scheme("auto", [iob1]) == "iob1" and not warnings
  assert run_ner.resolve_scheme("iob1", [conll]) == "iob1"
  assert nm.detect_scheme([["I-A", "B-A"], ["I-B"]]) == "iob1"
  assert nm.detect_scheme([["B-A", "I-A"], ["I-B"]]) == "bio"  # a tie: BIO


def test_label_set_and_types():
  bio = run_ner.read_conll(_fixture("bio_tab.conll"), "train_file")
  assert run_ner.entity_types(bio) == {"ORG", "MISC", "PER", "LOC"}
  assert run_ner.label_list({"PER", "creative-work"}) == [
      "O", "B-PER", "I-PER", "B-creative-work", "I-creative-work"]
  assert run_ner.parse_labels_flag("B-PER, S-LOC,product,O,I-creative-work") == {
      "PER", "LOC", "product", "creative-work"}
  dev = run_ner.read_conll(_fixture("bioes.tsv"), "dev_file")
  with pytest.raises(common.UsageError) as e:
    run_ner.check_types(dev, {"PER"}, "train.conll")
  assert str(e.value).startswith("%s:6: tag 'B-LOC' has entity type 'LOC', which is not one of "
                                 "the model's (PER, from train.conll); add it to --labels" %
                                 _fixture("bioes.tsv"))
  run_ner.check_types(dev, {"PER", "LOC"}, "train.conll")
  # Gold ids: any scheme is read as entities and looked up as BIO; unknown labels are -1.
  label_map = {label: i for i, label in enumerate(run_ner.label_list({"PER"}))}
  assert run_ner.bio_label_ids(["B-PER", "E-PER", "S-PER", "S-LOC", "O"], label_map) == [
      1, 2, 1, -1, 0]


@pytest.mark.parametrize("content, message", [
    ("EU\tB-ORG\nrejects\n", ":2: one column ('rejects'): a token without a tag (line 1 has 2 "
     "columns)"),
    ("rejects\nEU\tB-ORG\n", ":1: one column ('rejects'): a token without a tag; expected "
     "token<TAB>tag"),
    ("EU NNP B-ORG\nrejects O\n", ":2: 2 columns ('rejects O'), but line 1 has 3"),
    ("EU\tB-ORG\n\tO\n", ":2: no token before the tab"),
    ("", ": no sentences (an empty file)"),
    ("\n\t\n", ": no sentences (an empty file)"),
    ("-DOCSTART- -X- -X- O\n\n", ": no sentences (an empty file, or only -DOCSTART- lines)"),
    # A text without line breaks (not a CoNLL file): the column sanity limit.
    pytest.param(" ".join(["w"] * 613) + "\n", ":1: 613 columns, more than 64 (the line starts "
                 "'w w w w w w w w w w '): not a CoNLL token line", id="613-columns"),
])
def test_bad_files_are_one_line_errors(tmp_path, content, message):
  path = tmp_path / "train.conll"
  path.write_text(content)
  with pytest.raises(common.UsageError) as e:
    run_ner.read_conll(str(path), "train_file")
  text = str(e.value)
  assert "\n" not in text and message in text and str(path) in text, text


def test_line_ends_and_unicode_separators(tmp_path):
  # CR-only (old Mac) line ends, CRLF and LF: the same sentences and line numbers. (GFile's
  # line iteration deletes every \r: a CR-only file was one line of 613 columns.)
  want = [["EU", "rejects"], ["Paris"]]
  for name, data in (("lf", b"EU B-ORG\nrejects O\n\nParis B-LOC\n"),
                     ("cr", b"EU B-ORG\rrejects O\r\rParis B-LOC\r"),
                     ("crlf", b"EU B-ORG\r\nrejects O\r\n\r\nParis B-LOC"),
                     ("mixed", b"EU B-ORG\rrejects O\r\n\nParis B-LOC\r\n")):
    (tmp_path / name).write_bytes(data)
    conll = run_ner.read_conll(str(tmp_path / name), "train_file")
    assert [s.words for s in conll.sentences] == want, name
    assert [s.line_numbers for s in conll.sentences] == [[1, 2], [4]], name
    assert conll.num_columns == 2 and conll.sentences[1].tags == ["B-LOC"], name
  # Lines split in chunks at every position, \r\n across a chunk boundary included.
  data = b"a\r\nbb\rc\n\r\rd\r"
  for size in (1, 2, 3, 5, 100):
    lines = run_ner._lines(io.BytesIO(data), size)  # pylint: disable=protected-access
    assert [l for _, l in lines] == [x.encode() for x in data.decode().splitlines()], size
  # A space-separated token holding a no-break space or U+2028 (which str.split() splits at)
  # is one token, as in conlleval; on the first line it used to make every other line "wrong".
  (tmp_path / "nbsp").write_text("New\u00a0York B-LOC\nis O\n\nx\u2028y O\nz\u0085w O\n",
                                 encoding="utf-8")
  conll = run_ner.read_conll(str(tmp_path / "nbsp"), "train_file")
  assert [s.words for s in conll.sentences] == [["New\u00a0York", "is"],
                                                ["x\u2028y", "z\u0085w"]]
  # A real column-count error still names the line that has the odd count.
  (tmp_path / "odd").write_text("EU B-ORG\nNew\u00a0York NNP B-LOC\n", encoding="utf-8")
  with pytest.raises(common.UsageError) as e:
    run_ner.read_conll(str(tmp_path / "odd"), "train_file")
  assert str(e.value) == "%s:2: 3 columns ('New\\xa0York NNP B-LOC'), but line 1 has 2" % (
      tmp_path / "odd")


def test_words_are_kept_exactly(tmp_path):
  # Invalid UTF-8 and a byte-order mark: the word is written back byte for byte.
  (tmp_path / "t.conll").write_bytes(b"\xef\xbb\xbfbad\xffbyte\tO\nok\tB-X\n")
  conll = run_ner.read_conll(str(tmp_path / "t.conll"), "test_file")
  run_ner.write_predictions_conll(str(tmp_path / "p.conll"), conll, [["O", "I-X"]])
  assert (tmp_path / "p.conll").read_bytes() == b"bad\xffbyte O O\nok B-X I-X\n\n"
  # A token with a space (tab layout): the whole file is tab-separated.
  (tmp_path / "s.conll").write_text("New York\tB-LOC\n")
  conll = run_ner.read_conll(str(tmp_path / "s.conll"), "test_file")
  assert run_ner.write_predictions_conll(str(tmp_path / "q.conll"), conll, [["O"]]) == "\t"
  assert (tmp_path / "q.conll").read_text() == "New York\tB-LOC\tO\n\n"


# ----------------------------------------------------------------------------------------------
# conlleval rules and schemes.


def _chunks(tags):
  return [tuple(c) for c in nm.get_chunks(tags)]


def test_conlleval_chunk_rules_hand_made():
  # I- without B- starts an entity (after O and at the sentence start).
  assert _chunks(["I-PER", "I-PER", "O", "I-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
  # A type change inside a run ends one entity and starts another.
  assert _chunks(["B-PER", "I-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 1), ("LOC", 2, 3)]
  # B- after I- of the same type: a new entity (IOB1's use of B-).
  assert _chunks(["I-PER", "I-PER", "B-PER", "O"]) == [("PER", 0, 1), ("PER", 2, 2)]
  # An entity open at the end of the sentence ends there.
  assert _chunks(["O", "B-ORG", "I-ORG"]) == [("ORG", 1, 2)]
  # BIOES: E- and S- end entities; a BIOES sentence without E- still reads.
  assert _chunks(["B-PER", "E-PER", "S-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "E-LOC"]) == [
      ("PER", 0, 1), ("PER", 2, 2), ("PER", 3, 3), ("LOC", 4, 6), ("LOC", 7, 7)]
  assert _chunks(["B-PER", "I-PER", "O", "I-PER", "E-PER"]) == [("PER", 0, 1), ("PER", 3, 4)]
  # Types with hyphens: split at the first one.
  assert _chunks(["B-creative-work", "I-creative-work"]) == [("creative-work", 0, 1)]
  assert nm.start_of_chunk("O", "I", "", "PER") and not nm.start_of_chunk("B", "I", "PER", "PER")
  assert nm.end_of_chunk("B", "O", "PER", "") and nm.end_of_chunk("I", "I", "PER", "LOC")
  assert not nm.end_of_chunk("B", "I", "PER", "PER")


def test_conlleval_scores_hand_computed():
  gold = [["B-PER", "I-PER", "O", "B-LOC"],          # PER[0,1], LOC[3]
          ["O", "I-ORG", "I-ORG", "O", "B-PER"],     # ORG[1,2], PER[4] (ends with the sentence)
          ["B-LOC", "O"]]                            # LOC[0]
  pred = [["B-PER", "I-PER", "O", "B-ORG"],          # PER[0,1] correct, ORG[3] wrong type
          ["O", "B-ORG", "I-ORG", "O", "O"],         # ORG[1,2] correct (I- vs B-), PER missed
          ["I-LOC", "I-LOC"]]                        # LOC[0,1] wrong span
  scores = nm.evaluate(gold, pred)
  # 5 gold, 4 predicted, 2 correct: P = 2/4, R = 2/5, F1 = 2PR/(P+R) = 4/9.
  assert (scores["num_gold_entities"], scores["num_predicted_entities"],
          scores["num_correct_entities"]) == (5, 4, 2)
  assert scores["precision"] == pytest.approx(0.5)
  assert scores["recall"] == pytest.approx(0.4)
  assert scores["f1"] == pytest.approx(4 / 9)
  # Tokens: 11; equal tags: 3 + 3 (not I-ORG vs B-ORG, not B-PER vs O) + 0 = 7... by hand:
  # s1: B-PER, I-PER, O equal (3); s2: O, I-ORG/I-ORG, O equal (3); s3: none.
  assert scores["accuracy"] == pytest.approx(6 / 11)
  types = scores["types"]
  assert list(types) == ["LOC", "ORG", "PER"]
  assert (types["PER"]["num_gold"], types["PER"]["num_predicted"],
          types["PER"]["num_correct"]) == (2, 1, 1)
  assert types["PER"]["precision"] == 1.0 and types["PER"]["recall"] == 0.5
  assert types["PER"]["f1"] == pytest.approx(2 / 3)
  assert types["LOC"]["f1"] == 0.0 and types["LOC"]["num_predicted"] == 1
  assert types["ORG"]["precision"] == pytest.approx(0.5) and types["ORG"]["recall"] == 1.0
  flat = nm.flat_results(scores, "eval_")
  assert flat["eval_f1"] == scores["f1"] and flat["eval_type_ORG_recall"] == 1.0
  report = nm.format_report(scores)
  assert "processed 11 tokens with 5 phrases; found: 4 phrases; correct: 2." in report
  assert "FB1:  44.44" in report
  # An entity at the end of one sentence never joins one at the start of the next.
  assert nm.evaluate([["B-PER"], ["I-PER"]], [["B-PER"], ["I-PER"]])["num_gold_entities"] == 2
  assert nm.evaluate([["O"]], [["O"]])["f1"] == 0.0  # no entity: 0, not a division by zero


def test_iob1_and_bioes_scores():
  # The same entities in three schemes score the same; token accuracy is per tag string.
  gold_bio = [["B-PER", "I-PER", "B-PER", "O", "B-LOC"]]
  gold_iob1 = [["I-PER", "I-PER", "B-PER", "O", "I-LOC"]]
  gold_bioes = [["B-PER", "E-PER", "S-PER", "O", "S-LOC"]]
  pred_bioes = [["B-PER", "E-PER", "B-PER", "E-PER", "S-LOC"]]  # PER[2,3] wrong span
  for gold in (gold_bio, gold_iob1, gold_bioes):
    scores = nm.evaluate(gold, pred_bioes)
    assert (scores["num_gold_entities"], scores["num_correct_entities"]) == (3, 2)
    assert scores["f1"] == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
  assert nm.evaluate(gold_bioes, pred_bioes)["accuracy"] == pytest.approx(3 / 5)


def test_scheme_conversions_round_trip():
  cases = {
      "bio": ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "I-LOC", "I-LOC", "B-ORG"],
      "iob1": ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-LOC", "I-LOC", "I-ORG"],
      "bioes": ["B-PER", "E-PER", "S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "S-ORG"],
  }
  for source, tags in cases.items():
    for target in nm.SCHEMES:
      assert nm.convert_tags(tags, target) == cases[target], (source, target)
  # Property: any entities written in any scheme read back as the same entities.
  rng = random.Random(0)
  for _ in range(300):
    length = rng.randint(0, 12)
    chunks, i = [], 0
    while i < length:
      if rng.random() < 0.4:
        end = min(length - 1, i + rng.randint(0, 3))
        chunks.append(nm.Chunk(rng.choice(["PER", "LOC", "creative-work"]), i, end))
        i = end + 1
      else:
        i += 1
    for scheme in nm.SCHEMES:
      tags = nm.chunks_to_tags(chunks, length, scheme)
      assert nm.get_chunks(tags) == chunks
      assert all(nm.is_valid_tag(t, scheme) for t in tags)
      for other in nm.SCHEMES:
        assert nm.convert_tags(nm.convert_tags(tags, other), scheme) == tags


# ----------------------------------------------------------------------------------------------
# Windows.


def test_windows_never_lose_or_duplicate_a_word():
  rng = random.Random(1)
  for trial in range(400):
    num_words = rng.randint(0, 40)
    pieces_per_word = [rng.choice([0, 1, 1, 1, 2, 3, 7]) for _ in range(num_words)]
    first_pieces, n = [], 0
    for count in pieces_per_word:
      first_pieces.append(n if count else -1)
      n += count
    window = rng.randint(2, 20)
    stride = rng.randint(1, window - 1)
    spans, assigned = run_ner.window_assignments(first_pieces, n, window, stride)
    # The windows cover every piece, each at most `window` long.
    covered = set(p for s in spans for p in range(s.start, s.start + s.length))
    assert covered == set(range(n)) and all(s.length <= window for s in spans), trial
    words = [word for positions in assigned for _, word in positions]
    placed = [i for i, p in enumerate(first_pieces) if p >= 0]
    assert sorted(words) == placed, trial  # every placeable word exactly once
    for index, positions in enumerate(assigned):
      for position, word in positions:
        piece = spans[index].start + position - 1
        assert piece == first_pieces[word]
        # The window is the max-context one: run_squad's rule (where floats cannot tie).
        scores = [min(piece - s.start, s.start + s.length - 1 - piece) + 0.01 * s.length
                  for s in spans if s.start <= piece < s.start + s.length]
        check = run_squad._check_is_max_context  # pylint: disable=protected-access
        if sorted(scores)[-1] - sorted(scores + [-1])[-2] > 1e-6:
          assert check(spans, index, piece)


def test_max_context_ties_are_exact():
  # min context 2 in a 126-piece window vs 3 in a 26-piece one: 2.00 + 1.26 == 3.00 + 0.26.
  spans = [run_squad.DocSpan(0, 126), run_squad.DocSpan(100, 26)]
  assert run_ner.max_context_window(spans, 123) == 0  # first window on an exact tie
  assert 100 * 2 + 126 == 100 * 3 + 26


def test_convert_sentences_real_pieces(vocab_file):
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  vocab = tokenization.load_vocab(vocab_file)
  words = ["Angela", "Merkel", "visited", "S\u00e3o", "Paulo", "\ufe0f", "yesterday"]
  tags = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O"]
  labels = run_ner.label_list({"PER", "LOC"})
  label_map = {label: i for i, label in enumerate(labels)}
  sentence = run_ner.Sentence(words, tags, list(range(1, 8)))
  # 7 pieces (merkel = mer ##kel, U+FE0F none), window 6, stride 3: windows at 0 and 3.
  features, stats = run_ner.convert_sentences([sentence], tokenizer, label_map, 8, 3,
                                              with_labels=True)
  assert (stats.num_words, stats.num_unplaced_words, stats.num_split_sentences) == (7, 1, 1)
  assert stats.first_unplaced == [6]
  seen = {}
  for f in features:
    assert f.input_ids[0] == vocab["[CLS]"] and len(f.input_ids) == 8
    for position, word in f.word_positions:
      seen[word] = f.input_ids[position]
      assert f.label_weights[position] == 1.0
      assert f.label_ids[position] == label_map[tags[word]]
    assert sum(f.label_weights) == len(f.word_positions)
  assert len(features) == 2
  assert seen == {0: vocab["angela"], 1: vocab["mer"], 2: vocab["visited"], 3: vocab["sao"],
                  4: vocab["paulo"], 6: vocab["yesterday"]}
  outputs = [{"logits": np.eye(5, dtype=np.float32)[np.array(f.label_ids)]} for f in features]
  logits = run_ner.gather_word_logits([sentence], features, outputs, 5)[0]
  assert np.isnan(logits[5]).all()  # the unplaced word
  assert run_ner.predicted_tags(logits, labels, "bioes") == [
      "B-PER", "E-PER", "O", "B-LOC", "E-LOC", "O", "O"]


def test_graph_windows_and_chunks_match_python():
  """windows_graph / max_context_graph / chunk_graph (the export's) against the Python code."""
  rng = random.Random(2)
  counts = [rng.choice([0, 1, 3, 9, 14, 15, 16, 40]) for _ in range(12)]
  max_seq_length, stride = 16, 5
  piece_ids = tf.ragged.constant([[1000 + 10 * t + i for i in range(n)]
                                  for t, n in enumerate(counts)], dtype=tf.int32,
                                 ragged_rank=1)
  windows = run_ner.windows_graph(piece_ids, max_seq_length, stride, 101, 102)
  best_window, best_position = run_ner.max_context_graph(windows, sum(counts))
  ids = windows["input_ids"].numpy()
  texts = windows["text"].numpy()
  offset = 0
  for t, n in enumerate(counts):
    spans = run_squad.make_doc_spans(n, max_seq_length - 2, stride)
    rows = np.where(texts == t)[0]
    assert len(rows) == max(1, len(spans))
    for row, span in zip(rows, spans):
      want = [101] + [1000 + 10 * t + i for i in range(span.start, span.start + span.length)]
      want += [102] + [0] * (max_seq_length - span.length - 2)
      assert ids[row].tolist() == want
    for piece in range(n):
      w = run_ner.max_context_window(spans, piece)
      assert best_window[offset + piece] == rows[w]
      assert best_position[offset + piece] == piece - spans[w].start + 1
    offset += n
  # chunk_graph + scheme_tags_graph against ner_metrics on random BIO label sequences.
  labels = run_ner.label_list({"A", "B"})
  sentences = [[rng.choice(labels) for _ in range(rng.randint(0, 9))] for _ in range(30)]
  flat = [nm.split_tag(x) for s in sentences for x in s]
  prefix = tf.constant([{"O": 0, "B": 1, "I": 2}[p] for p, _ in flat] or [], tf.int32)
  type_id = tf.constant([{"": 0, "A": 1, "B": 2}[t] for _, t in flat] or [], tf.int32)
  lengths = [len(s) for s in sentences]
  row_ids = tf.constant(np.repeat(np.arange(len(sentences)), lengths), tf.int32)
  starts = tf.constant(np.cumsum([0] + lengths[:-1]), tf.int32)
  limits = tf.constant(np.cumsum(lengths), tf.int32)
  start, end, prev_prefix, prev_type = run_ner.chunk_graph(prefix, type_id, row_ids, starts,
                                                           limits)
  names = tf.gather(tf.constant(["", "A", "B"]), type_id)
  for scheme in nm.SCHEMES:
    tags = run_ner.scheme_tags_graph(scheme, prefix, names, start, end, prev_prefix, prev_type,
                                     type_id).numpy()
    got = np.split(np.array([x.decode() for x in tags], dtype=object), np.cumsum(lengths)[:-1])
    assert [list(x) for x in got] == [nm.convert_tags(s, scheme) for s in sentences], scheme


# Control characters, separators and other hostile text for the raw-text SavedModel's split.
HOSTILE_TEXTS = [
    "Obama in \x00 Paris", "a\x00b c", "\x00", "", " \t\r\n ", "tab\there\r\nnext\rline",
    "x\u2028y\u2029z\u00a0w\u3000v\u2007u\u202ft", "Z\u00fcrich\x0bBern\x0cGenf\x1cA\x1fB\x85C",
    "e\u0301\u200bf zero\ufeffwidth \ufffd rep", "(hi)!? \u00bfqu\u00e9?", "\u4e2d\u6587abc def",
    "\x7f\x80x \ufe0f end", "New York-based \U0001f602 @user http://t.co/x"]


def test_split_text_graph_matches_basic_tokenizer():
  """The raw-text export's words are BasicTokenizer's on control characters and separators
  (a NUL used to end the text: "Obama in \\x00 Paris" -> [Obama, in])."""
  for lower in (True, False):
    words, normalized, begin, end = run_ner.split_text_graph(tf.constant(HOSTILE_TEXTS), lower)
    basic = tokenization.BasicTokenizer(do_lower_case=lower)
    for i, text in enumerate(HOSTILE_TEXTS):
      assert [w.decode() for w in normalized[i].numpy()] == basic.tokenize(text), (lower, text)
      raw = text.encode("utf-8")
      # The words as in the text (control characters inside kept), at their byte offsets.
      assert [raw[b:e] for b, e in zip(begin[i].numpy(), end[i].numpy())] == list(
          words[i].numpy()), text
  words, _, _, _ = run_ner.split_text_graph(tf.constant([], tf.string), True)
  assert words.shape[0] == 0


def test_sweep_knows_ner(tmp_path):
  assert sweep.canonical_task("NER") == "ner" and "ner" not in sweep.TASKS
  spec = sweep.ALL_TASKS["ner"]
  assert spec.metrics[0] == ("f1", "eval_f1", "F1") and spec.score == ["f1"]
  (tmp_path / "train.conll").write_text("a\tO\n")
  with pytest.raises(common.UsageError, match="has no dev.conll or dev.txt"):
    sweep.task_data_dir(spec, None, None, {}, ner_dir=str(tmp_path))
  (tmp_path / "valid.txt").write_text("a\tO\n")
  assert sweep.task_data_dir(spec, None, None, {}, ner_dir=str(tmp_path)) == str(tmp_path)
  with pytest.raises(common.UsageError, match="task ner needs --ner_dir"):
    sweep.task_data_dir(spec, None, None, {})
  opts = dict(init_checkpoint="ck", bert_config_file="c.json", vocab_file="v.txt",
              do_lower_case=True, max_seq_length={"glue": 128})
  grid = sweep.task_grid(spec)
  assert grid == sweep.PAPER_GRIDS["glue"]
  (run,) = sweep.build_plan([spec], {"ner": dict(grid, epochs=[3.0], learning_rates=[5e-5])},
                            [2], "out", {"ner": "data/ner"}, opts)
  assert run.cmd[1] == os.path.join(REPO_DIR, "run_ner.py")
  for arg in ("--data_dir=data/ner", "--max_seq_length=128", "--do_train=true",
              "--do_eval=true", "--learning_rate=5e-5", "--seed=2",
              "--output_dir=out/ner/bs32_lr5e-5_ep3/seed2"):
    assert arg in run.cmd
  # Aggregation ranks by eval_f1 (x100).
  for lr, f1 in (("1e-5", 0.30), ("5e-5", 0.42)):
    run_dir = tmp_path / "sweep" / "ner" / ("bs32_lr%s_ep3" % lr) / "seed1"
    run_dir.mkdir(parents=True)
    (run_dir / "eval_results.json").write_text(json.dumps(
        {"eval_f1": f1, "eval_precision": 0.5, "eval_recall": 0.3}))
  agg = sweep.aggregate(str(tmp_path / "sweep"), ["ner"], log_fn=lambda s: None)
  assert agg["tasks"]["ner"]["best"] == "32/5e-5/3" and agg["glue_overall"] is None
  assert sweep.tasks_on_disk(str(tmp_path / "sweep")) == ["ner"]


def test_padding_buckets_and_trimmed_batches(tmp_path):
  """--padding=longest / bucket slice every window feature (labels and weights too) to the
  batch's longest window, rounded up to a multiple of 8 or to a bucket; defaults and TPU."""
  eu = batch_padding
  assert eu.padding_buckets(128) == [32, 64, 128]
  assert eu.padding_buckets(384) == [32, 64, 128, 256, 384]
  assert eu.padding_buckets(64) == [32, 64] and eu.padding_buckets(33) == [32, 33]
  assert eu.padding_buckets(32) == [32] and eu.padding_buckets(24) == [24]
  seq = 96  # buckets 32, 64, 96
  rng = np.random.RandomState(0)
  lengths = [3, 9, 17, 40, 33, 96, 70, 1, 64, 65, 2]
  features = []
  for n in lengths:
    ids = list(rng.randint(1, 100, n)) + [0] * (seq - n)
    features.append(run_ner.WindowFeature(
        0, ids, [1] * n + [0] * (seq - n), [0] * seq, list(rng.randint(0, 5, n)) + [0] * (seq - n),
        [1.0] * n + [0.0] * (seq - n), []))
  record = str(tmp_path / "windows.tf_record")
  run_ner.write_features(features, record)
  batches = {}
  for padding in ("max_length", "longest", "bucket"):
    input_fn = run_ner.input_fn_builder(record, seq, False, False, padding=padding)
    batches[padding] = list(input_fn({"batch_size": 2}).as_numpy_iterator())
  pairs = [lengths[i:i + 2] for i in range(0, len(lengths), 2)]
  assert [b["input_ids"].shape[1] for b in batches["max_length"]] == [seq] * 6
  assert [b["input_ids"].shape[1] for b in batches["longest"]] == [16, 40, 96, 72, 72, 8]
  assert [b["input_ids"].shape[1] for b in batches["bucket"]] == [32, 64, 96, 96, 96, 32]
  for padding in ("longest", "bucket"):
    for full, cut, pair in zip(batches["max_length"], batches[padding], pairs):
      n = cut["input_ids"].shape[1]
      assert n >= max(pair) and sorted(cut) == sorted(full)
      for name in ("input_ids", "input_mask", "segment_ids", "label_ids", "label_weights"):
        np.testing.assert_array_equal(cut[name], full[name][:, :n], err_msg=name)
        assert not full[name][:, n:].any(), name  # only padding was cut
  # Defaults: longest for evaluation (bucket with --use_xla), max_length on TPU; training too
  # when the model draws its dropout masks at --max_seq_length (run_classifier, run_ner), else
  # max_length (run_squad).
  flags = lambda **kw: types.SimpleNamespace(**dict(dict(padding=None, use_tpu=False,
                                                         use_xla=False), **kw))
  assert eu.effective_padding(flags()) == "longest"
  assert eu.effective_padding(flags(), training=True) == "max_length"
  full_length = dict(training=True, full_length_dropout=True)
  assert eu.effective_padding(flags(), **full_length) == "longest"
  assert eu.effective_padding(flags(use_xla=True), **full_length) == "bucket"
  assert eu.effective_padding(flags(use_tpu=True), **full_length) == "max_length"
  assert eu.effective_padding(flags(padding="max_length"), **full_length) == "max_length"
  assert eu.effective_padding(flags(use_xla=True)) == "bucket"
  assert eu.effective_padding(flags(use_xla=True, padding="longest")) == "longest"
  assert eu.effective_padding(flags(use_tpu=True)) == "max_length"
  assert eu.effective_padding(flags(), default="max_length") == "max_length"
  assert eu.effective_padding(flags(padding="bucket"), training=True) == "bucket"
  # BERT skips the padding rows with longest (the default) on CPU / GPU only.
  assert eu.skips_padding(flags()) and eu.skips_padding(flags(padding="longest"))
  for kw in (dict(use_xla=True), dict(use_tpu=True), dict(padding="max_length"),
             dict(padding="bucket")):
    assert not eu.skips_padding(flags(**kw)), kw
  eu.check_padding_flag(flags(padding="bucket"))
  for padding in ("longest", "bucket"):
    with pytest.raises(common.UsageError, match="--padding=%s: not with --use_tpu" % padding):
      eu.check_padding_flag(flags(padding=padding, use_tpu=True))


# ----------------------------------------------------------------------------------------------
# Whole jobs on a slice of WNUT 2017 (real data), tiny random BERT.

SEQ = 32


def _sentences(path):
  """The raw line blocks of a CoNLL file (each block: a sentence's lines, kept byte-exact)."""
  blocks, current = [], []
  with open(path, "rb") as f:
    for line in f:
      if line.strip():
        current.append(line)
      elif current:
        blocks.append(current)
        current = []
  if current:
    blocks.append(current)
  return blocks


def _slice(src, dst, count, also=None):
  """The first `count` sentences of src, plus the first later one with a line `also` accepts."""
  blocks = _sentences(src)
  chosen = blocks[:count]
  if also:
    chosen += [b for b in blocks[count:] if any(also(l) for l in b)][:1]
  with open(dst, "wb") as f:
    f.write(b"".join(b"".join(block) + b"\n" for block in chosen))
  return chosen


@pytest.fixture(scope="module")
def wnut(tmp_path_factory):
  """Slices of WNUT 2017 train / dev / test, a tiny config and a random BERT checkpoint."""
  src = shared_path("ner", "wnut17")
  root = tmp_path_factory.mktemp("wnut")
  data = root / "data"
  data.mkdir()
  _slice(os.path.join(src, "train.conll"), str(data / "train.conll"), 40)
  dev_blocks = _slice(os.path.join(src, "dev.conll"), str(data / "dev.conll"), 15,
                      also=_is_pieceless)
  test_blocks = _slice(os.path.join(src, "test.conll"), str(data / "test.conll"), 15,
                       also=_is_pieceless)
  config_file = str(root / "bert_config.json")
  with open(config_file, "w") as f:
    json.dump(TINY_BERT_CONFIG, f)
  checkpoint = write_random_bert_checkpoint(config_file, str(root / "bert_model.ckpt"))
  return {"root": root, "data": data, "config": config_file, "checkpoint": checkpoint,
          "test_blocks": test_blocks,
          "dev_pieceless": sum(1 for b in dev_blocks for l in b if _is_pieceless(l)),
          "test_pieceless": sum(1 for b in test_blocks for l in b if _is_pieceless(l))}


def _is_pieceless(line):
  """A WNUT line whose word is U+FE0F alone: a word the tokenizer gives no word piece."""
  return line.startswith(b"\xef\xb8\x8f\t")


def _args(wnut, out, extra=()):
  return ["--data_dir=%s" % wnut["data"], "--vocab_file=%s" % VOCAB,
          "--bert_config_file=%s" % wnut["config"], "--init_checkpoint=%s" % wnut["checkpoint"],
          "--output_dir=%s" % out, "--max_seq_length=%d" % SEQ, "--doc_stride=10",
          "--train_batch_size=8", "--learning_rate=1e-3", "--num_train_epochs=4",
          "--predict_batch_size=16", "--eval_batch_size=16"] + list(extra)


def _checkpoint_values(output_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(output_dir)))
  names = [n for n in reader.get_variable_to_shape_map()
           if n.startswith(("bert/", "cls/")) and "adam" not in n]
  return {n: reader.get_tensor(n) for n in names}


@pytest.fixture(scope="module")
def trained(wnut):
  """One --do_train --do_eval --do_predict --export_dir job."""
  out, export = wnut["root"] / "out", wnut["root"] / "export"
  log = run_tool("run_ner.py", _args(wnut, out, [
      "--do_train", "--do_eval", "--do_predict", "--export_dir=%s" % export,
      "--save_checkpoints_steps=1000", "--output_word_logits", "--padding=max_length"])).output
  return {"out": out, "export": export, "log": log}


@pytest.mark.slow
def test_train_eval_predict_export_on_wnut(wnut, trained):
  out, log = trained["out"], trained["log"]
  assert "Tag scheme: BIO (IOB2) (detected)" in log
  results = json.loads((out / "eval_results.json").read_text())
  steps = results["num_train_steps"]
  assert results["global_step"] == steps > 0
  # Which checkpoint produced the results: in eval_results / test_results, and beside
  # predictions.conll (its format has no room for it).
  record = {"checkpoint": str(out / ("model.ckpt-%d" % steps)), "global_step": steps}
  assert (results["checkpoint"], results["checkpoint_step"]) == tuple(record.values())
  assert json.loads((out / "predictions.conll.checkpoint.json").read_text()) == record
  assert "checkpoint = %s\n" % record["checkpoint"] in (out / "eval_results.txt").read_text()
  for key in ("eval_f1", "eval_precision", "eval_recall", "eval_accuracy", "eval_loss",
              "eval_type_person_f1", "eval_num_gold_entities"):
    assert key in results, key
  # The dev slice has words that are only U+FE0F: counted, not dropped.
  assert results["eval_num_unplaced_words"] == wnut["dev_pieceless"] > 0
  assert "eval_num_unplaced_words = %d" % wnut["dev_pieceless"] in (
      out / "eval_results.txt").read_text()
  assert 0.0 <= results["eval_f1"] <= 1.0 and results["eval_accuracy"] > 0.5
  labels = (out / "labels.txt").read_text().split()
  assert labels[0] == "O" and len(labels) == 13 and "B-creative-work" in labels
  assert json.loads((out / "ner_config.json").read_text())["tag_scheme"] == "bio"
  # predictions.conll: `token gold predicted`, the words and gold tags exactly as the input.
  blocks = wnut["test_blocks"]
  predicted = (out / "predictions.conll").read_bytes().split(b"\n\n")
  assert predicted[-1] == b"" and len(predicted) == len(blocks) + 1
  for block, sentence in zip(blocks, predicted):
    rows = sentence.split(b"\n")
    assert len(rows) == len(block)
    for line, row in zip(block, rows):
      word, gold = line.rstrip(b"\n").split(b"\t")
      fields = row.split(b" ")
      assert fields[:2] == [word, gold] and len(fields) == 3
      assert nm.is_valid_tag(fields[2].decode(), "bio")
  test_results = json.loads((out / "test_results.json").read_text())
  assert test_results["checkpoint"] == record["checkpoint"]
  assert test_results["test_num_unplaced_words"] == wnut["test_pieceless"] > 0
  assert test_results["test_num_words"] == sum(len(b) for b in blocks)
  export = trained["export"]
  for name in ("saved_model.pb", "labels.txt", "ner_config.json", "bert_config.json",
               common.EXPORT_MARKER):
    assert (export / name).exists(), name
  assert not [p for p in os.listdir(str(wnut["root"])) if ".tmp-" in p]


def _batch_lengths(record_file, batch_size):
  """The longest window (real pieces) of each batch of a window TFRecord, in order."""
  lengths = [sum(tf.train.Example.FromString(r).features.feature["input_mask"].int64_list.value)
             for r in tf.compat.v1.io.tf_record_iterator(str(record_file))]
  return [max(lengths[i:i + batch_size]) for i in range(0, len(lengths), batch_size)]


@pytest.mark.slow
def test_sigterm_stops_without_results_and_resume_is_exact(wnut, trained):
  """Also: training, evaluation and prediction with --padding=longest (the default; batches of
  2, ragged) equal --padding=max_length (`trained`): weights (dropout on, its masks drawn at
  --max_seq_length), word logits, tags and every score."""
  out = wnut["root"] / "stopped"
  args = _args(wnut, out, ["--do_train", "--do_eval", "--save_checkpoints_steps=1000",
                           "--do_predict", "--output_word_logits", "--eval_batch_size=2",
                           "--predict_batch_size=2"])
  proc = start_tool("run_ner.py", args)
  lines = []
  try:
    for line in proc.stderr:
      lines.append(line)
      # The CheckpointSaverHook writes step 0 after the hooks' begin(): training has started.
      if "Saving checkpoints for 0 into" in line:
        proc.send_signal(signal.SIGTERM)
        break
    lines.append(proc.communicate(timeout=120)[1] or "")
  finally:
    if proc.poll() is None:
      proc.kill()
  log = "".join(lines)
  assert proc.returncode == 143, log[-3000:]
  assert "interrupted (signal 15)" in log
  step = int(tf.train.load_checkpoint(tf.train.latest_checkpoint(str(out))).get_tensor(
      "global_step"))
  want = json.loads((trained["out"] / "eval_results.json").read_text())
  assert 0 < step < want["num_train_steps"]
  for name in ("eval_results.json", "eval_results.txt", ".lock-local"):
    assert not (out / name).exists(), name
  # The same command resumes and ends with the uninterrupted job's weights and scores: to
  # float rounding, as that job trained with --padding=max_length and this one with longest
  # (other dropout masks or batches would differ by far more).
  log = run_tool("run_ner.py", args).output
  assert "), --padding=longest" in log and "), --padding=max_length" in trained["log"]
  got = json.loads((out / "eval_results.json").read_text())
  assert got["global_step"] == want["global_step"]
  reference, resumed = _checkpoint_values(trained["out"]), _checkpoint_values(out)
  assert sorted(reference) == sorted(resumed) and "cls/ner/output_weights" in resumed
  for name in reference:
    np.testing.assert_allclose(resumed[name], reference[name], rtol=1e-5, atol=1e-5,
                               err_msg=name)
  # Evaluated and predicted with --padding=longest, `trained` with max_length: the same
  # outputs to float rounding.
  assert log.count("windows (--padding=longest)") == 2
  assert trained["log"].count("windows (--padding=max_length)") == 2
  for split in ("dev", "test"):  # batches of 2 windows: some shorter, hence sliced
    batches = _batch_lengths(out / ("%s.tf_record" % split), 2)
    assert any(b <= SEQ - 8 for b in batches), (split, batches)
  ref = trained["out"]
  logits, ref_logits = np.load(str(out / "word_logits.npz")), np.load(str(ref / "word_logits.npz"))
  np.testing.assert_array_equal(logits["sentence_lengths"], ref_logits["sentence_lengths"])
  np.testing.assert_allclose(logits["logits"], ref_logits["logits"], rtol=1e-5, atol=1e-5)
  assert (out / "predictions.conll").read_bytes() == (ref / "predictions.conll").read_bytes()
  for name in ("eval_results.json", "test_results.json"):
    got, want = [json.loads((d / name).read_text()) for d in (out, ref)]
    keys = [k for k in want if k.startswith(("eval_", "test_"))]
    assert len(keys) > 10, (name, keys)
    for key in keys:
      np.testing.assert_allclose(got[key], want[key], rtol=1e-5, err_msg=key)


def _cleaned(word):
  return "".join(c for c in word if unicodedata.category(c) not in ("Cc", "Cf"))


RELOAD_SCRIPT = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the ops of the raw-text signature
    export_dir, texts = sys.argv[1], json.loads(open(sys.argv[2]).read())
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    out = {k: v.numpy().tolist() for k, v in serve(text=tf.constant(texts)).items()}
    out["empty_batch_shapes"] = {k: v.shape.as_list()
                                 for k, v in serve(text=tf.constant([], tf.string)).items()}
    # One text a request: its windows only, cut to a shorter bucket when they are short.
    out["single_word_logits"] = [serve(text=tf.constant([t]))["word_logits"].numpy()[0].tolist()
                                 for t in texts]
    print("RESULT " + json.dumps(out, default=lambda b: b.decode("utf-8")))
""")


@pytest.mark.slow
def test_export_equals_estimator_predict(wnut, tmp_path):
  """Raw text through the SavedModel (fresh process) == Estimator.predict on the same words."""
  # A model that predicts entities: random BERT and a random tagging layer, BIOES output.
  types = {"corporation", "creative-work", "group", "location", "person", "product"}
  labels = run_ner.label_list(types)
  config = modeling.BertConfig.from_json_file(wnut["config"])
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(7)
    ids = tf.compat.v1.placeholder(tf.int32, [None, 8])
    run_ner.create_model(config, False, ids, tf.ones_like(ids), tf.zeros_like(ids),
                         len(labels), False)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      checkpoint = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "ner.ckpt"))
  # Raw texts: WNUT test sentences (emoji, @names, URLs, some longer than a window) and
  # hand-made ones (accents, CJK, a format character inside a word, a lone variation selector).
  texts = [b"".join(line.split(b"\t")[0] + b" " for line in block).decode("utf-8").strip()
           for block in wnut["test_blocks"]]
  texts += ["Ünïcödé wörds in São Paulo, 中文 and Zürich!", "co\u200bop \ufe0f end", "one",
            "Obama in \x00 Paris", "a\x00b c\u2028d\u00a0e\x1ff"]
  basic = tokenization.BasicTokenizer(do_lower_case=False)
  tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
  with open(tmp_path / "texts.conll", "w", encoding="utf-8") as f:
    for text in texts:
      # The export's words: BasicTokenizer's, without the ones that have no word piece.
      words = [w for w in basic.tokenize(text) if tokenizer.tokenize(w)]
      f.write("".join(w + "\n" for w in words) + "\n")
  out, export = tmp_path / "out", tmp_path / "export"
  run_tool("run_ner.py", [
      "--test_file=%s" % (tmp_path / "texts.conll"), "--vocab_file=%s" % VOCAB,
      "--bert_config_file=%s" % wnut["config"], "--init_checkpoint=%s" % checkpoint,
      "--output_dir=%s" % out, "--labels=%s" % ",".join(sorted(types)), "--max_seq_length=24",
      "--doc_stride=7", "--tag_scheme=bioes", "--do_predict", "--output_word_logits",
      "--export_dir=%s" % export])
  (tmp_path / "texts.json").write_text(json.dumps(texts))
  proc = run_tool(None, ["-c", RELOAD_SCRIPT, str(export), str(tmp_path / "texts.json")],
                  timeout=180)
  served = json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1][7:])
  # An empty batch: empty outputs (it used to fail, InvalidArgumentError in LowerBound_1).
  empty = served.pop("empty_batch_shapes")
  single = served.pop("single_word_logits")
  assert sorted(empty) == sorted(served) and all(shape[0] == 0 for shape in empty.values())
  # A request's windows run at its longest window's bucket (16 or 24 here): a text alone gives
  # the logits it gets in the whole batch (whose longest windows are full, 24), to 1e-5.
  short = 0
  for b, text in enumerate(texts):
    n = served["num_words"][b]
    np.testing.assert_allclose(np.array(single[b][:n]), np.array(served["word_logits"][b][:n]),
                               rtol=1e-5, atol=1e-5, err_msg=text)
    short += len(tokenizer.tokenize(text)) + 2 <= 16
  assert short >= 5
  npz = np.load(str(out / "word_logits.npz"))
  # Predicted from --init_checkpoint (nothing in --output_dir): the sidecars name it.
  for name in ("predictions.conll", "word_logits.npz"):
    assert json.loads((out / (name + ".checkpoint.json")).read_text()) == {
        "checkpoint": checkpoint, "global_step": None}, name
  logits = np.split(npz["logits"], np.cumsum(npz["sentence_lengths"])[:-1])
  sentences = (out / "predictions.conll").read_text(encoding="utf-8").split("\n\n")[:-1]
  assert len(sentences) == len(texts)
  num_entities = near_ties = 0
  for b, (text, sentence) in enumerate(zip(texts, sentences)):
    rows = [row.split(" ") for row in sentence.split("\n")]
    n = served["num_words"][b]
    words = served["words"][b][:n]
    starts, ends = served["word_starts"][b][:n], served["word_ends"][b][:n]
    # The Python tokenizer's words (which lose the format characters the text has inside).
    assert [_cleaned(w) for w in words] == [row[0] for row in rows], b
    # Character offsets into the text (a format character stays inside its word).
    assert [text[s:e] for s, e in zip(starts, ends)] == words
    np.testing.assert_allclose(np.array(served["word_logits"][b][:n]), logits[b], atol=2e-4)
    tags = served["tags"][b][:n]
    estimator_tags = [row[2] for row in rows]
    if tags != estimator_tags:
      # Only a near-tie of two logits may flip (float round-off between the two graphs).
      top2 = np.sort(logits[b], axis=1)[:, -2:]
      assert (top2[:, 1] - top2[:, 0]).min() < 1e-3, (b, tags, estimator_tags)
      near_ties += 1
      continue
    chunks = nm.get_chunks(estimator_tags)
    k = served["num_entities"][b]
    assert [(served["entity_types"][b][i], served["entity_starts"][b][i],
             served["entity_ends"][b][i], served["entities"][b][i]) for i in range(k)] == [
                 (c.type, starts[c.start], ends[c.end], text[starts[c.start]:ends[c.end]])
                 for c in chunks], b
    num_entities += k
  assert near_ties <= 1 and num_entities > 20  # the comparison covered real entities
  assert max(len(s.split("\n")) for s in sentences) > 30  # and texts longer than a window


def test_export_runs_a_request_at_its_bucket(monkeypatch):
  """NerTagger (the raw-text export) with padding=bucket runs a request's windows at their
  longest, rounded up to 16 / 32 / 48, and answers as padding=max_length to 1e-5."""
  config = modeling.BertConfig.from_dict(TINY_BERT_CONFIG)
  labels = run_ner.label_list({"person", "location"})
  seq = 48

  def build():
    ids = tf.compat.v1.placeholder(tf.int32, [None, None])
    run_ner.create_model(config, False, ids, ids, ids, len(labels), False)
  variables = export_utils.random_variables(build, export_utils.collect_variable_specs(build))
  # The one part of BertPreprocessor NerTagger uses (the whole one traces its packer: slow).
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  vocab = tokenization.load_vocab(VOCAB)
  table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
      tf.constant(list(vocab)), tf.constant(list(vocab.values()), tf.int64)), -1)
  preprocessor = types.SimpleNamespace(
      cls_id=vocab["[CLS]"], sep_id=vocab["[SEP]"], _wordpiece=tf_text.WordpieceTokenizer(
          table, suffix_indicator="##", token_out_type=tf.int64, unknown_token="[UNK]"))
  widths = []
  real_logits = run_ner.NerTagger._logits

  def logits(self, input_ids, input_mask, segment_ids):
    widths.append(int(input_ids.shape[1]))  # run eagerly below: the width the model runs at
    return real_logits(self, input_ids, input_mask, segment_ids)
  monkeypatch.setattr(run_ner.NerTagger, "_logits", logits)
  long_text = " ".join("word%d" % i for i in range(30))  # several windows of 46 pieces
  requests = [["one"], ["Obama visited Paris", "and London on Friday ."],
              ["a b c d e f g h i j k l m n o"], [long_text, "short"]]
  tf.config.run_functions_eagerly(True)  # tracing the text graph is slower than running it
  try:
    got = {}
    for padding in ("bucket", "max_length"):
      tagger = run_ner.NerTagger(config, variables, preprocessor, labels, "bio", seq, 20, True,
                                 padding=padding)
      got[padding] = [tagger.tag(tf.constant(texts)) for texts in requests]
  finally:
    tf.config.run_functions_eagerly(False)
  assert widths == [16, 16, 32, 48] + [seq] * 4
  for bucket, full in zip(got["bucket"], got["max_length"]):
    np.testing.assert_allclose(bucket["word_logits"].numpy(), full["word_logits"].numpy(),
                               rtol=1e-5, atol=1e-5)
    assert bucket["tags"].numpy().tolist() == full["tags"].numpy().tolist()


@pytest.mark.slow
def test_bad_flags_and_inputs_are_one_line_errors(wnut, tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  lines = (wnut["data"] / "train.conll").read_text(encoding="utf-8").splitlines(True)
  (data / "train.conll").write_text("".join(lines[:30]), encoding="utf-8")
  (data / "dev.conll").write_text("Paris\tB-city\n", encoding="utf-8")
  base = _args(dict(wnut, data=data), tmp_path / "out")
  proc = run_tool("run_ner.py", base + ["--do_train", "--doc_stride=30"], expect_rc=2)
  assert last_error_line(proc) == (
      "error: --doc_stride=30: must be smaller than the window of 30 word pieces "
      "(--max_seq_length=32 minus [CLS] and [SEP]), or windows would not overlap")
  proc = run_tool("run_ner.py", base + ["--do_train", "--do_eval"], expect_rc=2)
  last = last_error_line(proc)
  assert last.startswith("error: %s:1: tag 'B-city' has entity type 'city', which is not one "
                         "of the model's (" % (data / "dev.conll")), last
  assert "Traceback" not in proc.output and not (tmp_path / "out").exists()
  # Evaluation / export from no trained weights: one line before any work.
  no_weights = [a for a in base if not a.startswith("--init_checkpoint=")]
  proc = run_tool("run_ner.py", no_weights + ["--do_eval", "--export_dir=%s" % (
      tmp_path / "export")], expect_rc=2)
  assert last_error_line(proc) == (
      "error: --do_eval/--export_dir: no trained weights (no checkpoint in --output_dir=%s), "
      "so it would score a randomly initialised model; give --init_checkpoint, or pass "
      "--allow_random_eval to do that deliberately" % (tmp_path / "out"))
  assert not (tmp_path / "out").exists() and not (tmp_path / "export").exists()
