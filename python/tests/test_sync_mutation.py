"""python/tools/sync_mutation.py (docs/cli.md, "Sync mutation over the examples"): on a
hand-synchronised example of the original, every sync op dropped on its own is caught or
redundant, and the report's counts add up to the example's sync ops."""

import json
import os
import sys

import pytest

from conftest import CORPUS, ROOT

sys.path.insert(0, os.path.join(ROOT, "python", "tools"))


def test_every_drop_of_a_hand_synced_example_is_caught_or_redundant(tmp_path):
    if not os.path.isdir(CORPUS):
        pytest.skip(f"the TileLang-Ascend corpus is not at {CORPUS}")
    import sync_mutation

    assert "elementwise/elementwise_add_pipeline.py" in sync_mutation.hand_synced(CORPUS)
    assert "elementwise/elementwise_add.py" not in sync_mutation.hand_synced(CORPUS)
    rc = sync_mutation.main(["--only", "elementwise/elementwise_add_pipeline", "--out",
                             str(tmp_path)])
    rows = json.loads((tmp_path / "sync_mutation.json").read_text())["rows"]
    assert rc == 0 and [r["status"] for r in rows] == ["ok"], rows
    (row,) = rows
    # Its 12 flags: the sets deadlock their waits when dropped, some waits race.
    assert sum(row["counts"].values()) == row["syncs"] > 0
    assert row["counts"]["deadlock"] > 0 and row["counts"]["race"] > 0
    assert row["counts"]["mismatch"] == 0 and row["holes"] == []
    assert "| elementwise/elementwise_add_pipeline.py | ok |" in (
        tmp_path / "sync_mutation.md").read_text()
