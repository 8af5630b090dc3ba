"""The translation RealFormer (Table 7): an encoder-decoder built from modeling.py's pieces.

Library modules: nmt_modeling (the model), beam_search, decoding (the decoding graph and the
checkpoint checks shared by run_translation and translation_serving), translation_records (the
TFRecord format and the SentencePiece model's ids: load_spm), translation_serving (the raw-text
SavedModel: export), translation_input, translation_metrics. Tools, run from the repository root as `python -m translation.TOOL`:
create_translation_data, run_translation, export_translation, reproduce_table7.
"""
