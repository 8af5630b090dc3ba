# coding=utf-8
"""WikiHop (QAngaroo) for ETC: reading the data, the features, the side inputs, the answers and
the accuracy.

The library of `python -m etc_model.create_wikihop`, `python -m etc_model.run_long_tasks
--task=wikihop` and `python -m etc_model.wikihop_evaluate`. The feature layout is the official
google-research etcmodel's (models/wikihop/data_utils.py, models/multihop_utils.py):

Lower case. The text, the query and the candidates are lower-cased before tokenising, as the
official code does (do_lower_case must be true). With a SentencePiece model (spm_model_file) the
same holds: the text is lower-cased and then given to SentencePiece (tokenization.FullTokenizer
with spm_model_file and do_lower_case), so a model trained on lower-cased text (build_vocab.py
--do_lower_case, its default) fits; a cased model's capital-letter pieces are never used.

Data. A QAngaroo file is a JSON list of {"id", "query", "supports": [str], "candidates": [str],
"answer": str} (the hidden test set has no "answer"; the dev set's "annotations" are not read).
Candidates and answers are compared as the official code does after `strip().lower()`; a
candidate repeated after that is kept once (its first place). The answer must be among the
candidates.

Long input [L]: every candidate's word pieces, the query's word pieces, then each support
document's sentences (split_sentences), padded with 0.
Global input [G]: one token per candidate (CANDIDATE), one per query word piece (QUESTION), and per
document one paragraph token (PARAGRAPH) followed by one token per sentence (SENTENCE), padded
with 0. Candidate i is global token i (i < max_candidates).
  sentence_ids [L]: each candidate, each query word piece and each document sentence is a
    sentence; a long token's id is the global index of its sentence token (padding -1).
  paragraph_ids [L]: a document token's paragraph token (candidates, query, padding: -1).
  long_breakpoints [L]: 1 at the last token of each candidate, of the query and of each document
    (local attention stays inside these paragraphs).
  global_breakpoints [G]: 1 at each candidate token, at the last query token and at the last token
    of each document's group (paragraph token + sentence tokens).
  segment_ids [L]: token types, candidate 4, query 3, document 1 (padding 0);
  global_segment_ids [G]: candidate 6, question 5, paragraph 7, sentence 0 (padding 0).
  l2g_linked_ids [L]: for every candidate i, its own pieces at the start and every mention of it
    in a kept sentence are linked to global token i (-1 elsewhere; a later candidate's mention
    overwrites an earlier one's where they overlap, as the official loop does). A mention: the
    candidate's text occurs in the sentence's lower-cased text and its word pieces occur as a run
    of the sentence's pieces (every such run). With a SentencePiece model the pieces of a word
    depend on what precedes it ("\u2581emma" after a space, "emma" or "em" "ma" after "("), so
    the pieces are not compared: a mention is an occurrence of the candidate's text in the
    sentence's lower-cased text that starts a word (no letter or digit before it) and starts and
    ends at piece boundaries (SentencePiece's offsets; a piece's leading space aside), linked
    over the pieces that cover it (find_mentions with spans).
  candidate_mask [C] (1 for a real candidate), label [1] (the answer's candidate index; -1 when
    the data has no answer).

Truncation (truncate_documents, the official rule): while the documents hold more sentences than
the global budget allows (min(max_num_sentences, G - candidates - query pieces - documents)) or
more word pieces than the long budget (L - candidate pieces - query pieces), the last sentence of
the document with the most sentences left is dropped (ties: the document that has waited longest
since its last cut, first by document order). An example whose candidates and query alone do not
fit, or with more candidates than max_candidates, gets no record (it is listed as skipped: the
official accuracy counts it as wrong).

Sentences: the official code splits with NLTK's punkt, which this environment does not have;
split_sentences is a rule-based splitter (a sentence ends at . ! or ? plus closing quotes or
brackets, before white space and a capital letter, digit or opening quote; not after a known
abbreviation or a one-letter initial), written for Wikipedia text and not compared with punkt on
the WikiHop files; where they split otherwise, the sentence tokens and the sentence budget differ,
the word pieces of the long input do not.

Accuracy (evaluate_predictions): predictions are {id: answer string}, the official submission
format; an example is right when its prediction equals its answer after strip().lower() (the
official etcmodel prediction writes the candidate lower-cased and stripped); a missing prediction
is wrong; predictions for ids the data does not have are not scored (counted as "unknown_ids").
The model's prediction is the arg-max candidate (the first of equal scores, as np.argmax).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import heapq
import os
import re

import numpy as np
import tensorflow as tf

from realformer_tf import common
from etc_model import etc_inputs
from etc_model import long_tasks

TASK = "wikihop"
SPLITS = ("train", "dev", "test")
SUMMARY_NAME = "wikihop.json"
EXAMPLES_SUFFIX = ".examples.jsonl"
# The official defaults (run_wikihop.py / generate_tf_examples.py).
DEFAULT_MAX_SEQ_LENGTH = 4096
DEFAULT_MAX_GLOBAL_SEQ_LENGTH = 430
DEFAULT_MAX_NUM_SENTENCES = 200
# The most candidates of a WikiHop question.
DEFAULT_MAX_CANDIDATES = 79

# The global tokens' vocabulary entries (ids 1, 3, 4, 5 in the BERT vocabularies: the official
# SENTENCE / QUESTION / CANDIDATE / PARAGRAPH_GLOBAL_TOKEN_ID).
GLOBAL_TOKENS = collections.OrderedDict([
    ("sentence", "[unused0]"), ("question", "[unused2]"), ("candidate", "[unused3]"),
    ("paragraph", "[unused4]")])
# Token type ids (the model's segment ids), official multihop_utils values.
SENTENCE_TYPE = 1
QUESTION_TYPE = 3
CANDIDATE_TYPE = 4
GLOBAL_SENTENCE_TYPE = 0
GLOBAL_QUESTION_TYPE = 5
GLOBAL_CANDIDATE_TYPE = 6
GLOBAL_PARAGRAPH_TYPE = 7
# A config's segment_vocab_size must hold the largest type id.
MIN_SEGMENT_VOCAB_SIZE = GLOBAL_PARAGRAPH_TYPE + 1

# The features of a record, in the order written; "L", "G", "C" or 1 is the length.
FEATURES = (("token_ids", "L"), ("sentence_ids", "L"), ("long_breakpoints", "L"),
            ("global_token_ids", "G"), ("global_breakpoints", "G"), ("paragraph_ids", "L"),
            ("segment_ids", "L"), ("l2g_linked_ids", "L"), ("global_segment_ids", "G"),
            ("candidate_mask", "C"), ("label", 1))

Example = collections.namedtuple(
    "Example", ["id", "query", "supports", "candidates", "answer", "duplicates"])

_REQUIRED_KEYS = ("id", "query", "supports", "candidates")
_ABBREVIATIONS = frozenset("""
mr mrs ms dr st jr sr prof rev hon gen col lt sgt capt cpt maj adm gov sen rep pres mt ft
no vs etc inc ltd co corp bros dept univ est approx ca cf al fig vol pp op ed eds jan feb mar apr
jun jul aug sep sept oct nov dec
""".split())
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s+[\"'(\[]?[A-Z0-9])")


def normalize_answer(text):
  """The comparison form of a candidate / answer / prediction: strip().lower()."""
  return text.strip().lower()


def _record_name(index, record):
  if isinstance(record, dict) and isinstance(record.get("id"), str):
    return "record %d (id %s)" % (index, record["id"])
  return "record %d" % index


def parse_examples(data, source, require_answer=True):
  """Checked Examples of a loaded QAngaroo list (one line naming `source` and the record).

  Args:
    data: the loaded JSON.
    source: how the file is named in errors ("--dev_file=dev.json").
    require_answer: every record must have an "answer" (the hidden test set has none).

  Returns:
    list of Example (candidates normalized and unique, answer normalized or None).
  """
  if not isinstance(data, list):
    common.fail("%s: not a QAngaroo file (a JSON list of records), got a %s" %
                (source, type(data).__name__))
  examples, seen = [], set()
  for index, record in enumerate(data):
    name = _record_name(index, record)
    if not isinstance(record, dict):
      common.fail("%s: %s is a %s, not an object" % (source, name, type(record).__name__))
    keys = _REQUIRED_KEYS + (("answer",) if require_answer else ())
    missing = [k for k in keys if k not in record]
    if missing:
      common.fail("%s: %s has no %s" % (source, name, ", ".join('"%s"' % k for k in missing)))
    for key in ("id", "query") + (("answer",) if "answer" in record else ()):
      if not isinstance(record[key], str):
        common.fail("%s: %s: \"%s\" is a %s, not a string" %
                    (source, name, key, type(record[key]).__name__))
    for key in ("supports", "candidates"):
      values = record[key]
      if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        common.fail("%s: %s: \"%s\" is not a list of strings" % (source, name, key))
    if record["id"] in seen:
      common.fail("%s: %s repeats an earlier record's id" % (source, name))
    seen.add(record["id"])
    candidates = []
    for candidate in record["candidates"]:
      if not normalize_answer(candidate):
        common.fail("%s: %s has an empty candidate" % (source, name))
      if normalize_answer(candidate) not in candidates:
        candidates.append(normalize_answer(candidate))
    if not candidates:
      common.fail("%s: %s has no candidates" % (source, name))
    answer = None
    if "answer" in record:
      answer = normalize_answer(record["answer"])
      if answer not in candidates:
        common.fail("%s: %s: its answer %r is not among its %d candidates" %
                    (source, name, record["answer"], len(candidates)))
    examples.append(Example(record["id"], record["query"], list(record["supports"]), candidates,
                            answer, len(record["candidates"]) - len(candidates)))
  return examples


# One reader of the task files' JSON (a missing file, a directory, bad JSON: one line).
load_json = long_tasks.load_json


def read_examples(path, source, require_answer=True):
  """Reads and checks a QAngaroo JSON file (parse_examples).

  Args:
    path: the file.
    source: how errors name it ("--dev_file=dev.json", "data file dev.json").
    require_answer: see parse_examples.

  Returns:
    list of Example.
  """
  return parse_examples(load_json(path, source), source, require_answer)


def split_sentences(text):
  """A document's sentences (rule-based; see the module docstring), stripped, none empty."""
  sentences, start = [], 0
  for match in _SENTENCE_END.finditer(text):
    words = text[start:match.start()].split()
    last = words[-1].lower().rstrip(".") if words else ""
    if match.group(0).startswith(".") and (
        last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
      continue
    sentences.append(text[start:match.end()])
    start = match.end()
  sentences.append(text[start:])
  return [s.strip() for s in sentences if s.strip()]


def truncate_documents(sentence_lengths, max_sentences, max_tokens):
  """How many leading sentences of each document to keep (the official truncation rule).

  While the kept sentences number more than max_sentences or their word pieces more than
  max_tokens, the last kept sentence of the document with the most kept sentences is dropped;
  among documents with as many, the one pushed back on the queue first (by document order at
  the start, a document just cut goes behind the others), as the official MaxHeap does.

  Args:
    sentence_lengths: per document, the word pieces of each sentence.
    max_sentences: the most sentences over all documents (>= 0).
    max_tokens: the most word pieces over all documents (>= 0).

  Returns:
    list of int: the sentences kept per document.
  """
  kept = [len(lengths) for lengths in sentence_lengths]
  excess_sentences = sum(kept) - max_sentences
  excess_tokens = sum(sum(lengths) for lengths in sentence_lengths) - max_tokens
  if excess_sentences <= 0 and excess_tokens <= 0:
    return kept
  heap = [(-count, order, doc) for order, (doc, count) in enumerate(enumerate(kept))]
  heapq.heapify(heap)
  order = len(heap)
  while excess_sentences > 0 or excess_tokens > 0:
    _, _, doc = heapq.heappop(heap)
    if kept[doc] == 0:  # every document is empty
      break
    kept[doc] -= 1
    excess_sentences -= 1
    excess_tokens -= sentence_lengths[doc][kept[doc]]
    heapq.heappush(heap, (-kept[doc], order, doc))
    order += 1
  return kept


def find_mentions(sentence, pieces, candidate, candidate_pieces, spans=None):
  """Where a candidate is mentioned in a sentence, as inclusive word-piece spans.

  Args:
    sentence: the sentence's text.
    pieces: its word pieces.
    candidate: the candidate's text (normalized).
    candidate_pieces: its word pieces.
    spans: SentencePiece: each piece's [begin, end) character span in `sentence`
      (long_tasks.SentencePieceSpans.pieces_with_spans); the mentions are then found by text
      and spans (module docstring). None: WordPiece, runs of candidate_pieces.

  Returns:
    list of (first, last) indices into `pieces` (overlapping runs included).
  """
  if not candidate or not candidate_pieces or candidate not in sentence.lower():
    return []
  if spans is not None:
    return _mentions_by_spans(sentence, spans, candidate)
  n = len(candidate_pieces)
  return [(i, i + n - 1) for i in range(len(pieces) - n + 1)
          if pieces[i:i + n] == candidate_pieces]


def _mentions_by_spans(sentence, spans, candidate):
  """find_mentions of a SentencePiece sentence: word-start occurrences on piece boundaries."""
  lowered = sentence.lower()
  back = long_tasks.original_offsets(sentence, lowered)
  found = []
  start = lowered.find(candidate)
  while start >= 0:
    if start == 0 or not lowered[start - 1].isalnum():
      begin, end = back[start], back[start + len(candidate)]
      run = long_tasks.piece_run(spans, begin, end)
      # The first piece may hold the space before the word (its marker), nothing else.
      if (run is not None and not sentence[spans[run[0]][0]:begin].strip() and
          spans[run[1] - 1][1] == end):
        found.append((run[0], run[1] - 1))
    start = lowered.find(candidate, start + 1)
  return found


def global_token_ids(vocab, tokens=None):
  """{"sentence": id, ...} of the global tokens in a vocabulary {token: id} (missing: KeyError).

  Args:
    vocab: {token: id} (a FullTokenizer's vocab: WordPiece tokens or SentencePiece pieces).
    tokens: {kind: token} for the kinds of GLOBAL_TOKENS (None: GLOBAL_TOKENS).
  """
  tokens = tokens or GLOBAL_TOKENS
  return collections.OrderedDict((kind, vocab[tokens[kind]]) for kind in GLOBAL_TOKENS)


class _Builder(object):
  """Appends the long and global tokens of one example (convert_example)."""

  def __init__(self):
    self.long = collections.OrderedDict((name, []) for name in (
        "token_ids", "sentence_ids", "paragraph_ids", "long_breakpoints", "segment_ids"))
    self.global_ = collections.OrderedDict((name, []) for name in (
        "global_token_ids", "global_segment_ids", "global_breakpoints"))

  def add_long(self, ids, sentence, paragraph, token_type):
    for token_id in ids:
      for name, value in zip(self.long, (token_id, sentence, paragraph, 0, token_type)):
        self.long[name].append(value)

  def end_long_paragraph(self):
    if self.long["long_breakpoints"]:
      self.long["long_breakpoints"][-1] = 1

  def add_global(self, token_id, token_type, breakpoint=0):
    for name, value in zip(self.global_, (token_id, token_type, breakpoint)):
      self.global_[name].append(value)
    return len(self.global_["global_token_ids"]) - 1

  def end_global_paragraph(self):
    self.global_["global_breakpoints"][-1] = 1


def _pad(values, length, value=0):
  return list(values) + [value] * (length - len(values))


def convert_example(example, tokenize, ids, settings):
  """The record of one example, or why it has none.

  Args:
    example: Example.
    tokenize: function text -> (word pieces, their ids) (lower-casing, as the official BERT
      tokenizer of WikiHop), or (pieces, ids, spans) with SentencePiece (find_mentions).
    ids: global_token_ids() of the vocabulary.
    settings: dict with max_seq_length, max_global_seq_length, max_candidates,
      max_num_sentences.

  Returns:
    (features, info): features an OrderedDict {name: list of int} in FEATURES order (None when
    skipped); info a dict: skipped (None or the reason), long_tokens, global_tokens,
    sentences, truncated_sentences, mentions (linked mentions in the documents),
    most_mentioned (the candidate index with the most mentions; ties: the first).
  """
  long_len, global_len = settings["max_seq_length"], settings["max_global_seq_length"]
  num_candidates = len(example.candidates)
  info = {"skipped": None}
  if num_candidates > settings["max_candidates"]:
    info["skipped"] = "more than --max_candidates=%d candidates" % settings["max_candidates"]
    return None, info
  candidates = [tuple(tokenize(c))[:2] for c in example.candidates]
  query_pieces, query_ids = tuple(tokenize(example.query))[:2]
  if not query_pieces:
    info["skipped"] = "a query without word pieces"
    return None, info
  documents = []
  for text in example.supports:
    sentences = split_sentences(text)
    # (text, pieces, ids, spans or None)
    documents.append([((s,) + tuple(tokenize(s)) + (None,))[:4] for s in sentences])
  long_budget = long_len - sum(len(p) for p, _ in candidates) - len(query_pieces)
  global_budget = global_len - num_candidates - len(query_pieces) - len(documents)
  if long_budget < 0:
    info["skipped"] = "candidates and query longer than --max_seq_length=%d" % long_len
    return None, info
  if global_budget < 0:
    info["skipped"] = ("candidates, query pieces and documents more than "
                       "--max_global_seq_length=%d" % global_len)
    return None, info
  kept = truncate_documents([[len(p) for _, p, _, _ in doc] for doc in documents],
                            min(settings["max_num_sentences"], global_budget), long_budget)

  built = _Builder()
  spans = [[] for _ in range(num_candidates)]
  for i, (pieces, piece_ids) in enumerate(candidates):
    sentence = built.add_global(ids["candidate"], GLOBAL_CANDIDATE_TYPE, breakpoint=1)
    start = len(built.long["token_ids"])
    spans[i].append((start, start + len(pieces) - 1))
    built.add_long(piece_ids, sentence, -1, CANDIDATE_TYPE)
    built.end_long_paragraph()
  for piece_id in query_ids:  # one sentence (and global token) per query word piece
    sentence = built.add_global(ids["question"], GLOBAL_QUESTION_TYPE)
    built.add_long([piece_id], sentence, -1, QUESTION_TYPE)
  built.end_long_paragraph()
  built.end_global_paragraph()
  mentions = [0] * num_candidates
  for document, keep in zip(documents, kept):
    paragraph = built.add_global(ids["paragraph"], GLOBAL_PARAGRAPH_TYPE)
    for text, pieces, piece_ids, piece_spans in document[:keep]:
      sentence = built.add_global(ids["sentence"], GLOBAL_SENTENCE_TYPE)
      offset = len(built.long["token_ids"])
      for i, candidate in enumerate(example.candidates):
        found = find_mentions(text, pieces, candidate, candidates[i][0], piece_spans)
        spans[i].extend((offset + first, offset + last) for first, last in found)
        mentions[i] += len(found)
      built.add_long(piece_ids, sentence, paragraph, SENTENCE_TYPE)
    built.end_long_paragraph()
    built.end_global_paragraph()
  linked = [-1] * long_len
  for i, candidate_spans in enumerate(spans):  # later candidates overwrite (official order)
    for first, last in candidate_spans:
      linked[first:last + 1] = [i] * (last - first + 1)

  features = collections.OrderedDict()
  pads = {"sentence_ids": -1, "paragraph_ids": -1}
  for name, values in list(built.long.items()) + list(built.global_.items()):
    length = global_len if name.startswith("global") else long_len
    features[name] = _pad(values, length, pads.get(name, 0))
  features["l2g_linked_ids"] = linked
  features["candidate_mask"] = _pad([1] * num_candidates, settings["max_candidates"])
  features["label"] = [example.candidates.index(example.answer)
                       if example.answer is not None else -1]
  features = collections.OrderedDict((name, features[name]) for name, _ in FEATURES)
  info.update(
      long_tokens=len(built.long["token_ids"]),
      global_tokens=len(built.global_["global_token_ids"]), sentences=sum(kept),
      truncated_sentences=sum(len(d) for d in documents) - sum(kept),
      mentions=sum(mentions), most_mentioned=int(np.argmax(mentions)))
  return features, info


def feature_lengths(max_seq_length, max_global_seq_length, max_candidates):
  """{feature: length} of a record (FEATURES)."""
  sizes = {"L": max_seq_length, "G": max_global_seq_length, "C": max_candidates}
  return collections.OrderedDict((name, sizes.get(size, size)) for name, size in FEATURES)


def add_side_inputs(features, config, long_seq_len, global_seq_len,
                    candidate_ignore_hard_g2l=False, query_ignore_hard_g2l=False,
                    enable_l2g_linking=True):
  """Adds the 8 side inputs of a batch of WikiHop records (etc_inputs'
  make_multihop_side_inputs_tf with the official run_wikihop options).

  Args:
    features: dict of batched int32 record features.
    config: EtcConfig (local_radius, relative_pos_max_distance, use_hard_g2l_mask,
      use_hard_l2g_mask).
    long_seq_len: L, or None (a batch cut to its own length).
    global_seq_len: G, or None.
    candidate_ignore_hard_g2l: under the hard g2l mask, the candidates' global tokens still see
      every long token.
    query_ignore_hard_g2l: likewise the question's global tokens.
    enable_l2g_linking: a candidate's mentions get the "own sentence" relative id to its global
      token.

  Returns:
    The dict with the side inputs, static shapes set.
  """
  global_types = features["global_segment_ids"]
  ignore = tf.zeros_like(global_types)
  if candidate_ignore_hard_g2l:
    ignore += tf.cast(tf.equal(global_types, GLOBAL_CANDIDATE_TYPE), global_types.dtype)
  if query_ignore_hard_g2l:
    ignore += tf.cast(tf.equal(global_types, GLOBAL_QUESTION_TYPE), global_types.dtype)
  side = etc_inputs.make_multihop_side_inputs_tf(
      features["long_breakpoints"], features["paragraph_ids"], features["sentence_ids"],
      features["global_breakpoints"], config.local_radius, config.relative_pos_max_distance,
      use_hard_g2l_mask=config.use_hard_g2l_mask, ignore_hard_g2l_mask=ignore,
      use_hard_l2g_mask=config.use_hard_l2g_mask,
      l2g_linked_ids=features["l2g_linked_ids"] if enable_l2g_linking else None)
  return etc_inputs.with_side_inputs(features, side, config.local_radius, long_seq_len,
                                     global_seq_len)


# ----------------------------------------------------------------------------- split files
def record_file(data_dir, split):
  """<data_dir>/wikihop_<split>.tfrecord."""
  return os.path.join(data_dir, "%s_%s.tfrecord" % (TASK, split))


def examples_file(data_dir, split):
  """<data_dir>/wikihop_<split>.examples.jsonl: one line per example of the split's file."""
  return record_file(data_dir, split)[:-len(".tfrecord")] + EXAMPLES_SUFFIX


def example_line(example, record_index, info):
  """The examples file's line of one example: id, candidates, answer, record (its index in the
  split's records, or None when skipped) and skipped (the reason, or None)."""
  return collections.OrderedDict([
      ("id", example.id), ("candidates", example.candidates), ("answer", example.answer),
      ("record", record_index), ("skipped", info["skipped"])])


def read_split_examples(data_dir, split, num_records):
  """The examples file of a split, checked against its records (one line when they differ).

  Args:
    data_dir: the --data_dir.
    split: "train", "dev" or "test".
    num_records: the records in the split's TFRecord file.

  Returns:
    list of dicts (example_line).
  """
  return long_tasks.read_examples_file(data_dir, examples_file(data_dir, split),
                                       record_file(data_dir, split), num_records,
                                       "etc_model.create_wikihop")


# ----------------------------------------------------------------------------- answers, accuracy
def predicted_indices(logits, candidate_mask):
  """The arg-max real candidate of each row (the first of equal scores), int [n]."""
  masked = np.where(np.asarray(candidate_mask) > 0, np.asarray(logits, np.float64), -np.inf)
  return masked.argmax(axis=1)


def predictions_from_outputs(logits, candidate_mask, examples):
  """The official submission {id: answer} of a split's records.

  Args:
    logits: float [records, C].
    candidate_mask: int [records, C].
    examples: the split's examples file lines (read_split_examples).

  Returns:
    OrderedDict {id: the arg-max candidate's text} in record order (skipped examples have
    none).
  """
  chosen = predicted_indices(logits, candidate_mask)
  by_record = {line["record"]: line for line in examples if line["record"] is not None}
  if len(by_record) != len(chosen):
    raise ValueError("%d predictions for %d records" % (len(chosen), len(by_record)))
  return collections.OrderedDict(
      (by_record[i]["id"], by_record[i]["candidates"][int(k)]) for i, k in enumerate(chosen))


def evaluate_predictions(gold, predictions):
  """Accuracy of {id: answer} predictions, by the rules in the module docstring.

  Args:
    gold: {id: answer} of every example with an answer.
    predictions: {id: predicted answer} (values must be strings).

  Returns:
    dict: accuracy (None without examples), examples, correct, missing (examples without a
    prediction, counted wrong), unknown_ids (predictions for other ids, not scored).
  """
  correct = sum(1 for key, answer in gold.items()
                if key in predictions and
                normalize_answer(predictions[key]) == normalize_answer(answer))
  return collections.OrderedDict([
      ("accuracy", correct / float(len(gold)) if gold else None),
      ("examples", len(gold)), ("correct", correct),
      ("missing", sum(1 for key in gold if key not in predictions)),
      ("unknown_ids", sum(1 for key in predictions if key not in gold))])


def read_predictions(path, source=None):
  """A {id: answer} JSON file, checked (one line when it is not an object of strings)."""
  source = source or "prediction file %s" % path
  predictions = load_json(path, source)
  if not isinstance(predictions, dict):
    common.fail("%s: not a JSON object {id: answer}, got a %s" %
                (source, type(predictions).__name__))
  for key, value in predictions.items():
    if not isinstance(value, str):
      common.fail("%s: the prediction of %s is a %s, not a string" %
                  (source, key, type(value).__name__))
  return predictions


def split_metrics(logits, candidate_mask, examples):
  """The official accuracy of a split's record outputs, over every example of the split.

  Args:
    logits: float [records, C].
    candidate_mask: int [records, C].
    examples: the split's examples file lines (skipped examples count as wrong).

  Returns:
    (predictions {id: answer}, dict: accuracy, examples (with an answer), correct, skipped
    (examples with an answer but no record)).
  """
  predictions = predictions_from_outputs(logits, candidate_mask, examples)
  gold = collections.OrderedDict((line["id"], line["answer"]) for line in examples
                                 if line["answer"] is not None)
  result = evaluate_predictions(gold, predictions)
  metrics = collections.OrderedDict([
      ("accuracy", result["accuracy"]), ("examples", result["examples"]),
      ("correct", result["correct"]), ("skipped", result["missing"])])
  return predictions, metrics
