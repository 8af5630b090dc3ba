"""Tests for sliding_window.py: the one window rule of run_squad, run_ner and run_classifier."""

import collections

from realformer_tf import classifier_features
import run_ner
import run_squad
from realformer_tf import sliding_window


def official_doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """The loop inside google-research/bert run_squad.convert_examples_to_features, verbatim."""
  _DocSpan = collections.namedtuple("DocSpan", ["start", "length"])  # pylint: disable=invalid-name
  doc_spans = []
  start_offset = 0
  while start_offset < num_tokens:
    length = num_tokens - start_offset
    if length > max_tokens_for_doc:
      length = max_tokens_for_doc
    doc_spans.append(_DocSpan(start=start_offset, length=length))
    if start_offset + length == num_tokens:
      break
    start_offset += min(length, doc_stride)
  return doc_spans


def test_edge_cases():
  windows = sliding_window.windows
  assert windows(3, 5, 2) == [(0, 3)]                        # shorter than the window
  assert windows(5, 5, 2) == [(0, 5)]                        # exact fit: one window
  assert windows(6, 5, 2) == [(0, 5), (2, 4)]                # one token over
  assert windows(10, 4, 9) == [(0, 4), (4, 4), (8, 2)]       # stride > window: capped
  assert windows(10, 4, 4) == [(0, 4), (4, 4), (8, 2)]       # stride = window
  assert windows(9, 4, 1)[-1] == (5, 4)                      # the last ends at the end
  assert windows(0, 4, 2) == []
  assert windows(0, 4, 2, empty_text_window=True) == [(0, 0)]
  assert windows(3, 4, 2, empty_text_window=True) == [(0, 3)]


def test_same_windows_as_the_official_loop_and_in_every_user():
  for num_tokens in range(0, 30):
    for window in range(1, 9):
      for stride in range(1, 11):
        want = official_doc_spans(num_tokens, window, stride)
        assert sliding_window.windows(num_tokens, window, stride) == want
        assert run_squad.make_doc_spans(num_tokens, window, stride) == want
        assert classifier_features.document_windows(num_tokens, window, stride) == (
            want or [(0, 0)])
        if num_tokens:
          spans, assigned = run_ner.window_assignments(list(range(num_tokens)), num_tokens,
                                                       window, stride)
          assert spans == want and sum(len(a) for a in assigned) == num_tokens


def test_max_context_window_is_the_official_rule_exact_on_ties():
  check = run_squad._check_is_max_context  # pylint: disable=protected-access
  assert run_ner.max_context_window is sliding_window.max_context_window
  # Every token of every layout up to 40 tokens: the official float rule picks the same window
  # (exact ties there are between windows of one length, which floats also give the first).
  for num_tokens in range(1, 40):
    for window in range(1, 12):
      for stride in range(1, window + 1):
        spans = sliding_window.windows(num_tokens, window, stride)
        for position in range(num_tokens):
          best = sliding_window.max_context_window(spans, position)
          assert check(spans, best, position), (num_tokens, window, stride, position)
  assert sliding_window.max_context_window([sliding_window.Window(0, 3)], 5) is None
  # The module docstring's exact tie, 100 * 1 + 118 == 100 * 2 + 18: the first window here,
  # the second in floating point (1 + 1.18 < 2 + 0.18), which is why run_squad keeps its own.
  spans = sliding_window.windows(132, 118, 114)
  assert spans == [(0, 118), (114, 18)]
  assert sliding_window.max_context_window(spans, 116) == 0
  assert check(spans, 1, 116) and not check(spans, 0, 116)
