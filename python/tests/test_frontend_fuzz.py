"""Malformed and odd kernel sources through the front end (issue 45 item 1): each builds, or
stops with a TilelangError located in the kernel's own file -- never an internal error
(an AttributeError / KeyError / TypeError traceback from inside tilelang)."""

import pytest

from tilelang import TilelangError

from conftest import kernel_from_body

K = "with T.Kernel(2, is_npu=True) as (cid, vid):\n"
V = K + "    with T.Scope(\"V\"):\n"


def inside(body, prefix=V, depth=8):
    return prefix + "".join(" " * depth + ln + "\n" for ln in body.strip("\n").split("\n"))


SOURCES = {
    # with forms
    "three_items": K.replace(":\n", ", T.Scope(\"V\"), T.Scope(\"C\"):\n") + "    pass\n",
    "kernel_binds_three": "with T.Kernel(2, is_npu=True) as (a, b, c):\n    pass\n",
    "kernel_binds_attribute": "with T.Kernel(2, is_npu=True) as cid.x:\n    pass\n",
    "nested_kernel": K + "    with T.Kernel(1, is_npu=True) as (c2, v2):\n        pass\n",
    "scope_of_unknown_kind": K + "    with T.Scope(\"X\"):\n        pass\n",
    "scope_bound_to_a_name": K + "    with T.Scope(\"V\") as s:\n        pass\n",
    "python_context": K + "    with open(\"/nonexistent/x\") as f:\n        pass\n",
    "non_context": K + "    with 3:\n        pass\n",
    "if_frame_without_then": K + "    with T.If(cid == 0):\n        pass\n",
    "then_alone": K + "    with T.Then():\n        pass\n",
    # assignment forms
    "unpack_a_run_time_value": inside("a, b = cid"),
    "unpack_too_few": inside("a, b, c = (1, 2)"),
    "starred_rest": inside("a, *b = (1, 2, 3)\nc = b[1] + a"),
    "starred_only": inside("*a, = (1, 2)"),
    "chained": inside("a = b = c = cid + 1"),
    "augmented_element": inside("u = T.alloc_ub((1, N), \"float32\")\nu[0, 0] += 1"),
    "augmented_attribute": inside("A.x += 1"),
    "annotated_without_value": inside("x: T.int32"),
    "annotated_attribute": inside("A.x: int = 3"),
    "walrus": inside("if (n := N) > 0:\n    pass"),
    "attribute_store": inside("A.shape = (1,)"),
    "gm_element_store": inside("A[0, 0] = 1.0"),
    "subscript_of_a_number": inside("x = 3\nx[0] = 1"),
    # statements the body does not take
    "delete": inside("x = 1\ndel x"),
    "global": inside("global G"),
    "import": inside("import os"),
    "class": inside("class X:\n    pass"),
    "nested_def": inside("def f():\n    pass"),
    "try": inside("try:\n    pass\nexcept Exception:\n    pass"),
    "match": inside("match N:\n    case 64:\n        pass"),
    "yield": inside("yield 1"),
    "raise": inside("raise ValueError(\"mine\")"),
    # loops
    "loop_over_an_int": inside("for i in 5:\n    pass"),
    "loop_tuple_target_serial": inside("for i, j in T.serial(4):\n    pass"),
    "break_in_device_loop": inside("for i in T.serial(4):\n    break"),
    "for_else": inside("for i in T.serial(4):\n    pass\nelse:\n    pass"),
    "endless_build_time_while": inside("while True:\n    pass"),
    "serial_four_args": inside("for i in T.serial(1, 2, 3, 4):\n    pass"),
    "grid_wrong_names": inside("for i in T.grid(2, 2):\n    pass"),
    "parallel_attribute_target": inside("for A.x in T.Parallel(4):\n    pass"),
    # calls and expressions
    "copy_without_arguments": inside("T.copy()"),
    "copy_of_five": inside("T.copy(A, B, A, B, A)"),
    "unknown_dtype": inside("u = T.alloc_ub((8,), \"float99\")"),
    "shape_of_a_string": inside("u = T.alloc_ub(\"abc\", \"float32\")"),
    "tile_add_numbers": inside("T.tile.add(1, 2, 3)"),
    "tile_add_two": inside("u = T.alloc_ub((1, N), \"float32\")\nT.tile.add(u, u)"),
    "undefined_name": inside("foo(1)"),
    "division_by_zero": inside("x = 1 / 0"),
    "ellipsis_index": inside("u = T.alloc_ub((1, N), \"float32\")\nT.copy(A[..., 0], u)"),
    "string_index": inside("u = T.alloc_ub((1, N), \"float32\")\nT.copy(A[\"x\"], u)"),
    "kernel_without_grid": "with T.Kernel() as (cid, vid):\n    pass\n",
    "dict_unpacking": inside("d = {**{1: 2}}"),
    "lambda_call": inside("f = (lambda x: x + 1)(cid)"),
    "unsupported_name_as_loop": inside("for i in T.thread_binding(4, \"x\"):\n    pass"),
    "unsupported_dtype": inside("u = T.alloc_ub((8,), T.float8_e5m2)"),
    "typo_name": inside("T.cpoy(A, B)"),
    "pass_config_typo": inside("x = tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNK"),
    "assert_false": inside("assert N == 3, \"N must be 3\""),
}

# The forms that build (everything else must be a located TilelangError).
BUILD = {"scope_bound_to_a_name", "starred_rest", "starred_only", "chained", "walrus",
         "dict_unpacking", "lambda_call"}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_odd_kernel_sources_build_or_stop_at_their_line(tmp_path, name):
    path, k = kernel_from_body(tmp_path, SOURCES[name], f"fuzz_{name}")
    try:
        k()
    except AssertionError as e:  # the body's own `assert`, as Python raises it
        assert name == "assert_false" and "N must be 3" in str(e)
        return
    except TilelangError as e:
        assert name not in BUILD, f"{name}: {e}"
        assert e.loc is not None and e.loc[0] == path.name, f"{name}: {e} at {e.loc}"
        lines = path.read_text().count("\n")
        assert 9 <= e.loc[1] <= lines, f"{name}: line {e.loc[1]} is outside the body: {e}"
        return
    assert name in BUILD, f"{name} built; expected an error"

