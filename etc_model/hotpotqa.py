# coding=utf-8
"""HotpotQA for ETC: reading the data, the official scorer, the features, the side inputs and
the answers.

The library of `python -m etc_model.create_hotpotqa`, `python -m etc_model.run_long_tasks
--task=hotpotqa` and `python -m etc_model.hotpotqa_evaluate`. The feature layout is the official
google-research etcmodel's (models/hotpotqa/generate_tf_examples_lib.py, data_utils.py,
eval_utils.py, run_finetuning_lib.py).

Data. A HotpotQA file (distractor or fullwiki, train or dev) is a JSON list of {"_id",
"question", "context": [[title, [sentence, ...]], ...], "answer", "supporting_facts": [[title,
sent_id], ...], "type", "level"}; the fullwiki test file has no "answer" / "supporting_facts"
("type" and "level" are optional everywhere). A supporting fact whose title is not in the
context, or whose sentence index is past its paragraph's end, is kept for the scorer and counted
(the fullwiki context may lack a gold paragraph; a few train facts point past their paragraph).

Official scorer (evaluate, the rules of hotpotqa/hotpot's hotpot_evaluate_v1.py): answers are
compared after normalize_answer (lower case, punctuation removed, the articles a / an / the
removed, white space collapsed); answer F1 over the normalized words, 0 when either side is
"yes", "no" or "noanswer" and the two differ, 0 without a common word; supporting facts are
compared as sets of (title, sent_id) pairs (duplicates count once), precision 0 without
predictions, recall 0 without gold, F1 0 when both are 0, EM 1 when no pair is wrong or missing;
joint precision / recall are the products of the answer's and the facts', joint F1 their
harmonic mean, joint EM the product of the EMs. Every metric is a sum over the data file's
examples divided by their number: an example without a predicted answer adds 0 to the answer and
joint metrics, one without predicted facts 0 to the facts' and joint metrics.

Long input [L]: [CLS] (token type 1, no sentence, its own long paragraph), the question's word
pieces (type 3), then per context paragraph its title's word pieces (type 2) and its sentences'
(type 1), each paragraph a long paragraph (long_breakpoints at its last token). Text is cut at
white space first and each piece WordPiece-tokenized (long_tokens_to_unigrams: a word piece's
white-space word within its title or sentence; -1 for [CLS], question and padding). With a
SentencePiece model (create_hotpotqa --spm_model_file) the question, each title and each
sentence is encoded whole (its ids are sp.encode of the text, lower-cased with do_lower_case),
a piece's unigram is the white-space word of its first non-space character.
Global input [G], every global token of token type 0: [CLS] (ignores the hard g2l mask), one
QUESTION token per question word piece, then per paragraph a PARAGRAPH token, a SENTENCE token
for the title and one per sentence (global_breakpoints: after [CLS], after the last question
token, after each paragraph's last token).
  sentence_ids [L]: a long token's title / sentence / question-piece global token (-1: [CLS],
    padding); paragraph_ids [L]: its paragraph token (-1 for [CLS], question, padding).
  global_paragraph_ids [G] / global_sentence_ids [G]: the context paragraph index of a PARAGRAPH,
    title or sentence token and the sentence index of a sentence token (-1 otherwise); the
    prediction's supporting facts are read through them.
  supporting_facts [G]: 1 at a supporting sentence's token, and at the PARAGRAPH and title tokens
    of a paragraph with a supporting fact (the official labels).
  answer_type [1]: 0 span, 1 "yes", 2 "no" (the answer text exactly "yes" / "no"), -1 unknown
    (no answer in the data, or a span answer not found in the input);
  answer_begin / answer_end [1]: the inclusive long span of the answer, 0 / 0 for yes / no (the
    [CLS] token), -1 unknown. The span is the answer's text found (case-sensitive, by
    characters, then moved to word pieces and tightened as run_squad's _improve_answer_span; with
    SentencePiece, the pieces whose character spans overlap it) in a supporting paragraph's
    title or a supporting sentence; of several, the one ending first.

Truncation (the official rule): the question's pieces, titles and sentences are added in order,
and one that does not fit in the rest of L or G is left out while later ones that fit are still
added (the PARAGRAPH token is added when G has room). Unlike the official code, a sentence after
one left out keeps its own index in global_sentence_ids (the official numbering shifts there),
and answer spans are only looked for in the titles and sentences that were added. Every cut is
counted (convert_example's info, the summary). Training records follow the official filter: an
example whose kept input has no supporting-fact label, or whose span answer is not found in it,
gets no record (skipped, with the reason); dev and test examples always get one.

Prediction (predict_example, the official generate_prediction_json): a title / sentence token
whose sigmoid(supporting-fact logit) >= sp_threshold (0.5) is a predicted fact [title, sentence
index] (title tokens are not facts); the answer type is the arg-max of three logits on the
[CLS] global token; for a span, the best (begin, end) by begin + end logit (the product of the
softmax probabilities) with both ends on a title / sentence token of one predicted supporting
sentence (or title), begin <= end and at most max_answer_length (30) word pieces (ties: the later
span, as sorted()[-1]); its text is the white-space words it covers projected onto the
word-piece text by run_squad.get_final_text (with SentencePiece, the context text the span's
pieces cover); "" when no span qualifies. The official code keeps
only the 50 most probable begins and ends before pairing them and reads the [CLS] token's
sentence id -1 as the last global token; this search looks at every pair of real tokens and
never picks [CLS] for a span. An example without a record predicts "" and no facts.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import os
import re
import string

import numpy as np
import tensorflow as tf

import run_squad
import tokenization
from realformer_tf import common
from etc_model import etc_inputs
from etc_model import long_tasks

TASK = "hotpotqa"
SPLITS = ("train", "dev", "test")
SUMMARY_NAME = "hotpotqa.json"
VOCAB_NAME = "hotpotqa_vocab.txt"
SPM_NAME = "hotpotqa_spm.model"
EXAMPLES_SUFFIX = ".examples.jsonl"
# The official run_finetuning defaults.
DEFAULT_MAX_SEQ_LENGTH = 4096
DEFAULT_MAX_GLOBAL_SEQ_LENGTH = 230
DEFAULT_MAX_ANSWER_LENGTH = 30
DEFAULT_SP_THRESHOLD = 0.5

# The global tokens' vocabulary entries (official WORDPIECE_DEFAULT_GLOBAL_TOKEN_IDS).
GLOBAL_TOKENS = collections.OrderedDict([
    ("cls", "[CLS]"), ("sentence", "[unused0]"), ("question", "[unused2]"),
    ("paragraph", "[unused4]")])
# Token type ids (official generate_tf_examples_lib values).
GLOBAL_TYPE = 0
SENTENCE_TYPE = 1
TITLE_TYPE = 2
QUESTION_TYPE = 3
MIN_SEGMENT_VOCAB_SIZE = QUESTION_TYPE + 1
# Answer types (official answer_types_map).
ANSWER_TYPES = ("span", "yes", "no")

# The features of a record, in the order written; "L", "G" or 1 is the length.
FEATURES = (("token_ids", "L"), ("sentence_ids", "L"), ("long_breakpoints", "L"),
            ("global_token_ids", "G"), ("global_breakpoints", "G"), ("paragraph_ids", "L"),
            ("segment_ids", "L"), ("global_segment_ids", "G"), ("long_tokens_to_unigrams", "L"),
            ("global_paragraph_ids", "G"), ("global_sentence_ids", "G"),
            ("supporting_facts", "G"), ("answer_type", 1), ("answer_begin", 1),
            ("answer_end", 1))
# Padding values of the features that do not pad with 0.
_PADDING = {"sentence_ids": -1, "paragraph_ids": -1, "long_tokens_to_unigrams": -1,
            "global_paragraph_ids": -1, "global_sentence_ids": -1}

Paragraph = collections.namedtuple("Paragraph", ["title", "sentences"])
Example = collections.namedtuple(
    "Example", ["id", "question", "context", "answer", "supporting_facts", "type", "level"])

# The official tokenizer's white space (data_utils._WHITESPACE_DELIMITER).
_WHITESPACE = u" \t\r\n\u202f"


# ----------------------------------------------------------------------------- the official scorer
def normalize_answer(text):
  """The official normalization: lower case, no punctuation, no articles, single spaces."""
  text = text.lower()
  exclude = set(string.punctuation)
  text = "".join(ch for ch in text if ch not in exclude)
  text = re.sub(r"\b(a|an|the)\b", " ", text)
  return " ".join(text.split())


def answer_f1(prediction, gold):
  """The official answer (f1, precision, recall) of one prediction."""
  prediction, gold = normalize_answer(prediction), normalize_answer(gold)
  special = ("yes", "no", "noanswer")
  if (prediction in special or gold in special) and prediction != gold:
    return 0, 0, 0
  prediction_tokens, gold_tokens = prediction.split(), gold.split()
  num_same = sum((collections.Counter(prediction_tokens) &
                  collections.Counter(gold_tokens)).values())
  if num_same == 0:
    return 0, 0, 0
  precision = 1.0 * num_same / len(prediction_tokens)
  recall = 1.0 * num_same / len(gold_tokens)
  return (2 * precision * recall) / (precision + recall), precision, recall


def supporting_facts_scores(prediction, gold):
  """The official (em, f1, precision, recall) of predicted against gold (title, sent_id) pairs
  (each a set: duplicates count once)."""
  predicted = set(map(tuple, prediction))
  gold = set(map(tuple, gold))
  tp = sum(1 for pair in predicted if pair in gold)
  fp = len(predicted) - tp
  fn = sum(1 for pair in gold if pair not in predicted)
  precision = 1.0 * tp / (tp + fp) if tp + fp > 0 else 0.0
  recall = 1.0 * tp / (tp + fn) if tp + fn > 0 else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
  return (1.0 if fp + fn == 0 else 0.0), f1, precision, recall


METRIC_NAMES = ("em", "f1", "prec", "recall", "sp_em", "sp_f1", "sp_prec", "sp_recall",
                "joint_em", "joint_f1", "joint_prec", "joint_recall")


def evaluate(predictions, gold):
  """The official metrics of a prediction object against gold examples (module docstring).

  Args:
    predictions: {"answer": {id: text}, "sp": {id: [[title, sent_id], ...]}} (checked:
      check_predictions).
    gold: list of (id, answer, supporting_facts) of every example of the data file.

  Returns:
    OrderedDict: the official 12 metrics (None without examples), then examples,
    missing_answers, missing_sp (examples without a prediction: scored 0) and unknown_ids
    (predicted ids the data does not have: not scored).
  """
  sums = collections.OrderedDict((name, 0) for name in METRIC_NAMES)
  answers, facts = predictions["answer"], predictions["sp"]
  for key, answer, supporting_facts in gold:
    joint = True
    if key in answers:
      em = normalize_answer(answers[key]) == normalize_answer(answer)
      f1, precision, recall = answer_f1(answers[key], answer)
      sums["em"] += float(em)
      sums["f1"] += f1
      sums["prec"] += precision
      sums["recall"] += recall
    else:
      joint = False
    if key in facts:
      sp_em, sp_f1, sp_precision, sp_recall = supporting_facts_scores(facts[key],
                                                                      supporting_facts)
      sums["sp_em"] += sp_em
      sums["sp_f1"] += sp_f1
      sums["sp_prec"] += sp_precision
      sums["sp_recall"] += sp_recall
    else:
      joint = False
    if joint:
      joint_precision = precision * sp_precision
      joint_recall = recall * sp_recall
      if joint_precision + joint_recall > 0:
        joint_f1 = 2 * joint_precision * joint_recall / (joint_precision + joint_recall)
      else:
        joint_f1 = 0.
      sums["joint_em"] += em * sp_em
      sums["joint_f1"] += joint_f1
      sums["joint_prec"] += joint_precision
      sums["joint_recall"] += joint_recall
  result = collections.OrderedDict(
      (name, value / len(gold) if gold else None) for name, value in sums.items())
  ids = set(key for key, _, _ in gold)
  result["examples"] = len(gold)
  result["missing_answers"] = sum(1 for key in ids if key not in answers)
  result["missing_sp"] = sum(1 for key in ids if key not in facts)
  result["unknown_ids"] = len((set(answers) | set(facts)) - ids)
  return result


def check_predictions(predictions, source):
  """One line unless `predictions` is the official format {"answer": {id: str}, "sp": {id:
  [[title, sent_id], ...]}}; returns it."""
  if not isinstance(predictions, dict):
    common.fail('%s: not a JSON object {"answer": {...}, "sp": {...}}, got a %s' %
                (source, type(predictions).__name__))
  for key in ("answer", "sp"):
    if key not in predictions:
      common.fail('%s: has no "%s" (the official format {"answer": {id: text}, "sp": {id: '
                  '[[title, sent_id], ...]}})' % (source, key))
    if not isinstance(predictions[key], dict):
      common.fail('%s: "%s" is a %s, not an object {id: ...}' %
                  (source, key, type(predictions[key]).__name__))
  for key, value in predictions["answer"].items():
    if not isinstance(value, str):
      common.fail("%s: the answer of %s is a %s, not a string" %
                  (source, key, type(value).__name__))
  for key, pairs in predictions["sp"].items():
    if not isinstance(pairs, list) or not all(_is_fact(pair) for pair in pairs):
      common.fail("%s: the supporting facts of %s are not a list of [title, sentence index] "
                  "pairs" % (source, key))
  return predictions


def _is_fact(pair):
  return (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str) and
          isinstance(pair[1], int) and not isinstance(pair[1], bool))


def read_predictions(path, source=None):
  """A prediction file, checked (check_predictions)."""
  source = source or "prediction file %s" % path
  return check_predictions(load_json(path, source), source)


# ----------------------------------------------------------------------------- reading the data
# One reader of the task files' JSON (a missing file, a directory, bad JSON: one line).
load_json = long_tasks.load_json


def _record_name(index, record):
  if isinstance(record, dict) and isinstance(record.get("_id"), str):
    return "record %d (_id %s)" % (index, record["_id"])
  return "record %d" % index


def _check_context(context):
  """None if `context` is a list of [title, [sentences]], else what is wrong."""
  if not isinstance(context, list):
    return '"context" is not a list of [title, [sentences]]'
  for n, paragraph in enumerate(context):
    if (not isinstance(paragraph, list) or len(paragraph) != 2 or
        not isinstance(paragraph[0], str) or not isinstance(paragraph[1], list) or
        not all(isinstance(s, str) for s in paragraph[1])):
      return '"context" paragraph %d is not [title, [sentences]]' % n
  return None


def parse_examples(data, source, require_answer=True):
  """Checked Examples of a loaded HotpotQA list (one line naming `source` and the record).

  Args:
    data: the loaded JSON.
    source: how the file is named in errors ("--dev_file=dev.json").
    require_answer: every record must have "answer" and "supporting_facts" (the fullwiki test
      file has neither).

  Returns:
    list of Example (answer and supporting_facts None where the record has none).
  """
  if not isinstance(data, list):
    common.fail("%s: not a HotpotQA file (a JSON list of records), got a %s" %
                (source, type(data).__name__))
  examples, seen = [], set()
  for index, record in enumerate(data):
    name = _record_name(index, record)
    if not isinstance(record, dict):
      common.fail("%s: %s is a %s, not an object" % (source, name, type(record).__name__))
    keys = ("_id", "question", "context") + (
        ("answer", "supporting_facts") if require_answer else ())
    missing = [k for k in keys if k not in record]
    if missing:
      common.fail("%s: %s has no %s" % (source, name, ", ".join('"%s"' % k for k in missing)))
    for key in ("_id", "question", "answer", "type", "level"):
      if key in record and not isinstance(record[key], str):
        common.fail('%s: %s: "%s" is a %s, not a string' %
                    (source, name, key, type(record[key]).__name__))
    problem = _check_context(record["context"])
    if problem:
      common.fail("%s: %s: %s" % (source, name, problem))
    facts = record.get("supporting_facts")
    if facts is not None and (not isinstance(facts, list) or
                              not all(_is_fact(pair) for pair in facts)):
      common.fail('%s: %s: "supporting_facts" is not a list of [title, sentence index] pairs' %
                  (source, name))
    if record["_id"] in seen:
      common.fail("%s: %s repeats an earlier record's _id" % (source, name))
    seen.add(record["_id"])
    examples.append(Example(
        record["_id"], record["question"],
        [Paragraph(title, list(sentences)) for title, sentences in record["context"]],
        record.get("answer"), [list(pair) for pair in facts] if facts is not None else None,
        record.get("type", ""), record.get("level", "")))
  return examples


def read_examples(path, source, require_answer=True):
  """Reads and checks a HotpotQA JSON file (parse_examples)."""
  return parse_examples(load_json(path, source), source, require_answer)


def facts_outside_context(example):
  """The supporting facts of an example whose title is not in its context or whose sentence
  index is past the paragraph's end (they can never be predicted)."""
  sizes = collections.defaultdict(int)
  for paragraph in example.context:
    sizes[paragraph.title] = max(sizes[paragraph.title], len(paragraph.sentences))
  return [pair for pair in example.supporting_facts or []
          if pair[0] not in sizes or not 0 <= pair[1] < sizes[pair[0]]]


# ----------------------------------------------------------------------------- tokens and spans
def whitespace_split(text):
  """(words, char_to_word): white-space words (the official delimiters) and each character's
  word index (a space belongs to the word before it, -1 before the first)."""
  words, char_to_word, after_space = [], [], True
  for c in text:
    if c in _WHITESPACE:
      after_space = True
    else:
      if after_space:
        words.append(c)
      else:
        words[-1] += c
      after_space = False
    char_to_word.append(len(words) - 1)
  return words, char_to_word


TokenizedText = collections.namedtuple(
    "TokenizedText", ["text", "pieces", "ids", "char_to_word", "word_to_piece", "piece_to_word",
                      "spans"])


def is_sentencepiece(tokenizer):
  """Whether a FullTokenizer is a SentencePiece one (spm_model_file)."""
  return getattr(tokenizer, "sp_model", None) is not None


def _sentencepiece_tokenized(text, spm_spans, tokenizer):
  """TokenizedText of a whole text's SentencePiece ids (sp.encode of the text, lower-cased with
  do_lower_case) with each piece's character span; a piece's word is the white-space word of
  its first non-space character (a word-start marker alone: the next piece's word)."""
  ids, spans = spm_spans.pieces_with_spans(text)
  words, char_to_word = whitespace_split(text)
  piece_to_word = [None] * len(ids)
  for i, (begin, end) in enumerate(spans):
    inside = [c for c in range(begin, end) if text[c] not in _WHITESPACE]
    if inside:
      piece_to_word[i] = char_to_word[inside[0]]
  following = len(words) - 1 if words else -1
  for i in range(len(ids) - 1, -1, -1):
    if piece_to_word[i] is None:
      piece_to_word[i] = following
    following = piece_to_word[i]
  word_to_piece = [piece_to_word.index(w) if w in piece_to_word else len(ids)
                   for w in range(len(words))]
  return TokenizedText(text, tokenizer.convert_ids_to_tokens(ids), ids, char_to_word,
                       word_to_piece, piece_to_word, spans)


def make_tokenize(tokenizer):
  """text -> TokenizedText, titles and short texts cached.

  WordPiece: each white-space word tokenized on its own (the official way). SentencePiece: the
  whole text at once (its ids are sp.encode of the text), with each piece's character span.
  """
  cache = {}
  spm_spans = long_tasks.tokenize_fn(tokenizer) if is_sentencepiece(tokenizer) else None

  def tokenize(text):
    if text in cache:
      return cache[text]
    if spm_spans is not None:
      result = _sentencepiece_tokenized(text, spm_spans, tokenizer)
      if len(text) <= 100:
        cache[text] = result
      return result
    words, char_to_word = whitespace_split(text)
    pieces, word_to_piece, piece_to_word = [], [], []
    for i, word in enumerate(words):
      word_to_piece.append(len(pieces))
      word_pieces = tokenizer.tokenize(word)
      piece_to_word.extend([i] * len(word_pieces))
      pieces.extend(word_pieces)
    result = TokenizedText(text, pieces, tokenizer.convert_tokens_to_ids(pieces), char_to_word,
                           word_to_piece, piece_to_word, None)
    if len(text) <= 100:
      cache[text] = result
    return result

  return tokenize


def find_answer_spans(tokenized, answer, tokenize_answer):
  """Every occurrence of `answer` in a tokenized text as an inclusive word-piece span.

  WordPiece (the official data_utils.find_answer_spans_wordpiece): character occurrences
  (case-sensitive, not overlapping), widened to white-space words, then tightened to the
  answer's own word pieces where they occur inside (run_squad's _improve_answer_span).
  SentencePiece (tokenized.spans, the official find_answer_spans_sentencepiece): the same
  character occurrences, each the run of pieces that overlap its characters.

  Args:
    tokenized: TokenizedText of the title / sentence.
    answer: the answer text.
    tokenize_answer: text -> word pieces (the tokenizer's tokenize; WordPiece only).

  Returns:
    list of (first, last) word-piece indices.
  """
  if not answer:
    return []
  if tokenized.spans is not None:
    return _sentencepiece_answer_spans(tokenized, answer)
  spans, answer_pieces = [], None
  begin = tokenized.text.find(answer)
  while begin != -1:
    end = begin + len(answer) - 1
    first_word, last_word = tokenized.char_to_word[begin], tokenized.char_to_word[end]
    first = tokenized.word_to_piece[first_word]
    if last_word + 1 < len(tokenized.word_to_piece):
      last = tokenized.word_to_piece[last_word + 1] - 1
    else:
      last = len(tokenized.pieces) - 1
    if answer_pieces is None:
      answer_pieces = " ".join(tokenize_answer(answer))
    spans.append(_improve_span(tokenized.pieces, (first, last), answer_pieces))
    begin = tokenized.text.find(answer, end + 1)
  return spans


def _sentencepiece_answer_spans(tokenized, answer):
  """find_answer_spans with SentencePiece: each occurrence's overlapping pieces."""
  spans = []
  begin = tokenized.text.find(answer)
  while begin != -1:
    run = long_tasks.piece_run(tokenized.spans, begin, begin + len(answer))
    if run is not None:
      spans.append((run[0], run[1] - 1))
    begin = tokenized.text.find(answer, begin + len(answer))
  return spans


def _improve_span(pieces, span, answer_pieces):
  """The innermost sub-span whose pieces are the answer's (run_squad's rule), else `span`."""
  for begin in range(span[0], span[1] + 1):
    for end in range(span[1], begin - 1, -1):
      if " ".join(pieces[begin:end + 1]) == answer_pieces:
        return begin, end
  return span


# ----------------------------------------------------------------------------- features
def global_token_ids(vocab, global_tokens=None):
  """{"cls": id, ...} of the global tokens in a vocabulary {token: id} (missing: KeyError).

  Args:
    vocab: {token: id} (a SentencePiece FullTokenizer's: its pieces).
    global_tokens: {kind: token} (None: GLOBAL_TOKENS).
  """
  global_tokens = global_tokens or GLOBAL_TOKENS
  return collections.OrderedDict((kind, vocab[token]) for kind, token in global_tokens.items())


class _Builder(object):
  """Appends the long and global tokens of one example within L and G (convert_example)."""

  def __init__(self, long_len, global_len):
    self.long_len, self.global_len = long_len, global_len
    self.long = collections.OrderedDict((name, []) for name in (
        "token_ids", "sentence_ids", "paragraph_ids", "long_breakpoints", "segment_ids",
        "long_tokens_to_unigrams"))
    self.global_ = collections.OrderedDict((name, []) for name in (
        "global_token_ids", "global_segment_ids", "global_breakpoints", "global_paragraph_ids",
        "global_sentence_ids", "supporting_facts"))
    self.dropped_pieces = 0
    self.dropped_parts = 0
    self.dropped_global_full = 0

  @property
  def num_long(self):
    return len(self.long["token_ids"])

  @property
  def num_global(self):
    return len(self.global_["global_token_ids"])

  def add_global(self, token_id, paragraph=-1, sentence=-1, label=0):
    """Adds a global token when G has room; returns its index or None."""
    if self.num_global >= self.global_len:
      return None
    for name, value in zip(self.global_, (token_id, GLOBAL_TYPE, 0, paragraph, sentence,
                                          label)):
      self.global_[name].append(value)
    return self.num_global - 1

  def add_part(self, ids, token_type, unigrams, global_id, paragraph_token=-1, paragraph=-1,
               sentence=-1, label=0):
    """Adds a sentence (its long pieces and its global token) when both fit, else counts it
    dropped; returns the offset of its first long token or None."""
    if self.num_long + len(ids) > self.long_len or self.num_global >= self.global_len:
      self.dropped_parts += 1
      self.dropped_pieces += len(ids)
      self.dropped_global_full += int(self.num_global >= self.global_len)
      return None
    offset = self.num_long
    sentence_token = self.num_global
    for token_id, unigram in zip(ids, unigrams):
      for name, value in zip(self.long, (token_id, sentence_token, paragraph_token, 0,
                                         token_type, unigram)):
        self.long[name].append(value)
    self.add_global(global_id, paragraph, sentence, label)
    return offset

  def end_paragraph(self):
    if self.long["long_breakpoints"]:
      self.long["long_breakpoints"][-1] = 1
    if self.global_["global_breakpoints"]:
      self.global_["global_breakpoints"][-1] = 1


def _pad(values, length, value=0):
  return list(values) + [value] * (length - len(values))


def answer_type_of(answer):
  """The official answer type of an answer text: 1 "yes", 2 "no", else 0 (a span)."""
  return ANSWER_TYPES.index(answer) if answer in ("yes", "no") else 0


def convert_example(example, tokenize, tokenize_answer, ids, settings, is_training=False):
  """The record of one example, or why it has none (module docstring).

  Args:
    example: Example.
    tokenize: make_tokenize's function.
    tokenize_answer: text -> word pieces (the tokenizer's tokenize).
    ids: global_token_ids() of the vocabulary.
    settings: dict with max_seq_length, max_global_seq_length.
    is_training: apply the official training filter (no record without a supporting-fact label
      or a found answer).

  Returns:
    (features, info): features an OrderedDict {name: list of int} in FEATURES order (None when
    skipped); info a dict: skipped (None or the reason), long_tokens, global_tokens,
    dropped_parts (question pieces, titles, sentences left out: G was full, dropped_global_full
    of them, or the rest of L too short), dropped_pieces (their word
    pieces), answer_type (-1 unknown), answer_found (a span answer found in the input).
  """
  long_len, global_len = settings["max_seq_length"], settings["max_global_seq_length"]
  built = _Builder(long_len, global_len)
  built.add_global(ids["cls"])
  built.end_paragraph()
  built.long["token_ids"].append(ids["cls"])  # the long [CLS]: yes / no answers point here
  for name, value in (("sentence_ids", -1), ("paragraph_ids", -1), ("long_breakpoints", 1),
                      ("segment_ids", SENTENCE_TYPE), ("long_tokens_to_unigrams", -1)):
    built.long[name].append(value)
  for piece_id in tokenize(example.question).ids:
    built.add_part([piece_id], QUESTION_TYPE, [-1], ids["question"])
  built.end_paragraph()

  facts = collections.defaultdict(set)
  for title, sent_id in example.supporting_facts or []:
    facts[title].add(sent_id)
  answer = example.answer
  spans = []
  for p, paragraph in enumerate(example.context):
    supporting = facts.get(paragraph.title, set())
    paragraph_token = built.add_global(ids["paragraph"], paragraph=p, label=int(bool(supporting)))
    parts = [(tokenize(paragraph.title), TITLE_TYPE, -1, bool(supporting))]
    parts += [(tokenize(s), SENTENCE_TYPE, n, n in supporting)
              for n, s in enumerate(paragraph.sentences)]
    for tokenized, token_type, sentence, label in parts:
      offset = built.add_part(tokenized.ids, token_type, tokenized.piece_to_word, ids["sentence"],
                              paragraph_token if paragraph_token is not None else -1, p,
                              sentence, int(label))
      if offset is not None and label and answer:
        spans += [(offset + first, offset + last) for first, last in
                  find_answer_spans(tokenized, answer, tokenize_answer)]
    built.end_paragraph()

  info = {"skipped": None, "long_tokens": built.num_long, "global_tokens": built.num_global,
          "dropped_parts": built.dropped_parts, "dropped_global_full": built.dropped_global_full,
          "dropped_pieces": built.dropped_pieces}
  answer_type, span = -1, (-1, -1)
  if answer is not None:
    answer_type = answer_type_of(answer)
    if answer_type:
      span = (0, 0)
    elif spans:
      span = min(spans, key=lambda s: s[1])  # the official sort by end (stable: first found)
    else:
      answer_type = -1
  info["answer_type"] = answer_type
  info["answer_found"] = bool(spans)
  if is_training:
    if not any(built.global_["supporting_facts"]):
      info["skipped"] = "no supporting fact in the kept input"
      return None, info
    if answer_type < 0:
      info["skipped"] = "answer not found in the kept supporting sentences"
      return None, info

  features = collections.OrderedDict()
  for name, values in list(built.long.items()) + list(built.global_.items()):
    length = global_len if name.startswith("global") or name == "supporting_facts" else long_len
    features[name] = _pad(values, length, _PADDING.get(name, 0))
  features["answer_type"] = [answer_type]
  features["answer_begin"], features["answer_end"] = [span[0]], [span[1]]
  return collections.OrderedDict((name, features[name]) for name, _ in FEATURES), info


def feature_lengths(max_seq_length, max_global_seq_length):
  """{feature: length} of a record (FEATURES)."""
  sizes = {"L": max_seq_length, "G": max_global_seq_length}
  return collections.OrderedDict((name, sizes.get(size, size)) for name, size in FEATURES)


def add_side_inputs(features, config, long_seq_len, global_seq_len, cls_token_id=101):
  """Adds the 8 side inputs of a batch of HotpotQA records (etc_inputs'
  make_multihop_side_inputs_tf with the official run_finetuning options: the [CLS] global token
  ignores the hard g2l mask, no l2g linking).

  Args:
    features: dict of batched int32 record features.
    config: EtcConfig (local_radius, relative_pos_max_distance, use_hard_g2l_mask,
      use_hard_l2g_mask).
    long_seq_len: L, or None (a batch cut to its own length).
    global_seq_len: G, or None.
    cls_token_id: the [CLS] id of the vocabulary.

  Returns:
    The dict with the side inputs, static shapes set.
  """
  ignore = tf.cast(tf.equal(features["global_token_ids"], cls_token_id),
                   features["global_token_ids"].dtype)
  side = etc_inputs.make_multihop_side_inputs_tf(
      features["long_breakpoints"], features["paragraph_ids"], features["sentence_ids"],
      features["global_breakpoints"], config.local_radius, config.relative_pos_max_distance,
      use_hard_g2l_mask=config.use_hard_g2l_mask, ignore_hard_g2l_mask=ignore,
      use_hard_l2g_mask=config.use_hard_l2g_mask)
  return etc_inputs.with_side_inputs(features, side, config.local_radius, long_seq_len,
                                     global_seq_len)


# ----------------------------------------------------------------------------- split files
def record_file(data_dir, split):
  """<data_dir>/hotpotqa_<split>.tfrecord."""
  return os.path.join(data_dir, "%s_%s.tfrecord" % (TASK, split))


def examples_file(data_dir, split):
  """<data_dir>/hotpotqa_<split>.examples.jsonl: one line per example of the split's file."""
  return record_file(data_dir, split)[:-len(".tfrecord")] + EXAMPLES_SUFFIX


def example_line(example, record_index, info, with_context=True):
  """The examples file's line of one example: what scoring and the answer text need (id,
  record index or None, skipped reason or None, answer, supporting_facts, context: None without
  with_context, as the train split's, which is never decoded)."""
  context = [[p.title, p.sentences] for p in example.context] if with_context else None
  return collections.OrderedDict([
      ("id", example.id), ("record", record_index), ("skipped", info["skipped"]),
      ("answer", example.answer), ("supporting_facts", example.supporting_facts),
      ("context", context)])


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
                                       "etc_model.create_hotpotqa")


def load_data_tokenizer(data_dir):
  """The tokenizer of a create_hotpotqa directory (its vocabulary or SentencePiece model copy,
  as its settings say, and do_lower_case).

  Args:
    data_dir: the --data_dir.

  Returns:
    (tokenization.FullTokenizer, do_lower_case).
  """
  summary_path = os.path.join(data_dir, SUMMARY_NAME)
  if not tf.io.gfile.exists(summary_path):
    common.fail("--data_dir=%s: has no %s (write the data with etc_model.create_hotpotqa)" %
                (data_dir, SUMMARY_NAME))
  summary = load_json(summary_path, "--data_dir=%s: %s" % (data_dir, SUMMARY_NAME))
  settings = summary.get("settings", {})
  do_lower_case = settings.get("do_lower_case")
  if not isinstance(do_lower_case, bool):
    common.fail("--data_dir=%s: %s has no settings.do_lower_case (write the data again with "
                "etc_model.create_hotpotqa)" % (data_dir, SUMMARY_NAME))
  is_spm = bool(settings.get("spm_model_file"))
  path = os.path.join(data_dir, SPM_NAME if is_spm else VOCAB_NAME)
  if not tf.io.gfile.exists(path):
    common.fail("--data_dir=%s: has no %s (write the data with etc_model.create_hotpotqa)" %
                (data_dir, os.path.basename(path)))
  if is_spm:
    return tokenization.FullTokenizer(None, do_lower_case, spm_model_file=path), do_lower_case
  return tokenization.FullTokenizer(path, do_lower_case), do_lower_case

# The record features the answers are decoded from (read_decoding_features).
DECODING_FEATURES = ("token_ids", "sentence_ids", "segment_ids", "long_tokens_to_unigrams",
                     "global_paragraph_ids", "global_sentence_ids")


def read_decoding_features(path):
  """{name: int array [records, length]} of DECODING_FEATURES read from a record file."""
  columns = {name: [] for name in DECODING_FEATURES}
  for record in tf.compat.v1.io.tf_record_iterator(path):
    feature = tf.train.Example.FromString(record).features.feature
    for name in DECODING_FEATURES:
      columns[name].append(list(feature[name].int64_list.value))
  return {name: np.asarray(values, np.int64) for name, values in columns.items()}


# ----------------------------------------------------------------------------- answers
def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def best_span(begin_logits, end_logits, token_types, sentence_ids, supporting,
              max_answer_length):
  """The best answer span of one record (module docstring), or None.

  Args:
    begin_logits, end_logits: float [L].
    token_types: int [L] (segment_ids).
    sentence_ids: int [L].
    supporting: bool [G], the predicted supporting title / sentence tokens.
    max_answer_length: the most word pieces of an answer.

  Returns:
    (begin, end) or None.
  """
  sentence_ids = np.asarray(sentence_ids)
  valid = (np.isin(token_types, (SENTENCE_TYPE, TITLE_TYPE)) & (sentence_ids >= 0))
  valid &= np.asarray(supporting)[np.maximum(sentence_ids, 0)]
  positions = np.nonzero(valid)[0]
  best, best_key = None, None
  begin_logits = np.asarray(begin_logits, np.float64)
  end_logits = np.asarray(end_logits, np.float64)
  for begin in positions:
    ends = positions[(positions >= begin) & (positions < begin + max_answer_length) &
                     (sentence_ids[positions] == sentence_ids[begin])]
    if not len(ends):
      continue
    scores = begin_logits[begin] + end_logits[ends]
    top = scores.max()
    end = int(ends[np.nonzero(scores == top)[0][-1]])
    key = (top, int(begin), end)
    if best_key is None or key > best_key:
      best, best_key = (int(begin), end), key
  return best


def span_text(span, record, context, tokenizer, do_lower_case=True):
  """The answer text of a long span, a piece of the context's own text.

  WordPiece: the span's white-space words projected by run_squad.get_final_text onto the
  word-piece text. SentencePiece: the title / sentence is tokenised again (its ids are the
  record's) and the answer is the text the span's pieces cover, outer white space left out.

  Args:
    span: (begin, end) long indices.
    record: {name: array} of DECODING_FEATURES for the record.
    context: the example's [[title, [sentences]], ...].
    tokenizer: the data's tokenization.FullTokenizer.
    do_lower_case: the tokenizer's lower-casing.

  Returns:
    str.
  """
  begin, end = span
  sentence_token = record["sentence_ids"][begin]
  paragraph = record["global_paragraph_ids"][sentence_token]
  sentence = record["global_sentence_ids"][sentence_token]
  title, sentences = context[paragraph]
  text = title if sentence < 0 else sentences[sentence]
  if is_sentencepiece(tokenizer):
    return _sentencepiece_span_text(span, record, text, tokenizer)
  words, _ = whitespace_split(text)
  first, last = record["long_tokens_to_unigrams"][begin], record["long_tokens_to_unigrams"][end]
  word_text = " ".join(words[first:last + 1])
  pieces = tokenizer.convert_ids_to_tokens([int(i) for i in record["token_ids"][begin:end + 1]])
  piece_text = " ".join(pieces).replace(" ##", "").replace("##", "")
  piece_text = " ".join(piece_text.strip().split())
  return run_squad.get_final_text(piece_text, word_text, do_lower_case)


def _sentencepiece_span_text(span, record, text, tokenizer):
  """span_text with SentencePiece: the characters of `text` the span's pieces cover."""
  begin, end = span
  sentence_ids = np.asarray(record["sentence_ids"])
  first = int(np.nonzero(sentence_ids == sentence_ids[begin])[0][0])
  ids, spans = long_tasks.tokenize_fn(tokenizer).pieces_with_spans(text)
  if [int(i) for i in record["token_ids"][first:first + len(ids)]] != ids:
    raise ValueError("the record's pieces of %r are not its SentencePiece ids (another model "
                     "than the data's?)" % text)
  return text[spans[begin - first][0]:spans[end - first][1]].strip()


def predict_example(outputs, record, context, tokenizer, do_lower_case=True,
                    sp_threshold=DEFAULT_SP_THRESHOLD, max_answer_length=DEFAULT_MAX_ANSWER_LENGTH):
  """The official prediction (answer text, supporting facts) of one record.

  Args:
    outputs: {"sp_logits" [G], "answer_type_logits" [3], "begin_logits" [L], "end_logits" [L]}.
    record: {name: array} of DECODING_FEATURES.
    context: the example's [[title, [sentences]], ...].
    tokenizer: the data's tokenizer.
    do_lower_case: its lower-casing.
    sp_threshold: probability threshold of a supporting fact.
    max_answer_length: the most word pieces of a span answer.

  Returns:
    (answer text, [[title, sentence index], ...]).
  """
  supporting = _sigmoid(outputs["sp_logits"]) >= sp_threshold
  facts = [[context[int(p)][0], int(s)] for p, s, chosen in
           zip(record["global_paragraph_ids"], record["global_sentence_ids"], supporting)
           if chosen and p >= 0 and s >= 0]
  answer_type = int(np.argmax(outputs["answer_type_logits"]))
  if answer_type:
    return ANSWER_TYPES[answer_type], facts
  span = best_span(outputs["begin_logits"], outputs["end_logits"], record["segment_ids"],
                   record["sentence_ids"], supporting, max_answer_length)
  if span is None:
    return "", facts
  return span_text(span, record, context, tokenizer, do_lower_case), facts


def split_predictions(outputs, records, examples, tokenizer, do_lower_case=True,
                      sp_threshold=DEFAULT_SP_THRESHOLD,
                      max_answer_length=DEFAULT_MAX_ANSWER_LENGTH):
  """The official prediction object of a split's record outputs.

  Args:
    outputs: stacked predict outputs {"sp_logits" [n, G], "answer_type_logits" [n, 3],
      "begin_logits" [n, L], "end_logits" [n, L]}.
    records: read_decoding_features of the split's records (n rows).
    examples: the split's examples file lines (read_split_examples).
    tokenizer: the data's tokenizer.
    do_lower_case: its lower-casing.
    sp_threshold: see predict_example.
    max_answer_length: see predict_example.

  Returns:
    {"answer": {id: text}, "sp": {id: facts}} over every example of the split ("" and [] for
    an example without a record, as officially).
  """
  answers, facts = collections.OrderedDict(), collections.OrderedDict()
  num = len(outputs["answer_type_logits"])
  if num != len(records["token_ids"]):
    raise ValueError("%d predictions for %d records" % (num, len(records["token_ids"])))
  for line in examples:
    answers[line["id"]], facts[line["id"]] = "", []
    i = line["record"]
    if i is None:
      continue
    row = {name: outputs[name][i] for name in ("sp_logits", "answer_type_logits",
                                               "begin_logits", "end_logits")}
    record = {name: values[i] for name, values in records.items()}
    answers[line["id"]], facts[line["id"]] = predict_example(
        row, record, line["context"], tokenizer, do_lower_case, sp_threshold, max_answer_length)
  return {"answer": answers, "sp": facts}


def split_metrics(outputs, records, examples, tokenizer, do_lower_case=True,
                  sp_threshold=DEFAULT_SP_THRESHOLD, max_answer_length=DEFAULT_MAX_ANSWER_LENGTH):
  """The official metrics of a split's outputs over every example with an answer.

  Args: as split_predictions.

  Returns:
    (predictions {"answer", "sp"}, OrderedDict of evaluate's metrics over the examples with an
    answer and supporting facts, and skipped: those of them without a record, scored with ""
    and no facts).
  """
  predictions = split_predictions(outputs, records, examples, tokenizer, do_lower_case,
                                  sp_threshold, max_answer_length)
  gold = [(line["id"], line["answer"], line["supporting_facts"]) for line in examples
          if line["answer"] is not None and line["supporting_facts"] is not None]
  metrics = evaluate(predictions, gold)
  metrics["skipped"] = sum(1 for line in examples if line["record"] is None and
                           line["answer"] is not None and line["supporting_facts"] is not None)
  for key in ("missing_answers", "missing_sp", "unknown_ids"):
    del metrics[key]
  return predictions, metrics

