// Sparse Flash Attention (DeepSeek-V3.2 sparse MLA decode over a paged KV cache), the
// structure of docs "Sparse Flash Attention" (../shared/docs/kernels.md), with the four
// published versions as switches of one builder:
//
//   baseline        n_base 64, 64 heads per task: each gathered row goes GM -> UB and is
//                   copied straight back out (one round trip per row), -1 rows zero-filled,
//                   per-row scalar softmax loops, K-split gemm_v0 matmuls, serial chunks
//   developer       + rows gathered into one contiguous UB tile and copied out once;
//                   broadcast + tile ops instead of per-row loops
//   pa              + 16 heads per task, axpy, ping-pong UB gather buffers (the next
//                   chunk's MTE2 loads overlap this chunk's MTE3 copy-out), Cube/Vector
//                   pipeline over chunks with two workspace stages
//   no_cv_pipeline  n_base 256 without the C/V pipeline (serial chunks); expert mma: MM1 K=576
//                   in 9 chunks of 64, MM2 K=256 in 8 chunks of 32, double-buffered L0A/L0B
//                   so MTE1 overlaps M; the same gather ping-pong
//
// The original gets sync, the C/V split and `Pipelined(chunks, num_stages=2)` for its first
// three versions from automatic passes; here those four versions keep hand-written flags
// and pipelines (pa: prologue C1(0), then C1(c+1) before C2(c) on the Cube and V0(c+1)
// before V1(c) on the Vector), and the fifth, `auto` (build_auto), is the dataflow alone
// compiled by our passes (docs/passes.md).
//
// Fixed-core launch: 24 blocks, each running tasks cid, cid + 24, ...; a task is one query
// token, one KV head and m_base query heads. Workspaces are sized by the core count.
// Per chunk of n_base sparse indices (V0 -> C1 -> V1 -> C2 -> V2):
//   V0 (each AIV n_base/2 indices): indices -> UB; per index block = block_table[b, i/128],
//      row = i % 128 (scalar loads), copy the KV row (576 wide) GM -> UB, then to ws1 (512)
//      and ws2 (rope 64); the mask bias (0 or -1e30 per index) from the indices
//   C1: S = q kv^T + q_rope rope^T (K = 576) -> ws3
//   V1 (each AIV m_base/2 heads): online softmax of scale * S + bias -> P (bf16) -> ws4
//   C2: O_c = P kv[:, :512] (the gathered tile reused in L1) -> ws5
//   V2: l = alpha l + rowsum(P); acc = alpha acc + O_c; at the end O = acc / l.
// Invalid indices (-1, past the active length / causal bound, past topk) are never read:
// their address uses position 0 of the batch (select), and the bias removes them.
#include <fmt/format.h>

#include <cmath>

#include "registry.h"
#include "tilepipe/lang.h"

namespace tilepipe::kernels {
namespace {

using namespace lang;

const std::vector<std::string> kVariants = {"baseline", "developer", "pa", "no_cv_pipeline"};

std::vector<std::string> all_variants() {
  auto v = kVariants;
  v.push_back("auto");
  return v;
}

struct Knobs {
  bool row_roundtrip;    // gather one row, copy it out, next row (baseline)
  bool per_row_softmax;  // scalar per-row loops instead of broadcast + tile ops
  bool axpy;             // fused scale * S + bias
  bool pingpong;         // two UB gather buffers of 32 rows
  bool pipelined;        // C/V pipeline over chunks, two workspace stages
  bool expert_mma;       // K split 64 / 32 with double-buffered L0
  int64_t n_base, m_base;
};

Knobs knobs(const std::string& v, const Params& p) {
  size_t step = 0;
  while (kVariants[step] != v) ++step;
  Knobs k{};
  k.row_roundtrip = step == 0;
  k.per_row_softmax = step == 0;
  k.axpy = step >= 2;
  k.pingpong = step >= 2;
  k.pipelined = step == 2;
  k.expert_mma = step == 3;
  k.n_base = step == 3 ? 256 : 64;
  k.m_base = step >= 2 ? 16 : 64;
  if (p.at("n_base") > 0) k.n_base = p.at("n_base");
  if (p.at("m_base") > 0) k.m_base = p.at("m_base");
  k.m_base = std::min(k.m_base, p.at("H") / p.at("KV_N"));
  return k;
}

constexpr int64_t kPage = 128, kD = 512, kRope = 64, kDk = kD + kRope;
constexpr int64_t kSub = 32;                  // rows per ping-pong gather buffer
constexpr double kMasked = -1e30;             // bias of an invalid index: exp() of it is 0
constexpr double kNegMaxInit = 1073741824.0;  // minus the running max starts at +2^30

// Cross-core flag ids (mode 2), one counter per hand-off.
constexpr int kKvReady = 0;  // V -> C: gathered rows in ws1 / ws2
constexpr int kSReady = 1;   // C -> V: scores in ws3
constexpr int kPReady = 2;   // V -> C: probabilities in ws4
constexpr int kOReady = 3;   // C -> V: partial O in ws5

// Cube MTE2 <-> MTE1 event ids.
constexpr int kEvQ = 0, kEvKv = 1 /* +slot: 1, 2 */, kEvP = 3;

double scale_of(const Params& p) {
  if (p.at("scale_milli") > 0) return static_cast<double>(p.at("scale_milli")) / 1000.0;
  return 1.0 / std::sqrt(static_cast<double>(kDk));
}

int64_t act_kv(const Params& p) {
  return p.at("act_kv") > 0 ? p.at("act_kv") : std::min<int64_t>(p.at("KV_S"), 2560);
}

/// The kernel's GM tensors, in the order of the reference.
struct SfaTensors {
  Tensor query, query_rope, kv, block_table, sparse, out;
};
SfaTensors sfa_tensors(KernelBuilder& kb, const Params& p) {
  const int64_t B = p.at("B"), T = p.at("T"), H = p.at("H"), KVN = p.at("KV_N");
  const int64_t topk = p.at("topk"), pages = p.at("KV_S") / kPage;
  return {kb.input("query", {T, H, kD}, bf16),
          kb.input("query_rope", {T, H, kRope}, bf16),
          kb.input("kv", {B * pages, kPage, KVN, kDk}, bf16),
          kb.input("block_table", {B, pages}, i32),
          kb.input("sparse_indices", {T, KVN, topk}, i32),
          kb.output("out", {T, H, kD}, bf16)};
}

ir::Program build_auto(const Params& p);

/// The largest chunk (n_base), head group (m_base) and n_base x m_base whose buffers fit
/// L1 / L0 / UB in each variant (what `list` states); larger ones are a ParamError.
struct ChunkLimit {
  const char* variant;
  int64_t n_base, m_base, product;
};
constexpr ChunkLimit kChunkLimits[] = {{"baseline", 64, 64, 64 * 64},
                                       {"developer", 64, 64, 64 * 64},
                                       {"pa", 64, 32, 64 * 32},
                                       {"no_cv_pipeline", 256, 32, 256 * 32},
                                       {"auto", 128, 32, 128 * 16}};

void check_chunk(const std::string& variant, int64_t n, int64_t m) {
  for (const auto& l : kChunkLimits)
    if (variant == l.variant && (n > l.n_base || m > l.m_base || n * m > l.product))
      throw ParamError{fmt::format(
          "kernel 'sfa' [{}]: n_base={} with m_base={} does not fit on chip; this variant "
          "takes n_base <= {}, m_base <= {} and n_base x m_base <= {}",
          variant, n, m, l.n_base, l.m_base, l.product)};
}

ir::Program build(const Params& p, const std::string& variant) {
  if (variant == "auto") return build_auto(p);
  const Knobs kn = knobs(variant, p);
  check_chunk(variant, kn.n_base, kn.m_base);
  const int64_t B = p.at("B"), T = p.at("T"), H = p.at("H"), KVN = p.at("KV_N");
  const int64_t KVS = p.at("KV_S"), topk = p.at("topk"), cores = p.at("block_num");
  const int64_t n = kn.n_base, m = kn.m_base, h = m / 2, half = n / 2;
  const int64_t G = H / KVN, groups = G / m, tasks = T * KVN * groups, per_b = T / B;
  const int64_t pages = KVS / kPage, act = act_kv(p);
  const int64_t chunks = (topk + n - 1) / n, rem = topk - (chunks - 1) * n;
  const int64_t stages = kn.pipelined ? 2 : 1, nkv = kn.pipelined ? 2 : 1;
  const int64_t nl0 = kn.expert_mma ? 2 : 1;
  const bool causal = p.at("causal") != 0;
  const double scale = scale_of(p);

  KernelBuilder kb("sfa", cores);
  auto [query, query_rope, kv, block_table, sparse, out] = sfa_tensors(kb, p);
  auto ws1 = kb.workspace("ws1", {cores, stages, n, kD}, bf16);
  auto ws2 = kb.workspace("ws2", {cores, stages, n, kRope}, bf16);
  auto ws3 = kb.workspace("ws3", {cores, stages, m, n}, f32);
  auto ws4 = kb.workspace("ws4", {cores, stages, m, n}, bf16);
  auto ws5 = kb.workspace("ws5", {cores, stages, m, kD}, f32);
  auto [cid, vid] = kb.launch();

  struct Task {
    Ex tok, head, h0, b, bound;
  };
  auto task = [&](Ex t) {
    Ex tok = t / (KVN * groups), head = (t / groups) % KVN;
    Ex h0 = head * G + (t % groups) * m;
    // Query token tok is position (tok % per_b) of the last per_b of its batch's act tokens.
    Ex bound = causal ? Ex(act - per_b) + tok % per_b : Ex(act - 1);
    return Task{tok, head, h0, tok / per_b, bound};
  };
  // The chunk order of each core kind: serial, or the two-stage pipeline (stage 0 of
  // chunk c + 1 before stage 1 of chunk c).
  auto chunk_loop = [&](const std::function<void(Ex)>& stage0,
                        const std::function<void(Ex)>& stage1) {
    if (!kn.pipelined) {
      serial(chunks, [&](Ex c) {
        stage0(c);
        stage1(c);
      });
      return;
    }
    stage0(0);
    serial(chunks, [&](Ex c) {
      if (chunks > 1) if_(c + 1 < chunks, [&] { stage0(c + 1); });
      stage1(c);
    });
  };

  scope_c([&] {
    auto q_l1 = alloc_L1("q_l1", {m, kD}, bf16);
    auto qr_l1 = alloc_L1("qrope_l1", {m, kRope}, bf16);
    auto kv_l1 = alloc_L1("kv_l1", {nkv, n, kD}, bf16);
    auto rope_l1 = alloc_L1("rope_l1", {nkv, n, kRope}, bf16);
    auto p_l1 = alloc_L1("p_l1", {m, n}, bf16);
    // K chunk of MM1 / MM2: 64 / n with gemm_v0, 64 / 32 with the expert mma.
    const int64_t k2 = kn.expert_mma ? 32 : n, n2 = kn.expert_mma ? kD / 2 : kD;
    auto l0a = alloc_L0A("l0a", {nl0, m, std::max<int64_t>(64, k2)}, bf16);
    auto l0b = alloc_L0B("l0b", {nl0, std::max<int64_t>(64, kD / n2 * k2), std::max(n, n2)}, bf16);
    // Serial versions share one L0C tile for S and O (64 heads x 512 f32 is all of L0C);
    // the pipeline needs both at once.
    auto l0c_o = alloc_L0C("l0c", {m, kD}, f32);
    auto l0c_s = kn.pipelined ? alloc_L0C("l0c_s", {m, n}, f32) : Tensor();
    Tile c_s = kn.pipelined ? Tile(l0c_s) : l0c_o(all, slice(0, n));
    const int id_s = 0, id_o = kn.pipelined ? 1 : 0;

    auto credits = [&](auto flag) {
      flag(Pipe::MTE1, Pipe::MTE2, kEvQ);
      for (int64_t s = 0; s < nkv; ++s) flag(Pipe::MTE1, Pipe::MTE2, kEvKv + s);
      flag(Pipe::MTE1, Pipe::MTE2, kEvP);
      for (int64_t s = 0; s < nl0; ++s) flag(Pipe::M, Pipe::MTE1, s);
      flag(Pipe::FIX, Pipe::M, id_s);
      if (id_o != id_s) flag(Pipe::FIX, Pipe::M, id_o);
    };
    credits([](Pipe a, Pipe b, int64_t id) { set_flag(a, b, id); });

    // One K-split matmul: per K chunk, MTE1 moves the operands into L0 slot k % nl0
    // (with two slots the next chunk's MTE1 overlaps this chunk's mmad), M accumulates into
    // the L0C tile, FIX moves the result to GM.
    auto matmul = [&](int64_t nk, const std::function<void(int64_t, int64_t)>& load,
                      const std::function<void(int64_t, int64_t, bool)>& mmad, Tile l0c, int id,
                      Tile dst) {
      for (int64_t k = 0; k < nk; ++k) {
        int64_t side = k % nl0;
        wait_flag(Pipe::M, Pipe::MTE1, side);
        load(k, side);
        set_flag(Pipe::MTE1, Pipe::M, side);
        wait_flag(Pipe::MTE1, Pipe::M, side);
        if (k == 0) wait_flag(Pipe::FIX, Pipe::M, id);
        mmad(k, side, k == 0);
        set_flag(Pipe::M, Pipe::MTE1, side);
      }
      set_flag(Pipe::M, Pipe::FIX, id);
      wait_flag(Pipe::M, Pipe::FIX, id);
      copy(l0c, dst);
      set_flag(Pipe::FIX, Pipe::M, id);
    };

    serial(cid, tasks, cores, [&](Ex t) {
      Task tk = task(t);
      wait_flag(Pipe::MTE1, Pipe::MTE2, kEvQ);
      copy(query(tk.tok, slice(tk.h0, m), all), q_l1);
      copy(query_rope(tk.tok, slice(tk.h0, m), all), qr_l1);
      set_flag(Pipe::MTE2, Pipe::MTE1, kEvQ);

      auto c1 = [&](Ex c) {  // S = q kv^T + q_rope rope^T
        Ex slot = c % stages, ks = c % nkv;
        wait_cross_flag(kKvReady);
        wait_flag(Pipe::MTE1, Pipe::MTE2, kEvKv + ks);
        copy(ws1(cid, slot), kv_l1[ks]);
        copy(ws2(cid, slot), rope_l1[ks]);
        set_flag(Pipe::MTE2, Pipe::MTE1, kEvKv + ks);
        if_(c == 0, [&] { wait_flag(Pipe::MTE2, Pipe::MTE1, kEvQ); });
        wait_flag(Pipe::MTE2, Pipe::MTE1, kEvKv + ks);
        // K = 576 in 9 chunks of 64: 8 of the 512 query columns, then the rope part.
        matmul(
            kDk / 64,
            [&](int64_t k, int64_t side) {
              bool rope = k == kD / 64;
              copy(rope ? Tile(qr_l1) : q_l1(all, slice(k * 64, 64)), l0a(side, all, slice(0, 64)));
              copy(rope ? Tile(rope_l1[ks]) : kv_l1(ks, all, slice(k * 64, 64)),
                   l0b(side, slice(0, 64), slice(0, n)), CopyOpts{true, std::nullopt});
            },
            [&](int64_t, int64_t side, bool init) {
              mma(l0a(side, all, slice(0, 64)), l0b(side, slice(0, 64), slice(0, n)), c_s, init);
            },
            c_s, id_s, ws3(cid, slot));
        set_cross_flag(Pipe::FIX, kSReady);
      };
      auto c2 = [&](Ex c) {  // O_c = P kv[:, :512]
        Ex slot = c % stages, ks = c % nkv;
        wait_cross_flag(kPReady);
        wait_flag(Pipe::MTE1, Pipe::MTE2, kEvP);
        copy(ws4(cid, slot), p_l1);
        set_flag(Pipe::MTE2, Pipe::MTE1, kEvP);
        wait_flag(Pipe::MTE2, Pipe::MTE1, kEvP);
        // gemm_v0: one mmad [m, n] x [n, 512]; expert: K in chunks of 32, N in two halves
        // (a [32, 512] bf16 tile per L0B slot).
        matmul(
            n / k2,
            [&](int64_t k, int64_t side) {
              copy(p_l1(all, slice(k * k2, k2)), l0a(side, all, slice(0, k2)));
              for (int64_t j = 0; j < kD / n2; ++j)
                copy(kv_l1(ks, slice(k * k2, k2), slice(j * n2, n2)),
                     l0b(side, slice(j * k2, k2), slice(0, n2)));
            },
            [&](int64_t, int64_t side, bool init) {
              for (int64_t j = 0; j < kD / n2; ++j)
                mma(l0a(side, all, slice(0, k2)), l0b(side, slice(j * k2, k2), slice(0, n2)),
                    l0c_o(all, slice(j * n2, n2)), init);
            },
            l0c_o, id_o, ws5(cid, slot));
        set_flag(Pipe::MTE1, Pipe::MTE2, kEvP);
        set_flag(Pipe::MTE1, Pipe::MTE2, kEvKv + ks);
        set_cross_flag(Pipe::FIX, kOReady);
      };
      chunk_loop(c1, c2);
      set_flag(Pipe::MTE1, Pipe::MTE2, kEvQ);
    });
    credits([](Pipe a, Pipe b, int64_t id) { wait_flag(a, b, id); });
  });

  scope_v([&] {
    const int64_t gather_rows = kn.row_roundtrip ? 1 : (kn.pingpong ? kSub : half);
    const int64_t ngather = kn.pingpong ? 2 : 1;
    const int64_t oc = kD / 2;  // O is moved in two column halves (UB budget at 32 heads/AIV)
    auto bt_ub = alloc_ub("bt_ub", {pages}, i32);
    auto idx_ub = alloc_ub("idx_ub", {stages, n}, i32);
    auto bias = alloc_ub("bias", {stages, 1, n}, f32);
    // The original compares f32 (its Compare takes no int32) into a bit mask (one bit per
    // index, as CompareScalar writes it and Select reads it).
    auto idx_f = alloc_ub("idx_f", {n}, f32);
    auto mask = alloc_ub("mask", {n / 8}, u8);
    auto gbuf = alloc_ub("gather", {ngather, gather_rows, kDk}, bf16);
    auto zero_row = kn.row_roundtrip ? alloc_ub("zero_row", {1, kDk}, bf16) : Tensor();
    auto s_in = alloc_ub("s_in", {h, n}, f32);
    auto work = alloc_ub("work", {h, n}, f32);
    auto bc = alloc_ub("bcast", {h, std::max<int64_t>(n, 64)}, f32);
    auto p_bf = alloc_ub("p_bf", {h, n}, bf16);
    auto acc_o = alloc_ub("acc_o", {h, kD}, f32);
    auto stage_o = alloc_ub("stage_o", {h, oc}, f32);
    auto out_bf = alloc_ub("out_bf", {h, oc}, bf16);
    auto neg_m = alloc_ub("neg_m", {2, h, 1}, f32);
    auto sum_i = alloc_ub("sumexp_i", {stages, h, 1}, f32);
    auto alpha = alloc_ub("alpha", {stages, h, 1}, f32);
    auto sumexp = alloc_ub("sumexp", {h, 1}, f32);

    // UB credits (V / MTE3 -> MTE2: the buffer's readers are done; MTE3 -> V likewise).
    constexpr int kEvIdx = 0 /* +slot */, kEvS = 2, kEvO = 3, kEvG = 4 /* +buffer */;
    auto credits = [&](auto flag) {
      for (int64_t s = 0; s < stages; ++s) flag(Pipe::V, Pipe::MTE2, kEvIdx + s);
      flag(Pipe::V, Pipe::MTE2, kEvS);
      flag(Pipe::V, Pipe::MTE2, kEvO);
      for (int64_t g = 0; g < ngather; ++g) flag(Pipe::MTE3, Pipe::MTE2, kEvG + g);
      flag(Pipe::MTE3, Pipe::V, 0);  // p_bf
      flag(Pipe::MTE3, Pipe::V, 1);  // out_bf
    };
    credits([](Pipe a, Pipe b, int64_t id) { set_flag(a, b, id); });
    if (kn.row_roundtrip) {
      tile::fill(zero_row, 0.0);
      set_flag(Pipe::V, Pipe::MTE3, 2);
      wait_flag(Pipe::V, Pipe::MTE3, 2);
    }
    auto handoff = [](Pipe a, Pipe b, int id) {
      set_flag(a, b, id);
      wait_flag(a, b, id);
    };
    // Blocks of 64 columns of a [h, cols] tile, for per-row factors broadcast once into bc.
    auto by_blocks = [&](Tile src_row_vec, int64_t cols, const std::function<void(Tile, Tile)>& op,
                         Tensor dst) {
      const int64_t w = std::max<int64_t>(n, 64);
      tile::broadcast(bc, src_row_vec);
      for (int64_t j = 0; j < cols / w; ++j) op(dst(all, slice(j * w, w)), Tile(bc));
    };

    serial(cid, tasks, cores, [&](Ex t) {
      Task tk = task(t);
      copy(block_table(tk.b, all), bt_ub);
      handoff(Pipe::MTE2, Pipe::S, 1);
      tile::fill(acc_o, 0.0);
      tile::fill(sumexp, 0.0);
      tile::fill(neg_m, kNegMaxInit);

      auto v0 = [&](Ex c) {  // gather this AIV's half of chunk c
        Ex slot = c % stages;
        wait_flag(Pipe::V, Pipe::MTE2, kEvIdx + slot);
        auto load_idx = [&](int64_t cnt) {
          copy(sparse(tk.tok, tk.head, slice(c * n, cnt)), idx_ub(slot, slice(0, cnt)));
        };
        if (rem == n)
          load_idx(n);
        else if (chunks == 1)
          load_idx(rem);
        else
          if_else(
              c == chunks - 1, [&] { load_idx(rem); }, [&] { load_idx(n); });
        handoff(Pipe::MTE2, Pipe::S, 0);
        handoff(Pipe::MTE2, Pipe::V, 0);
        // bias = 0 where 0 <= index <= bound, -1e30 elsewhere (and past topk).
        tile::fill(bias[slot], 0.0);
        tile::cast(idx_f, idx_ub[slot]);
        tile::compare(mask, idx_f, tk.bound, CmpMode::LE);
        tile::select(bias[slot], mask, bias[slot], kMasked);
        tile::compare(mask, idx_f, 0, CmpMode::GE);
        tile::select(bias[slot], mask, bias[slot], kMasked);
        if (rem != n)
          if_(c == chunks - 1, [&] { tile::fill(bias(slot, 0, slice(rem, n - rem)), kMasked); });
        set_flag(Pipe::V, Pipe::MTE2, kEvIdx + slot);

        auto index = [&](Ex r) { return load(idx_ub, {slot, r}); };
        auto valid = [&](Ex r) {
          return c * n + r < topk && index(r) >= 0 && index(r) <= tk.bound;
        };
        // Invalid indices gather position 0 of the batch: in range, masked by the bias.
        auto kv_row = [&](Ex r) {
          Ex pos = select(valid(r), index(r), 0);
          return kv(load(bt_ub, {pos / kPage}), pos % kPage, tk.head, all);
        };
        auto copy_out = [&](Tile src_kv, Tile src_rope, Ex r0, int64_t rows_n) {
          copy(src_kv, ws1(cid, slot, slice(r0, rows_n), all));
          copy(src_rope, ws2(cid, slot, slice(r0, rows_n), all));
        };
        if (kn.row_roundtrip) {
          serial(half, [&](Ex j) {
            Ex r = vid * half + j;
            if_else(
                valid(r),
                [&] {
                  wait_flag(Pipe::MTE3, Pipe::MTE2, kEvG);
                  copy(kv(load(bt_ub, {index(r) / kPage}), index(r) % kPage, tk.head, all),
                       gbuf(0, 0, all));
                  handoff(Pipe::MTE2, Pipe::MTE3, 0);
                  copy_out(gbuf(0, all, slice(0, kD)), gbuf(0, all, slice(kD, kRope)), r, 1);
                  set_flag(Pipe::MTE3, Pipe::MTE2, kEvG);
                },
                [&] {
                  copy_out(zero_row(all, slice(0, kD)), zero_row(all, slice(kD, kRope)), r, 1);
                });
          });
        } else {
          // Sub-chunks of gather_rows rows; with two buffers the MTE2 loads of one overlap
          // the MTE3 copy-out of the other.
          const int64_t nsub = half / gather_rows;
          serial(nsub, [&](Ex s) {
            Ex g = (c * nsub + s) % ngather, r0 = vid * half + s * gather_rows;
            wait_flag(Pipe::MTE3, Pipe::MTE2, kEvG + g);
            serial(gather_rows, [&](Ex j) { copy(kv_row(r0 + j), gbuf(g, j, all)); });
            handoff(Pipe::MTE2, Pipe::MTE3, 0);
            copy_out(gbuf(g, all, slice(0, kD)), gbuf(g, all, slice(kD, kRope)), r0, gather_rows);
            set_flag(Pipe::MTE3, Pipe::MTE2, kEvG + g);
          });
        }
        set_cross_flag(Pipe::MTE3, kKvReady);
      };

      auto v1 = [&](Ex c) {  // online softmax of scale * S + bias for this AIV's heads
        Ex slot = c % stages, cur = c % 2, prv = 1 - cur;
        wait_cross_flag(kSReady);
        wait_flag(Pipe::V, Pipe::MTE2, kEvS);
        copy(ws3(cid, slot, rows(vid * h, h), all), s_in);
        handoff(Pipe::MTE2, Pipe::V, 1);
        if (kn.per_row_softmax) {
          serial(h, [&](Ex r) {
            tile::muls(work(r, all), s_in(r, all), scale);
            tile::add(work(r, all), work(r, all), bias(slot, 0, all));
          });
        } else if (kn.axpy) {
          tile::broadcast(work, bias[slot]);
          tile::axpy(work, s_in, scale);
        } else {
          tile::broadcast(work, bias[slot]);
          tile::muls(s_in, s_in, scale);
          tile::add(work, work, s_in);
        }
        set_flag(Pipe::V, Pipe::MTE2, kEvS);
        reduce_max(work, neg_m[cur]);
        tile::muls(neg_m[cur], neg_m[cur], -1.0);
        tile::min(neg_m[cur], neg_m[cur], neg_m[prv]);  // -m_new
        if (kn.per_row_softmax) {
          handoff(Pipe::V, Pipe::S, 0);
          serial(h, [&](Ex r) { tile::adds(work(r, all), work(r, all), at(neg_m, {cur, r, 0})); });
        } else {
          tile::broadcast(bc(all, slice(0, n)), neg_m[cur]);
          tile::add(work, work, bc(all, slice(0, n)));
        }
        tile::exp(work, work);
        wait_flag(Pipe::MTE3, Pipe::V, 0);
        tile::cast(p_bf, work);
        handoff(Pipe::V, Pipe::MTE3, 0);
        copy(p_bf, ws4(cid, slot, rows(vid * h, h), all));
        set_flag(Pipe::MTE3, Pipe::V, 0);
        set_cross_flag(Pipe::MTE3, kPReady);
        reduce_sum(work, sum_i[slot]);
        tile::sub(alpha[slot], neg_m[cur], neg_m[prv]);  // m_old - m_new
        tile::exp(alpha[slot], alpha[slot]);
      };

      auto v2 = [&](Ex c) {  // l = alpha l + rowsum(P); acc = alpha acc + O_c
        Ex slot = c % stages;
        tile::mul(sumexp, sumexp, alpha[slot]);
        tile::add(sumexp, sumexp, sum_i[slot]);
        if (kn.per_row_softmax) {
          handoff(Pipe::V, Pipe::S, 0);
          serial(h, [&](Ex r) {
            tile::muls(acc_o(r, all), acc_o(r, all), at(alpha, {slot, r, 0}));
          });
        } else {
          by_blocks(
              alpha[slot], kD, [](Tile d, Tile f) { tile::mul(d, d, f); }, acc_o);
        }
        wait_cross_flag(kOReady);
        for (int64_t j = 0; j < kD / oc; ++j) {
          wait_flag(Pipe::V, Pipe::MTE2, kEvO);
          copy(ws5(cid, slot, rows(vid * h, h), slice(j * oc, oc)), stage_o);
          handoff(Pipe::MTE2, Pipe::V, 2);
          tile::add(acc_o(all, slice(j * oc, oc)), acc_o(all, slice(j * oc, oc)), stage_o);
          set_flag(Pipe::V, Pipe::MTE2, kEvO);
        }
      };
      chunk_loop(v0, [&](Ex c) {
        v1(c);
        v2(c);
      });

      // O = acc / l, cast, store this AIV's heads.
      if (kn.per_row_softmax) {
        handoff(Pipe::V, Pipe::S, 0);
        serial(h, [&](Ex r) { tile::div(acc_o(r, all), acc_o(r, all), at(sumexp, {r, 0})); });
      } else {
        by_blocks(
            sumexp, kD, [](Tile d, Tile f) { tile::div(d, d, f); }, acc_o);
      }
      for (int64_t j = 0; j < kD / oc; ++j) {
        wait_flag(Pipe::MTE3, Pipe::V, 1);
        tile::cast(out_bf, acc_o(all, slice(j * oc, oc)));
        handoff(Pipe::V, Pipe::MTE3, 1);
        copy(out_bf, out(tk.tok, rows(tk.h0 + vid * h, h), slice(j * oc, oc)));
        set_flag(Pipe::MTE3, Pipe::V, 1);
      }
    });
    credits([](Pipe a, Pipe b, int64_t id) { wait_flag(a, b, id); });
  });
  return kb.finish();
}

/// The automatic version: the same dataflow written without scopes, flags, workspaces or
/// slots. Per chunk of n_base sparse indices: gather the KV rows (Vector, one scalar-indexed
/// copy per row), S = [q q_rope] [kv rope]^T with K = 576 in chunks of 64 (Cube), online
/// softmax with the mask bias (Vector), O_c = P kv[:, :512] in four column blocks (Cube),
/// rescale and accumulate (Vector). cv_split gives each vector core half of the gathered rows
/// and half of the heads, keeps the indices, page table and bias whole on both, and
/// pipelines the chunk loop across the cores.
ir::Program build_auto(const Params& p) {
  const int64_t B = p.at("B"), T = p.at("T"), H = p.at("H"), KVN = p.at("KV_N");
  const int64_t KVS = p.at("KV_S"), topk = p.at("topk"), cores = p.at("block_num");
  const int64_t n = p.at("n_base") > 0 ? p.at("n_base") : std::min<int64_t>(128, topk);
  const int64_t m = std::min<int64_t>(p.at("m_base") > 0 ? p.at("m_base") : 16, H / KVN);
  check_chunk("auto", n, m);
  if (n % 16 != 0)
    throw ParamError{fmt::format(
        "kernel 'sfa' [auto]: a chunk of n_base={} indices must be a multiple of 16 (cube "
        "fractals); with n_base=0 the chunk is min(128, topk={}): use topk a multiple of 16",
        n, topk)};
  if (topk % n != 0)
    throw ParamError{
        fmt::format("kernel 'sfa' [auto]: n_base={} must divide topk={} (the "
                    "automatic version has no partial chunk)",
                    n, topk)};
  const int64_t G = H / KVN, groups = G / m, tasks = T * KVN * groups, per_b = T / B;
  const int64_t pages = KVS / kPage, act = act_kv(p), chunks = topk / n;
  const int64_t cols = 128;  // O column block of one P V mmad (L0B holds [n, 128])
  const bool causal = p.at("causal") != 0;
  const double scale = scale_of(p);

  KernelBuilder kb("sfa", cores);
  auto [query, query_rope, kv, block_table, sparse, out] = sfa_tensors(kb, p);
  Ex cid = kb.launch().cid;

  auto q_l1 = alloc_L1("q_l1", {m, kDk}, bf16);
  auto kv_l1 = alloc_L1("kv_l1", {n, kDk}, bf16);
  auto p_l1 = alloc_L1("p_l1", {m, n}, bf16);
  auto qa0 = alloc_L0A("qa0", {m, 64}, bf16);
  auto qa = alloc_L0A("qa", {m, 64}, bf16);
  auto pa = alloc_L0A("pa", {m, n}, bf16);
  auto kb0 = alloc_L0B("kb0", {64, n}, bf16);
  auto kbk = alloc_L0B("kb", {64, n}, bf16);
  auto vb = alloc_L0B("vb", {n, cols}, bf16);
  auto s_c = alloc_L0C("s_c", {m, n}, f32);
  auto o_c = alloc_L0C("o_c", {m, kD}, f32);
  auto bt_ub = alloc_ub("bt_ub", {pages}, i32);
  auto idx = alloc_ub("idx", {n}, i32);
  auto idx_f = alloc_ub("idx_f", {n}, f32);  // compared as f32 into a bit mask, as above
  auto mask = alloc_ub("mask", {n / 8}, u8);
  auto bias = alloc_ub("bias", {1, n}, f32);
  auto gather = alloc_ub("gather", {n, kDk}, bf16);
  auto s_ub = alloc_ub("s_ub", {m, n}, f32);
  auto work = alloc_ub("work", {m, n}, f32);
  auto bc = alloc_ub("bc", {m, n}, f32);
  auto p_bf = alloc_ub("p_bf", {m, n}, bf16);
  auto o_ub = alloc_ub("o_ub", {m, kD}, f32);
  auto obc = alloc_ub("obc", {m, kD}, f32);
  auto acc = alloc_ub("acc", {m, kD}, f32);
  auto out_bf = alloc_ub("out_bf", {m, kD}, bf16);
  auto nm = alloc_ub("neg_m", {m, 1}, f32);  // minus the running max
  auto mx = alloc_ub("neg_m_new", {m, 1}, f32);
  auto alpha = alloc_ub("alpha", {m, 1}, f32);
  auto l = alloc_ub("l", {m, 1}, f32);
  auto rs = alloc_ub("rowsum", {m, 1}, f32);

  serial(cid, tasks, cores, [&](Ex t) {
    Ex tok = t / (KVN * groups), head = (t / groups) % KVN;
    Ex h0 = head * G + (t % groups) * m;
    Ex bound = causal ? Ex(act - per_b) + tok % per_b : Ex(act - 1);
    copy(block_table(tok / per_b, all), bt_ub);
    copy(query(tok, slice(h0, m), all), q_l1(all, slice(0, kD)));
    copy(query_rope(tok, slice(h0, m), all), q_l1(all, slice(kD, kRope)));
    tile::fill(acc, 0.0);
    tile::fill(l, 0.0);
    tile::fill(nm, kNegMaxInit);
    knob("num_stages", "pipeline_stages", 2, 1, 8, chunks, {"bias", "alpha"});
    pipelined(chunks, PipelineOpts{2, 1}, [&](Ex c) {
      // The chunk's indices; bias 0 where 0 <= index <= bound, -1e30 elsewhere.
      copy(sparse(tok, head, slice(c * n, n)), idx);
      tile::fill(bias, 0.0);
      tile::cast(idx_f, idx);
      tile::compare(mask, idx_f, bound, CmpMode::LE);
      tile::select(bias, mask, bias, kMasked);
      tile::compare(mask, idx_f, 0, CmpMode::GE);
      tile::select(bias, mask, bias, kMasked);
      // Gather the KV rows through the page table (invalid indices read position 0).
      serial(n, [&](Ex r) {
        Ex i = load(idx, {r});
        Ex pos = select(i >= 0 && i <= bound, i, 0);
        copy(kv(load(bt_ub, {pos / kPage}), pos % kPage, head, all), gather(r, all));
      });
      copy(gather, kv_l1);
      // S = q kv^T over K = 576 in chunks of 64.
      copy(q_l1(all, slice(0, 64)), qa0);
      copy(kv_l1(all, slice(0, 64)), kb0, CopyOpts{true, std::nullopt});
      gemm(qa0, kb0, s_c);
      pipelined(1, kDk / 64, PipelineOpts{2, 1}, [&](Ex k) {
        copy(q_l1(all, slice(k * 64, 64)), qa);
        copy(kv_l1(all, slice(k * 64, 64)), kbk, CopyOpts{true, std::nullopt});
        gemm(qa, kbk, s_c, GemmOpts{false, false, false});
      });
      copy(s_c, s_ub);
      // Online softmax of scale * S + bias.
      tile::broadcast(work, bias);
      tile::mul(s_ub, s_ub, scale);  // fused with the add into one axpy (fuse_axpy)
      tile::add(work, work, s_ub);
      reduce_max(work, mx);
      tile::mul(mx, mx, -1.0);
      tile::min(mx, mx, nm);
      tile::sub(alpha, mx, nm);
      tile::add(nm, mx, 0.0);
      tile::broadcast(bc, mx);
      tile::add(work, work, bc);
      tile::exp(work, work);
      tile::cast(p_bf, work);
      copy(p_bf, p_l1);
      reduce_sum(work, rs);
      tile::exp(alpha, alpha);
      tile::mul(l, l, alpha);
      tile::add(l, l, rs);
      // O_c = P kv[:, :512], 128 columns per mmad.
      copy(p_l1, pa);
      pipelined(kD / cols, PipelineOpts{2, 1}, [&](Ex j) {
        copy(kv_l1(all, slice(j * cols, cols)), vb);
        gemm(pa, vb, o_c(all, slice(j * cols, cols)));
      });
      copy(o_c, o_ub);
      // acc = alpha acc + O_c
      tile::broadcast(obc, alpha);
      tile::mul(acc, acc, obc);
      tile::add(acc, acc, o_ub);
    });
    tile::broadcast(obc, l);
    tile::div(acc, acc, obc);
    tile::cast(out_bf, acc);
    copy(out_bf, out(tok, slice(h0, m), all));
  });
  return kb.finish();
}

/// splitmix64 stream for integer inputs (the same on every platform).
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
};

/// Random bf16 query / rope / paged KV; block_table a scattered permutation of all pages;
/// per (token, kv head) topk distinct positions of [0, KV_S) drawn from the active length,
/// with about 1 in 16 entries -1 and (when act_kv < KV_S) some past the active length.
sim::HostData inputs(const Params& p, uint64_t seed) {
  const int64_t B = p.at("B"), T = p.at("T"), H = p.at("H"), KVN = p.at("KV_N");
  const int64_t KVS = p.at("KV_S"), topk = p.at("topk"), pages = KVS / kPage;
  const int64_t act = act_kv(p);
  sim::HostData in;
  in["query"] = random_tensor(T * H * kD, bf16, seed);
  in["query_rope"] = random_tensor(T * H * kRope, bf16, seed + 1);
  in["kv"] = random_tensor(B * pages * kPage * KVN * kDk, bf16, seed + 2);
  Rng rng{seed * 0x2545F4914F6CDD1Dull + 3};
  std::vector<double> perm(static_cast<size_t>(B * pages));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<double>(i);
  for (size_t i = perm.size(); i > 1; --i)
    std::swap(perm[i - 1], perm[static_cast<size_t>(rng.below(static_cast<int64_t>(i)))]);
  in["block_table"] = perm;
  std::vector<double> idx(static_cast<size_t>(T * KVN * topk));
  std::vector<int64_t> pos(static_cast<size_t>(KVS));
  for (int64_t tn = 0; tn < T * KVN; ++tn) {
    // A random permutation of the active positions (then the inactive ones) gives distinct
    // indices; position 0 goes first so every query attends to at least one valid row.
    for (int64_t i = 0; i < KVS; ++i) pos[static_cast<size_t>(i)] = i;
    for (int64_t i = act - 1; i > 1; --i)
      std::swap(pos[static_cast<size_t>(i)], pos[static_cast<size_t>(1 + rng.below(i))]);
    for (int64_t j = 0; j < topk; ++j) {
      int64_t v = pos[static_cast<size_t>(j % KVS)];
      uint64_t u = rng.next() % 16;
      if (j > 0 && u == 0) v = -1;
      if (j > 0 && u == 1 && act < KVS) v = act + rng.below(KVS - act);
      idx[static_cast<size_t>(tn * topk + j)] = static_cast<double>(v);
    }
  }
  in["sparse_indices"] = idx;
  return in;
}

/// Plain sparse attention in double precision from the bf16 inputs: gather the topk rows
/// through the block table, S = scale * q . k (576 wide), mask -1 / past-the-bound indices,
/// softmax, O = P V (V = the first 512 columns).
sim::HostData reference(const Params& p, const std::string&, const sim::HostData& in) {
  const int64_t B = p.at("B"), T = p.at("T"), H = p.at("H"), KVN = p.at("KV_N");
  const int64_t KVS = p.at("KV_S"), topk = p.at("topk"), pages = KVS / kPage;
  const int64_t act = act_kv(p), per_b = T / B, G = H / KVN;
  const bool causal = p.at("causal") != 0;
  const double scale = scale_of(p);
  const auto& q = in.at("query");
  const auto& qr = in.at("query_rope");
  const auto& kv = in.at("kv");
  const auto& bt = in.at("block_table");
  const auto& si = in.at("sparse_indices");
  std::vector<double> o(static_cast<size_t>(T * H * kD));
  std::vector<double> s(static_cast<size_t>(topk));
  std::vector<const double*> row(static_cast<size_t>(topk));
  for (int64_t t = 0; t < T; ++t) {
    int64_t b = t / per_b;
    int64_t bound = causal ? act - per_b + t % per_b : act - 1;
    for (int64_t hd = 0; hd < H; ++hd) {
      int64_t nh = hd / G;
      const double* qh = &q[static_cast<size_t>((t * H + hd) * kD)];
      const double* qrh = &qr[static_cast<size_t>((t * H + hd) * kRope)];
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < topk; ++j) {
        auto i = static_cast<int64_t>(si[static_cast<size_t>((t * KVN + nh) * topk + j)]);
        row[static_cast<size_t>(j)] = nullptr;
        if (i < 0 || i > bound) continue;
        auto blk = static_cast<int64_t>(bt[static_cast<size_t>(b * pages + i / kPage)]);
        const double* r = &kv[static_cast<size_t>(((blk * kPage + i % kPage) * KVN + nh) * kDk)];
        double dot = 0;
        for (int64_t d = 0; d < kD; ++d) dot += qh[d] * r[d];
        for (int64_t d = 0; d < kRope; ++d) dot += qrh[d] * r[kD + d];
        row[static_cast<size_t>(j)] = r;
        s[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      double* oh = &o[static_cast<size_t>((t * H + hd) * kD)];
      for (int64_t j = 0; j < topk; ++j) {
        if (!row[static_cast<size_t>(j)]) continue;
        double e = std::exp(s[static_cast<size_t>(j)] - mx);
        sum += e;
        for (int64_t d = 0; d < kD; ++d) oh[d] += e * row[static_cast<size_t>(j)][d];
      }
      for (int64_t d = 0; d < kD; ++d) oh[d] /= sum;
    }
  }
  return {{"out", o}};
}

std::string validate(const Params& p) {
  const int64_t B = p.at("B"), T = p.at("T"), H = p.at("H"), KVN = p.at("KV_N");
  if (p.at("D") != kD || p.at("D_rope") != kRope || p.at("page_block") != kPage)
    return "D=512, D_rope=64 and page_block=128 are what the kernel is written for";
  if (T % B != 0)
    return fmt::format("T={} must be a multiple of B={} (T/B tokens per batch)", T, B);
  if (H % KVN != 0) return fmt::format("H={} must be a multiple of KV_N={}", H, KVN);
  if (p.at("topk") % 8 != 0)
    return fmt::format("topk={} must be a multiple of 8 (32-byte UB rows of i32 indices)",
                       p.at("topk"));
  if (p.at("KV_S") % kPage != 0)
    return fmt::format("KV_S={} must be a multiple of page_block={}", p.at("KV_S"), kPage);
  const int64_t act = act_kv(p);
  if (act > p.at("KV_S")) return fmt::format("act_kv={} exceeds KV_S={}", act, p.at("KV_S"));
  if (act < T / B)
    return fmt::format("act_kv={} must cover the T/B={} query tokens of a batch", act, T / B);
  for (const auto& v : kVariants) {
    Knobs k = knobs(v, p);
    int64_t G = H / KVN;
    if (k.m_base % 16 != 0 || G % k.m_base != 0)
      return fmt::format(
          "m_base={} ({}): heads per task must be a multiple of 16 (cube "
          "fractals) dividing H/KV_N={}",
          k.m_base, v, G);
    if (k.n_base % 64 != 0)
      return fmt::format("n_base={} ({}) must be a multiple of 64", k.n_base, v);
  }
  return "";
}

}  // namespace

KernelSource sfa_kernel() {
  return KernelSource{
      "sfa",
      "Sparse Flash Attention (DeepSeek-V3.2 sparse MLA decode): topk KV rows gathered through "
      "a paged-KV block table, fixed-core launch; `auto` written as dataflow only",
      all_variants(),
      {{"B", 1, 1, 64, "batch (T/B query tokens each)"},
       {"T", 1, 1, 64, "query tokens"},
       {"H", 128, 16, 256, "query heads"},
       {"KV_N", 1, 1, 16, "kv heads (divides H)"},
       {"D", 512, 512, 512, "head dim (512)"},
       {"D_rope", 64, 64, 64, "rope dim (64)"},
       {"KV_S", 2560, 128, 65536, "kv capacity per batch, multiple of page_block"},
       {"topk", 2048, 1, 8192, "sparse indices per token and kv head"},
       {"page_block", 128, 128, 128, "rows per KV page (128)"},
       {"act_kv", 0, 0, 65536, "active kv length (0 = min(KV_S, 2560))"},
       {"n_base", 0, 0, 256,
        "sparse indices per chunk, s2 split (0 = the variant's: 64 / 256; at most 64 in "
        "baseline, developer, pa, 128 in auto)"},
       {"m_base", 0, 0, 64,
        "query heads per task (0 = the variant's: 64 / 16; at most 32 in pa, no_cv_pipeline, "
        "auto; n_base x m_base <= 2048 in auto)"},
       {"scale_milli", 500, 0, 100000, "softmax scale x 1000 (0 = 1/sqrt(576))"},
       {"causal", 0, 0, 1, "mask mode: 0 none (active length), 1 causal bound"},
       {"block_num", 24, 1, 24, "AI cores (fixed-core launch)"}},
      validate,
      build,
      inputs,
      reference,
      // S accumulates in f32 on the cube from bf16 operands; P goes through bf16 (relative
      // error 2^-9) and O is stored as bf16 (2^-9): a few 1e-3 at |O| < 1. A dropped mask
      // (-1 rows attended as position 0) or a wrong rescale moves O by > 5e-2.
      {1e-2, 1e-2},
      kVariants,
      {{"KV_S", 2560}},
      {},
      "",
  };
}

}  // namespace tilepipe::kernels
