# coding=utf-8
"""ETC (Extended Transformer Construction) with RealFormer residual attention.

A fork-style extension of the official google-research `etcmodel/` code: `etc_modeling` (the
model, official config keys and checkpoint names, plus `residual_attention`), `etc_inputs`
(the side inputs: global-local attention masks and relative attention ids) and `etc_records`
(the features of its records and the length bounds of its data tools). Its tools, run from
the repository root as `python -m etc_model.TOOL`: `lift_bert_checkpoint` (BERT -> ETC),
`create_pretraining_data` (long-document MLM records), `run_pretraining`, `create_long_tasks`
(the long-context tasks' records) and `run_long_tasks` (fine-tuning on them).
"""
