# coding=utf-8
"""The sliding window over a long token sequence, one rule for every task that cuts texts.

The official run_squad.py loop (its `_DocSpan`s): windows of at most `window_length` tokens,
`stride` apart, the last one ending at the end of the text. Used by run_squad (contexts longer
than a question's budget: make_doc_spans / DocSpan), run_ner (sentences longer than
max_seq_length) and run_classifier (--long_document=window: document_windows / DocWindow).
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
