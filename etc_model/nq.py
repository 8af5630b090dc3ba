# coding=utf-8
"""Natural Questions for ETC: reading the data, the official scorer, the features and the
answers.

The library of `python -m etc_model.create_nq`, `python -m etc_model.run_long_tasks --task=nq`
and `python -m etc_model.nq_evaluate`. The feature layout and the answer decoding are the
official google-research etcmodel's (models/nq/preproc_nq_lib.py, run_nq_lib.py,
eval_nq_lib.py); the scorer is google-research-datasets/natural-questions' nq_eval.py and
eval_utils.py.

Data. One JSON object per line (a .jsonl file, gzip-compressed or not; several files through
a comma-separated list or a glob): "example_id" (an integer, or a string), "question_text",
the document as "document_text" (the simplified format: tokens separated by single spaces,
HTML tags among them) or "document_tokens" (the original format: [{"token", "html_token",
...}]), "long_answer_candidates" [{"start_token", "end_token", "top_level"}] and "annotations"
[{"long_answer": {"start_token", "end_token", ...}, "short_answers": [{"start_token",
"end_token", ...}], "yes_no_answer": "YES" | "NO" | "NONE"}] (one in the training file, five
in the development file; a file to predict may have none). Token spans are [start, end), -1 / -1
for none; byte offsets ("start_byte", "end_byte") are optional (-1 when absent).

Official scorer (evaluate; nq_eval's rules). Gold: an example has a long answer when at least
2 of its annotations have a non-null long answer, a short answer when at least 2 have a
non-null short answer span or a yes / no answer. A long prediction is right when gold has a
long answer and the span equals one annotator's non-null long answer; a short prediction is
right when gold has a short answer and either its yes / no answer equals one annotator's, or
(no yes / no predicted) its set of non-null spans equals one annotator's set. Spans are equal
when both have byte offsets and those are equal, or both have token offsets and those are
equal. A prediction has an answer when its long span is not null (long) or it has a non-null
short span or a yes / no answer (short). Precision = right / predicted, recall = right / gold,
F1 their harmonic mean (0 when a denominator is 0): the "-answer-" metrics with every
prediction taken, the "best-threshold-" metrics at the score threshold that maximizes F1
(predictions sorted by their long_answer_score / short_answers_score, highest first; a
threshold keeps every prediction scoring at least it: ties enter together; of equal F1s the
higher threshold wins), and recall-at-precision>=t (t = 0.5, 0.75, 0.9): the most recall at a
threshold whose precision is at least t (the first such threshold among equal recalls). The
prediction file must have one prediction per example of the gold file, no more (the official
refusal); a yes / no answer with non-null short spans, a span with start >= end or one -1
end, and scores that are not finite numbers are refused (one line).

Records (one per window of the document, preproc_nq_lib's layout). The document's input is the
tokens of its top-level long-answer candidates, in order: each word tokenized alone (WordPiece,
or SentencePiece: the word's sp.encode, lower-cased first with do_lower_case), an HTML start tag
as [unused102] and an end tag as [unused103] (the official include_html_tokens; in
document_text an HTML token is one of "<...>"). The special tokens ([CLS], [SEP], [unused34],
[unused0], [unused102], [unused103]: SPECIAL_TOKENS) are the BERT vocabulary's; create_nq's
--<kind>_token flags choose others (a SentencePiece model's pieces). Windows of doc_len = L -
(question pieces) - 3 of those word pieces start every --doc_stride pieces until one reaches
the end.
  long input [L]: [CLS], the question's word pieces (at most --max_question_length), [SEP], the
    window's pieces, [SEP], padding; long_breakpoints: 1 at the last [SEP].
  token_pos [L] / candidate_ids [L]: each piece's document token and candidate index (-1 for
    [CLS], question, [SEP], padding).
  global input [G]: [CLS], one [unused34] per question piece and for the first [SEP], then one
    [unused0] per run of a candidate's pieces in the window (a candidate cut by the window's
    start or end gets its own), then one token of id 0 for the closing [SEP] (the official
    layout); sentence_ids [L]: each long token's global token ([CLS], question pieces and the
    first [SEP] one each; padding the last). When G is full, the later pieces belong to the
    last global token (counted: candidates_without_global_token).
  answer_type [1]: of the first annotation, 0 null, 1 yes, 2 no, 3 long, 4 short (a short
    answer made of several spans is one span from the first's start to the last's end); a
    short answer outside the window is type 0 there, likewise a long answer of type 3.
  la_start / la_end / sa_start / sa_end [1]: the long / short answer's first and last word
    piece in the window (inclusive), 0 / 0 ([CLS]) when it is not there. With SentencePiece the
    first piece is the one after a word-start marker standing alone ("\u2581" before a word
    whose first characters form no piece with it) when the token has another piece: the marker
    is the space before the word, as in HotpotQA's answer spans; decoding maps either piece to
    the same document token.
Questions longer than --max_question_length pieces are cut (as officially; counted).
Training keeps the official down-sampling: a window of type 0 is kept with probability
--include_unknown_rate (--include_unknown_rate_for_unanswerable, default 4x that, when the
whole example has no answer), from a generator seeded by --seed; dev and test keep every window.

Differences from the official code, by intent:
  * An answer counts in a window only when both its ends are there (the official code keeps
    the found end and puts the other on [CLS] when only one is in the window).
  * Word pieces: a document token without word pieces cannot be an answer end; when an
    answer's first or last token has none, the next / previous token with pieces is used
    (counted: answer_ends_moved).
  * The head (etc_model.long_task_heads.nq_head) has the official variables under
    cls/long_tasks/nq/ (long_output_weights [4, hidden], answer_type_output_weights [5, hidden]
    and their biases) and no --mask_long_output; decoding only reads document positions.
  * The official preprocessing options off by default there are not offered:
    predict_la_when_no_sa (a short-answer label on the long answer) and fixed_blocks (one
    global token per 27 long tokens instead of one per candidate).
  * SentencePiece vocabularies (the official tokenizer_type ALBERT): the special tokens are
    chosen by create_nq's flags, all six of them (the official fixes [CLS], [SEP] and the HTML
    tags to its vocabulary's <unused_63>, <unused_2>, <unused_35>, <unused_36> and the question
    and candidate global tokens to ids 35 and 1); an answer's label starts after a word-start
    marker standing alone (the official puts it on the token's first piece, the marker);
    --do_lower_case lower-cases the words before SentencePiece, as create_hotpotqa does (the
    official ignores do_lower_case with a SentencePiece model; a model that folds case itself
    gives the same pieces either way, a cased one needs --do_lower_case=false).
  * Decoding (predict_example, the official "joint" span selection with the answer type): the
    score of a position is its logit minus its window's [CLS] logit (the official divides by
    the [CLS] logit, which reverses the order when that logit is negative); every document
    position of every window is a candidate (the official keeps each window's 50 best); the
    answer type is read from the window holding the best short-answer start (the official
    reads the example's last window).
Decoding: the long answer's start is the best-scoring position (ties: the later token), its
end the best-scoring position at or after it (ties: the first), else the best end and the
two swapped; likewise the short answer, whose end is fewer than --max_short_answer_length
document tokens after its start; each span is [first token, last token + 1), its score the sum
of its ends' scores. Answer type yes / no (the arg-max of the five type logits): the short
spans are dropped and yes_no_answer set (as officially, types null and long change nothing: the
scorer's thresholds decide).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import json
import math
import os
import random

import numpy as np
import tensorflow as tf

from realformer_tf import common
from etc_model import long_tasks

TASK = "nq"
SPLITS = ("train", "dev", "test")
SUMMARY_NAME = "nq.json"
VOCAB_NAME = "nq_vocab.txt"
SPM_NAME = "nq_spm.model"
EXAMPLES_SUFFIX = ".examples.jsonl"
# The official preproc_nq / run_nq defaults.
DEFAULT_MAX_SEQ_LENGTH = 4096
DEFAULT_MAX_GLOBAL_SEQ_LENGTH = 230
DEFAULT_DOC_STRIDE = 2048
DEFAULT_MAX_QUESTION_LENGTH = 32
DEFAULT_MAX_SHORT_ANSWER_LENGTH = 32
# Gold has an answer when at least this many annotators give one (eval_utils' flags).
LONG_NON_NULL_THRESHOLD = 2
SHORT_NON_NULL_THRESHOLD = 2
# The precisions of nq_eval's recall-at-precision table.
PRECISION_TARGETS = (0.5, 0.75, 0.9)

# The vocabulary entries of the special tokens (official preproc_nq_lib: global_question_id 35
# and global_sentence_id 1 are these entries of the BERT uncased vocabulary).
SPECIAL_TOKENS = collections.OrderedDict([
    ("cls", "[CLS]"), ("sep", "[SEP]"), ("question", "[unused34]"), ("candidate", "[unused0]"),
    ("html_start", "[unused102]"), ("html_end", "[unused103]")])
# Answer types (official answer_type_enum).
ANSWER_TYPES = ("null", "yes", "no", "long", "short")
NUM_ANSWER_TYPES = len(ANSWER_TYPES)
LABELS = ("la_start", "la_end", "sa_start", "sa_end")

# The features of a record, in the order written; "L", "G" or 1 is the length.
FEATURES = (("token_ids", "L"), ("sentence_ids", "L"), ("long_breakpoints", "L"),
            ("global_token_ids", "G"), ("global_breakpoints", "G"), ("token_pos", "L"),
            ("candidate_ids", "L"), ("answer_type", 1), ("la_start", 1), ("la_end", 1),
            ("sa_start", 1), ("sa_end", 1))

Span = collections.namedtuple("Span", ["start_byte", "end_byte", "start_token", "end_token"])
NULL_SPAN = Span(-1, -1, -1, -1)
Annotation = collections.namedtuple("Annotation", ["long_answer", "short_answers", "yes_no"])
# A prediction of the official format (its scores floats, yes_no lower case).
Prediction = collections.namedtuple(
    "Prediction", ["long_answer", "short_answers", "yes_no", "long_score", "short_score"])
Example = collections.namedtuple(
    "Example", ["id", "question", "tokens", "html", "candidates", "annotations"])


# ----------------------------------------------------------------------------- the official scorer
def span_problem(span):
  """What is wrong with a span (eval_utils.Span's checks), or None."""
  if (span.start_byte < 0) != (span.end_byte < 0):
    return "one byte offset is -1 and the other not"
  if (span.start_token < 0) != (span.end_token < 0):
    return "one token offset is -1 and the other not"
  if span.start_byte >= 0 and span.start_byte >= span.end_byte:
    return "start_byte >= end_byte"
  if span.start_token >= 0 and span.start_token >= span.end_token:
    return "start_token >= end_token"
  return None


def is_null(span):
  """A span without byte and token offsets (no answer)."""
  return span.start_byte < 0 and span.start_token < 0


def spans_equal(a, b):
  """eval_utils.nonnull_span_equal: equal byte offsets (when both have them) or equal token
  offsets (when both have them)."""
  if a.start_byte >= 0 and b.start_byte >= 0 and (
      (a.start_byte, a.end_byte) == (b.start_byte, b.end_byte)):
    return True
  return (a.start_token >= 0 and b.start_token >= 0 and
          (a.start_token, a.end_token) == (b.start_token, b.end_token))


def span_sets_equal(gold, predicted):
  """eval_utils.span_set_equal: every non-null span of each side equals one of the other's."""
  gold = [s for s in gold if not is_null(s)]
  predicted = [s for s in predicted if not is_null(s)]
  return (all(any(spans_equal(p, g) for g in gold) for p in predicted) and
          all(any(spans_equal(p, g) for p in predicted) for g in gold))


def has_short_answer(short_answers, yes_no):
  """A non-null short span or a yes / no answer."""
  return any(not is_null(s) for s in short_answers) or yes_no != "none"


def gold_has_long_answer(annotations):
  """At least LONG_NON_NULL_THRESHOLD annotations with a non-null long answer."""
  return sum(not is_null(a.long_answer) for a in annotations) >= LONG_NON_NULL_THRESHOLD


def gold_has_short_answer(annotations):
  """At least SHORT_NON_NULL_THRESHOLD annotations with a short span or a yes / no answer."""
  return sum(has_short_answer(a.short_answers, a.yes_no) for a in annotations
             ) >= SHORT_NON_NULL_THRESHOLD


def score_long_answer(annotations, prediction):
  """nq_eval.score_long_answer: (gold has an answer, prediction has one, right, score)."""
  gold = gold_has_long_answer(annotations)
  predicted = not is_null(prediction.long_answer)
  right = gold and predicted and any(
      spans_equal(a.long_answer, prediction.long_answer)
      for a in annotations if not is_null(a.long_answer))
  return gold, predicted, bool(right), prediction.long_score


def score_short_answer(annotations, prediction):
  """nq_eval.score_short_answer: (gold has an answer, prediction has one, right, score)."""
  gold = gold_has_short_answer(annotations)
  predicted = has_short_answer(prediction.short_answers, prediction.yes_no)
  right = False
  if gold and predicted:
    if prediction.yes_no != "none":
      right = any(prediction.yes_no == a.yes_no for a in annotations)
    else:
      right = any(span_sets_equal(a.short_answers, prediction.short_answers)
                  for a in annotations)
  return gold, predicted, bool(right), prediction.short_score


def _divide(x, y):
  return x / y if y else 0


def compute_f1(stats, prefix):
  """nq_eval.compute_f1 over every prediction: {prefix+n, f1, precision, recall}."""
  right = sum(s[2] for s in stats)
  precision = _divide(right, sum(s[1] for s in stats))
  recall = _divide(right, sum(s[0] for s in stats))
  return collections.OrderedDict([
      (prefix + "n", len(stats)), (prefix + "f1", _divide(2 * precision * recall,
                                                          precision + recall)),
      (prefix + "precision", precision), (prefix + "recall", recall)])


def pr_curve_metrics(stats, prefix, targets=PRECISION_TARGETS):
  """nq_eval.compute_pr_curves and get_metrics_with_answer_stats' names.

  Args:
    stats: list of (has_gold, has_prediction, right, score).
    prefix: "long-" or "short-".
    targets: the precisions of the recall-at-precision table.

  Returns:
    OrderedDict: best-threshold-f1 / -precision / -recall, best-threshold (0.0 when no
    threshold has an F1 above 0), then per target recall-at-precision>=t and
    precision-at-precision>=t (0 when no threshold reaches t), then per target
    threshold-at-precision>=t (the score threshold of that point, the one nq_eval prints in
    its table; None when no threshold reaches t).
  """
  stats = sorted(stats, key=lambda s: s[-1], reverse=True)  # stable, as the official sort
  total_gold = sum(s[0] for s in stats)
  at_threshold = collections.OrderedDict()
  right = predicted = 0
  for _, has_prediction, is_right, score in stats:
    right += is_right
    predicted += has_prediction
    # Ties: the threshold's point is the one after all of them.
    at_threshold[score] = (_divide(right, predicted), _divide(right, total_gold))
  best = (0.0, 0.0, 0.0, 0.0)
  max_recall = [0] * len(targets)
  max_precision = [0] * len(targets)
  max_threshold = [None] * len(targets)
  for threshold, (precision, recall) in at_threshold.items():
    for t, target in enumerate(targets):
      if precision >= target and recall > max_recall[t]:
        max_recall[t], max_precision[t], max_threshold[t] = recall, precision, threshold
    f1 = _divide(2 * precision * recall, precision + recall)
    if f1 > best[0]:
      best = (f1, precision, recall, threshold)
  metrics = collections.OrderedDict()
  for name, value in zip(("f1", "precision", "recall"), best[:3]):
    metrics[prefix + "best-threshold-" + name] = value
  metrics[prefix + "best-threshold"] = best[3]
  for t, target in enumerate(targets):
    metrics[prefix + "recall-at-precision>={:.2}".format(target)] = max_recall[t]
    metrics[prefix + "precision-at-precision>={:.2}".format(target)] = max_precision[t]
  for t, target in enumerate(targets):
    metrics[prefix + "threshold-at-precision>={:.2}".format(target)] = max_threshold[t]
  return metrics


def evaluate(gold, predictions):
  """The official metrics of predictions against gold annotations.

  Args:
    gold: {example id: [Annotation, ...]}.
    predictions: {example id: Prediction} with exactly gold's ids (ValueError otherwise: the
      official refusal).

  Returns:
    OrderedDict: nq_eval's JSON metrics (long-best-threshold-f1, ..., short-...), then the
    metrics of every prediction (long-answer-n / -f1 / -precision / -recall, short-answer-...),
    then examples, gold_long_answers and gold_short_answers (examples with a gold answer).
  """
  missing = set(gold) - set(predictions)
  unknown = set(predictions) - set(gold)
  if missing or unknown:
    raise ValueError("%d examples have no prediction and %d predictions are for examples the "
                     "gold file does not have (the official scorer needs exactly its ids)" %
                     (len(missing), len(unknown)))
  long_stats = [score_long_answer(gold[key], predictions[key]) for key in gold]
  short_stats = [score_short_answer(gold[key], predictions[key]) for key in gold]
  metrics = pr_curve_metrics(long_stats, "long-")
  metrics.update(pr_curve_metrics(short_stats, "short-"))
  metrics.update(compute_f1(long_stats, "long-answer-"))
  metrics.update(compute_f1(short_stats, "short-answer-"))
  metrics["examples"] = len(gold)
  metrics["gold_long_answers"] = sum(1 for s in long_stats if s[0])
  metrics["gold_short_answers"] = sum(1 for s in short_stats if s[0])
  return metrics


# ----------------------------------------------------------------------------- reading
def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_span(value, what):
  """A Span of a JSON object {start_token, end_token[, start_byte, end_byte]}; ValueError
  naming `what` when it is not one (eval_utils.Span's checks)."""
  if not isinstance(value, dict):
    raise ValueError("%s is a %s, not an object" % (what, type(value).__name__))
  offsets = []
  for key in ("start_byte", "end_byte", "start_token", "end_token"):
    offset = value.get(key, -1)
    if not _is_int(offset):
      raise ValueError('%s: "%s" is not an integer' % (what, key))
    offsets.append(offset)
  span = Span(*[max(o, -1) for o in offsets])
  problem = span_problem(span)
  if problem:
    raise ValueError("%s: %s" % (what, problem))
  return span


def _example_id(record):
  key = record.get("example_id")
  if not (_is_int(key) or isinstance(key, str)):
    raise ValueError('"example_id" is missing or not an integer or string')
  return key


def parse_annotations(record, num_tokens=None):
  """The Annotations of an NQ record (ValueError on a malformed one).

  Args:
    record: the parsed JSON line.
    num_tokens: the document's length (spans past it are refused), or None.

  Returns:
    list of Annotation (yes_no lower case).
  """
  annotations = record.get("annotations")
  if not isinstance(annotations, list):
    raise ValueError('"annotations" is missing or not a list')
  parsed = []
  for n, annotation in enumerate(annotations):
    what = "annotation %d" % n
    if not isinstance(annotation, dict) or "long_answer" not in annotation:
      raise ValueError("%s has no long_answer" % what)
    long_answer = parse_span(annotation["long_answer"], what + " long_answer")
    shorts = annotation.get("short_answers", [])
    if not isinstance(shorts, list):
      raise ValueError("%s: short_answers is not a list" % what)
    short_answers = [parse_span(s, "%s short answer %d" % (what, i)) for i, s in enumerate(shorts)]
    yes_no = annotation.get("yes_no_answer", "NONE")
    if not isinstance(yes_no, str) or yes_no.lower() not in ("yes", "no", "none"):
      raise ValueError("%s: yes_no_answer %r is not YES, NO or NONE" % (what, yes_no))
    if num_tokens is not None:
      for span in [long_answer] + short_answers:
        if span.end_token > num_tokens:
          raise ValueError("%s: token span [%d, %d) ends past the document's %d tokens" %
                           (what, span.start_token, span.end_token, num_tokens))
    parsed.append(Annotation(long_answer, short_answers, yes_no.lower()))
  return parsed


def _document_tokens(record):
  """(tokens, html flags) of the original format's document_tokens or document_text."""
  if "document_tokens" in record:
    tokens = record["document_tokens"]
    if not isinstance(tokens, list) or not all(
        isinstance(t, dict) and isinstance(t.get("token"), str) for t in tokens):
      raise ValueError('"document_tokens" is not a list of {"token", "html_token"}')
    return [t["token"] for t in tokens], [bool(t.get("html_token")) for t in tokens]
  text = record.get("document_text")
  if not isinstance(text, str):
    raise ValueError('has neither "document_text" nor "document_tokens"')
  tokens = text.split(" ")
  return tokens, [len(t) > 2 and t.startswith("<") and t.endswith(">") for t in tokens]


def parse_example(record, require_annotations=True):
  """An Example of one NQ JSON line (ValueError naming what is wrong)."""
  if not isinstance(record, dict):
    raise ValueError("is a %s, not an object" % type(record).__name__)
  key = _example_id(record)
  question = record.get("question_text")
  if not isinstance(question, str):
    raise ValueError('"question_text" is missing or not a string')
  tokens, html = _document_tokens(record)
  candidates = record.get("long_answer_candidates")
  if not isinstance(candidates, list):
    raise ValueError('"long_answer_candidates" is missing or not a list')
  parsed = []
  for n, c in enumerate(candidates):
    span = parse_span(c, "long_answer_candidates[%d]" % n)
    if is_null(span) or span.start_token < 0 or span.end_token > len(tokens):
      raise ValueError("long_answer_candidates[%d]: token span [%d, %d) is not within the "
                       "document's %d tokens" % (n, span.start_token, span.end_token,
                                                 len(tokens)))
    parsed.append((span.start_token, span.end_token, bool(c.get("top_level", True))))
  annotations = None
  if require_annotations or "annotations" in record:
    annotations = parse_annotations(record, len(tokens))
  return Example(key, question, tokens, html, parsed, annotations)


def iter_records(patterns, flag_name, parse):
  """Parses every JSON line of the files of `patterns`, streamed (one line on any bad line or
  a repeated example id).

  Args:
    patterns: comma-separated files or globs.
    flag_name: the flag (or argument) they come from, for errors ("dev_file").
    parse: record -> value (ValueError on a bad record).

  Yields:
    (example id, value) in file order.
  """
  source = "--" + flag_name
  seen = set()
  for path in common.expand_input_files(patterns, flag_name):
    number = 0
    try:
      for number, line in enumerate(long_tasks.iter_lines(path), 1):
        if not line.strip():
          continue
        try:
          record = json.loads(line)
          key = _example_id(record) if isinstance(record, dict) else None
          value = parse(record)
        except ValueError as e:
          common.fail("%s=%s: line %d: %s" % (source, path, number, e))
        if key in seen:
          common.fail("%s=%s: line %d repeats example_id %s" % (source, path, number, key))
        seen.add(key)
        yield key, value
    except (OSError, EOFError, UnicodeDecodeError) as e:
      common.fail("%s=%s: line %d: cannot be read as (gzipped) UTF-8 JSON lines (%s)" %
                  (source, path, number + 1, e))


def iter_examples(patterns, flag_name, require_annotations=True):
  """Reads and checks NQ files (parse_example), streamed: Examples in file order."""
  for _, example in iter_records(patterns, flag_name,
                                 lambda r: parse_example(r, require_annotations)):
    yield example


def read_gold(patterns, flag_name):
  """{example id: [Annotation]} of NQ files (the scorer's gold; documents not kept)."""
  def parse(record):
    if not isinstance(record, dict):
      raise ValueError("is a %s, not an object" % type(record).__name__)
    return parse_annotations(record)
  return collections.OrderedDict(iter_records(patterns, flag_name, parse))


def parse_prediction(value, index):
  """A Prediction of one entry of the official prediction list (ValueError naming it)."""
  what = "prediction %d" % index
  if not isinstance(value, dict):
    raise ValueError("%s is a %s, not an object" % (what, type(value).__name__))
  try:
    key = _example_id(value)
  except ValueError as e:
    raise ValueError("%s: %s" % (what, e))
  what = "prediction %d (example_id %s)" % (index, key)
  long_answer = (parse_span(value["long_answer"], what + " long_answer")
                 if "long_answer" in value else NULL_SPAN)
  shorts = value.get("short_answers", [])
  if not isinstance(shorts, list):
    raise ValueError("%s: short_answers is not a list" % what)
  short_answers = [parse_span(s, "%s short answer %d" % (what, i)) for i, s in enumerate(shorts)]
  yes_no = value.get("yes_no_answer", "none")
  if not isinstance(yes_no, str) or yes_no.lower() not in ("yes", "no", "none"):
    raise ValueError("%s: yes_no_answer %r is not yes, no or none" % (what, yes_no))
  yes_no = yes_no.lower()
  if yes_no != "none" and any(not is_null(s) for s in short_answers):
    raise ValueError("%s: a yes / no answer and short answer spans cannot coexist" % what)
  scores = []
  for name in ("long_answer_score", "short_answers_score"):
    if not _is_number(value.get(name)) or not math.isfinite(value[name]):
      raise ValueError("%s: %s is missing or not a finite number" % (what, name))
    scores.append(float(value[name]))
  return key, Prediction(long_answer, short_answers, yes_no, scores[0], scores[1])


def check_predictions(data, source):
  """{example id: Prediction} of the official prediction object (one line naming `source`)."""
  if not isinstance(data, dict) or not isinstance(data.get("predictions"), list):
    common.fail('%s: not the official format {"predictions": [...]}' % source)
  predictions = collections.OrderedDict()
  for index, value in enumerate(data["predictions"]):
    try:
      key, prediction = parse_prediction(value, index)
    except ValueError as e:
      common.fail("%s: %s" % (source, e))
    if key in predictions:
      common.fail("%s: prediction %d repeats example_id %s" % (source, index, key))
    predictions[key] = prediction
  return predictions


def read_predictions(path, source=None):
  """A prediction file, checked (check_predictions)."""
  source = source or "prediction file %s" % path
  return check_predictions(long_tasks.load_json(path, source), source)


# ----------------------------------------------------------------------------- features
def special_token_ids(vocab, tokens=None):
  """{"cls": id, ...} of the special tokens in a vocabulary {token: id} (missing: KeyError).

  Args:
    vocab: {token: id} (a SentencePiece FullTokenizer's: its pieces).
    tokens: {kind: token} in SPECIAL_TOKENS' order (None: SPECIAL_TOKENS).

  Returns:
    OrderedDict {kind: id}.
  """
  tokens = tokens or SPECIAL_TOKENS
  return collections.OrderedDict((kind, vocab[token]) for kind, token in tokens.items())


def document_pieces(example, tokenize_word, ids):
  """The word pieces of the document's top-level candidates (module docstring).

  Args:
    example: Example.
    tokenize_word: long_tasks.make_tokenize_word's function.
    ids: special_token_ids() of the vocabulary.

  Returns:
    (piece ids, candidate index of each, document token of each, tokens without pieces).
  """
  pieces, candidate_ids, token_pos, empty = [], [], [], 0
  for index, (start, end, top_level) in enumerate(example.candidates):
    if not top_level:
      continue
    for pos in range(start, end):
      token = example.tokens[pos]
      if example.html[pos]:
        new = [ids["html_end"] if token.startswith("</") else ids["html_start"]]
      else:
        new = tokenize_word(token)
      empty += int(not new)
      pieces.extend(new)
      candidate_ids.extend([index] * len(new))
      token_pos.extend([pos] * len(new))
  return pieces, candidate_ids, token_pos, empty


def document_labels(annotation):
  """(answer type, long (first, last) tokens, short (first, last) tokens) of an annotation
  (inclusive; (-1, -1) for none; the official preproc_nq_lib rules)."""
  if annotation is None:
    return -1, (-1, -1), (-1, -1)
  long_span = annotation.long_answer
  la = (-1, -1) if long_span.start_token < 0 else (long_span.start_token,
                                                   long_span.end_token - 1)
  shorts = [s for s in annotation.short_answers if s.start_token >= 0]
  sa = (shorts[0].start_token, shorts[-1].end_token - 1) if shorts else (-1, -1)
  if annotation.yes_no in ("yes", "no"):
    answer_type = ANSWER_TYPES.index(annotation.yes_no)
  elif shorts:
    answer_type = ANSWER_TYPES.index("short")
  elif la[0] >= 0:
    answer_type = ANSWER_TYPES.index("long")
  else:
    answer_type = 0
  return answer_type, la, sa


def _piece_span(token_pos, tokens, pieces=(), word_start_id=None):
  """(first, last) document piece of an inclusive token span, or None (no piece there).

  Args:
    token_pos: the document token of each document piece.
    tokens: (first, last) document token, (-1, -1) for none.
    pieces: the document pieces' ids (read with word_start_id).
    word_start_id: SentencePiece's word-start marker standing alone (long_tasks.word_start_id),
      or None: the span starts after it when its token has more pieces (the marker is the space
      before the word, as in HotpotQA's answer spans).

  Returns:
    (first, last) piece indices, or None.
  """
  if tokens[0] < 0:
    return None
  inside = [i for i, pos in enumerate(token_pos) if tokens[0] <= pos <= tokens[1]]
  if not inside:
    return None
  first, last = inside[0], inside[-1]
  if (word_start_id is not None and first < last and pieces[first] == word_start_id and
      token_pos[first + 1] == token_pos[first]):
    first += 1
  return first, last


def _pad(values, length, value=0):
  return list(values) + [value] * (length - len(values))


def window_features(question, pieces, candidate_ids, token_pos, start, settings, ids):
  """The long and global features of one window (module docstring), without labels.

  Args:
    question: the question's word-piece ids (already cut).
    pieces, candidate_ids, token_pos: document_pieces' lists.
    start: the window's first document piece.
    settings: dict with max_seq_length, max_global_seq_length.
    ids: special_token_ids().

  Returns:
    (OrderedDict of features, candidates without their own global token).
  """
  long_len, global_len = settings["max_seq_length"], settings["max_global_seq_length"]
  doc_len = long_len - len(question) - 3
  end = min(start + doc_len, len(pieces))
  preamble = [ids["cls"]] + list(question) + [ids["sep"]]
  token_ids = preamble + pieces[start:end] + [ids["sep"]]
  window_candidates = [-1] * len(preamble) + candidate_ids[start:end] + [-1]
  window_pos = [-1] * len(preamble) + token_pos[start:end] + [-1]
  global_ids = [ids["cls"]] + [ids["question"]] * (len(question) + 1)
  sentence_ids = list(range(len(preamble)))
  without_global = 0
  for i in range(len(preamble), len(token_ids)):
    candidate = window_candidates[i]
    if candidate != window_candidates[i - 1]:
      if len(global_ids) < global_len:
        global_ids.append(ids["candidate"] if candidate >= 0 else 0)
      elif candidate >= 0:
        without_global += 1
    sentence_ids.append(len(global_ids) - 1)
  features = collections.OrderedDict()
  features["token_ids"] = _pad(token_ids, long_len)
  features["sentence_ids"] = _pad(sentence_ids, long_len, len(global_ids) - 1)
  features["long_breakpoints"] = _pad([0] * (len(token_ids) - 1) + [1], long_len)
  features["global_token_ids"] = _pad(global_ids, global_len)
  features["global_breakpoints"] = _pad([0] * (len(global_ids) - 1) + [1], global_len)
  features["token_pos"] = _pad(window_pos, long_len, -1)
  features["candidate_ids"] = _pad(window_candidates, long_len, -1)
  return features, without_global


def window_starts(num_pieces, doc_len, stride):
  """The first document piece of each window (the official range)."""
  return list(range(0, max(num_pieces - doc_len, 0) + stride, stride))


def convert_example(example, tokenize_word, ids, settings, is_training=False, rng=None,
                    word_start_id=None):
  """The records of one example (one per window) and what was cut or left out.

  Args:
    example: Example.
    tokenize_word: long_tasks.make_tokenize_word's function.
    ids: special_token_ids() of the vocabulary.
    settings: dict with max_seq_length, max_global_seq_length, doc_stride,
      max_question_length, include_unknown_rate, include_unknown_rate_for_unanswerable.
    is_training: down-sample the windows without an answer (rng.random() < rate keeps one).
    rng: random.Random of the split (is_training).
    word_start_id: a SentencePiece vocabulary's word-start marker piece standing alone
      (long_tasks.word_start_id), or None: an answer's first piece is never that marker when
      its token has another piece.

  Returns:
    (list of OrderedDict features in FEATURES order, info dict: windows, records,
    null_windows_dropped, question_pieces_cut, candidates_without_global_token,
    tokens_without_pieces, answers_without_pieces (the first annotation's long / short answer
    has no word piece in the input), answer_ends_moved, document_pieces, answer_type).
  """
  question = []
  for word in example.question.split():
    question.extend(tokenize_word(word))
  question_cut = max(0, len(question) - settings["max_question_length"])
  question = question[:settings["max_question_length"]]
  pieces, candidate_ids, token_pos, empty = document_pieces(example, tokenize_word, ids)
  annotation = example.annotations[0] if example.annotations else None
  answer_type, la_tokens, sa_tokens = document_labels(annotation)
  info = {"windows": 0, "records": 0, "null_windows_dropped": 0,
          "question_pieces_cut": question_cut, "candidates_without_global_token": 0,
          "tokens_without_pieces": empty, "answers_without_pieces": 0, "answer_ends_moved": 0,
          "document_pieces": len(pieces), "answer_type": answer_type}
  spans = {}
  for name, tokens in (("la", la_tokens), ("sa", sa_tokens)):
    spans[name] = _piece_span(token_pos, tokens, pieces, word_start_id)
    if tokens[0] >= 0 and spans[name] is None:
      info["answers_without_pieces"] += 1
    elif spans[name] is not None and (token_pos[spans[name][0]], token_pos[spans[name][1]]) != (
        tokens[0], tokens[1]):
      info["answer_ends_moved"] += 1
  doc_len = settings["max_seq_length"] - len(question) - 3
  offset = len(question) + 2
  records = []
  for start in window_starts(len(pieces), doc_len, settings["doc_stride"]):
    features, without_global = window_features(question, pieces, candidate_ids, token_pos,
                                                start, settings, ids)
    info["windows"] += 1
    info["candidates_without_global_token"] += without_global
    labels = {}
    for name in ("la", "sa"):
      span = spans[name]
      inside = span is not None and start <= span[0] and span[1] < start + doc_len
      labels[name] = (offset + span[0] - start, offset + span[1] - start) if inside else (0, 0)
    window_type = answer_type
    if ((answer_type == ANSWER_TYPES.index("short") and labels["sa"] == (0, 0)) or
        (answer_type == ANSWER_TYPES.index("long") and labels["la"] == (0, 0))):
      window_type = 0
    if is_training and window_type == 0:
      rate = (settings["include_unknown_rate_for_unanswerable"] if answer_type == 0
              else settings["include_unknown_rate"])
      if not rng.random() < rate:
        info["null_windows_dropped"] += 1
        continue
    features["answer_type"] = [window_type]
    features["la_start"], features["la_end"] = [labels["la"][0]], [labels["la"][1]]
    features["sa_start"], features["sa_end"] = [labels["sa"][0]], [labels["sa"][1]]
    records.append(features)
  info["records"] = len(records)
  return records, info


def feature_lengths(max_seq_length, max_global_seq_length):
  """{feature: length} of a record (FEATURES)."""
  sizes = {"L": max_seq_length, "G": max_global_seq_length}
  return collections.OrderedDict((name, sizes.get(size, size)) for name, size in FEATURES)


def training_rng(seed):
  """The split's generator of the training down-sampling."""
  return random.Random(seed)


# ----------------------------------------------------------------------------- split files
def record_file(data_dir, split):
  """<data_dir>/nq_<split>.tfrecord."""
  return os.path.join(data_dir, "%s_%s.tfrecord" % (TASK, split))


def examples_file(data_dir, split):
  """<data_dir>/nq_<split>.examples.jsonl: one line per example of the split's files."""
  return record_file(data_dir, split)[:-len(".tfrecord")] + EXAMPLES_SUFFIX


def _span_json(span):
  return collections.OrderedDict([
      ("start_token", span.start_token), ("end_token", span.end_token),
      ("start_byte", span.start_byte), ("end_byte", span.end_byte)])


def annotations_json(annotations):
  """The examples file's form of Annotations (parse_annotations reads it back)."""
  return [collections.OrderedDict([
      ("long_answer", _span_json(a.long_answer)),
      ("short_answers", [_span_json(s) for s in a.short_answers]),
      ("yes_no_answer", a.yes_no.upper())]) for a in annotations]


def example_line(example, first_record, info, with_annotations=True):
  """The examples file's line of one example: id, record (its first record's index, or None),
  num_records, the info counts of convert_example and the annotations (None without
  with_annotations, as the train split's, which is never scored)."""
  line = collections.OrderedDict([
      ("id", example.id), ("record", first_record if info["records"] else None),
      ("num_records", info["records"])])
  line["annotations"] = (annotations_json(example.annotations)
                         if with_annotations and example.annotations is not None else None)
  return line


def read_split_examples(data_dir, split, num_records):
  """The examples file of a split, checked against its records (one line when they differ)."""
  return long_tasks.read_examples_file(data_dir, examples_file(data_dir, split),
                                       record_file(data_dir, split), num_records,
                                       "etc_model.create_nq", count_key="num_records")


def read_token_pos(path):
  """int32 array [records, L] of the token_pos feature of a record file."""
  rows = []
  for record in tf.compat.v1.io.tf_record_iterator(path):
    feature = tf.train.Example.FromString(record).features.feature
    rows.append(list(feature["token_pos"].int64_list.value))
  return np.asarray(rows, np.int32)


# ----------------------------------------------------------------------------- answers
# The per-window outputs of the head (long_task_heads.nq_head) decoding reads.
POSITION_LOGITS = tuple(name + "_logits" for name in LABELS)


def _scored_positions(logits, token_pos, window):
  """(score, document token, window) of each document position of a window: the logit minus
  the window's [CLS] logit."""
  logits = np.asarray(logits, np.float64)
  return [(float(logits[i] - logits[0]), int(token_pos[i]), window)
          for i in np.nonzero(np.asarray(token_pos) >= 0)[0]]


def _joint_span(starts, ends, max_length=None):
  """The official joint selection: best start, then the best end at or after it (within
  max_length tokens), else the best end and the two swapped. Returns (first token, last token,
  score, the start's window) or None without positions."""
  if not starts or not ends:
    return None
  start = max(starts)
  end = None
  for candidate in ends:
    if candidate[1] >= start[1] and (max_length is None or
                                     candidate[1] - start[1] < max_length):
      if end is None or candidate[0] > end[0]:
        end = candidate
  if end is None:
    end = max(ends)
  first, last = min(start[1], end[1]), max(start[1], end[1])
  return first, last, start[0] + end[0], start[2]


def _official_span(first, last):
  return collections.OrderedDict([("start_token", first), ("end_token", last + 1),
                                  ("start_byte", -1), ("end_byte", -1)])


def null_prediction(example_id):
  """The official prediction of an example without a record: no answers, scores 0."""
  return collections.OrderedDict([
      ("example_id", example_id), ("long_answer", _official_span(-1, -2)),
      ("long_answer_score", 0.0), ("short_answers", []), ("short_answers_score", 0.0),
      ("yes_no_answer", "NONE")])


def predict_example(example_id, windows, token_pos,
                    max_short_answer_length=DEFAULT_MAX_SHORT_ANSWER_LENGTH):
  """The official prediction of one example from its windows' outputs (module docstring).

  Args:
    example_id: the example's id.
    windows: list of dicts {la_start_logits, la_end_logits, sa_start_logits, sa_end_logits:
      float [L], answer_type_logits: float [5]}, one per record of the example.
    token_pos: list of int [L] (each record's token_pos).
    max_short_answer_length: a short answer's end is fewer document tokens after its start.

  Returns:
    OrderedDict in the official prediction format.
  """
  scored = {name: [] for name in POSITION_LOGITS}
  for w, (outputs, pos) in enumerate(zip(windows, token_pos)):
    for name in POSITION_LOGITS:
      scored[name] += _scored_positions(outputs[name], pos, w)
  long_span = _joint_span(scored["la_start_logits"], scored["la_end_logits"])
  short_span = _joint_span(scored["sa_start_logits"], scored["sa_end_logits"],
                           max_short_answer_length)
  if long_span is None or short_span is None:
    return null_prediction(example_id)
  prediction = collections.OrderedDict([
      ("example_id", example_id), ("long_answer", _official_span(*long_span[:2])),
      ("long_answer_score", long_span[2]),
      ("short_answers", [_official_span(*short_span[:2])]),
      ("short_answers_score", short_span[2]), ("yes_no_answer", "NONE")])
  answer_type = int(np.argmax(windows[short_span[3]]["answer_type_logits"]))
  if ANSWER_TYPES[answer_type] in ("yes", "no"):
    prediction["short_answers"] = []
    prediction["yes_no_answer"] = ANSWER_TYPES[answer_type].upper()
  return prediction


def split_predictions(outputs, token_pos, examples,
                      max_short_answer_length=DEFAULT_MAX_SHORT_ANSWER_LENGTH):
  """The official prediction object of a split's record outputs.

  Args:
    outputs: stacked predict outputs (POSITION_LOGITS [n, L], answer_type_logits [n, 5]).
    token_pos: int [n, L] of the split's records (read_token_pos).
    examples: the split's examples file lines (read_split_examples).
    max_short_answer_length: see predict_example.

  Returns:
    {"predictions": [...]}, one per example of the split, in its order.
  """
  num = len(outputs["answer_type_logits"])
  if num != len(token_pos):
    raise ValueError("%d predictions for %d records" % (num, len(token_pos)))
  predictions = []
  for line in examples:
    first = line["record"]
    if first is None:
      predictions.append(null_prediction(line["id"]))
      continue
    rows = range(first, first + line["num_records"])
    windows = [{name: outputs[name][i] for name in POSITION_LOGITS + ("answer_type_logits",)}
               for i in rows]
    predictions.append(predict_example(line["id"], windows, [token_pos[i] for i in rows],
                                       max_short_answer_length))
  return {"predictions": predictions}


def split_metrics(outputs, token_pos, examples,
                  max_short_answer_length=DEFAULT_MAX_SHORT_ANSWER_LENGTH):
  """The official metrics of a split's outputs over its annotated examples.

  Args: as split_predictions.

  Returns:
    (the prediction object, OrderedDict of evaluate's metrics over the examples with
    annotations (only examples: 0 without any)).
  """
  predictions = split_predictions(outputs, token_pos, examples, max_short_answer_length)
  gold = collections.OrderedDict(
      (line["id"], parse_annotations(line)) for line in examples
      if line.get("annotations") is not None)
  if not gold:
    return predictions, collections.OrderedDict([("examples", 0)])
  parsed = collections.OrderedDict(
      parse_prediction(p, i) for i, p in enumerate(predictions["predictions"])
      if p["example_id"] in gold)
  return predictions, evaluate(gold, parsed)

