"""Editable prompt templates shipped with the package (`*.txt`, read with `Path`, not imported).

- `clr_extract.txt`: CLR claim extraction; placeholders `{problem}`, `{response}`, `{m}`.
- `clr_verify.txt`: CLR claim verification; placeholders `{problem}`, `{claim}`.
Placeholders are filled in one pass (stages/clr.py `fill`), so LaTeX braces in a template or in
the inserted text are left alone. Point `extract_prompt=` / `verify_prompt=` at your own copies.
"""
