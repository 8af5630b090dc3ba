# coding=utf-8
"""Translation metrics: sacreBLEU BLEU and chrF, and the tokenised compound-split BLEU of papers.

score_translations(hypotheses, references, target_language) returns three corpus scores:

- "bleu": sacreBLEU on detokenised text (what a SentencePiece model decodes to) with its
  standard 13a tokenizer, exponential smoothing, mixed case; "bleu_signature" is the standard
  signature string (`nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`). This is the
  comparable, reproducible number (Post 2018).
- "chrf": sacreBLEU chrF2 (character 6-grams, beta 2), with "chrf_signature".
- "tokenized_compound_split_bleu": the number most NMT papers report for WMT En-De (GNMT,
  ConvS2S, the Transformer, fairseq, ADMIN), after tensor2tensor's get_ende_bleu.sh (fairseq's
  compound_split_bleu.sh applies the same split to output that is Moses-tokenised already):
  hypothesis and reference go through Moses' replace-unicode-punctuation and tokenizer
  (sacremoses, the Python port, -l <target_language>, default escaping, no aggressive dash
  splitting), every hyphen between two non-spaces is split
  off as `##AT##-##AT##` (perl `s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g`), and multi-bleu.perl
  scores the tokens (sacreBLEU with tokenize="none" and no smoothing: the same formula). It is
  NOT comparable to sacreBLEU: it is usually higher (the split hyphens are easy matches), and it
  is labelled by "tokenized_compound_split_bleu_signature" and "..._note".

write_bleu_json(path, scores) writes the dict as indented JSON, atomically.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import re

from realformer_tf import common

# perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g' (non-overlapping, left to right, as in perl).
_COMPOUND = re.compile(r"(\S)-(\S)")
TOKENIZED_BLEU_NOTE = (
    "Moses-tokenised (sacremoses: replace-unicode-punctuation, tokenizer -l %s), compounds split "
    "with ##AT##-##AT##, multi-bleu.perl-equivalent BLEU (sacreBLEU tokenize=none, no "
    "smoothing): the tensor2tensor/fairseq/ADMIN get_ende_bleu.sh number of the NMT literature; "
    "not comparable to sacreBLEU")


def split_compounds(text):
  """Splits hyphenated compounds as get_ende_bleu.sh does: `a-b` -> `a ##AT##-##AT## b`.

  Args:
    text: a (Moses-tokenised) sentence.

  Returns:
    The sentence with each non-overlapping `X-Y` (X, Y non-space) split; as in perl, in
    `a-b-c` the second hyphen is not split (its left character is taken by the first match).
  """
  return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", text)


class MosesProcessor(object):
  """Moses replace-unicode-punctuation + tokenizer -l LANG (sacremoses), then split_compounds."""

  def __init__(self, language):
    import sacremoses  # pylint: disable=g-import-not-at-top
    self.language = language
    self._normalizer = sacremoses.MosesPunctNormalizer(lang=language)
    self._tokenizer = sacremoses.MosesTokenizer(lang=language)

  def tokenize(self, text):
    """The Moses tokens of `text` joined by spaces (escaped like tokenizer.perl's default)."""
    text = self._normalizer.replace_unicode_punct(text)
    return self._tokenizer.tokenize(text, return_str=True, escape=True,
                                    aggressive_dash_splits=False)

  def __call__(self, text):
    return split_compounds(self.tokenize(text))


def _check_inputs(hypotheses, references):
  hypotheses = [h.rstrip("\r\n") for h in hypotheses]
  references = [r.rstrip("\r\n") for r in references]
  if len(hypotheses) != len(references):
    raise ValueError("%d hypotheses but %d references: they must be line-aligned" %
                     (len(hypotheses), len(references)))
  if not hypotheses:
    raise ValueError("no hypotheses to score")
  return hypotheses, references


def _bleu_details(score):
  return {"precisions": [float(p) for p in score.precisions], "brevity_penalty": float(score.bp),
          "sys_len": int(score.sys_len), "ref_len": int(score.ref_len)}


def sacrebleu_scores(hypotheses, references):
  """sacreBLEU BLEU (13a, detokenised) and chrF2 of a corpus.

  Args:
    hypotheses: list of str, one detokenised translation per sentence.
    references: list of str, line-aligned with hypotheses.

  Returns:
    dict: "bleu", "bleu_signature", "bleu_details" (n-gram precisions in %, brevity penalty,
    lengths), "chrf", "chrf_signature".
  """
  from sacrebleu.metrics import BLEU, CHRF  # pylint: disable=g-import-not-at-top
  hypotheses, references = _check_inputs(hypotheses, references)
  bleu = BLEU(tokenize="13a")
  bleu_score = bleu.corpus_score(hypotheses, [references])
  chrf = CHRF()
  chrf_score = chrf.corpus_score(hypotheses, [references])
  return {"bleu": float(bleu_score.score), "bleu_signature": str(bleu.get_signature()),
          "bleu_details": _bleu_details(bleu_score),
          "chrf": float(chrf_score.score), "chrf_signature": str(chrf.get_signature())}


def tokenized_bleu(hypotheses, references, target_language):
  """The tokenised, compound-split BLEU of the NMT literature (see the module docstring).

  Args:
    hypotheses: list of str, detokenised translations.
    references: list of str, raw (detokenised) references, line-aligned.
    target_language: Moses language code of the target ("de", "en", "fr", ...).

  Returns:
    dict: "tokenized_compound_split_bleu" and "tokenized_compound_split_bleu_signature",
    "..._details" (precisions, brevity penalty, lengths), "..._note" (what it is).
  """
  from sacrebleu.metrics import BLEU  # pylint: disable=g-import-not-at-top
  hypotheses, references = _check_inputs(hypotheses, references)
  process = MosesProcessor(target_language)
  bleu = BLEU(tokenize="none", smooth_method="none")
  score = bleu.corpus_score([process(h) for h in hypotheses],
                            [[process(r) for r in references]])
  signature = "%s|moses-tok:%s|compound-split:atat" % (bleu.get_signature(), target_language)
  key = "tokenized_compound_split_bleu"
  return {key: float(score.score), key + "_signature": signature,
          key + "_details": _bleu_details(score),
          key + "_note": TOKENIZED_BLEU_NOTE % target_language}


def score_translations(hypotheses, references, target_language):
  """All corpus scores of a translated test set.

  Args:
    hypotheses: list of str, the model's detokenised translations, one per sentence.
    references: list of str, the reference translations (raw text), line-aligned.
    target_language: the target language's code ("de", "fr", "en", ...), for Moses.

  Returns:
    dict: "num_sentences", "target_language", sacrebleu_scores(...) ("bleu",
    "bleu_signature", "bleu_details", "chrf", "chrf_signature") and tokenized_bleu(...)
    ("tokenized_compound_split_bleu", its signature, details and note). Raises ValueError
    when the lists differ in length or are empty.
  """
  hypotheses, references = _check_inputs(hypotheses, references)
  scores = {"num_sentences": len(hypotheses), "target_language": target_language}
  scores.update(sacrebleu_scores(hypotheses, references))
  scores.update(tokenized_bleu(hypotheses, references, target_language))
  return scores


def write_bleu_json(path, scores):
  """Writes the scores (score_translations' dict) as indented JSON to `path`, atomically."""
  common.write_json_atomic(path, scores)
