# coding=utf-8
"""Reading text corpora, and the checks every text-reading tool runs on its inputs and outputs.

The one input policy of create_pretraining_data.py, build_vocab.py,
translation/create_translation_data.py and etc_model/create_pretraining_data.py:

- TextReader: gzip by magic bytes, a limit on undecodable bytes (--max_bad_fraction), over-long
  lines cut at whitespace (--max_line_chars); define_input_flags / validate_input_flags.
- check_text_inputs: an input that is one of our outputs (a TFRecord, a summary, a vocab) is
  refused; check_outputs_not_inputs: an output never replaces an input or matches its glob.
- summary_path_for: the summary JSON beside the TFRecords of --output_file.

create_pretraining_data keeps these names (create_pretraining_data.TextReader, ...).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections
import fnmatch
import gzip
import json
import os
import struct
import zlib

from absl import flags
import numpy as np
import tensorflow as tf

from realformer_tf import common


# Defaults of --max_bad_fraction and --max_line_chars.
DEFAULT_MAX_BAD_FRACTION = 0.01
DEFAULT_MAX_LINE_CHARS = 1000000

_GZIP_MAGIC = b"\x1f\x8b"
# Bytes at which an over-long line is preferably cut (ASCII: never inside a UTF-8 sequence).
_CUT_BYTES = (b" ", b"\t")
# A gzip file's text size is unknown before its end: fail early only when this much of it is
# read and this share of it is undecodable (clearly binary: random bytes give ~43%).
_GZIP_EARLY_CHECK_BYTES = 1 << 20
_GZIP_EARLY_BAD_SHARE = 0.25


class TextReader(object):
  """Reads text files as lines of bytes, with the input policy all text-reading tools share.

  - A gzip file (recognised by its magic bytes, whatever its name) is decompressed on the fly.
  - Bytes that are not UTF-8 are counted; a file in which more than `max_bad_fraction` of the
    bytes are undecodable fails (common.UsageError naming the file and the share): binary or
    otherwise compressed data is refused instead of becoming garbage text. A plain file fails
    as soon as its share is sure to be over the limit.
  - A line longer than `max_line_chars` characters is cut into pieces of at most that many
    characters, at the last space or tab that keeps a piece under the limit (at a character
    boundary where there is none). The pieces are yielded as separate lines, even while the
    line has not ended yet, so that nothing downstream holds one huge line: memory stays flat.

  Counters in `stats`: text_bytes, undecodable_bytes, lines_with_undecodable_bytes,
  long_lines_split (lines that were cut), long_line_pieces (the pieces they became).
  `disk_bytes_done` is the number of bytes of the files on disk consumed so far (compressed
  bytes for gzip), for progress against the files' sizes.
  """

  def __init__(self, max_line_chars=DEFAULT_MAX_LINE_CHARS,
               max_bad_fraction=DEFAULT_MAX_BAD_FRACTION, read_block=1 << 22,
               flag_name="input_file"):
    """Builds a reader.

    Args:
      max_line_chars: int >= 1, the longest line (in characters) yielded whole.
      max_bad_fraction: float in [0, 1], the largest share of undecodable bytes per file.
      read_block: int, bytes read at a time.
      flag_name: the flag that named the files, for messages.
    """
    self.max_line_chars = max(1, int(max_line_chars))
    self.max_bad_fraction = max_bad_fraction
    self.read_block = max(1, int(read_block))
    self.flag_name = flag_name
    self.stats = collections.Counter()
    self.disk_bytes_done = 0
    self._path = None
    self._is_gzip = False
    self._file_size = 0
    self._file_text_bytes = 0
    self._file_yielded_bytes = 0
    self._file_bad_bytes = 0
    self._splitting = False  # the current line has been cut already

  def read_lines(self, path):
    """Yields the lines of one file as bytes, each with its b"\\n" (the last may lack it).

    Args:
      path: a text file (plain or gzip), any tf.io.gfile path.

    Yields:
      bytes, one line (or one piece of an over-long line) at a time.
    """
    self._path = path
    self._file_size = tf.io.gfile.stat(path).length
    self._file_text_bytes = self._file_yielded_bytes = self._file_bad_bytes = 0
    self._splitting = False
    disk_start = self.disk_bytes_done
    with tf.io.gfile.GFile(path, "rb") as disk:
      self._is_gzip = disk.read(len(_GZIP_MAGIC)) == _GZIP_MAGIC
      disk.seek(0)
      f = gzip.GzipFile(fileobj=disk, mode="rb") if self._is_gzip else disk
      tail = b""
      while True:
        try:
          block = f.read(self.read_block)
        except (OSError, EOFError, zlib.error) as e:
          common.fail("--%s: %s: not a readable gzip file (%s)" % (self.flag_name, path, e))
        self._file_text_bytes += len(block)
        self.disk_bytes_done = disk_start + (disk.tell() if self._is_gzip
                                             else self._file_text_bytes)
        buf = tail + block if tail else block
        # At the end of the file everything left is one last line (maybe without "\n").
        cut = buf.rfind(b"\n") + 1 if block else len(buf)
        complete, tail = buf[:cut], buf[cut:]
        if complete:
          for line in self._lines(complete):
            self._file_yielded_bytes += len(line)
            yield line
        if not block:
          break
        if len(tail) > self.max_line_chars:
          # A line still without its end: cut it now, so that memory stays flat.
          pieces, tail = _cut_long_line(tail, self.max_line_chars)
          if pieces:
            if not self._splitting:
              self.stats["long_lines_split"] += 1
            self._splitting = True
            self.stats["long_line_pieces"] += len(pieces)
            for piece in pieces:
              piece = self._checked(piece) + b"\n"
              self._file_yielded_bytes += len(piece)
              yield piece
        self._check_bad_share(at_end=False)
    self.disk_bytes_done = disk_start + self._file_size
    self.stats["text_bytes"] += self._file_text_bytes
    self._check_bad_share(at_end=True)

  def read_files(self, paths):
    """Yields the lines of each file in turn (see read_lines)."""
    for path in paths:
      for line in self.read_lines(path):
        yield line

  def check_partial(self):
    """Applies the undecodable-bytes limit to the lines of the current file yielded so far.

    For callers that stop reading before the end of a file (build_vocab --max_input_bytes).
    """
    if self._path is not None:
      self._check_bad_share(at_end=True, partial=True)

  def _lines(self, complete):
    """Splits whole lines (bytes ending in "\\n", except at the end of a file) and checks them."""
    # Fast path: valid UTF-8 (the usual case) needs no per-line decoding.
    try:
      complete.decode("utf-8")
      clean = True
    except UnicodeDecodeError:
      clean = False
    lines = complete.split(b"\n")
    last = lines.pop()  # b"" when `complete` ends with "\n"
    if last:
      lines.append(last)
    num_terminated = len(lines) - (1 if last else 0)
    limit = self.max_line_chars
    for i, line in enumerate(lines):
      end = b"\n" if i < num_terminated else b""
      if len(line) > limit or self._splitting:
        pieces, line = _cut_long_line(line, limit)
        if pieces or self._splitting:
          if not self._splitting:
            self.stats["long_lines_split"] += 1
          self.stats["long_line_pieces"] += len(pieces) + 1
          self._splitting = False
          for piece in pieces:
            yield (piece if clean else self._checked(piece)) + b"\n"
      yield (line if clean else self._checked(line)) + end

  def _checked(self, line):
    """Counts the undecodable bytes of one line; returns the line unchanged."""
    try:
      line.decode("utf-8")
    except UnicodeDecodeError:
      # Valid sequences re-encode to themselves, so what "ignore" dropped is the bad bytes.
      bad = len(line) - len(line.decode("utf-8", "ignore").encode("utf-8"))
      self._file_bad_bytes += bad
      self.stats["undecodable_bytes"] += bad
      self.stats["lines_with_undecodable_bytes"] += 1
    return line

  def _check_bad_share(self, at_end, partial=False):
    """Fails (one line naming the file and the share) when too much of it is undecodable.

    Args:
      at_end: the whole file (or all that will be read of it) has been read.
      partial: the reading stopped early: the share is that of the lines yielded.
    """
    bad = self._file_bad_bytes
    done = self._file_yielded_bytes if partial else self._file_text_bytes
    if not bad:
      return
    limit = self.max_bad_fraction
    if at_end:
      over = bad > limit * done
      what = "%.1f%% of %s %d bytes%s (%d)" % (100.0 * bad / done, "the" if partial else "its",
                                               done, " read" if partial else "", bad)
    elif not self._is_gzip:
      # The size is known: the final share is at least bad / size (exact at the end: wait).
      over = bad > limit * self._file_size and done < self._file_size
      what = "at least %.1f%% of its %d bytes (%d so far)" % (100.0 * bad / self._file_size,
                                                              self._file_size, bad)
    else:
      over = done >= _GZIP_EARLY_CHECK_BYTES and bad > _GZIP_EARLY_BAD_SHARE * done
      what = "%.1f%% of its first %d bytes (%d)" % (100.0 * bad / done, done, bad)
    if over:
      common.fail("--%s: %s: %s are not UTF-8 text, over --max_bad_fraction=%g; a binary or "
                  "compressed file? (gzip is decompressed)" % (self.flag_name, self._path, what,
                                                               limit))


def _cut_long_line(line, max_chars):
  """Cuts pieces of at most max_chars characters off the front of one line.

  Args:
    line: bytes without "\\n" (UTF-8; characters are counted by their lead bytes).
    max_chars: int >= 1.

  Returns:
    (pieces, rest): the list of pieces cut, each of at most max_chars characters (the space or
    tab a piece was cut at is dropped), and the rest of the line, at most max_chars characters.
  """
  if len(line) <= max_chars:  # bytes >= characters
    return [], line
  # Byte offsets at which the characters start (UTF-8 continuation bytes are 10xxxxxx).
  starts = np.flatnonzero((np.frombuffer(line, np.uint8) & 0xC0) != 0x80)
  pieces = []
  pos = 0  # byte offset of the rest
  first = 0  # index in `starts` of the rest's first character
  while len(starts) - first > max_chars:
    end = int(starts[first + max_chars])  # the rest[:end] holds max_chars characters
    space = max(line.rfind(c, pos, end + 1) for c in _CUT_BYTES)
    if space > pos:
      pieces.append(line[pos:space])
      pos = space + 1
      first = int(np.searchsorted(starts, pos))
    else:
      pieces.append(line[pos:end])
      pos = end
      first += max_chars
  return pieces, line[pos:]


def define_input_flags():
  """Defines the flags of the shared text reader (TextReader); build_vocab.py uses them too."""
  flags.DEFINE_float(
      "max_bad_fraction", DEFAULT_MAX_BAD_FRACTION,
      "Fail when more than this share of an input file's bytes is not UTF-8 (a binary or "
      "compressed file); below it, bad bytes are replaced and counted. gzip files are read "
      "decompressed.")
  flags.DEFINE_integer(
      "max_line_chars", DEFAULT_MAX_LINE_CHARS,
      "Lines longer than this many characters are cut at whitespace into pieces of at most "
      "this length (counted in the summary), so that memory stays flat.")


def validate_input_flags(max_bad_fraction, max_line_chars):
  """Checks the values of the flags of define_input_flags; fails with a one-line error.

  Args:
    max_bad_fraction: float, --max_bad_fraction.
    max_line_chars: int, --max_line_chars.
  """
  if not 0.0 <= max_bad_fraction <= 1.0:
    common.fail("--max_bad_fraction=%g: must be in [0, 1]" % max_bad_fraction)
  if max_line_chars < 1:
    common.fail("--max_line_chars=%d: must be >= 1" % max_line_chars)


# ---------------------------------------------------------------------------------------------
# Inputs that must not be read as text, outputs that must not replace inputs.
# ---------------------------------------------------------------------------------------------

# The summary written beside the TFRecords: NAME.summary.json for --output_file=NAME.EXT (see
# summary_path_for; never matched by the glob `<output_file>*`).
SUMMARY_SUFFIX = ".summary.json"
# Keys by which a JSON file is recognised as one of our summaries.
_SUMMARY_MARKER_KEYS = ("instances", "input_files", "output_files", "settings")
_MAX_SUMMARY_SNIFF_BYTES = 1 << 24


def _crc32c_table():
  table = []
  for i in range(256):
    crc = i
    for _ in range(8):
      crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    table.append(crc)
  return table


_CRC32C_TABLE = _crc32c_table()


def _masked_crc32c(data):
  """The masked CRC-32C that TFRecord framing stores after each length."""
  crc = 0xFFFFFFFF
  for byte in bytearray(data):
    crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def non_text_kind(path):
  """Recognises the files this project writes that are not a text corpus.

  Args:
    path: an input file.

  Returns:
    None for text, or a description: a TFRecord file (its first record's length has a valid
    CRC, which text hits with probability 2**-32), one of our summary JSON files, a BERT vocab.
  """
  with tf.io.gfile.GFile(path, "rb") as f:
    head = f.read(1 << 16)
  if len(head) >= 12 and struct.unpack("<I", head[8:12])[0] == _masked_crc32c(head[:8]):
    return "a TFRecord file (written by create_pretraining_data.py?)"
  if head.lstrip()[:1] == b"{" and tf.io.gfile.stat(path).length <= _MAX_SUMMARY_SNIFF_BYTES:
    try:
      with tf.io.gfile.GFile(path, "rb") as f:
        obj = json.loads(f.read().decode("utf-8"))
    except ValueError:  # not JSON (UnicodeDecodeError is a ValueError too)
      obj = None
    if isinstance(obj, dict) and all(k in obj for k in _SUMMARY_MARKER_KEYS):
      return "a summary JSON written by create_pretraining_data.py"
  lines = head.split(b"\n")[:2000]
  if lines and lines[0].strip() == b"[PAD]" and all(
      token in (l.strip() for l in lines) for token in (b"[UNK]", b"[CLS]", b"[SEP]", b"[MASK]")):
    return "a BERT vocab file"
  return None


def check_text_inputs(input_files, flag_name="input_file"):
  """Fails with one line naming the first input that is not text (see non_text_kind).

  A glob like `out/*` picks up earlier outputs (TFRecord shards, summaries, vocabs); read as
  text they become garbage training data without any error.

  Args:
    input_files: the expanded input files.
    flag_name: the flag that named them.
  """
  for path in input_files:
    kind = non_text_kind(path)
    if kind:
      common.fail("--%s: %s is %s, not text; leave it out of --%s" % (flag_name, path, kind,
                                                                      flag_name))


def _split_path(path):
  if "://" in path:
    scheme, rest = path.split("://", 1)
    return [scheme + "://"] + [p for p in rest.split("/") if p]
  return os.path.abspath(path).split(os.sep)


def matches_pattern(path, pattern):
  """Whether `path` is matched by the file glob `pattern` (also before the file exists).

  Args:
    path: a file name.
    pattern: a glob as tf.io.gfile.glob takes it ("*" does not cross "/").

  Returns:
    bool.
  """
  parts, pattern_parts = _split_path(path), _split_path(pattern)
  return len(parts) == len(pattern_parts) and all(
      fnmatch.fnmatchcase(p, q) for p, q in zip(parts, pattern_parts))


def check_outputs_not_inputs(output_files, input_patterns, input_files, other_inputs=(),
                             flag_name="output_file", input_flag="input_file"):
  """Fails with one line if an output would replace an input or be read back as one later.

  Args:
    output_files: every file the tool writes.
    input_patterns: the --input_file value (comma-separated names and globs).
    input_files: the expanded input files.
    other_inputs: more files the tool reads (vocab, SentencePiece model).
    flag_name: the flag that named the outputs.
    input_flag: the flag that named the inputs.
  """
  for output in output_files:
    common.check_output_path(output, flag_name)
    common.check_not_input(output, list(input_files) + [p for p in other_inputs if p],
                           flag_name)
    for pattern in input_patterns.split(","):
      pattern = pattern.strip()
      if pattern and matches_pattern(output, pattern):
        common.fail("--%s=%s: matches --%s=%s, so it would replace an input or be read back "
                    "as text by a rerun; write it elsewhere" % (flag_name, output, input_flag,
                                                               pattern))


def summary_path_for(output_file):
  """The summary JSON written beside the TFRecords of --output_file.

  `out/x.tfrecord` -> `out/x.summary.json`: the usual `--input_file=out/x.tfrecord*` of the
  training script never matches it. When the extension-less name would still start with an
  output's name (`out/x` -> `out/x.summary.json`), `out/summary-x.json` is used instead.

  Args:
    output_file: the --output_file value (comma-separated names allowed; the first names it).

  Returns:
    The summary path: no output name (before sharding) is a prefix of it.
  """
  names = [name.strip() for name in output_file.split(",") if name.strip()]
  if not names:
    common.fail("--output_file is empty")
  directory, base = os.path.split(names[0])
  stem, ext = os.path.splitext(base)
  candidates = [stem + SUMMARY_SUFFIX] if stem and ext else []
  # Two prefixes that differ in their first character: one of them never starts with `base`.
  candidates += ["summary-%s.json" % base, "_summary-%s.json" % base]
  normalized = [os.path.normpath(name) for name in names]
  for candidate in candidates:
    path = os.path.join(directory, candidate)
    if not any(os.path.normpath(path).startswith(name) for name in normalized):
      return path
  common.fail("--output_file=%s: found no summary name that the glob of an output name does "
              "not match; use other output names" % output_file)
