#include "values.h"

#include <algorithm>
#include <bit>

namespace tilepipe::sim {

ValueExecutor::ValueExecutor(int groups, int threads, const std::vector<int64_t>& written_bytes,
                             const std::atomic<bool>* cancel)
    : groups_(static_cast<size_t>(groups)), cancel_(cancel) {
  threads = std::min(threads, groups);
  if (threads <= 0) return;
  pages_.resize(written_bytes.size());
  for (size_t i = 0; i < written_bytes.size(); ++i)
    pages_[i].resize(static_cast<size_t>((written_bytes[i] + kPage - 1) / kPage));
  for (int i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>());
  for (int g = 0; g < groups; ++g)
    groups_[static_cast<size_t>(g)].worker = workers_[static_cast<size_t>(g % threads)].get();
  for (auto& w : workers_) w->thread = std::thread([this, p = w.get()] { run(*p); });
}

ValueExecutor::~ValueExecutor() {
  for (auto& w : workers_) {
    {
      std::lock_guard lk(w->m);
      w->stop = true;  // an engine error ends the run: queued values no longer matter
    }
    w->more.notify_one();
  }
  for (auto& w : workers_) w->thread.join();
}

void ValueExecutor::apply(const Instr& in, std::atomic<bool>* changed) {
  if (cancel_ && cancel_->load(std::memory_order_relaxed)) [[unlikely]] {
    skipped_.store(true, std::memory_order_relaxed);  // published by `done` (or same thread)
    return;
  }
  if (!changed) return execute(in);
  const std::vector<uint8_t> before = access_bytes(in.acc[0]);
  execute(in);
  if (access_bytes(in.acc[0]) != before)
    changed->store(true, std::memory_order_relaxed);  // read after drain_all
}

std::vector<uint8_t> access_bytes(const Access& a) {
  const uint8_t* first = a.mem + a.offset * a.t->elem_bytes;
  const int64_t at = a.byte_lo();
  std::vector<uint8_t> out;
  for_each_span<true>(a, [&](int64_t lo, int64_t len, int64_t) {
    out.insert(out.end(), first + (lo - at), first + (lo - at) + len);
  });
  return out;
}

void ValueExecutor::run(Worker& w) {
  std::deque<Job> batch;
  for (;;) {
    {
      std::unique_lock lk(w.m);
      w.more.wait(lk, [&] { return w.stop || !w.jobs.empty(); });
      if (w.stop) return;
      batch.swap(w.jobs);
    }
    for (const Job& j : batch) {
      apply(j.in, j.changed);
      auto& done = groups_[static_cast<size_t>(j.group)].done;
      done.fetch_add(1, std::memory_order_release);
      done.notify_all();
    }
    batch.clear();
  }
}

void ValueExecutor::wait_for(int group, uint64_t seq) {
  if (workers_.empty()) return;
  auto& done = groups_[static_cast<size_t>(group)].done;
  for (uint64_t d; (d = done.load(std::memory_order_acquire)) < seq;)
    done.wait(d, std::memory_order_acquire);
}

void ValueExecutor::wait_for_read(int group, uint64_t seq) {
  Group& g = groups_[static_cast<size_t>(group)];
  if (!g.worker || seq <= g.read_seq) return;  // inline, or applied for an earlier read
  g.read_seq = seq;
  wait_for(group, seq);
  if (g.submitted - g.window_start > kInlineWindow) {
    g.window_start = g.submitted;
    g.fresh_reads = 0;
  }
  if (++g.fresh_reads < kInlineReads) return;
  drain(group);
  g.worker = nullptr;
}

void ValueExecutor::drain(int group) {
  wait_for(group, groups_[static_cast<size_t>(group)].submitted);
}

void ValueExecutor::drain_all() {
  for (int g = 0; g < static_cast<int>(groups_.size()); ++g) drain(g);
}

void ValueExecutor::order_gm(int group, const Access& a, bool write, uint64_t seq) {
  auto& pages = pages_[static_cast<size_t>(a.t->gm_index)];
  if (pages.empty()) return;  // never written: reads in any order see the same bytes
  const uint64_t self = uint64_t{1} << group;
  for_each_run(a, [&](int64_t lo, int64_t len) {
    for (int64_t p = lo / kPage; p <= (lo + len - 1) / kPage; ++p) {
      Page& pg = pages[static_cast<size_t>(p)];
      if (pg.writer >= 0 && pg.writer != group) wait_for(pg.writer, pg.write_seq);
      if (!write) {
        pg.readers |= self;
        continue;
      }
      for (uint64_t r = pg.readers & ~self; r; r &= r - 1) drain(std::countr_zero(r));
      pg = {group, seq, 0};
    }
  });
}

uint64_t ValueExecutor::submit(int group, const Instr& in, std::atomic<bool>* changed) {
  if (workers_.empty()) {
    apply(in, changed);
    return 0;
  }
  Group& g = groups_[static_cast<size_t>(group)];
  const uint64_t seq = g.submitted + 1;
  for (int i = 0; i < in.t->num_acc; ++i) {
    const Access& a = in.acc[static_cast<size_t>(i)];
    if (a.t->scope == ir::Scope::GM) order_gm(group, a, i == 0, seq);
  }
  g.submitted = seq;
  if (!g.worker) {
    apply(in, changed);
    g.done.store(seq, std::memory_order_release);
    g.done.notify_all();
    return seq;
  }
  {
    std::lock_guard lk(g.worker->m);
    g.worker->jobs.push_back({group, in, changed});
  }
  g.worker->more.notify_one();
  if (seq > kBehind) wait_for(group, seq - kBehind);
  return seq;
}

}  // namespace tilepipe::sim
