# coding=utf-8
"""ETC (Extended Transformer Construction) with RealFormer residual attention.

A fork-style extension of the official google-research `etcmodel/` code: `etc_modeling` (the
model, official config keys and checkpoint names, plus `residual_attention`) and `etc_inputs`
(the side inputs: global-local attention masks and relative attention ids). Run its tools from
the repository root as `python -m etc_model.TOOL`.
"""
