// The engine's memory system (class Engine, engine.h): GM and local memories and their
// values (host data in, the value executor, the scalar unit's loads), and the bytes a GM
// copy moves: which L2 serves and which HBM, its DMA bursts (touch_gm; the L2 model and the
// bandwidth ledgers are bandwidth.h, the copy's time on them is gm_transfer in engine.cc).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "engine.h"
#include "tilepipe/numeric.h"

namespace tilepipe::sim {

void Engine::setup_memory() {
  gm_.resize(p_.gm.size());
  for (size_t i = 0; i < p_.gm.size(); ++i) {
    const auto& b = *p_.gm[i].buffer;
    // Timing mode carries no values, except what scalar loads read: addresses and
    // branches that depend on data must follow the real data.
    if (!functional_ && !p_.gm[i].scalar_read) continue;
    gm_[i].assign(static_cast<size_t>(b.bytes()), 0);
    auto count_error = [&](int64_t given) {
      return UserError(Diagnostic{b.loc,
                                  "host-data",
                                  fmt::format("host data for '{}' has {} values; the tensor has {}",
                                              b.name, given, b.elements()),
                                  {},
                                  "pass exactly one value per element"});
    };
    std::vector<double>* values = nullptr;
    if (io_)
      if (auto it = io_->find(b.name); it != io_->end()) values = &it->second;
    if (!values) {
      auto raw = opts_.raw_inputs.find(b.name);
      if (raw == opts_.raw_inputs.end()) continue;
      const RawTensor& r = raw->second;
      if (r.elements != b.elements()) throw count_error(r.elements);
      const auto* src = static_cast<const uint8_t*>(r.data);
      if (r.dtype == b.dtype) {
        std::copy_n(src, gm_[i].size(), gm_[i].data());
      } else {
        const int64_t eb = ir::dtype_bytes(r.dtype), db = ir::dtype_bytes(b.dtype);
        for (int64_t e = 0; e < r.elements; ++e)
          store_elem(b.dtype, gm_[i].data() + e * db, load_elem(r.dtype, src + e * eb));
      }
      continue;
    }
    if (static_cast<int64_t>(values->size()) != b.elements())
      throw count_error(static_cast<int64_t>(values->size()));
    store_elems(b.dtype, values->data(), gm_[i].data(), values->size());
    // collect() writes every tensor back: the host copy is not needed until then (at
    // 8 bytes a value it is the run's largest memory).
    if (functional_) std::vector<double>().swap(*values);
  }
}

/// Where functional values are applied: on worker threads (values.h), or in line.
void Engine::setup_values() {
  int threads = 0;
  if (functional_) {
    threads = opts_.value_threads;
    if (threads < 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  std::vector<int64_t> written(p_.gm.size(), 0);
  for (const auto* prog : {&p_.aic, &p_.aiv})
    for (const auto& t : prog->instrs)
      if (t.num_acc > 0 && t.acc[0].scope == ir::Scope::GM)
        written[static_cast<size_t>(t.acc[0].gm_index)] =
            p_.gm[static_cast<size_t>(t.acc[0].gm_index)].buffer->bytes();
  values_exec_ = std::make_unique<ValueExecutor>(static_cast<int>(cross_.size()), threads, written,
                                                 opts_.cancel);
}

/// First byte of an operand's buffer, or null where this run keeps no values.
uint8_t* Engine::memory(Core& c, const lower::AccessTemplate& a) {
  if (!values_) return nullptr;
  auto& m = a.scope == ir::Scope::GM ? gm_[static_cast<size_t>(a.gm_index)]
                                     : c.local[static_cast<size_t>(a.scope)];
  if (m.empty()) return nullptr;
  return m.data() + (a.scope == ir::Scope::GM ? 0 : a.base_bytes);
}

int64_t Engine::scalar_load(Core& c, const lower::LoadSite& site, const int64_t* index) {
  const auto& a = site.acc;
  int64_t off = 0;
  for (int d = 0; d < a.dims; ++d) {
    if (index[d] < 0 || index[d] >= a.dim[d]) {
      std::vector<int64_t> idx(index, index + a.dims);
      fail(site.op.loc, "slice-bounds",
           fmt::format("load of '{}' at [{}]: index {} of dimension {} is outside [0, {}) (at "
                       "{})",
                       a.buffer->name, fmt::join(idx, ", "), index[d], d, a.dim[d], loop_state(c)),
           "guard the load with the index's validity (e.g. select(idx >= 0, idx, 0)) or "
           "clamp it into the tensor");
    }
    off += index[d] * a.dim_stride[d];
  }
  bool gm = a.scope == ir::Scope::GM;
  if (gm) {
    bool hit = c.dcache.read(a.gm_index, off * ir::dtype_bytes(a.dtype));
    ++c.tally.scalar_loads.reads;
    c.tally.scalar_loads.misses += hit ? 0 : 1;
    scalar(c, hit ? chip_.scalar_dcache_hit_cycles : chip_.scalar_load_cycles);
  } else {
    scalar(c, chip_.scalar_op_cycles);
  }
  Access acc;
  acc.t = &a;
  acc.offset = off;
  acc.mem = memory(c, a);
  if (a.scope == ir::Scope::UB)
    await_ub(c, acc);
  else if (!gm)
    drain_values(c);  // GM loads read inputs, which nothing writes
  if (race_ && !gm)   // GM loads read inputs, which the verifier keeps read-only
    race_access(c, Pipe::S, acc, RaceKind::Read, race_site(c, Pipe::S, &site.op));
  const uint8_t* p = acc.mem + acc.offset * ir::dtype_bytes(a.dtype);
  if (a.dtype == ir::DType::I64 || a.dtype == ir::DType::U64) {  // every bit: no double between
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  const double v = load_elem(a.dtype, p);
  if (!ir::is_float(a.dtype)) return static_cast<int64_t>(v);
  // A float element as the scalar unit's C conversion gives it (`(int32_t)x.GetValue(i)`,
  // the original's T.cast(x, "int32")): toward zero; NaN 0 and saturated at the ends,
  // where C leaves it undefined.
  if (std::isnan(v)) return 0;
  if (v >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (v < -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

/// Waits until core c's AI core has applied its values, which the engine then reads.
void Engine::drain_values(const Core& c) {
  values_exec_->wait_for_read(c.ai_core, values_exec_->submitted(c.ai_core));
  if (values_exec_->skipped()) interrupted(c.t);  // cancelled: the values are not the run's
}

/// Waits until the instructions writing the UB element `a` starts at have been applied
/// (with every earlier one of the AI core, in order): what a scalar read of it needs.
void Engine::await_ub(const Core& c, const Access& a) {
  if (c.ub_write_seq.empty()) return;  // nothing written to this UB through the executor
  const int64_t lo = a.byte_lo();
  uint64_t seq = 0;
  for (int64_t p = lo / kUbPage; p <= (lo + a.t->elem_bytes - 1) / kUbPage; ++p)
    seq = std::max(seq, c.ub_write_seq[static_cast<size_t>(p)]);
  values_exec_->wait_for_read(c.ai_core, seq);
  if (values_exec_->skipped()) interrupted(c.t);
}

/// The address-dependent part of a GM copy: which bytes L2 serves and which HBM (marking
/// them resident), and which MTE2 bytes re-read an input range this core read before.
/// `a` is the copy's GM operand (gm_operand) resolved.
GmWork Engine::touch_gm(const lower::OpTemplate& t, const Access& a, L2Residency& l2,
                        ReadRanges& ranges, L2Fills* fills, double now, double* landing) {
  const bool read = t.acc[1].scope == ir::Scope::GM;
  const lower::AccessTemplate& g = *a.t;
  GmWork w;
  bool track = read && t.pipe == Pipe::MTE2 && !p_.gm[static_cast<size_t>(g.gm_index)].workspace;
  RangeSet* seen = track ? &ranges[g.gm_index] : nullptr;
  int64_t miss = 0, hit = 0, again = 0;
  // Adjacent runs are one contiguous range: one L2 touch where they meet on a line boundary
  // (L2Residency::touch), one read-range update, one DMA burst.
  int64_t l2_lo = 0, l2_len = 0, l2_row = 0;
  if (!read) fills = nullptr;  // a write lands in the L2 and waits for no fill
  auto touch_l2 = [&] {
    if (l2_len == 0) return;
    if (fills)
      *landing =
          std::max(*landing, fills->before_touch(l2, g.gm_index, l2_lo, l2_lo + l2_len, now));
    auto [mi, h] = l2.touch(g.gm_index, l2_lo, l2_lo + l2_len, l2_row);
    miss += mi;
    hit += h;
  };
  // DMA efficiency (docs/simulator.md): each contiguous run costs at least a minimum
  // burst, a long run off the full-bandwidth alignment streams slower.
  int64_t run_lo = 0, run_len = 0;
  double charged = 0;
  auto burst = [&] {
    if (run_len == 0) return;
    if (track) again += seen->add(run_lo, run_lo + run_len);
    double b = std::max(static_cast<double>(run_len), chip_.dma_min_burst_bytes);
    if (run_len >= chip_.dma_full_bw_align && run_lo % chip_.dma_full_bw_align != 0)
      b /= chip_.dma_misaligned_factor;
    charged += b;
  };
  auto l2_piece = [&](int64_t lo, int64_t len) {
    if (lo != l2_lo + l2_len || lo % l2.line_bytes() != 0) {
      touch_l2();
      l2_lo = lo;
      l2_len = 0;
    }
    l2_len += len;
  };
  const int64_t line = l2.line_bytes();
  for_each_span<true>(a, [&](int64_t lo, int64_t len, int64_t row) {
    l2_row = row;  // the same for every span of the access
    if (lo != run_lo + run_len) {
      burst();
      run_lo = lo;
      run_len = 0;
    }
    run_len += len;
    if (lo % line == 0 && row % line == 0) {  // its rows meet on line boundaries
      l2_piece(lo, len);
      return;
    }
    for (int64_t r = lo; r < lo + len; r += row) l2_piece(r, row);
  });
  burst();
  touch_l2();
  if (t.pipe == Pipe::MTE2 && t.acc[0].scope == ir::Scope::L1)
    charged /= chip_.dma_nd2nz_efficiency;
  if (!read) {  // writes land in L2 (write-back); the die's L2 bandwidth is shared
    hit += miss;
    miss = 0;
  }
  w.hbm = static_cast<double>(miss);
  w.l2 = static_cast<double>(hit);
  w.reloaded = static_cast<double>(again);
  w.charged = charged;
  w.transfers = 1;
  return w;
}

/// Applies an instruction's effect on the values (execute), its operands' memory found
/// here: resolve leaves it out, since most runs keep no values.
void Engine::execute_values(Core& c, const Instr& in) {
  Instr v = in;
  for (int i = 0; i < in.t->num_acc; ++i) {
    Access& a = v.acc[static_cast<size_t>(i)];
    a.mem = memory(c, *a.t);
  }
  const uint64_t seq = values_exec_->submit(c.ai_core, v, race_ ? race_->take_tag() : nullptr);
  const Access& dst = v.acc[0];
  if (in.t->num_acc > 0 && dst.t->scope == ir::Scope::GM && !written_.empty()) {
    auto& w = written_[static_cast<size_t>(dst.t->gm_index)];
    const int64_t eb = dst.t->elem_bytes;
    if (!w.empty())
      for_each_run(dst, [&](int64_t lo, int64_t len) {
        for (int64_t e = lo / eb; e < (lo + len + eb - 1) / eb; ++e)
          w[static_cast<size_t>(e)] = true;
      });
  }
  if (seq > 0 && in.t->num_acc > 0 && dst.t->scope == ir::Scope::UB) {
    if (c.ub_write_seq.empty())
      c.ub_write_seq.assign(c.local[static_cast<size_t>(ir::Scope::UB)].size() / kUbPage + 1, 0);
    for (int64_t p = dst.byte_lo() / kUbPage; p <= (dst.byte_hi() - 1) / kUbPage; ++p)
      c.ub_write_seq[static_cast<size_t>(p)] = seq;
  }
}

}  // namespace tilepipe::sim
