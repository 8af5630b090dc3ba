# coding=utf-8
"""ETC records: the features ETC's data tools write and its training scripts read, and the
length bounds every ETC data tool checks.

Every ETC record stores the long ([L]) and global ([G]) inputs of
etc_inputs.make_sentence_global_inputs (LONG_FEATURES, GLOBAL_FEATURES; the side inputs are
computed from them in the input pipeline); a pre-training record
(etc_model/create_pretraining_data.py) adds the masked-LM features (PREDICTION_FEATURES;
FEATURE_NAMES: all of them, in the order written), a long-task record
(etc_model/create_long_tasks.py) its task's labels (etc_model/long_tasks.py). Both data tools
bound the lengths alike (check_lengths: G <= L, L <= MAX_LONG_SEQ_LENGTH unless
--allow_long_inputs of define_length_flags, the position table of an absolute-position config).
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

from absl import flags

from realformer_tf import common

# The features of a pre-training record, in the order written.
FEATURE_NAMES = ("token_ids", "sentence_ids", "long_breakpoints", "global_token_ids",
                 "global_breakpoints", "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights")
# The long [L] and global [G] inputs every ETC record stores.
LONG_FEATURES = ("token_ids", "sentence_ids", "long_breakpoints")
GLOBAL_FEATURES = ("global_token_ids", "global_breakpoints")
# The masked-LM features of a pre-training record [max_predictions_per_seq].
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")

# The longest --max_seq_length the ETC data tools take without --allow_long_inputs: 16 times the
# official 4096. ETC's relative positions set no bound of their own, and every record is padded to
# the length, so a mistyped value only makes a job grow until memory runs out.
MAX_LONG_SEQ_LENGTH = 65536


def define_length_flags():
  """Defines --allow_long_inputs (the ETC data tools' flag that lifts MAX_LONG_SEQ_LENGTH)."""
  flags.DEFINE_bool("allow_long_inputs", False,
                    "Allow --max_seq_length over %d (every record is padded to it: the job's "
                    "memory and time grow with it)." % MAX_LONG_SEQ_LENGTH)


def check_lengths(max_seq_length, max_global_seq_length, allow_long_inputs=False,
                  config=None, config_file=None):
  """Fails with one line when the long or global input length is impossible, before any work.

  A global token stands for a sentence of at least one long token, so G <= L. L is at most
  MAX_LONG_SEQ_LENGTH unless allow_long_inputs (ETC's relative positions set no bound; a record
  costs memory and time in proportion to L). With a config of absolute positions, both lengths
  fit its table (max_absolute_position_embeddings).

  Args:
    max_seq_length: --max_seq_length (L).
    max_global_seq_length: --max_global_seq_length (G).
    allow_long_inputs: --allow_long_inputs.
    config: an etc_modeling.EtcConfig, or None.
    config_file: the file it came from, for messages.
  """
  for name, value in (("max_seq_length", max_seq_length),
                      ("max_global_seq_length", max_global_seq_length)):
    if value < 1:
      common.fail("--%s=%d: must be >= 1" % (name, value))
  if max_global_seq_length > max_seq_length:
    common.fail("--max_global_seq_length=%d: must be <= --max_seq_length=%d (every global token "
                "stands for at least one long token)" % (max_global_seq_length, max_seq_length))
  if max_seq_length > MAX_LONG_SEQ_LENGTH and not allow_long_inputs:
    common.fail("--max_seq_length=%d: over %d, where every record padded to it costs memory and "
                "time in proportion; pass --allow_long_inputs if it is meant" %
                (max_seq_length, MAX_LONG_SEQ_LENGTH))
  # (G <= L: the global positions fit the table when the long ones do.)
  table = config.max_absolute_position_embeddings if config is not None else 0
  if table and max_seq_length > table:
    common.fail("--max_seq_length=%d is longer than max_absolute_position_embeddings=%d in %s" %
                (max_seq_length, table, config_file))
