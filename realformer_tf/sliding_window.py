# coding=utf-8
"""The sliding window over a long token sequence, one rule for every task that cuts texts.

The official run_squad.py loop (its `_DocSpan`s): windows of at most `window_length` tokens,
`stride` apart, the last one ending at the end of the text. Used by run_squad (contexts longer
than a question's budget: make_doc_spans / DocSpan), run_ner (sentences longer than
max_seq_length) and run_classifier (--long_document=window: document_windows / DocWindow).

A token in several windows is scored in the one where it has the most context
(`max_context_window`): the largest min(left context, right context) + 0.01 * window length,
the first window on ties. run_squad keeps the official float version (`_check_is_max_context`,
diffable against upstream) and does not call this one, because the two differ on exact ties:
in floating point 1 + 0.01 * 118 < 2 + 0.01 * 18, so for the windows (0, 118), (114, 18) of a
132-token text the official rule gives token 116 to the second window where exact arithmetic
(and the first-window-on-ties rule) gives it to the first. run_squad's features and predictions
stay the official code's; run_ner (whose SavedModel computes the choice in an integer graph,
run_ner.max_context_graph) uses this exact one, so the Python and graph choices agree.
Everywhere else the two agree (tests/test_sliding_window.py).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections

# One window: the index of its first token and its number of tokens.
Window = collections.namedtuple("Window", ["start", "length"])


def windows(num_tokens, window_length, stride, empty_text_window=False):
  """Windows of <= window_length tokens, `stride` apart, covering a text.

  The stride is capped by the window's length, so no token is ever skipped (a stride beyond
  the window length gives back-to-back windows); the last window ends at the text's end (it may
  be shorter than the others). A text that fits is one window.

  Args:
    num_tokens: the text's number of tokens (>= 0).
    window_length: tokens per window (>= 1).
    stride: tokens between window starts (>= 1).
    empty_text_window: what an empty text gives: False (run_squad) no window, True
      (run_classifier, whose every example needs a feature) one empty Window(0, 0).

  Returns:
    list of Window(start, length), in text order.
  """
  if num_tokens == 0 and empty_text_window:
    return [Window(0, 0)]
  spans = []
  start = 0
  while start < num_tokens:
    length = min(num_tokens - start, window_length)
    spans.append(Window(start=start, length=length))
    if start + length == num_tokens:
      break
    start += min(length, stride)
  return spans


def max_context_window(doc_spans, position):
  """The window where the token at `position` has the most context.

  The official run_squad rule (`_check_is_max_context`): the largest min(left context, right
  context) + 0.01 * window length, the first window on ties; computed exactly, as
  100 * min(...) + length, so that exact ties (which floating point can break either way, see
  the module docstring) go to the first window, as an integer graph computes it.

  Args:
    doc_spans: list of Window(start, length) (or anything with .start and .length).
    position: token index in the text.

  Returns:
    Index of the window, or None when no window holds the position.
  """
  best_score = None
  best_index = None
  for index, span in enumerate(doc_spans):
    end = span.start + span.length - 1
    if position < span.start or position > end:
      continue
    score = 100 * min(position - span.start, end - position) + span.length
    if best_score is None or score > best_score:
      best_score, best_index = score, index
  return best_index
