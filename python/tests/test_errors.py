"""The extension's one mapping of tilepipe's errors to Python exceptions (python/ext/errors.cc,
docs/errors.md): a user error is a TilepipeError with its diagnostics, an input error one
diagnostic whose kind is its category, a run's check finding a KernelCheckError (test_checks_
default.py), bad pass options a TilepipeError of kind pass-option."""

import pytest

import tilelang  # noqa: F401  (registers the Python error types with the extension)
import _tilepipe as ext
from tilelang import TilepipeError


def empty_program():
    return ext.Builder("empty", 1, ("k.py", 3)).finish()


def test_an_unknown_chip_is_a_tilepipe_error_of_kind_config():
    with pytest.raises(TilepipeError) as e:
        ext.compile(empty_program(), "a9", {})
    assert e.value.kinds == ["config"]
    assert "unknown chip 'a9'" in str(e.value)
    assert not str(e.value).startswith("tilepipe: ")  # the CLI's prefix is the CLI's


def test_pass_options_go_through_the_passes_table():
    with pytest.raises(TilepipeError) as e:
        ext.compile(empty_program(), "a3", {"auto_snyc": True})
    assert e.value.kinds == ["pass-option"]
    assert "auto_sync" in e.value.hint  # the options are listed
    with pytest.raises(TilepipeError) as e:
        ext.compile(empty_program(), "a3", {"max_rotation": 9})
    assert e.value.kinds == ["pass-option"]
    assert ext.compile(empty_program(), "a3", {"max_rotation": 2, "auto_sync": False})


def test_a_builder_error_is_located_at_the_call():
    b = ext.Builder("k", 1, ("k.py", 3))
    with pytest.raises(TilepipeError) as e:
        b.end_scope(("k.py", 9, 4))  # no scope is open
    assert e.value.kinds == ["build"]
    assert e.value.loc == ("k.py", 9)
    assert str(e.value).startswith("k.py:9:4: error: ")
