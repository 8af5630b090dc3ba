"""RealFormer: residual-attention BERT in TensorFlow (a fork-style extension of google-research/bert)."""

import setuptools

with open("requirements.txt") as f:
  # Runtime pins only; pytest and matplotlib are for tests and plots.
  REQUIREMENTS = [line.strip() for line in f
                  if line.strip() and not line.startswith("#")
                  and not line.startswith(("pytest", "matplotlib"))]

setuptools.setup(
    name="realformer-tf",
    version="0.1.0",
    description="BERT with RealFormer residual attention (none | sum | mean), Post-LN or Pre-LN, "
                "in TensorFlow 2.15 tf.compat.v1 with TPUEstimator.",
    python_requires=">=3.9,<3.12",
    # Every top-level module the README documents (tests/test_repo.py checks none is missing).
    py_modules=[
        "modeling", "tokenization", "optimization", "squad_evaluate", "create_pretraining_data", "run_pretraining", "run_classifier", "run_squad", "run_ner",
        "extract_features", "predict_masked", "export_hub", "slim_checkpoint", "build_vocab",
        "convert_hf_checkpoint", "analyze_attention", "run_demo",
        "average_checkpoints", ],
    # Model families in their own folders (run as `python -m etc_model.TOOL`).
    packages=["realformer_tf", "etc_model", "translation"],
    install_requires=REQUIREMENTS,
    extras_require={"test": ["pytest==8.3.3"], "plots": ["matplotlib==3.9.2"]},
    license="Apache-2.0",
)
