"""The paper's experiments at CPU scale (or any scale with the right flags): the drivers of
Tables 2, 7 and 8 and the fine-tuning sweep, run as `python -m paper.reproduce_table2` etc.
Nothing imports them; README.md beside them says what each reproduces."""
