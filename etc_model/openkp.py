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
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import json

import tensorflow as tf

from realformer_tf import common
from etc_model import nq

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
    for number, line in enumerate(nq.iter_lines(path), 1):
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
