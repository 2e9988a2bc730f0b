"""The original's public names tilepipe does not provide, each with why (the surface itself:
python/tests/data/tilelang_surface.txt). `T.NAME`, `T.tile.NAME` and `tilelang.NAME` of
these resolve to a stub (tilelang._core.Unsupported) whose use is the error
`not supported: NAME (why)` at the user's line; a name of neither list is an unknown name.
The table in docs/python.md is generated from this and the modules
(python/tools/surface_table.py)."""

import re

_GPU = "a GPU construct: threads, warps, TMA, mbarriers, tensor cores; Ascend cores have none"
_HOST = "a TVM runtime / host intrinsic; tilepipe builds the kernel body only"
_TIR = ("a TVMScript TIR construct below the tile level; tilepipe's IR has no TIR nodes "
        "; write tile ops, Python control flow and T.Parallel element code")
_MATH = ("an element function the T.Parallel lowering has no tile op for; it has exp, log, "
         "abs, sqrt, rsqrt, relu, min, max")
_DTYPE = "a dtype A2/A3 vector and cube units do not compute in"
_VIEW = "a buffer view; an IR region names one buffer: copy the data instead"
_TILE_HELPER = "a helper of the original's T.tile module, not an op"
_EXPERIMENT = ("an AscendC-level *_experiment call with mask / stride / parameter-struct "
               "operands; use the tile op without _experiment")

# The multi-device names: their error is a DeviceCountError (the runner's rank handling).
DEVICES = "memory of other NPUs"

_BY_REASON = {
    DEVICES: "shmem_get_nbi shmem_put_nbi shmem_ub_get_nbi shmem_ub_put_nbi",
    _GPU: """ptx_arrive_barrier ptx_arrive_barrier_expect_tx ptx_commit_group ptx_cp_async
        ptx_cp_async_barrier ptx_cp_async_bulk ptx_init_barrier_thread_count ptx_ldmatrix
        ptx_mma ptx_mma_sp ptx_wait_barrier ptx_wait_group tvm_warp_activemask tvm_warp_shuffle
        tvm_warp_shuffle_down tvm_warp_shuffle_up tvm_mma_sync tvm_bmma_sync
        tvm_load_matrix_sync tvm_store_matrix_sync tvm_fill_fragment tvm_mfma tvm_mfma_store
        tvm_rdna_wmma tvm_rdna_wmma_store tvm_storage_sync tvm_thread_allreduce shfl_xor
        shfl_down shfl_up sync_threads sync_thread_partial sync_global mbarrier_arrive
        mbarrier_expect_tx mbarrier_wait_parity create_list_of_mbarrier get_mbarrier
        create_tma_descriptor tma_load tma_store_arrive tma_store_wait fence_proxy_async
        set_max_nreg inc_max_nreg dec_max_nreg no_set_max_nreg wait_wgmma barrier_arrive
        barrier_wait create_barriers ws get_thread_binding get_thread_bindings
        get_block_binding get_block_bindings get_block_extents launch_thread env_thread
        thread_binding mma_store mma_fill dp4a atomic_addx2 atomic_addx4
        vscale tilelang.register_cuda_postproc tilelang.register_hip_postproc""",
    _HOST: """call_packed call_cpacked call_packed_lowered call_cpacked_lowered tvm_call_packed
        tvm_call_cpacked tvm_call_packed_lowered tvm_call_cpacked_lowered tvm_stack_alloca
        tvm_stack_make_array tvm_stack_make_shape tvm_struct_get tvm_struct_set tvm_tuple
        tvm_throw_last_error tvm_check_return tvm_access_ptr tvm_thread_invariant address_of
        isnullptr lookup_param TVMBackendAllocWorkspace TVMBackendFreeWorkspace anylist_getitem
        anylist_resetitem anylist_setitem_call_cpacked anylist_setitem_call_packed
        start_profile_intrinsic end_profile_intrinsic ret handle_add_byte_offset
        llvm_lookup_intrinsic_id call_llvm_intrin call_llvm_pure_intrin call_extern
        call_intrin call_pure_extern import_source mem_info_local_var tvm tilelang.lower""",
    _TIR: """Add Sub Mul Div Mod FloorDiv FloorMod EQ NE LT LE GT GE BufferLoad ProducerLoad Ramp
        Broadcast Shuffle Call CallEffectKind Let LetStmt IterVar CommReducer Range Reduce
        SizeVar StringImm FloatImm type_annotation meta_var block init where reads
        writes block_attr alloc_buffer match_buffer buffer buffer_decl decl_buffer allocate
        allocate_const realize buffer_store buffer_var arg func_name func_ret axis iter_var
        comm_reducer index_map target var ptr Ptr let attr Assert While evaluate ramp broadcast
        handle void assume undef likely has_let_value get_let_value make_tensor
        KernelLaunchFrame SharedBuffer LocalBuffer FragmentBuffer vectorlow vectorhigh
        vectorcombine""",
    _MATH: """acos acosh asin asinh atan atan2 atanh ceil clz copysign cosh erf exp2 exp10 floor
        fmod hypot isfinite isinf isnan ldexp log1p log2 log10 nearbyint nextafter popcount
        q_multiply_shift q_multiply_shift_per_axis round sinh tan tanh trunc fabs sigmoid
        shift_left shift_right bitwise_and bitwise_or bitwise_xor bitwise_not sin cos pow""",
    _DTYPE: """float64 tfloat32 float8_e3m4 float8_e4m3 float8_e4m3b11fnuz float8_e4m3fn
        float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu float6_e2m3fn
        float6_e3m2fn float4_e2m1fn float4_e2m1fn_unpacked e4m3_float8 e5m2_float8""",
    _VIEW: "reshape view",
    "the NPU-IR backend's API (the original's npuir branch, target 'npuir'); tilepipe models "
    "the AscendC backend: use the T.tile ops": """npuir_add npuir_sub npuir_mul npuir_div
        npuir_max npuir_min npuir_or npuir_and npuir_xor npuir_pow npuir_shl npuir_shr
        npuir_exp npuir_relu npuir_sigmoid npuir_ln npuir_sqrt npuir_rsqrt npuir_abs npuir_rec
        npuir_not npuir_exp2 npuir_log2 npuir_select npuir_cmp npuir_dot npuir_load_nd2nz
        npuir_store_nz2nd npuir_store_fixpipe npuir_brc npuir_fill npuir_clear npuir_cast
        npuir_reduce npuir_cumsum npuir_clamp npuir_atomic_add npuir_atomic_addx4 npuir_gather
        npuir_interleave npuir_deinterleave npuir_transpose npuir_arange npuir_concat npuir_pad
        npuir_flip npuir_bitcast npuir_vcos npuir_vsin npuir_verf npuir_vtanh npuir_print
        npuir_reshape block_barrier subblock_barrier sync_block_set sync_block_wait""",
    "raw AscendC / TIR source text has no model": "customized_code",
    "an L2 prefetch hint; the simulator has no data cache": "prefetch",
    "a reduction of a bool buffer into a condition has no model": "any_of all_of",
    "a scalar bit cast; tilepipe's is T.reinterpretcast of a UB buffer": "reinterpret",
    _TILE_HELPER: "tile.binary_op tile.unary_op tile.scalar_op tile.deprecated",
    _EXPERIMENT: """tile.fill_experiment tile.gathermask_experiment
        tile.reduce_sum_mask_experiment tile.sum_experiment""",
    "AscendC's ReduceSum of a count of elements into one; use T.reduce_sum over the tile":
        "tile.reduce_sum_experiment",
    "the simulator has no data cache to clean or invalidate":
        "tile.datacachecleanandinvalid_experiment",
    "the original's own brcb is not implemented: its codegen has no lowering; use "
    "T.tile.brcb_experiment": "tile.brcb",
    "no model in tilepipe's IR: the sort-buffer initialisation of the region-proposal sort":
        "tile.init_sort_buf",
    "no model in tilepipe's IR: a gather with interpolation weights":
        "tile.bilinear_interpolation",
    "no scan op in tilepipe's IR": "cumsum",
    "no erf / tanh op in tilepipe's IR; the library composes them on the vector unit":
        "tile.erf tile.tanh",
    "the GPU dialect's |x| reductions, which the original's Ascend lowering has not "
    "either; reduce a T.tile.abs of the tile":
        "reduce_absmax reduce_abssum",
    "no im2col load in tilepipe's IR": "c2d_im2col",
    "the element atomic of the GPU dialect; use T.tile.atomic_add(dst, src) on tiles":
        "atomic_add",
    "tilepipe's IR loops have no run-time exit": "loop_break",
    "padding of out-of-bounds GM reads has no model; copy with pad_value instead":
        "annotate_padding",
    "fragment layouts are the GPU dialect's; tilepipe models no layout objects":
        "Layout Fragment tilelang.Layout tilelang.Fragment",
    "tilepipe compiles in memory; it has no compiled-kernel store to look up": "tilelang.cached",
    "the original's TVM passes are C++ passes of tilepipe; see tilepipe --print-after":
        "tilelang.transform",
    "a utility of the original's package, not the language":
        "tilelang.deprecated tilelang.TensorSupplyType",
}

UNSUPPORTED = {name: why for why, names in _BY_REASON.items() for name in names.split()}

_LANES = re.compile(r"^(u?int\d+|float\d+\w*|bfloat16|tfloat32)x\d+$")


def why_not(name):
    """Why `name` is not supported ("copy" for T.copy, "tile.foo" for T.tile.foo,
    "tilelang.bar"), or None when it is no name of the original's surface."""
    if name in UNSUPPORTED:
        return UNSUPPORTED[name]
    if _LANES.match(name):
        return "a vector-lane dtype; tile kernels compute on tiles of scalar dtypes"
    return None
