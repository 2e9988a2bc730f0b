"""`python3 -m tilepipe FILE.py [args]`: runs a TileLang-Ascend script on tilepipe (see
tilepipe/runner.py)."""
