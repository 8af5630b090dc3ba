# coding=utf-8
"""Entity-level scoring with the conlleval rules, and tag-scheme conversions.

conlleval (the CoNLL-2000 / CoNLL-2003 shared-task scorer, conlleval.pl) reads a tag sequence
word by word and decides, from the previous and the current tag alone, whether an entity
("chunk") ends before the current word (endOfChunk) and whether one starts at it (startOfChunk).
This module implements those two functions from their documented rules, for the tags

  O        outside;
  B-TYPE   begin (BIO / IOB2, and IOB1 between two adjacent entities of one type);
  I-TYPE   inside;
  E-TYPE   end, S-TYPE single-word entity (BIOES / IOBES, the usual extension of conlleval);

where TYPE is everything after the first hyphen (so "B-creative-work" has type
"creative-work"). The consequences are conlleval's: an I- tag after O or after another type
starts a new entity (there is no "invalid" sequence: every sequence has one reading), a change of
type inside a run ends one entity and starts another, and an entity still open at the end of a
sentence ends there. Because the reading does not depend on the scheme, the same entities come
out of a sentence written in BIO, IOB1 or BIOES, and converting between the schemes is: read the
entities, write them in the other scheme (`chunks_to_tags`).

Scores (`evaluate`) are conlleval's: an entity is correct when a predicted entity has exactly the
gold one's first word, last word and type; precision = correct / predicted, recall = correct /
gold, F1 their harmonic mean (0 when undefined), overall and per type; token accuracy = words
whose predicted tag string equals the gold one / words. Values are fractions (conlleval prints
percentages).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import re

# The tag schemes read and written. Internally the tools use "bio".
SCHEMES = ("bio", "iob1", "bioes")
SCHEME_NAMES = {"bio": "BIO (IOB2)", "iob1": "IOB1", "bioes": "BIOES"}
_SCHEME_PREFIXES = {"bio": "BI", "iob1": "BI", "bioes": "BIES"}

Chunk = collections.namedtuple("Chunk", ["type", "start", "end"])  # end: last word (inclusive)


def split_tag(tag):
  """Splits a tag into its prefix and type, as conlleval does (at the first hyphen).

  Args:
    tag: a tag string such as "B-PER", "I-creative-work" or "O".

  Returns:
    (prefix, type): ("B", "PER"), ("I", "creative-work"), ("O", ""); a tag without a hyphen is
    (tag, "").
  """
  prefix, sep, type_ = tag.partition("-")
  if not sep:
    return tag, ""
  return prefix, type_


def end_of_chunk(prev_tag, tag, prev_type, type_):
  """conlleval's endOfChunk: did an entity end between the previous word and this one?

  Args:
    prev_tag: prefix of the previous word's tag ("B", "I", "E", "S", "O"; "O" before the first
      word of a sentence).
    tag: prefix of this word's tag ("O" after the last word of a sentence).
    prev_type: type of the previous word's tag ("" for O).
    type_: type of this word's tag.

  Returns:
    bool.
  """
  chunk_end = False
  if prev_tag == "B" and tag in ("B", "O", "S"):
    chunk_end = True
  if prev_tag == "I" and tag in ("B", "O", "S"):
    chunk_end = True
  # BIOES: an entity ends with its E- or S- word.
  if prev_tag in ("E", "S"):
    chunk_end = True
  if prev_tag not in ("O", ".") and prev_type != type_:
    chunk_end = True
  # conlleval's bracket notation: "[" and "]" chunks have length 1.
  if prev_tag in ("[", "]"):
    chunk_end = True
  return chunk_end


def start_of_chunk(prev_tag, tag, prev_type, type_):
  """conlleval's startOfChunk: did an entity start at this word?

  Args:
    prev_tag: prefix of the previous word's tag ("O" before the first word).
    tag: prefix of this word's tag.
    prev_type: type of the previous word's tag.
    type_: type of this word's tag.

  Returns:
    bool.
  """
  chunk_start = False
  if tag in ("B", "S"):
    chunk_start = True
  # An I- or E- word continues an entity only after a B- or I- word (of the same type).
  if prev_tag in ("E", "S", "O") and tag in ("I", "E"):
    chunk_start = True
  if tag not in ("O", ".") and prev_type != type_:
    chunk_start = True
  if tag in ("[", "]"):
    chunk_start = True
  return chunk_start


def get_chunks(tags):
  """The entities of one sentence, read with the conlleval rules.

  Args:
    tags: list of tag strings (any of the schemes, even mixed).

  Returns:
    list of Chunk(type, start, end) in order, `end` the index of the last word (inclusive).
  """
  chunks = []
  prev_tag, prev_type = "O", ""
  start = None
  for i, full_tag in enumerate(list(tags) + ["O"]):
    tag, type_ = split_tag(full_tag)
    if start is not None and end_of_chunk(prev_tag, tag, prev_type, type_):
      chunks.append(Chunk(prev_type, start, i - 1))
      start = None
    if i < len(tags) and start_of_chunk(prev_tag, tag, prev_type, type_):
      start = i
    prev_tag, prev_type = tag, type_
  return chunks


def chunks_to_tags(chunks, length, scheme):
  """Writes entities as the tags of one sentence in a scheme.

  Args:
    chunks: list of Chunk, not overlapping, in order.
    length: number of words.
    scheme: "bio" (every entity starts with B-), "iob1" (entities start with I-, B- only for an
      entity right after one of the same type) or "bioes" (S- single words; B-, I-..., E-).

  Returns:
    list of `length` tag strings.
  """
  if scheme not in SCHEMES:
    raise ValueError("unknown tag scheme %r (use one of %s)" % (scheme, ", ".join(SCHEMES)))
  tags = ["O"] * length
  prev = None
  for chunk in chunks:
    for i in range(chunk.start, chunk.end + 1):
      tags[i] = "I-" + chunk.type
    if scheme == "bio":
      tags[chunk.start] = "B-" + chunk.type
    elif scheme == "iob1":
      if prev is not None and prev.end + 1 == chunk.start and prev.type == chunk.type:
        tags[chunk.start] = "B-" + chunk.type
    else:
      if chunk.start == chunk.end:
        tags[chunk.start] = "S-" + chunk.type
      else:
        tags[chunk.start] = "B-" + chunk.type
        tags[chunk.end] = "E-" + chunk.type
    prev = chunk
  return tags


def convert_tags(tags, scheme):
  """The tags of one sentence rewritten in `scheme` (same entities, conlleval reading).

  Args:
    tags: list of tag strings in any scheme.
    scheme: target scheme (see chunks_to_tags).

  Returns:
    list of tag strings.
  """
  return chunks_to_tags(get_chunks(tags), len(tags), scheme)


def tag_pattern(scheme):
  """Regular expression of the valid tags of a scheme ("O" or PREFIX-TYPE)."""
  return re.compile(r"^(?:O|[%s]-.+)$" % _SCHEME_PREFIXES[scheme])


def is_valid_tag(tag, scheme):
  """Whether `tag` is a tag of `scheme` (O, or a prefix of the scheme, a hyphen and a type)."""
  return bool(tag_pattern(scheme).match(tag))


def tag_help(scheme):
  """The valid tags of a scheme, for error messages."""
  prefixes = _SCHEME_PREFIXES[scheme]
  return "O, " + ", ".join("%s-<type>" % p for p in prefixes)


def scheme_evidence(sentences_tags):
  """What the tags of a file say about its scheme.

  Args:
    sentences_tags: iterable of lists of tag strings.

  Returns:
    dict: "bioes" (E- / S- tags), "b" (B- tags), "i_starts" (entities that start with an I-
    tag: after O, at the start of a sentence or after another type) and "first_i_start"
    ((sentence index, word index) of the first such tag, or None).
  """
  counts = {"bioes": 0, "b": 0, "i_starts": 0, "first_i_start": None}
  for s, tags in enumerate(sentences_tags):
    prev_tag, prev_type = "O", ""
    for w, full_tag in enumerate(tags):
      tag, type_ = split_tag(full_tag)
      if tag in ("E", "S") and type_:
        counts["bioes"] += 1
      elif tag == "B" and type_:
        counts["b"] += 1
      elif tag == "I" and type_ and (prev_tag == "O" or prev_type != type_):
        counts["i_starts"] += 1
        if counts["first_i_start"] is None:
          counts["first_i_start"] = (s, w)
      prev_tag, prev_type = tag, type_
  return counts


def detect_scheme(sentences_tags):
  """Guesses the scheme of tagged sentences.

  BIOES when an E- or S- tag occurs. Otherwise IOB1 when more entities start with an I- tag
  than there are B- tags: in IOB1 most entities start with I- (B- only separates two adjacent
  entities of one type), in BIO every entity starts with B-, so a few stray I- starts (errors
  of a BIO file, which conlleval reads as entity starts) do not make a file IOB1. Otherwise BIO
  (also for a file with B- and O only, or no entity at all).

  Args:
    sentences_tags: iterable of lists of tag strings.

  Returns:
    "bioes", "iob1" or "bio".
  """
  counts = scheme_evidence(sentences_tags)
  if counts["bioes"]:
    return "bioes"
  return "iob1" if counts["i_starts"] > counts["b"] else "bio"


def _prf(correct, predicted, gold):
  precision = correct / predicted if predicted else 0.0
  recall = correct / gold if gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
  return precision, recall, f1


def evaluate(gold_sentences, predicted_sentences):
  """conlleval's scores of predicted against gold tags.

  Args:
    gold_sentences: list of lists of gold tag strings (one list per sentence).
    predicted_sentences: list of lists of predicted tags, the same lengths.

  Returns:
    dict: precision, recall, f1, accuracy (token), num_tokens, num_gold_entities,
    num_predicted_entities, num_correct_entities, and "types": {type: {precision, recall, f1,
    num_gold, num_predicted, num_correct}} for every type in gold or predictions (sorted).
  """
  if len(gold_sentences) != len(predicted_sentences):
    raise ValueError("%d gold sentences but %d predicted" % (len(gold_sentences),
                                                             len(predicted_sentences)))
  gold_count = collections.Counter()
  predicted_count = collections.Counter()
  correct_count = collections.Counter()
  correct_tags = tokens = 0
  for number, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
    if len(gold) != len(predicted):
      raise ValueError("sentence %d: %d gold tags but %d predicted" % (number, len(gold),
                                                                       len(predicted)))
    gold_chunks = get_chunks(gold)
    predicted_chunks = get_chunks(predicted)
    gold_count.update(c.type for c in gold_chunks)
    predicted_count.update(c.type for c in predicted_chunks)
    correct_count.update(c.type for c in set(gold_chunks) & set(predicted_chunks))
    # conlleval compares prefix and type, i.e. the whole tag.
    correct_tags += sum(1 for g, p in zip(gold, predicted) if split_tag(g) == split_tag(p))
    tokens += len(gold)
  precision, recall, f1 = _prf(sum(correct_count.values()), sum(predicted_count.values()),
                               sum(gold_count.values()))
  types = collections.OrderedDict()
  for type_ in sorted(set(gold_count) | set(predicted_count)):
    p, r, f = _prf(correct_count[type_], predicted_count[type_], gold_count[type_])
    types[type_] = {"precision": p, "recall": r, "f1": f, "num_gold": gold_count[type_],
                    "num_predicted": predicted_count[type_],
                    "num_correct": correct_count[type_]}
  return {"precision": precision, "recall": recall, "f1": f1,
          "accuracy": correct_tags / tokens if tokens else 0.0, "num_tokens": tokens,
          "num_gold_entities": sum(gold_count.values()),
          "num_predicted_entities": sum(predicted_count.values()),
          "num_correct_entities": sum(correct_count.values()), "types": types}


def flat_results(scores, prefix):
  """evaluate()'s scores as a flat dict for eval_results (per type: <prefix>type_<T>_<name>).

  Args:
    scores: output of evaluate.
    prefix: e.g. "eval_" or "test_".

  Returns:
    dict name -> number.
  """
  out = {}
  for key, value in scores.items():
    if key != "types":
      out[prefix + key] = value
  for type_, values in scores["types"].items():
    for key, value in values.items():
      out["%stype_%s_%s" % (prefix, type_, key)] = value
  return out


def format_report(scores):
  """A conlleval-style text report (percentages) of evaluate()'s scores."""
  lines = ["processed %d tokens with %d phrases; found: %d phrases; correct: %d." % (
      scores["num_tokens"], scores["num_gold_entities"], scores["num_predicted_entities"],
      scores["num_correct_entities"])]
  lines.append("accuracy: %6.2f%%; precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f" % (
      100 * scores["accuracy"], 100 * scores["precision"], 100 * scores["recall"],
      100 * scores["f1"]))
  for type_, values in scores["types"].items():
    lines.append("%17s: precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f  %d" % (
        type_, 100 * values["precision"], 100 * values["recall"], 100 * values["f1"],
        values["num_predicted"]))
  return "\n".join(lines) + "\n"
