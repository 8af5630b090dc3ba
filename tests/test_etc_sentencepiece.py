# coding=utf-8
"""The long-context tasks with a SentencePiece vocabulary: records, WikiHop, HotpotQA, training,
export."""

import collections
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf import common
from realformer_tf import vocab_building
import tokenization
from conftest import REPO_DIR, last_error_line, run_tool, shared_path
from etc_model import bert_windows
from etc_model import create_wikihop
from etc_model import etc_modeling
from etc_model import export_long_model as export
from etc_model import hotpotqa
from etc_model import hotpotqa_evaluate
from etc_model import nq
from etc_model import long_task_heads as heads
from etc_model import long_tasks
from etc_model import run_long_tasks
from etc_model import wikihop

tf1 = tf.compat.v1
L, G, C = 128, 16, 4
TINY_CONFIG = {"vocab_size": 1000, "hidden_size": 32, "num_hidden_layers": 2,
               "num_attention_heads": 2, "intermediate_size": 64, "local_radius": 8,
               "relative_pos_max_distance": 4, "relative_vocab_size": 12,
               "residual_attention": "sum", "use_hard_g2l_mask": True,
               "segment_vocab_size": 16}
# Names followed by possessives and punctuation, the cases where SentencePiece ids of a sentence
# cut around its names differ from the whole sentence's.
NAMES = ["Anna", "Boris", "Clara", "David"]
ENDINGS = ["'s house", ",", "!", ".", "?\"", ";", ")", " laughed"]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
  """A 1000-piece cased SentencePiece model of the shared sample, with [unused0] ... [unused4]."""
  sample = shared_path("sample_1mb.txt")
  path = str(tmp_path_factory.mktemp("spm") / "spm.model")
  vocab_building.build_sentencepiece([sample], 1000, path, do_lower_case=False, num_unused=5,
                                     max_input_bytes=200000)
  return path


def _tokenizer(spm_model, do_lower_case=False):
  return tokenization.FullTokenizer(None, do_lower_case, spm_model_file=spm_model)


def _real_sentences():
  """Lines of the shared sample with a title-case word right before a possessive or punctuation,
  and those words (the names to find)."""
  pattern = re.compile(r"\b([A-Z][a-z]+)('s\b|[,.;:!?\"')])")
  with open(shared_path("sample_1mb.txt"), encoding="utf-8") as f:
    lines = [l.strip() for l in f if pattern.search(l)][:400]
  names = sorted(set(m.group(1) for l in lines for m in pattern.finditer(l)))
  return lines, names


@pytest.mark.parametrize("do_lower_case", [False, True])
def test_sentence_ids_are_the_whole_sentences_and_mentions_cover_the_names(spm_model,
                                                                          do_lower_case):
  tokenizer = _tokenizer(spm_model, do_lower_case)
  sp = tokenizer.sp_model
  tokenize = long_tasks.tokenize_fn(tokenizer)
  lines, names = _real_sentences()
  lines += [u"\u0130stanbul: Emma's friend, \"Emma!\" said (Emma)."]  # "İ".lower() is 2 chars
  pattern = long_tasks.names_regex(names + ["Emma"])
  cut_differs = 0
  for line in lines:
    text = line.lower() if do_lower_case else line
    sentence = long_tasks.tokenize_sentence(line, pattern, tokenize)
    assert sentence.ids == sp.encode(text), line
    found = [m.group(0) for m in pattern.finditer(line)]
    assert [name for name, _, _ in sentence.mentions] == found
    for name, start, end in sentence.mentions:
      # The mention's pieces spell the name (a word-start marker aside), nothing more.
      spelled = "".join(sp.id_to_piece(i) for i in sentence.ids[start:end])
      assert spelled.replace(long_tasks.WORD_START, "") == (name.lower() if do_lower_case
                                                             else name), (line, name)
      assert sentence.name_ids[name] == tokenizer.tokenize_to_ids(name)
    # Cutting the sentence around the names (what WordPiece does) gives other ids.
    cut, pos = [], 0
    for match in pattern.finditer(line):
      cut += tokenize(line[pos:match.start()]) + tokenize(match.group(0))
      pos = match.end()
    cut_differs += (cut + tokenize(line[pos:])) != sentence.ids
  assert cut_differs > len(lines) // 2


def _chapter_sentences(seed=0, count=40):
  rng = np.random.RandomState(seed)
  words = "the old man walked to the river and saw a small boat near home".split()
  return [" ".join([NAMES[rng.randint(4)] + ENDINGS[rng.randint(len(ENDINGS))]] +
                   list(rng.choice(words, 4)) + ["with", NAMES[rng.randint(4)] +
                                                 ENDINGS[rng.randint(len(ENDINGS))]]) + "."
          for _ in range(count)]


def _settings(tokenizer):
  return {"max_seq_length": L, "max_global_seq_length": G, "max_candidates": C,
          "max_candidate_pieces": 4, "min_name_count": 2, "min_context_tokens": 0,
          "global_token_id": tokenizer.vocab["[unused0]"],
          "candidate_token_id": tokenizer.vocab["[unused1]"],
          "blank_token_id": tokenizer.vocab["[MASK]"]}


def test_cloze_blank_replaces_the_mention_and_candidates_are_the_names_own_pieces(spm_model):
  tokenizer = _tokenizer(spm_model)
  sp = tokenizer.sp_model
  settings = _settings(tokenizer)
  chapter = long_tasks.Chapter("book", 0, _chapter_sentences())
  names, sentences = long_tasks.tokenize_chapter(chapter, long_tasks.tokenize_fn(tokenizer), 2)
  assert names == NAMES
  examples = long_tasks.make_cloze_examples(chapter, sentences, settings, 1)
  assert examples
  blank = settings["blank_token_id"]
  for example in examples:
    ids = [i for i in example["token_ids"] if i]
    groups = [[i for i, s in zip(example["token_ids"], example["sentence_ids"]) if s == g and i]
              for g in range(sum(1 for g in example["global_token_ids"] if g))]
    num_c = sum(example["candidate_mask"])
    # Candidates: the name tokenised on its own (as the export tokenises a candidate).
    assert groups[:num_c] == [sp.encode(name)[:4] for name in example["candidates"]]
    # Context sentences: each exactly a sentence's ids.
    encoded = [sp.encode(s) for s in chapter.sentences]
    assert all(g in encoded for g in groups[num_c:-1])
    # The question: its sentence's ids with each mention of the answer one blank.
    question = groups[-1]
    assert blank in question and len(ids) == sum(len(g) for g in groups)
    source = [s for s in chapter.sentences
              if re.search(r"\b%s\b" % example["answer"], s) and
              _blanked(sp, s, example["answer"], blank) == question]
    assert source, (example["answer"], question)


def _blanked(sp, text, name, blank_id):
  """The whole text's ids with the pieces of each mention of `name` (and a word-start marker
  alone before them) as one blank: computed from the pieces' surfaces, without long_tasks."""
  proto = sp.encode_as_immutable_proto(text)
  spans = [m.span() for m in re.finditer(r"\b%s\b" % name, text)]
  out = []
  for piece in proto.pieces:
    inside = [s for s in spans if piece.end > s[0] and piece.begin < s[1]]
    if inside:
      if out and out[-1] == ("marker", inside[0]):
        out.pop()
      if not out or out[-1] != ("blank", inside[0]):
        out.append(("blank", inside[0]))
    elif piece.piece == long_tasks.WORD_START:
      nxt = [s for s in spans if s[0] == piece.end or s[0] == piece.begin + 1]
      out.append(("marker", nxt[0]) if nxt else piece.id)
    else:
      out.append(piece.id)
  return [blank_id if isinstance(o, tuple) and o[0] == "blank" else
          sp.piece_to_id(long_tasks.WORD_START) if isinstance(o, tuple) else o for o in out]


def test_special_tokens_must_be_pieces_of_the_model(spm_model):
  tokenizer = _tokenizer(spm_model)
  source = long_tasks.vocabulary_flag(None, spm_model)
  assert source == "--spm_model_file=%s" % spm_model
  ids = long_tasks.special_token_ids(tokenizer, {"global_token": "[unused3]",
                                                 "blank_token": "[MASK]"}, source)
  assert ids == {"global_token_id": tokenizer.sp_model.piece_to_id("[unused3]"),
                 "blank_token_id": tokenizer.sp_model.piece_to_id("[MASK]")}
  with pytest.raises(common.UsageError, match=r"^--global_token=\[unused9\]: not a piece of "
                     r"--spm_model_file=%s$" % re.escape(spm_model)):
    long_tasks.special_token_ids(tokenizer, {"global_token": "[unused9]"}, source)
  with pytest.raises(common.UsageError, match=r"^--candidate_token=\[PAD\]: has id 0, the "
                     r"padding id of the records"):
    long_tasks.special_token_ids(tokenizer, {"candidate_token": "[PAD]"}, source)
  with pytest.raises(common.UsageError, match=r"^--spm_model_file=%s: give it or "
                     r"--vocab_file=v.txt, not both" % re.escape(spm_model)):
    long_tasks.vocabulary_flag("v.txt", spm_model)


def test_wikihop_mentions_at_word_starts_on_piece_boundaries(spm_model):
  tokenizer = _tokenizer(spm_model, True)
  tokenize = create_wikihop.make_tokenize(tokenizer)
  sentence = "The Thames (thames river) flows past Gemma's thames-side house; Thames."
  pieces, ids, spans = tokenize(sentence)
  assert ids == tokenizer.sp_model.encode(sentence.lower())
  found = wikihop.find_mentions(sentence, pieces, "thames", tokenize("thames")[0], spans)
  # Every "thames" that starts a word (after a space, "(" or nothing), whatever its pieces
  # there; not "gemma" for "emma".
  spelled = ["".join(pieces[a:b + 1]).replace(long_tasks.WORD_START, "").strip("(")
             for a, b in found]
  assert spelled == ["thames"] * 4
  assert wikihop.find_mentions(sentence, pieces, "emma", tokenize("emma")[0], spans) == []
  # A candidate that ends inside a piece is not mentioned there ("hous" of "\u2581house").
  house = [i for i, (b, e) in enumerate(spans) if sentence[b:e] == " house"]
  assert house, pieces
  assert wikihop.find_mentions(sentence, pieces, "hous", tokenize("hous")[0], spans) == []
  assert wikihop.find_mentions(sentence, pieces, "house", tokenize("house")[0], spans) == [
      (house[0], house[0])]
  # A record: the candidates' pieces first (each on its own), mentions linked to them.
  example = wikihop.Example("q1", "country river", [sentence + " More about the Thames."],
                            ["thames", "nile"], "thames", 0)
  global_ids = wikihop.global_token_ids(tokenizer.vocab)
  features, info = wikihop.convert_example(
      example, tokenize, global_ids, {"max_seq_length": 256, "max_global_seq_length": 64,
                                      "max_candidates": 4, "max_num_sentences": 10})
  thames = tokenize("thames")[1]
  assert features["token_ids"][:len(thames)] == thames
  assert info["mentions"] == 5 and info["most_mentioned"] == 0
  linked = features["l2g_linked_ids"]
  # Its own pieces, the four mentions above and "the Thames." (its pieces after a space).
  assert sum(1 for i in linked if i == 0) == 2 * len(thames) + sum(b - a + 1 for a, b in found)


def _write_wikihop(path):
  data = [{"id": "a", "query": "located_in river", "answer": "Thames",
           "candidates": ["Thames", "Nile"],
           "supports": ["The Thames (Thames river) is in England. The Nile's delta is not."]}]
  with open(path, "w") as f:
    json.dump(data, f)


@pytest.mark.slow
def test_create_wikihop_with_a_sentencepiece_model(spm_model, tmp_path):
  _write_wikihop(str(tmp_path / "dev.json"))
  args = ["--dev_file=%s" % (tmp_path / "dev.json"), "--spm_model_file=%s" % spm_model,
          "--output_dir=%s" % (tmp_path / "out"), "--max_seq_length=128",
          "--max_global_seq_length=64", "--max_candidates=4", "--sentence_token=[unused1]"]
  run_tool("etc_model/create_wikihop.py", args)
  summary = json.loads((tmp_path / "out" / "wikihop.json").read_text())
  sp = _tokenizer(spm_model).sp_model
  assert summary["settings"]["spm_model_file"] == spm_model
  assert summary["settings"]["vocab_file"] is None
  assert summary["global_tokens"]["sentence"] == {"token": "[unused1]",
                                                  "id": sp.piece_to_id("[unused1]")}
  assert summary["global_tokens"]["paragraph"]["id"] == sp.piece_to_id("[unused4]")
  assert summary["splits"]["dev"]["mean_mentions"] == 3
  record = _read_records(str(tmp_path / "out" / "wikihop_dev.tfrecord"))[0]
  assert record["token_ids"][:len(sp.encode("thames"))] == sp.encode("thames")
  # A global token that is not a piece of the model: one line naming the flag and the model.
  result = run_tool("etc_model/create_wikihop.py", args[:-1] + [
      "--output_dir=%s" % (tmp_path / "bad"), "--question_token=[unused7]"], expect_rc=2)
  assert last_error_line(result) == ("error: --question_token=[unused7]: not a piece of "
                                     "--spm_model_file=%s" % spm_model)


def _corpus(path):
  """Two books of chapters whose names are followed by possessives and punctuation."""
  lines = []
  for book in range(2):
    for chapter in range(4):
      lines += ["CHAPTER %d." % (chapter + 1)] + _chapter_sentences(10 * book + chapter, 12)
      lines.append("")
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")


def _read_records(path):
  records = []
  for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
    feature = tf.train.Example.FromString(raw).features.feature
    records.append({k: list(v.int64_list.value) for k, v in feature.items()})
  return records


def _estimator_logits(config, records, checkpoint, path):
  """run_long_tasks' input_fn and PREDICT model_fn over cloze records."""
  long_tasks.write_records(path, records)
  with tf.Graph().as_default():
    dataset = run_long_tasks.input_fn_builder(path, "cloze", config, L, G, C, is_training=False)(
        {"batch_size": len(records)})
    features = tf1.data.make_one_shot_iterator(dataset).get_next()
    model_fn = run_long_tasks.model_fn_builder("cloze", config, checkpoint, 1e-3, 1, 0, False)
    spec = model_fn(features, None, tf1.estimator.ModeKeys.PREDICT,
                    {"batch_size": len(records)})
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return sess.run(spec.predictions["logits"])


@pytest.mark.slow
def test_records_train_and_export_answer_as_long_tasks_builds(spm_model, tmp_path):
  _corpus(str(tmp_path / "corpus.txt"))
  data = tmp_path / "data"
  run_tool("etc_model/create_long_tasks.py", [
      "--input_file=%s" % (tmp_path / "corpus.txt"), "--output_dir=%s" % data,
      "--spm_model_file=%s" % spm_model, "--do_lower_case=false", "--max_seq_length=%d" % L,
      "--max_global_seq_length=%d" % G, "--max_candidates=%d" % C, "--min_name_count=2",
      "--min_context_tokens=0", "--dev_fraction=0.25", "--test_fraction=0.25",
      "--global_token=[unused2]"])
  summary = json.loads((data / "long_tasks.json").read_text())
  tokenizer = _tokenizer(spm_model)
  sp = tokenizer.sp_model
  assert summary["settings"]["spm_model_file"] == spm_model
  assert summary["settings"]["vocab_file"] is None
  assert summary["settings"]["global_token_id"] == sp.piece_to_id("[unused2]")
  assert summary["examples"]["cloze"]["train"] > 0
  # Every sentence of a record is exactly a corpus line's SentencePiece ids.
  encoded = [sp.encode(l.strip()) for l in (tmp_path / "corpus.txt").read_text().splitlines()]
  for record in _read_records(str(data / "supporting_train.tfrecord"))[:5]:
    groups = {}
    for token, sentence in zip(record["token_ids"], record["sentence_ids"]):
      if token:
        groups.setdefault(sentence, []).append(token)
    assert groups and all(g in encoded for g in groups.values())
  # run_long_tasks trains and evaluates on them as on WordPiece records.
  (tmp_path / "etc_config.json").write_text(json.dumps(TINY_CONFIG))
  out = tmp_path / "out"
  run_tool("etc_model/run_long_tasks.py", [
      "--task=cloze", "--data_dir=%s" % data, "--etc_config_file=%s" % (tmp_path /
                                                                        "etc_config.json"),
      "--output_dir=%s" % out, "--max_seq_length=%d" % L, "--max_global_seq_length=%d" % G,
      "--max_candidates=%d" % C, "--train_batch_size=4", "--eval_batch_size=4",
      "--learning_rate=1e-3", "--do_train", "--do_eval", "--num_train_steps=2",
      "--save_checkpoints_steps=100"])
  results = json.loads((out / "eval_results.json").read_text())
  assert results["global_step"] == 2
  assert results["examples"] == summary["examples"]["cloze"]["dev"]
  # The raw-text export of the trained model: SentencePiece in the graph.
  settings, labels = export.read_settings(str(data))
  vocab_file, spm_file = export.data_vocabulary(None, None, settings, str(data))
  assert (vocab_file, spm_file) == (None, spm_model)
  config = etc_modeling.EtcConfig.from_dict(TINY_CONFIG)
  checkpoint = tf.train.latest_checkpoint(str(out))
  export.export_long_model("cloze", checkpoint, config, settings, None, False,
                           str(tmp_path / "export"), label_names=labels, spm_model_file=spm_file)
  info = json.loads((tmp_path / "export" / export.EXPORT_CONFIG).read_text())
  assert info["vocabulary"] == "sentencepiece"
  assert os.listdir(str(tmp_path / "export" / "assets")) == ["spm.model"]
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  loaded = tf.saved_model.load(str(tmp_path / "export"))
  # Its token ids of raw texts are FullTokenizer(spm_model_file=...)'s.
  texts = [u"Na\u00efve Anna's caf\u00e9 \u2014 \"Boris!\"  said (Clara).",
           "The  old man's boat, near home?", u"\u0130stanbul \u00e9t\u00e9 DAVID's."]
  features = loaded.signatures["features"](
      sentences=tf.constant([texts]), question=tf.constant(["[MASK] left."]),
      candidates=tf.constant([["Anna"]]))
  token_ids, sentence_ids = (features[k].numpy()[0] for k in ("token_ids", "sentence_ids"))
  got = [[int(t) for t, s in zip(token_ids, sentence_ids) if s == g and t] for g in range(5)]
  assert got[0] == sp.encode("Anna")
  assert got[1:4] == [tokenizer.tokenize_to_ids(t) for t in texts]
  question = long_tasks.tokenize_sentence("Anna left.", long_tasks.names_regex(["Anna"]),
                                          long_tasks.tokenize_fn(tokenizer))
  assert question.mentions == [("Anna", 0, len(sp.encode("Anna")))]
  assert got[4] == [settings["blank_token_id"]] + question.ids[question.mentions[0][2]:]
  # A cloze answer end to end: requests made of raw text get the records' features and the
  # Estimator's logits of those records.
  records, inputs = _cloze_requests(tokenizer, settings)
  served = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
  served_features = loaded.signatures["features"](
      **{k: tf.constant(v) for k, v in inputs.items()})
  for name in heads.COMMON_FEATURES + ("candidate_mask",):
    assert served_features[name].numpy().tolist() == [r[name] for r in records], name
  logits = _estimator_logits(config, records, checkpoint, str(tmp_path / "requests.tfrecord"))
  for b, record in enumerate(records):
    n = len(record["candidates"])
    np.testing.assert_allclose(served["scores"].numpy()[b][:n], logits[b][:n], atol=1e-5,
                               rtol=1e-5)
    assert served["answer"].numpy()[b].decode() == record["candidates"][
        int(np.argmax(logits[b][:n]))]


def _cloze_requests(tokenizer, settings):
  """Cloze records long_tasks builds from short documents, and the same as raw-text requests
  (each document's last sentence the question, its answer's mentions written as [MASK])."""
  documents = [_chapter_sentences(seed, 5) for seed in (3, 4, 5)]
  documents.append(["Anna met Boris's dog, and Anna laughed.", "Boris (the old man) left.",
                    "\"Anna!\" said Boris's friend; Anna's boat was near."])
  tokenize = long_tasks.tokenize_fn(tokenizer)
  records, inputs = [], {"sentences": [], "question": [], "candidates": []}
  for d, sentences in enumerate(documents):
    pattern = long_tasks.names_regex(long_tasks.find_names(sentences, 1))
    tokenized = [long_tasks.tokenize_sentence(s, pattern, tokenize) for s in sentences]
    earlier = set(m[0] for s in tokenized[:-1] for m in s.mentions)
    answers = sorted(set(m[0] for m in tokenized[-1].mentions) & earlier)
    record = long_tasks._cloze_example(tokenized[:-1], tokenized[-1], answers,
                                       np.random.default_rng(d), settings)
    assert record, d
    records.append(record)
    inputs["sentences"].append(sentences[:-1])
    inputs["question"].append(re.sub(r"\b%s\b" % record["answer"], "[MASK]", sentences[-1]))
    inputs["candidates"].append(record["candidates"])
  width = max(len(s) for s in inputs["sentences"])
  inputs["sentences"] = [s + [""] * (width - len(s)) for s in inputs["sentences"]]
  width = max(len(c) for c in inputs["candidates"])
  inputs["candidates"] = [c + [""] * (width - len(c)) for c in inputs["candidates"]]
  return records, inputs


@pytest.mark.parametrize("do_lower_case", [False, True])
def test_graph_ids_and_blanked_questions_equal_long_tasks(spm_model, do_lower_case):
  tokenizer = _tokenizer(spm_model, do_lower_case)
  tokenize = long_tasks.tokenize_fn(tokenizer)
  ids = export.SentencepieceIds(spm_model, do_lower_case)
  lines, names = _real_sentences()
  # Unknown characters next to a name ("\u2603") stay apart from the blank.
  lines = lines[:120] + [u"\u0130stanbul: Emma's friend, \"Emma!\" said (Emma).", "Emma",
                         u"\u2603Emma\u2603 met Emma\u00e7."]
  pattern = long_tasks.names_regex(names + ["Emma"])
  assert ids.ids(tf.constant(lines)).to_list() == [tokenizer.tokenize_to_ids(l) for l in lines]
  blank = tokenizer.vocab["[MASK]"]
  want, questions = [], []
  for line in lines:
    sentence = long_tasks.tokenize_sentence(line, pattern, tokenize)
    answer = sentence.mentions[0][0]
    blanked, pos = [], 0
    for name, begin, end in sentence.mentions:
      if name == answer:
        blanked += sentence.ids[pos:begin] + [blank]
        pos = end
    want.append(blanked + sentence.ids[pos:])
    questions.append(re.sub(r"\b%s\b" % answer, "[MASK]", line))
  got = export.blanked_question(ids, tf.constant(questions), "[MASK]", blank).to_list()
  assert got == want


def test_bert_windows_reads_cls_and_sep_of_sentencepiece_records(spm_model, tmp_path):
  (tmp_path / long_tasks.SUMMARY_NAME).write_text(json.dumps(
      {"settings": {"vocab_file": None, "spm_model_file": spm_model}}))
  sp = _tokenizer(spm_model).sp_model
  assert bert_windows.special_token_ids(str(tmp_path)) == (sp.piece_to_id("[CLS]"),
                                                           sp.piece_to_id("[SEP]"))
  (tmp_path / long_tasks.SUMMARY_NAME).write_text(json.dumps(
      {"settings": {"vocab_file": None, "spm_model_file": spm_model + "x"}}))
  with pytest.raises(common.UsageError, match=r"the spm_model_file of long_tasks.json \(.*x\) "
                     r"is not there"):
    bert_windows.special_token_ids(str(tmp_path))


# ----------------------------------------------------------------------------- HotpotQA
HOTPOTQA_FIXTURES = os.path.join(REPO_DIR, "tests", "fixtures", "hotpotqa")
HOTPOTQA_EXAMPLE = hotpotqa.Example(
    id="x", question="Where does the Loire end?",
    context=[hotpotqa.Paragraph("Loire", ["The Loire rises in the Massif Central.",
                                          "  It ends (Bay of Biscay's shore) in the sea."]),
             hotpotqa.Paragraph("Bay of Biscay", ["The Bay of Biscay is a gulf."])],
    answer="Bay of Biscay", supporting_facts=[["Loire", 1]], type="", level="")


@pytest.mark.parametrize("do_lower_case", [False, True])
def test_hotpotqa_answer_span_is_on_the_answer_pieces_and_reads_back_as_context_text(
    spm_model, do_lower_case):
  tokenizer = _tokenizer(spm_model, do_lower_case)
  sp = tokenizer.sp_model
  features, info = hotpotqa.convert_example(
      HOTPOTQA_EXAMPLE, hotpotqa.make_tokenize(tokenizer), tokenizer.tokenize,
      hotpotqa.global_token_ids(tokenizer.vocab), {"max_seq_length": 96,
                                                   "max_global_seq_length": 24})
  assert info["answer_found"] and info["dropped_parts"] == 0
  lower = (lambda text: text.lower()) if do_lower_case else (lambda text: text)
  # The question, each title and sentence: exactly sp.encode of its (lower-cased) text.
  groups = collections.OrderedDict()
  for token, sentence, kind in zip(features["token_ids"], features["sentence_ids"],
                                   features["segment_ids"]):
    if sentence >= 0 and kind != hotpotqa.QUESTION_TYPE:
      groups.setdefault(sentence, []).append(token)
  texts = [t for p in HOTPOTQA_EXAMPLE.context for t in [p.title] + p.sentences]
  assert list(groups.values()) == [sp.encode(lower(t)) for t in texts]
  question = [t for t, kind in zip(features["token_ids"], features["segment_ids"])
              if kind == hotpotqa.QUESTION_TYPE]
  assert question == sp.encode(lower(HOTPOTQA_EXAMPLE.question))
  # The label: the supporting sentence's occurrence (after "(", before "'s"), its pieces spell
  # the answer and nothing more.
  begin, end = features["answer_begin"][0], features["answer_end"][0]
  assert features["answer_type"] == [0] and 0 < begin <= end
  assert sp.decode(features["token_ids"][begin:end + 1]) == lower("Bay of Biscay")
  sentence_token = features["sentence_ids"][begin]
  assert (features["global_paragraph_ids"][sentence_token],
          features["global_sentence_ids"][sentence_token]) == (0, 1)
  # Decoded from the context, not from the pieces: the original case and characters.
  record = {name: np.array(features[name]) for name in hotpotqa.DECODING_FEATURES}
  context = [[p.title, p.sentences] for p in HOTPOTQA_EXAMPLE.context]
  assert hotpotqa.span_text((begin, end), record, context, tokenizer) == "Bay of Biscay"
  assert hotpotqa.span_text((begin, end + 2), record, context, tokenizer) == "Bay of Biscay's"
  # A span answer that starts inside a piece takes that whole piece (the official rule).
  tokenized = hotpotqa.make_tokenize(tokenizer)("Loire rises")
  (first, last), = hotpotqa.find_answer_spans(tokenized, "oire", None)
  assert "oire" in "".join(tokenized.pieces[first:last + 1]).lower()
  assert tokenized.spans[first][0] <= 1 and tokenized.spans[last][1] == len("Loire")


def test_hotpotqa_data_tokenizer_is_the_copied_sentencepiece_model(spm_model, tmp_path):
  (tmp_path / hotpotqa.SUMMARY_NAME).write_text(json.dumps(
      {"settings": {"vocab_file": None, "spm_model_file": spm_model, "do_lower_case": False}}))
  with pytest.raises(common.UsageError, match=r"^--data_dir=%s: has no hotpotqa_spm.model "
                     r"\(write the data with etc_model.create_hotpotqa\)$" % re.escape(
                         str(tmp_path))):
    hotpotqa.load_data_tokenizer(str(tmp_path))
  (tmp_path / hotpotqa.SPM_NAME).write_bytes(open(spm_model, "rb").read())
  tokenizer, do_lower_case = hotpotqa.load_data_tokenizer(str(tmp_path))
  assert hotpotqa.is_sentencepiece(tokenizer) and do_lower_case is False
  assert tokenizer.tokenize_to_ids("The Loire.") == tokenizer.sp_model.encode("The Loire.")


def _hotpotqa_data(spm_model, output_dir, extra=(), expect_rc=0):
  return run_tool(None, ["-m", "etc_model.create_hotpotqa", "--spm_model_file=" + spm_model,
                         "--output_dir=%s" % output_dir, "--max_seq_length=%d" % L,
                         "--max_global_seq_length=32"] +
                  ["--%s_file=%s" % (split, os.path.join(HOTPOTQA_FIXTURES, split + ".json"))
                   for split in ("train", "dev", "test")] + list(extra), expect_rc=expect_rc)


@pytest.mark.slow
def test_hotpotqa_with_a_sentencepiece_model_trains_and_scores_officially(spm_model, tmp_path):
  data = tmp_path / "data"
  _hotpotqa_data(spm_model, data, ["--paragraph_token=[unused3]"])
  summary = json.loads((data / hotpotqa.SUMMARY_NAME).read_text())
  sp = _tokenizer(spm_model).sp_model
  assert (summary["settings"]["spm_model_file"], summary["settings"]["vocab_file"]) == (
      spm_model, None)
  assert summary["global_tokens"]["paragraph"] == {"token": "[unused3]",
                                                   "id": sp.piece_to_id("[unused3]")}
  assert summary["splits"]["dev"]["span_answers_not_found"] == 0
  assert (data / hotpotqa.SPM_NAME).read_bytes() == open(spm_model, "rb").read()
  assert not (data / hotpotqa.VOCAB_NAME).exists()
  # Two steps from scratch, dev scored, test predicted: the official submission format.
  (tmp_path / "etc_config.json").write_text(json.dumps(TINY_CONFIG))
  out = tmp_path / "out"
  run_tool(None, ["-m", "etc_model.run_long_tasks", "--task=hotpotqa", "--data_dir=%s" % data,
                  "--etc_config_file=%s" % (tmp_path / "etc_config.json"),
                  "--output_dir=%s" % out, "--max_seq_length=%d" % L,
                  "--max_global_seq_length=32", "--train_batch_size=2", "--eval_batch_size=2",
                  "--predict_batch_size=2", "--learning_rate=1e-3", "--do_train", "--do_eval",
                  "--do_predict", "--num_train_steps=2", "--sp_threshold=0.0"])
  results = json.loads((out / "eval_results.json").read_text())
  assert results["global_step"] == 2 and results["records"] == 3
  dev = json.loads((out / "dev_predictions.json").read_text())
  assert sorted(dev) == ["answer", "sp"]
  scored = hotpotqa_evaluate.evaluate_files(os.path.join(HOTPOTQA_FIXTURES, "dev.json"),
                                            str(out / "dev_predictions.json"))
  for key in hotpotqa.METRIC_NAMES:
    assert scored[key] == pytest.approx(results[key]), key
  assert (scored["missing_answers"], scored["missing_sp"]) == (0, 0)
  # Every span answer is a piece of its example's own (cased) context text.
  for split, answers in (("dev", dev["answer"]),
                         ("test", json.loads((out / "test_predictions.json").read_text())[
                             "answer"])):
    contexts = {e["_id"]: e["context"] for e in
                json.load(open(os.path.join(HOTPOTQA_FIXTURES, split + ".json")))}
    for key, answer in answers.items():
      texts = [t for title, sentences in contexts[key] for t in [title] + sentences]
      assert answer in ("yes", "no") or any(answer in t for t in texts), (key, answer)
  # A global token that is not a piece of the model: one line naming the flag and the model.
  result = _hotpotqa_data(spm_model, tmp_path / "bad", ["--question_token=[unused7]"],
                          expect_rc=2)
  assert last_error_line(result) == ("error: --question_token=[unused7]: not a piece of "
                                     "--spm_model_file=%s" % spm_model)
  assert not (tmp_path / "bad").exists()


# ----------------------------------------------------------------------------- NQ and OpenKP
WORDPIECE_VOCAB = os.path.join(REPO_DIR, "data", "vocab.txt")
# A document whose words both vocabularies cover. With the sample's model, "\u2014", ".",
# "Loire" (cased) and "ends" start with the word-start marker standing alone; "\u200b" has no
# piece in either.
NQ_DOCUMENT = (u"<P> The Loire \u2014 (1990) ends in the Bay of Biscay . </P> "
               u"<P> It is \u200b long </P>")
NQ_TOKENS = NQ_DOCUMENT.split(" ")
NQ_CANDIDATES = [{"start_token": 0, "end_token": 13, "top_level": True},
                 {"start_token": 13, "end_token": 19, "top_level": True},
                 {"start_token": 8, "end_token": 11, "top_level": False}]
# (long answer, short answers) in tokens [start, end).
NQ_ANSWERS = {1: ((0, 13), [(3, 5)]), 2: ((0, 13), [(2, 3)]), 3: ((13, 19), [(17, 18)]),
              4: ((0, 13), [(8, 11)])}
NQ_SPECIAL_TOKENS = collections.OrderedDict([
    ("cls", "[CLS]"), ("sep", "[SEP]"), ("question", "[unused1]"), ("candidate", "[unused0]"),
    ("html_start", "[unused2]"), ("html_end", "[unused3]")])


def _nq_span(span):
  return {"start_token": span[0], "end_token": span[1], "start_byte": -1, "end_byte": -1}


def _nq_file(path):
  records = []
  for key, (long_span, shorts) in NQ_ANSWERS.items():
    annotation = {"long_answer": _nq_span(long_span),
                  "short_answers": [_nq_span(s) for s in shorts], "yes_no_answer": "NONE"}
    records.append({"example_id": key, "question_text": "Where does the Loire end?",
                    "document_text": NQ_DOCUMENT, "long_answer_candidates": NQ_CANDIDATES,
                    "annotations": [annotation] * 3})
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(json.dumps(r) + "\n" for r in records))
  return path


def _nq_settings(do_lower_case):
  return {"max_seq_length": 64, "max_global_seq_length": 24, "doc_stride": 40,
          "max_question_length": 16, "include_unknown_rate": 1.0,
          "include_unknown_rate_for_unanswerable": 4.0, "seed": 1,
          "do_lower_case": do_lower_case}


def _oracle_nq_outputs(records):
  """Outputs peaked at each record's labels (what a perfect model gives)."""
  outputs = {name: [] for name in nq.POSITION_LOGITS + ("answer_type_logits",)}
  for record in records:
    for name, label in zip(nq.POSITION_LOGITS, nq.LABELS):
      logits = np.full(len(record["token_ids"]), -5.0)
      logits[0] = 0.0
      logits[record[label][0]] = 10.0 if record[label][0] else 0.0
      outputs[name].append(logits)
    outputs["answer_type_logits"].append(np.eye(5)[record["answer_type"][0]] * 3)
  return {name: np.stack(values) for name, values in outputs.items()}


def _nq_predictions(output_dir):
  records = _read_records(os.path.join(output_dir, "nq_dev.tfrecord"))
  lines = nq.read_split_examples(output_dir, "dev", len(records))
  token_pos = np.array([r["token_pos"] for r in records], np.int32)
  return records, nq.split_metrics(_oracle_nq_outputs(records), token_pos, lines)


@pytest.mark.parametrize("do_lower_case", [False, True])
def test_nq_records_of_a_sentencepiece_model_decode_to_the_gold_answers(spm_model, tmp_path,
                                                                       do_lower_case):
  from etc_model import create_nq
  dev = _nq_file(str(tmp_path / "dev.jsonl"))
  tokenizer = _tokenizer(spm_model, do_lower_case)
  sp = tokenizer.sp_model
  lower = (lambda text: text.lower()) if do_lower_case else (lambda text: text)
  source = long_tasks.vocabulary_flag(None, spm_model)
  tokens = create_nq.check_special_tokens(tokenizer, NQ_SPECIAL_TOKENS, source)
  summary = create_nq.create_nq({"dev": dev}, str(tmp_path / "spm"), tokenizer, spm_model,
                                _nq_settings(do_lower_case), special_tokens=tokens)
  assert summary["special_tokens"]["html_start"] == {"token": "[unused2]",
                                                     "id": sp.piece_to_id("[unused2]")}
  assert (tmp_path / "spm" / nq.SPM_NAME).read_bytes() == open(spm_model, "rb").read()
  records, (predictions, metrics) = _nq_predictions(str(tmp_path / "spm"))
  marker = sp.piece_to_id(long_tasks.WORD_START)
  record = records[0]
  # Each document token's pieces: its own (lower-cased) encoding; HTML tags the chosen pieces.
  for pos, token in enumerate(NQ_TOKENS[:13]):
    pieces = [i for i, p in zip(record["token_ids"], record["token_pos"]) if p == pos]
    assert pieces == ([sp.piece_to_id("[unused3]" if token.startswith("</") else "[unused2]")]
                      if token.startswith("<") else sp.encode(lower(token))), token
  assert sp.encode(u"\u200b") == [] and 16 not in record["token_pos"]
  words = [t for t in NQ_TOKENS[:13] if not t.startswith("<")]
  assert [i for i, p in zip(record["token_ids"], record["token_pos"])
          if 0 <= p < 13 and not NQ_TOKENS[p].startswith("<")] == sp.encode(lower(" ".join(words)))
  # The short answers' first pieces: their first token's piece after a marker standing alone.
  for record, (key, (_, ((start, end),))) in zip(records, NQ_ANSWERS.items()):
    first, last = record["sa_start"][0], record["sa_end"][0]
    own = sp.encode(lower(NQ_TOKENS[start]))
    assert record["token_ids"][first] == (own[1] if own[0] == marker and len(own) > 1
                                          else own[0]), key
    assert (record["token_pos"][first], record["token_pos"][last]) == (start, end - 1)
    assert record["token_pos"][last + 1] != end - 1
  assert sp.encode(u"\u2014")[0] == marker  # the case above is there
  # A perfect model's outputs decode to the gold spans, as with WordPiece.
  assert [(p["long_answer"]["start_token"], p["long_answer"]["end_token"],
           [(s["start_token"], s["end_token"]) for s in p["short_answers"]])
          for p in predictions["predictions"]] == [
              (l[0], l[1], s) for l, s in NQ_ANSWERS.values()]
  assert (metrics["long-answer-f1"], metrics["short-answer-f1"]) == (1.0, 1.0)
  wordpiece = tokenization.FullTokenizer(WORDPIECE_VOCAB, True)
  create_nq.create_nq({"dev": dev}, str(tmp_path / "wordpiece"), wordpiece, WORDPIECE_VOCAB,
                      _nq_settings(True))
  assert _nq_predictions(str(tmp_path / "wordpiece"))[1][0] == predictions
  # A special token that is not a piece of the model (the defaults [unused34], [unused102] and
  # [unused103] are not) or has the padding id: one line naming its flag.
  with pytest.raises(common.UsageError, match=r"^--question_token=\[unused34\]: not a piece of "
                     r"--spm_model_file=%s$" % re.escape(spm_model)):
    create_nq.check_special_tokens(tokenizer, nq.SPECIAL_TOKENS, source)
  with pytest.raises(common.UsageError, match=r"^--sep_token=\[PAD\]: has id 0, the padding id"):
    create_nq.check_special_tokens(tokenizer, dict(tokens, sep="[PAD]"), source)


OPENKP_WORDS = [u"Deep", u"Learning", u"\u2014", u"(1990)", u"", u"\u200b", u"The", u"Loire",
                u"ends", u"."]
OPENKP_KEY_PHRASES = [[u"deep", u"learning"], [u"the", u"Loire"], [u"\u2014"]]


def _openkp_file(path):
  vdom = [{"Id": n, "text": " ".join(OPENKP_WORDS[s:e]), "feature": [0.0] * 20,
           "start_idx": s, "end_idx": e} for n, (s, e) in enumerate(((0, 4), (4, 10)))]
  with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps({"url": "u1", "text": " ".join(OPENKP_WORDS), "VDOM": json.dumps(vdom),
                        "KeyPhrases": OPENKP_KEY_PHRASES}) + "\n")
  return path


def _openkp_predictions(output_dir):
  """The records and a perfect model's keyphrases and metrics (logits peaked at the labels)."""
  from etc_model import openkp
  records = _read_records(os.path.join(output_dir, "openkp_dev.tfrecord"))
  lines = openkp.read_split_examples(output_dir, "dev", len(records))
  logits = np.full((len(records), openkp.MAX_PHRASE_WORDS, len(records[0]["token_ids"])), -5.0)
  for n, record in enumerate(records):
    for rank, (start, length) in enumerate(zip(record["label_start"], record["label_length"])):
      if start >= 0:
        logits[n, length - 1, start] = 10.0 - rank
  return records, openkp.split_metrics(logits, lines)


@pytest.mark.parametrize("do_lower_case", [False, True])
def test_openkp_records_of_a_sentencepiece_model_decode_to_the_gold_keyphrases(
    spm_model, tmp_path, do_lower_case):
  from etc_model import create_openkp
  dev = _openkp_file(str(tmp_path / "dev.jsonl"))
  tokenizer = _tokenizer(spm_model, do_lower_case)
  sp = tokenizer.sp_model
  settings = {"max_seq_length": 32, "max_global_seq_length": 4, "do_lower_case": do_lower_case}
  create_openkp.create_openkp({"dev": dev}, str(tmp_path / "spm"), tokenizer, settings)
  (record,), (predictions, metrics) = _openkp_predictions(str(tmp_path / "spm"))
  # Each word's pieces: its own (lower-cased) encoding, a marker standing alone included; ""
  # and "\u200b" have none but keep their word positions.
  length = record["long_breakpoints"].index(1) + 1
  lower = (lambda text: text.lower()) if do_lower_case else (lambda text: text)
  for w, word in enumerate(OPENKP_WORDS):
    assert [i for i, n in zip(record["token_ids"][:length], record["word_ids"]) if n == w] == (
        sp.encode(lower(word))), word
  assert sp.encode(u"\u2014")[0] == sp.piece_to_id(long_tasks.WORD_START)
  assert record["num_words"] == [len(OPENKP_WORDS)]
  assert record["token_ids"][:length] == sp.encode(lower(" ".join(OPENKP_WORDS)))
  # The labels are word positions: the n-grams' heads read the same words as with WordPiece.
  assert list(zip(record["label_start"], record["label_length"])) == [(0, 2), (2, 1), (6, 2)]
  phrases = [phrase for (phrase,) in predictions[0]["KeyPhrases"]]
  assert phrases[:3] == [u"deep learning", u"\u2014", u"the loire"]
  assert metrics["R@3"] == 1.0
  wordpiece = tokenization.FullTokenizer(WORDPIECE_VOCAB, True)
  create_openkp.create_openkp({"dev": dev}, str(tmp_path / "wordpiece"), wordpiece,
                              dict(settings, do_lower_case=True))
  (wordpiece_record,), (wordpiece_predictions, _) = _openkp_predictions(
      str(tmp_path / "wordpiece"))
  assert wordpiece_predictions == predictions
  for name in ("label_start", "label_length", "num_words", "global_token_ids"):
    assert wordpiece_record[name] == record[name], name


@pytest.mark.slow
def test_create_nq_and_create_openkp_take_a_sentencepiece_model(spm_model, tmp_path):
  sp = _tokenizer(spm_model).sp_model
  nq_args = ["--dev_file=%s" % _nq_file(str(tmp_path / "nq.jsonl")),
             "--spm_model_file=%s" % spm_model, "--do_lower_case=false",
             "--max_seq_length=64", "--max_global_seq_length=24", "--doc_stride=40",
             "--max_question_length=16"] + [
                 "--%s_token=%s" % item for item in NQ_SPECIAL_TOKENS.items()]
  run_tool(None, ["-m", "etc_model.create_nq", "--output_dir=%s" % (tmp_path / "nq")] + nq_args)
  summary = json.loads((tmp_path / "nq" / nq.SUMMARY_NAME).read_text())
  assert (summary["settings"]["spm_model_file"], summary["settings"]["vocab_file"]) == (
      spm_model, None)
  assert summary["special_tokens"]["question"] == {"token": "[unused1]",
                                                   "id": sp.piece_to_id("[unused1]")}
  assert (summary["splits"]["dev"]["records"], summary["splits"]["dev"]["answer_ends_moved"]) == (
      4, 0)
  assert (tmp_path / "nq" / nq.SPM_NAME).read_bytes() == open(spm_model, "rb").read()
  assert not (tmp_path / "nq" / nq.VOCAB_NAME).exists()
  openkp_args = ["--dev_file=%s" % _openkp_file(str(tmp_path / "openkp.jsonl")),
                 "--spm_model_file=%s" % spm_model, "--max_seq_length=32",
                 "--max_global_seq_length=4"]
  run_tool(None, ["-m", "etc_model.create_openkp", "--output_dir=%s" % (tmp_path / "openkp")] +
           openkp_args)
  summary = json.loads((tmp_path / "openkp" / "openkp.json").read_text())
  assert (summary["settings"]["spm_model_file"], summary["settings"]["vocab_file"]) == (
      spm_model, None)
  record, = _read_records(str(tmp_path / "openkp" / "openkp_dev.tfrecord"))
  assert record["token_ids"][:len(sp.encode(u"deep"))] == sp.encode(u"deep")
  # Both vocabularies: one line, nothing written (create_openkp runs the same check).
  result = run_tool(None, ["-m", "etc_model.create_nq", "--output_dir=%s" % (tmp_path / "bad"),
                           "--vocab_file=%s" % WORDPIECE_VOCAB] + nq_args, expect_rc=2)
  assert last_error_line(result) == (
      "error: --spm_model_file=%s: give it or --vocab_file=%s, not both (the SentencePiece "
      "model is the vocabulary)" % (spm_model, WORDPIECE_VOCAB))
  assert not (tmp_path / "bad").exists()
