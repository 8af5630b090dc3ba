# coding=utf-8
"""MS MARCO OpenKP (keyphrase extraction) for ETC: reading the data, the official scorer, the
features and the predicted keyphrases.

The library of `python -m etc_model.create_openkp`, `python -m etc_model.run_long_tasks
--task=openkp` and `python -m etc_model.openkp_evaluate`. The features and the decoding are the
official google-research etcmodel's (models/openkp/generate_examples_lib.py, run_finetuning_lib.py,
eval_utils.py); the scorer is microsoft/OpenKP's evaluate.py.

Data. JSON lines, one document per line: "url" (its id), "text" (words separated by single
spaces), "VDOM" (a JSON string: a list of elements {"Id", "text", "feature" (20 floats),
"start_idx", "end_idx"} whose texts are the words text.split(" ")[start_idx:end_idx], in order,
covering the text) and, in the training and development files, "KeyPhrases" (a list of
keyphrases, each a list of words).

Official scorer (evaluate; evaluate.py's rules). Both files are JSON lines keyed by "url" (a url
on several lines: its last line counts, as officially; counted as duplicate_urls); the
prediction file must have exactly the reference file's urls (the official refusal). A
keyphrase is normalised to its words lower-cased and joined by single spaces, trailing
whitespace removed (the official normalize_answer: no punctuation or article removal); a
keyphrase with no words or an empty first word is dropped (remove_empty); each list is
de-duplicated in order. For k = 1, 3, 5: true positives = the first k predicted keyphrases found
among the reference keyphrases, P@k = tp / k (also when fewer than k are predicted), R@k = tp /
(distinct reference keyphrases), F1@k = 2 P R / (P + R), 0 when P + R = 0; each metric is the
mean over the reference urls. A document whose reference keyphrases are all empty cannot be
scored (the official script divides by zero): one line naming it.

Records (one per document, generate_examples_lib's VDOM layout). Each VDOM element is one global
token (id 1, as officially, with WordPiece or SentencePiece) and its words' word pieces (each
word tokenized alone: WordPiece, or SentencePiece's encoding of the word lower-cased first with
do_lower_case, a word-start marker standing alone belonging to the word it starts) are the long
input; the input ends before the first element that does not fit: the G-th element
(cut_by_global_length) or one whose pieces would pass L word pieces or whose end would pass L
words (cut_by_long_length; the official code asserts the words fit); words and elements left
out are counted.
  token_ids [L], sentence_ids [L] (each piece's element), long_breakpoints [L] (1 at the last
    piece), global_token_ids [G], global_breakpoints [G] (1 at the last element): the standard
    side inputs (etc_estimator.add_side_inputs; each piece's element is its "sentence", the
    official long_vdom_idx);
  word_ids [L]: each piece's word (the official long_word_idx); num_words [1]: the words of the
    input (the official long_word_input_mask's ones);
  the visual features of each element (VISUAL_FEATURES, [G] each, from its 20 "feature"
    floats: x, width, y, height, block, inline, heading, leaf, font size, bold, then its
    parent's): font_ids / parent_font_ids (the official font size buckets), indicator_cross
    (block * 4 + heading * 2 + bold), x_coords, y_coords, widths, heights and the parent's (in
    hundredths of a pixel), inline / leaf / parent heading / parent leaf / parent bold
    indicators; an indicator other than 0 or 1 is refused, as officially;
  label_start / label_length [3]: the first occurrence of up to 3 keyphrases (-1 padding):
    each keyphrase lower-cased with spaces around it is searched, in sorted order, in each
    element's lower-cased text with spaces around it, element by element (whole words, never
    across elements); start = the element's first word + the spaces before the match.
Training leaves out a document with no label (as officially); dev and test keep every document
with a word piece. The model adds the official visual-feature embeddings to each element's
global token and to each of its long tokens (long_task_heads.openkp_embedding_adders: the
official defaults use_visual_features_in_global and _in_long, the three crossed indicators,
one extra dense layer, the official clipping ranges); the head
(etc_model.long_task_heads.openkp_head) scores every n-gram of 1 to 5 words.
Decoding (predict_keyphrases, eval_utils.get_key_phrase_predictions): the n-grams inside the
input's words by logit, best first; each is its words joined by spaces, lower-cased; equal ones
are one and an empty one is skipped; the first 5 are the predictions, written one per url as
{"url", "KeyPhrases": [[keyphrase], ...], "scores": [...]} (the official etcmodel's form).

Differences from the official code, by intent:
  * The visual features are always on, with the official default settings (the official flags
    use_visual_features_in_global / _in_long, extra_dense_feature_layers, indicators_to_cross
    and the coordinate ranges are not offered); coordinates are stored in hundredths of a
    pixel (records hold integers), so a coordinate may differ from the official float by up to
    0.005 pixel before scaling. A VDOM element's "Id" is not read.
  * The url is not a record feature (the official url_code_points): the examples file maps
    record indices to urls.
  * Keyphrases longer than 5 words are not labels (the official one-hot of their length is
    all zeros, so they carry no mass; counted: key_phrases_too_long); a keyphrase with no words
    or an empty first word is not searched (the official searches "  "); more than 3 found
    keyphrases keep the first 3 found (the official asserts at most 3; counted).
  * Dev documents without a label in their input keep their record and are scored (the
    official generator drops them and deflates its metrics by the share dropped,
    eval_fraction_of_removed_examples); a document whose input has no word piece predicts
    nothing and scores 0.
  * A url on several lines counts by its last line (the official scorer's reading; the
    official input_validate_and_dedup keeps the line with the most keyphrases found, or the
    first line of the eval set). The keyphrases are not filtered to those in the text (the
    official input_validate_and_dedup does so before the generator).
  * Decoding considers every n-gram inside the words (the official takes the 100 best
    positions, max_position_predictions, which can leave fewer than 5 distinct keyphrases);
    ties are broken by n-gram length, then start.
  * The long_word_first_occurrence feature (read by no official model code) is not written;
    the fixed_block_len option (one global token per fixed block) is not offered. SentencePiece
    vocabularies are taken as officially (each word's pieces, the element token id 1); with
    SentencePiece, --do_lower_case lower-cases the words before encoding them, as create_hotpotqa
    does (the official ignores do_lower_case with a SentencePiece model; a model that folds case
    itself gives the same pieces either way, a cased one needs --do_lower_case=false).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import json
import math
import os

import numpy as np
import tensorflow as tf

from realformer_tf import common
from etc_model import long_tasks

TASK = "openkp"
# The cut-offs of the official metrics (P@k, R@k, F1@k) and the number of keyphrases scored.
DEPTHS = (1, 3, 5)
MAX_DEPTH = 5


# ----------------------------------------------------------------------------- scorer
def normalize_phrase(words):
  """The official normalize_answer of one keyphrase (a list of words): lower-cased words joined
  by single spaces, trailing whitespace removed."""
  return " ".join(word.lower() for word in words).rstrip()


def clean_phrases(phrases):
  """The official remove_empty and dedup: the normalised keyphrases whose word list is not empty
  and whose first word is not empty, the first of equal ones kept, in order."""
  kept = []
  for words in phrases:
    if words and words[0]:
      phrase = normalize_phrase(words)
      if phrase not in kept:
        kept.append(phrase)
  return kept


def score_document(predicted, reference, max_depth=MAX_DEPTH):
  """The official get_score_full of one document.

  Args:
    predicted: the cleaned predicted keyphrases (clean_phrases), best first.
    reference: the cleaned reference keyphrases (not empty).
    max_depth: the deepest k.

  Returns:
    (precision list, recall list), entry k - 1 for P@k / R@k, k = 1 .. max_depth.
  """
  reference = set(reference)
  true_positives = 0
  precision, recall = [], []
  for i in range(max_depth):
    if i < len(predicted) and predicted[i] in reference:
      true_positives += 1
    precision.append(true_positives / float(i + 1))
    recall.append(true_positives / float(len(reference)))
  return precision, recall


def evaluate(references, predictions):
  """The official metrics of predicted keyphrases against reference keyphrases.

  Args:
    references: {url: [keyphrase (list of words), ...]}.
    predictions: {url: [keyphrase, ...]} (best first) with exactly the references' urls
      (ValueError otherwise: the official refusal).

  Returns:
    OrderedDict: F1@1, P@1, R@1, F1@3, P@3, R@3, F1@5, P@5, R@5 (means over the urls), then
    examples.

  Raises:
    ValueError: other urls, or a document whose reference keyphrases are all empty.
  """
  missing = set(references) - set(predictions)
  unknown = set(predictions) - set(references)
  if missing or unknown:
    raise ValueError("%d reference urls have no prediction and %d predictions are for urls the "
                     "reference file does not have (the official scorer needs exactly its urls)"
                     % (len(missing), len(unknown)))
  sums = collections.OrderedDict()
  for k in DEPTHS:
    for name in ("F1", "P", "R"):
      sums["%s@%d" % (name, k)] = 0.0
  for url, phrases in references.items():
    reference = clean_phrases(phrases)
    if not reference:
      raise ValueError("url %s has no reference keyphrase that is not empty (the official "
                       "scorer divides by zero)" % url)
    precision, recall = score_document(clean_phrases(predictions[url]), reference)
    for k in DEPTHS:
      p, r = precision[k - 1], recall[k - 1]
      sums["P@%d" % k] += p
      sums["R@%d" % k] += r
      sums["F1@%d" % k] += 2 * p * r / (p + r) if p + r > 0 else 0.0
  metrics = collections.OrderedDict((name, total / len(references))
                                    for name, total in sums.items())
  metrics["examples"] = len(references)
  return metrics


# ----------------------------------------------------------------------------- reading
def check_phrases(value, what):
  """A KeyPhrases value: a list of keyphrases, each a list of strings (ValueError otherwise)."""
  if value is None:
    raise ValueError("%s has no KeyPhrases" % what)
  if not isinstance(value, list):
    raise ValueError("%s KeyPhrases is a %s, not a list" % (what, type(value).__name__))
  for i, words in enumerate(value):
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
      raise ValueError("%s keyphrase %d is not a list of strings (the official format: "
                       "[[word, ...], ...])" % (what, i))
  return value


def iter_documents(path, source, parse):
  """Parses every JSON line of a file, streamed (gzipped or not); one line on a bad line.

  Args:
    path: the file.
    source: how errors name it ("--dev_file=x", "prediction file x").
    parse: (record dict, line number) -> value (ValueError on a bad record).

  Yields:
    (line number, url, value) in file order.
  """
  if not tf.io.gfile.exists(path):
    common.fail("%s: file does not exist" % source)
  if tf.io.gfile.isdir(path):
    common.fail("%s: is a directory, expected a file" % source)
  number = 0
  try:
    for number, line in enumerate(long_tasks.iter_lines(path), 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
        if not isinstance(record, dict):
          raise ValueError("is a %s, not an object" % type(record).__name__)
        url = record.get("url")
        if not isinstance(url, str) or not url:
          raise ValueError("has no url string")
        value = parse(record, number)
      except ValueError as e:
        common.fail("%s: line %d: %s" % (source, number, e))
      yield number, url, value
  except (OSError, EOFError, UnicodeDecodeError) as e:
    common.fail("%s: line %d: cannot be read as (gzipped) UTF-8 JSON lines (%s)" %
                (source, number + 1, e))


def read_keyphrases(path, source):
  """{url: KeyPhrases} of a reference or prediction file (the last line of a url counts, as
  officially) and the number of lines whose url an earlier line had.

  Args:
    path: JSON lines with url and KeyPhrases.
    source: how errors name the file.

  Returns:
    (OrderedDict url -> list of keyphrases, duplicate url lines).
  """
  phrases = collections.OrderedDict()
  duplicates = 0
  for _, url, value in iter_documents(
      path, source, lambda record, number: check_phrases(record.get("KeyPhrases"),
                                                         "url %s:" % record.get("url"))):
    if url in phrases:
      duplicates += 1
    phrases[url] = value
  return phrases, duplicates


# ----------------------------------------------------------------------------- documents
Document = collections.namedtuple("Document",
                                  ["url", "words", "elements", "key_phrases", "visual"])
"""One OpenKP line: url, words (text.split(" ")), elements ([(first word, end word)] of the
VDOM elements, in order, covering the words), key_phrases (the KeyPhrases, or None) and visual
(per element the values of VISUAL_FEATURES: element_visual_features)."""

# The official font size buckets (generate_examples_lib._FONT_SIZE_CUTOFFS): a size up to the
# i-th cut-off has font id i, a larger one the last id.
FONT_SIZE_CUTOFFS = (0,) + tuple(range(8, 25)) + (29, 34, 39, 44, 49)
FONT_ID_VOCAB_SIZE = len(FONT_SIZE_CUTOFFS) + 1
# The visual features of a global token (one [G] record feature each, in this order): the font
# ids of the element and its parent, the cross of its block / heading / bold indicators
# (block * 4 + heading * 2 + bold: the official indicators_to_id of indicators_to_cross), the
# positions and sizes of the element and its parent in hundredths of a pixel, and the other
# indicators (the official dense features, in the official order).
CROSSED_INDICATORS = ("block", "heading", "bold")
COORDINATE_FEATURES = ("x_coords", "y_coords", "widths", "heights", "parent_x_coords",
                       "parent_y_coords", "parent_widths", "parent_heights")
DENSE_INDICATORS = ("inline_indicator", "leaf_indicator", "parent_heading_indicator",
                    "parent_leaf_indicator", "parent_bold_indicator")
VISUAL_FEATURES = (("font_ids", "parent_font_ids", "indicator_cross") + COORDINATE_FEATURES +
                   DENSE_INDICATORS)
# Coordinates are stored as integers: hundredths of a pixel.
COORDINATE_SCALE = 100
# The official clipping ranges of the coordinates (run_finetuning's x_coords_min ... defaults;
# a parent's coordinates use its element's range).
COORDINATE_RANGES = {"x_coords": (-50.0, 1500.0), "y_coords": (-50.0, 6000.0),
                     "widths": (0.0, 1500.0), "heights": (0.0, 18000.0)}
# Where each value sits among an element's 10 floats (VdomFeatures: x, width, y, height, block,
# inline, heading, leaf, font size, bold); the parent's are the next 10.
_FEATURE_OFFSETS = {"x": 0, "width": 1, "y": 2, "height": 3, "block": 4, "inline": 5,
                    "heading": 6, "leaf": 7, "font_size": 8, "bold": 9}


def font_size_to_font_id(font_size):
  """The official font id of an integer font size (0 .. FONT_ID_VOCAB_SIZE - 1)."""
  for index, cutoff in enumerate(FONT_SIZE_CUTOFFS):
    if font_size <= cutoff:
      return index
  return len(FONT_SIZE_CUTOFFS)


def element_visual_features(floats):
  """The VISUAL_FEATURES values of one VDOM element's 20 "feature" floats (ValueError unless
  they are 20 finite numbers with indicators of 0 or 1, as the official VdomFeatures requires).

  Args:
    floats: the element's "feature" list (the element's 10 values, then its parent's).

  Returns:
    tuple of ints in VISUAL_FEATURES order.
  """
  if (not isinstance(floats, list) or len(floats) != 20 or
      not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
              for v in floats)):
    raise ValueError("feature is not a list of 20 finite numbers")

  def value(name, parent=False):
    return floats[_FEATURE_OFFSETS[name] + (10 if parent else 0)]

  def indicator(name, parent=False):
    if value(name, parent) not in (0, 1):
      raise ValueError("feature: %s%s is %r, not 0 or 1" % (
          "the parent's " if parent else "", name, value(name, parent)))
    return int(value(name, parent))

  cross = 0
  for name in CROSSED_INDICATORS:
    cross = 2 * cross + indicator(name)
  coordinates = [int(round(value(name, parent) * COORDINATE_SCALE))
                 for parent in (False, True) for name in ("x", "y", "width", "height")]
  return tuple([font_size_to_font_id(round(value("font_size"))),
                font_size_to_font_id(round(value("font_size", True))), cross] + coordinates +
               [indicator("inline"), indicator("leaf"), indicator("heading", True),
                indicator("leaf", True), indicator("bold", True)])


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def parse_elements(vdom_text, words):
  """The VDOM elements' word ranges and visual features (ValueError unless their texts are the
  words, in order, covering the text: the official input_validate_and_dedup checks; and their
  features are element_visual_features').

  Args:
    vdom_text: the line's VDOM value (a JSON string of a list of elements).
    words: text.split(" ").

  Returns:
    (list of (start_idx, end_idx), list of element_visual_features tuples).
  """
  if not isinstance(vdom_text, str):
    raise ValueError("VDOM is a %s, not a JSON string" % type(vdom_text).__name__)
  vdom = json.loads(vdom_text)
  if not isinstance(vdom, list) or not vdom:
    raise ValueError("VDOM is not a non-empty list of elements")
  elements, visual = [], []
  for i, element in enumerate(vdom):
    if not isinstance(element, dict):
      raise ValueError("VDOM element %d is not an object" % i)
    start, end, text = element.get("start_idx"), element.get("end_idx"), element.get("text")
    if not (_is_int(start) and _is_int(end) and isinstance(text, str)):
      raise ValueError("VDOM element %d has no integer start_idx / end_idx or no text" % i)
    expected_start = elements[-1][1] if elements else 0
    if start != expected_start or not start < end <= len(words):
      raise ValueError("VDOM element %d spans words [%d, %d), expected a span from %d within "
                       "the %d words of text" % (i, start, end, expected_start, len(words)))
    if text != " ".join(words[start:end]):
      raise ValueError("VDOM element %d's text is not the text's words %d .. %d" %
                       (i, start, end - 1))
    try:
      visual.append(element_visual_features(element.get("feature")))
    except ValueError as e:
      raise ValueError("VDOM element %d: %s" % (i, e))
    elements.append((start, end))
  if elements[-1][1] != len(words):
    raise ValueError("the VDOM elements end at word %d of the text's %d" %
                     (elements[-1][1], len(words)))
  return elements, visual


def parse_document(record, require_key_phrases):
  """A Document of one JSON line (ValueError naming what is wrong).

  Args:
    record: the line's dict (it has a url: iter_documents).
    require_key_phrases: the line must have KeyPhrases (training and development files).
  """
  if not isinstance(record.get("text"), str):
    raise ValueError("url %s: has no text string" % record["url"])
  words = record["text"].split(" ")
  try:
    elements, visual = parse_elements(record.get("VDOM"), words)
  except ValueError as e:
    raise ValueError("url %s: %s" % (record["url"], e))
  key_phrases = None
  if "KeyPhrases" in record or require_key_phrases:
    key_phrases = check_phrases(record.get("KeyPhrases"), "url %s:" % record["url"])
    if require_key_phrases and not clean_phrases(key_phrases):
      raise ValueError("url %s: has no keyphrase that is not empty (the official scorer cannot "
                       "score it)" % record["url"])
  return Document(record["url"], words, elements, key_phrases, visual)


def last_lines(path, source):
  """{url: the number of its last line} of a file and the lines whose url a later line has."""
  last_line = {}
  lines = 0
  for number, url, _ in iter_documents(path, source, lambda record, number: None):
    last_line[url] = number
    lines += 1
  return last_line, lines - len(last_line)


def iter_split_documents(path, source, require_key_phrases, last_line=None):
  """The Documents of a file, streamed; a url on several lines counts by its last line (as the
  official scorer reads it): earlier lines are skipped and counted.

  Args:
    path: OpenKP JSON lines (gzipped or not).
    source: how errors name it ("--dev_file=x").
    require_key_phrases: every line must have KeyPhrases.
    last_line: last_lines' map of the file when known (else the file is read for it first).

  Returns:
    (iterator of Documents, number of skipped duplicate lines; None when last_line was given).
  """
  duplicates = None
  if last_line is None:
    last_line, duplicates = last_lines(path, source)

  def documents():
    for number, url, document in iter_documents(
        path, source, lambda record, number: parse_document(record, require_key_phrases)):
      if last_line[url] == number:
        yield document

  return documents(), duplicates


# ----------------------------------------------------------------------------- features
DEFAULT_MAX_SEQ_LENGTH = 4096
DEFAULT_MAX_GLOBAL_SEQ_LENGTH = 512
# The longest keyphrase the head scores (the official kp_max_length) and the label slots (the
# official num_labels).
MAX_PHRASE_WORDS = 5
NUM_LABELS = 3
# The global token id of a VDOM element (the official: 1 for every element).
ELEMENT_TOKEN_ID = 1
SPLITS = ("train", "dev", "test")
SUMMARY_NAME = "openkp.json"
EXAMPLES_SUFFIX = ".examples.jsonl"
FEATURES = (("token_ids", "L"), ("sentence_ids", "L"), ("long_breakpoints", "L"),
            ("global_token_ids", "G"), ("global_breakpoints", "G"), ("word_ids", "L"),
            ("num_words", 1)) + tuple((name, "G") for name in VISUAL_FEATURES) + (
                ("label_start", NUM_LABELS), ("label_length", NUM_LABELS))
# The counts of convert_document's info, in the summary's order.
COUNTS = ("records", "cut_by_global_length", "cut_by_long_length", "words_cut",
          "elements_cut", "key_phrases_not_in_input", "key_phrases_too_long",
          "key_phrases_beyond_labels", "without_label", "without_pieces")


def _pad(values, length, value=0):
  return list(values) + [value] * (length - len(values))


def find_labels(document, num_elements, max_phrase_words=MAX_PHRASE_WORDS):
  """The first occurrence (start word, length) of each keyphrase in the kept elements, as the
  official generator finds it (lower-cased whole words inside one element, the keyphrases in
  sorted order per element), and the counts of those not found or too long.

  Args:
    document: Document with key_phrases.
    num_elements: the elements kept in the input.
    max_phrase_words: the longest keyphrase the head scores.

  Returns:
    (list of (start, length) in the order found, not found count, too long count).
  """
  keys = sorted(set(" " + normalize_phrase(words) + " "
                    for words in document.key_phrases if words and words[0]))
  missing = set(keys)
  labels, too_long = [], 0
  for start, end in document.elements[:num_elements]:
    search_text = " " + " ".join(document.words[start:end]).lower() + " "
    for key in keys:
      if key in missing and key in search_text:
        missing.remove(key)
        length = key.count(" ") - 1
        if length > max_phrase_words:
          too_long += 1
          continue
        offset = search_text.index(key)
        labels.append((start + search_text[:offset].count(" "), length))
  return labels, len(missing), too_long


def convert_document(document, tokenize_word, settings, is_training=False):
  """The record of one document (None when it has none) and what was cut or left out.

  Args:
    document: Document.
    tokenize_word: word -> its word-piece ids (long_tasks.make_tokenize_word).
    settings: dict with max_seq_length, max_global_seq_length.
    is_training: a document without a label in its input gets no record (the official
      generator drops it).

  Returns:
    (OrderedDict of features in FEATURES order, or None; info dict of COUNTS and words: the
    words of the input, those the predictions are made of).
  """
  long_len, global_len = settings["max_seq_length"], settings["max_global_seq_length"]
  token_ids, sentence_ids, word_ids = [], [], []
  info = collections.OrderedDict((name, 0) for name in COUNTS)
  kept_elements = num_words = 0
  for index, (start, end) in enumerate(document.elements):
    if index >= global_len:
      info["cut_by_global_length"] = 1
      break
    pieces = [tokenize_word(word) for word in document.words[start:end]]
    count = sum(len(p) for p in pieces)
    # Words without pieces count too (their logits stay): they must fit in L as well.
    if len(token_ids) + count > long_len or end > long_len:
      info["cut_by_long_length"] = 1
      break
    for offset, word_pieces in enumerate(pieces):
      token_ids.extend(word_pieces)
      word_ids.extend([start + offset] * len(word_pieces))
    sentence_ids.extend([index] * count)
    kept_elements, num_words = index + 1, end
  info["elements_cut"] = len(document.elements) - kept_elements
  info["words_cut"] = len(document.words) - num_words
  labels = []
  if document.key_phrases is not None:
    labels, info["key_phrases_not_in_input"], info["key_phrases_too_long"] = find_labels(
        document, kept_elements)
    info["key_phrases_beyond_labels"] = max(0, len(labels) - NUM_LABELS)
    labels = labels[:NUM_LABELS]
  if not token_ids:
    info["without_pieces"] = 1
    return None, dict(info, words=document.words[:num_words])
  if not labels:
    info["without_label"] = 1
    if is_training:
      return None, dict(info, words=document.words[:num_words])
  info["records"] = 1
  features = collections.OrderedDict()
  features["token_ids"] = _pad(token_ids, long_len)
  features["sentence_ids"] = _pad(sentence_ids, long_len, kept_elements - 1)
  features["long_breakpoints"] = _pad([0] * (len(token_ids) - 1) + [1], long_len)
  features["global_token_ids"] = _pad([ELEMENT_TOKEN_ID] * kept_elements, global_len)
  features["global_breakpoints"] = _pad([0] * (kept_elements - 1) + [1], global_len)
  features["word_ids"] = _pad(word_ids, long_len)
  features["num_words"] = [num_words]
  for i, name in enumerate(VISUAL_FEATURES):
    features[name] = _pad([values[i] for values in document.visual[:kept_elements]],
                          global_len)
  features["label_start"] = _pad([start for start, _ in labels], NUM_LABELS, -1)
  features["label_length"] = _pad([length for _, length in labels], NUM_LABELS, -1)
  return features, dict(info, words=document.words[:num_words])


def feature_lengths(max_seq_length, max_global_seq_length):
  """{feature: length} of a record (FEATURES)."""
  sizes = {"L": max_seq_length, "G": max_global_seq_length}
  return collections.OrderedDict((name, sizes.get(size, size)) for name, size in FEATURES)


def record_file(data_dir, split):
  """<data_dir>/openkp_<split>.tfrecord."""
  return os.path.join(data_dir, "%s_%s.tfrecord" % (TASK, split))


def examples_file(data_dir, split):
  """<data_dir>/openkp_<split>.examples.jsonl: one line per document of the split's file."""
  return record_file(data_dir, split)[:-len(".tfrecord")] + EXAMPLES_SUFFIX


def example_line(document, record, words, scored=True):
  """The examples file's line of one document: url, record (its index, or None), words (those
  of the input, the keyphrases' source) and key_phrases; both None unless scored (the train
  split's lines, never decoded nor scored, stay small)."""
  return collections.OrderedDict([
      ("url", document.url), ("record", record), ("words", list(words) if scored else None),
      ("key_phrases", document.key_phrases if scored else None)])


def read_split_examples(data_dir, split, num_records):
  """The examples file of a split, checked against its records (one line when they differ)."""
  return long_tasks.read_examples_file(data_dir, examples_file(data_dir, split),
                                       record_file(data_dir, split), num_records,
                                       "etc_model.create_openkp")


# ----------------------------------------------------------------------------- keyphrases
def predict_keyphrases(ngram_logits, words, max_predictions=MAX_DEPTH):
  """The best keyphrases of a document from its n-gram logits (the official
  get_key_phrase_predictions over every n-gram inside the input's words).

  Args:
    ngram_logits: float [MAX_PHRASE_WORDS, L]: entry [k - 1, s] scores the k words from word s.
    words: the input's words.
    max_predictions: how many distinct keyphrases.

  Returns:
    list of (keyphrase: its words lower-cased joined by spaces, logit), best first: equal
    keyphrases (after lower-casing) are one, an empty one is skipped.
  """
  num_words = len(words)
  logits = np.asarray(ngram_logits, np.float64)[:, :num_words]
  # n-gram (k + 1 words, from word s) is inside the words when s + k < num_words.
  lengths, starts = np.nonzero(
      np.arange(num_words)[None, :] + np.arange(logits.shape[0])[:, None] < num_words)
  scores = logits[lengths, starts]
  phrases = []
  seen = set()
  for i in np.argsort(-scores, kind="stable"):
    k, s = int(lengths[i]), int(starts[i])
    phrase = " ".join(words[s:s + k + 1]).lower()
    if phrase and phrase not in seen:
      seen.add(phrase)
      phrases.append((phrase, float(scores[i])))
      if len(phrases) == max_predictions:
        break
  return phrases


def prediction_line(url, phrases):
  """A line of the prediction file: {"url", "KeyPhrases": [[keyphrase], ...], "scores"} (the
  official etcmodel's form: each keyphrase one string; the official scorer reads KeyPhrases)."""
  return collections.OrderedDict([("url", url),
                                  ("KeyPhrases", [[phrase] for phrase, _ in phrases]),
                                  ("scores", [round(score, 6) for _, score in phrases])])


def split_predictions(ngram_logits, lines):
  """The prediction lines of every document of a split (a document without a record: no
  keyphrase).

  Args:
    ngram_logits: float [records, MAX_PHRASE_WORDS, L], in record order.
    lines: the split's examples file lines.

  Returns:
    list of prediction_line dicts, in document order.
  """
  return [prediction_line(line["url"], [] if line["record"] is None else predict_keyphrases(
      ngram_logits[line["record"]], line["words"])) for line in lines]


def split_metrics(ngram_logits, lines):
  """The official metrics of a split's outputs over every document of the split.

  Args:
    ngram_logits: float [records, MAX_PHRASE_WORDS, L].
    lines: the split's examples file lines (with key_phrases: dev; without: test).

  Returns:
    (prediction lines, metrics: evaluate's over every document when the split has keyphrases,
    else {"examples": 0}).
  """
  predictions = split_predictions(ngram_logits, lines)
  references = collections.OrderedDict(
      (line["url"], line["key_phrases"]) for line in lines if line["key_phrases"] is not None)
  if not references:
    return predictions, {"examples": 0}
  return predictions, evaluate(references, collections.OrderedDict(
      (p["url"], p["KeyPhrases"]) for p in predictions if p["url"] in references))
