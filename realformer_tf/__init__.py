"""The library the repository's commands are built on (not a command: nothing here runs on its
own). One concept per module; CONTRIBUTING.md maps them. The official google-research/bert
modules (modeling, tokenization, optimization, ...) stay at the repository root."""
