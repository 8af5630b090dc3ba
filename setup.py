"""RealFormer: residual-attention BERT in TensorFlow (a fork-style extension of google-research/bert)."""

import setuptools

# What only the tests (pytest and its worker processes) and the plots need.
NOT_AT_RUN_TIME = ("pytest", "execnet", "matplotlib")

with open("requirements.txt") as f:
  REQUIREMENTS = [line.strip() for line in f
                  if line.strip() and not line.startswith("#")
                  and not line.startswith(NOT_AT_RUN_TIME)]

setuptools.setup(
    name="realformer-tf",
    version="0.1.0",
    description="BERT with RealFormer residual attention (none | sum | mean), Post-LN or Pre-LN, "
                "in TensorFlow 2.15 tf.compat.v1 with TPUEstimator.",
    python_requires=">=3.9,<3.12",
    # Every top-level module: the commands and the official library (tests/test_repo.py checks none is missing).
    py_modules=[
        "modeling", "tokenization", "optimization", "squad_evaluate", "create_pretraining_data", "run_pretraining", "run_classifier", "run_squad", "run_ner",
        "extract_features", "predict_masked", "export_hub", "slim_checkpoint", "build_vocab",
        "convert_hf_checkpoint", "analyze_attention", "run_demo",
        "average_checkpoints", ],
    # Model families in their own folders (run as `python -m etc_model.TOOL`). The model configs
    # are installed as realformer_tf/configs, where `--bert_config_file=configs/NAME.json` finds
    # them from any working directory (model_config.shipped_config_path).
    packages=["realformer_tf", "realformer_tf.configs", "etc_model", "translation"],
    package_dir={"realformer_tf.configs": "configs"},
    package_data={"realformer_tf.configs": ["*.json"]},
    install_requires=REQUIREMENTS,
    extras_require={"test": ["pytest==8.3.3", "pytest-xdist==3.6.1"],
                    "plots": ["matplotlib==3.9.2"]},
    license="Apache-2.0",
)
