// The autotuner (contract in include/tilepipe/tune.h).
#include "tilepipe/tune.h"

#include "tilepipe/prof.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "tilepipe/prof.h"

namespace tilepipe::tune {
namespace {

using json = nlohmann::ordered_json;
constexpr double kInf = std::numeric_limits<double>::infinity();

/// One config's state while tuning.
struct Entry {
  Point params;
  size_t index = 0;  // enumeration order
  Prepared prep;
  bool have_lb = false, have_sim = false, from_cache = false;
  double lb = 0;
  Simulated sim;
  std::string status;
};

/// Results by config key, one file each in `dir`. A directory that cannot be made or written
/// (read-only, a file in the way, a full disk) is no cache at all, with a warning: the
/// search runs on, each config simulated.
class Cache {
 public:
  explicit Cache(std::string dir) : dir_(std::move(dir)) {
    if (dir_.empty()) return;
    try {
      std::filesystem::create_directories(dir_);
      const std::string probe = dir_ + "/.probe";
      prof::write_file_atomic(probe, "");
      std::filesystem::remove(probe);
    } catch (const std::exception& e) {
      disable(e.what());
    }
  }
  /// Why the cache is not used, or "".
  std::string warning() const {
    std::lock_guard<std::mutex> lock(mu_);
    return warning_;
  }
  bool load(Entry& e) const {
    if (off_) return false;
    std::ifstream in(path(e.prep.key));
    if (!in) return false;
    // A damaged or edited entry is recomputed: it must be this config's, and its numbers
    // must hold the simulator's invariants (finite, a run no faster than its lower bound).
    try {
      auto j = json::parse(in);
      if (j.at("key").get<std::string>() != e.prep.key) return false;
      double lb = j.at("lb_cycles").get<double>();
      if (!std::isfinite(lb) || lb < 0) return false;
      Simulated sim;
      bool have_sim = j.contains("cycles");
      if (have_sim) {
        sim.ok = j.at("ok").get<bool>();
        sim.cycles = j.at("cycles").get<double>();
        sim.bound = j.at("bound").get<std::string>();
        sim.reason = j.at("reason").get<std::string>();
        if (sim.ok &&
            !(std::isfinite(sim.cycles) && sim.cycles > 0 && sim.cycles >= lb * (1 - 1e-9)))
          return false;
      }
      e.lb = lb;
      e.have_lb = true;
      if (have_sim) {
        e.sim = sim;
        e.have_sim = e.from_cache = true;
      }
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }
  void store(const Entry& e) {
    if (off_) return;
    json j = {{"key", e.prep.key}, {"params", e.params}, {"lb_cycles", e.lb}};
    if (e.have_sim) {
      j["ok"] = e.sim.ok;
      j["cycles"] = e.sim.cycles;
      j["bound"] = e.sim.bound;
      j["reason"] = e.sim.reason;
    }
    try {
      prof::write_file_atomic(path(e.prep.key), j.dump() + "\n");
    } catch (const std::exception& ex) {
      disable(ex.what());
    }
  }

 private:
  void disable(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!off_)
      warning_ = fmt::format(
          "the tune cache '{}' cannot be used ({}): the search runs without a cache; give a "
          "writable --cache-dir, or --no-cache",
          dir_, why);
    off_ = true;
  }
  std::string path(const std::string& key) const { return dir_ + "/" + key + ".json"; }
  std::string dir_;
  std::atomic<bool> off_{dir_.empty()};
  mutable std::mutex mu_;
  std::string warning_;
};

/// On a terminal a bar redrawn at each config; otherwise (a CI log, a pipe) one whole line
/// every kLogInterval seconds, so a long search is seen to be alive.
class Progress {
 public:
  static constexpr double kLogInterval = 5.0;
  Progress(bool on, size_t total)
      : on_(on), tty_(isatty(2) == 1), total_(total), t0_(clock::now()), last_(t0_) {}
  void tick() {
    if (!on_) return;
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    auto now = clock::now();
    double el = std::chrono::duration<double>(now - t0_).count();
    double eta = done_ ? el / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0;
    if (!tty_) {
      if (std::chrono::duration<double>(now - last_).count() < kLogInterval) return;
      last_ = now;
      std::fprintf(stderr, "tilepipe tune: %zu/%zu configs, %.0f s, ETA %.0f s\n", done_, total_,
                   el, eta);
      return;
    }
    int w = 30, fill = total_ ? static_cast<int>(w * done_ / total_) : w;
    std::fprintf(stderr, "\r  [%s%s] %zu/%zu configs, %.0fs, ETA %.0fs ",
                 std::string(static_cast<size_t>(fill), '#').c_str(),
                 std::string(static_cast<size_t>(w - fill), '.').c_str(), done_, total_, el, eta);
    if (done_ == total_) std::fprintf(stderr, "\n");
  }
  void add(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    total_ += n;
  }

 private:
  using clock = std::chrono::steady_clock;
  bool on_, tty_;
  size_t total_, done_ = 0;
  clock::time_point t0_, last_;
  std::mutex mu_;
};

/// Runs f(i) for i in [0, n) on `jobs` threads, in index order of start.
void parallel_for(size_t n, int jobs, const std::function<void(size_t)>& f) {
  std::atomic<size_t> next{0};
  std::exception_ptr err;
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      size_t i = next++;
      if (i >= n) return;
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!err) err = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  int k = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(1, jobs)), n));
  for (int j = 0; j < k; ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (err) std::rethrow_exception(err);
}

std::vector<Point> grid(const Point& base, const Options& o) {
  std::vector<Point> out = {base};
  for (const auto& [name, values] : o.space) {
    std::vector<Point> next;
    for (const auto& p : out)
      for (int64_t v : values) {
        Point q = p;
        q[name] = v;
        next.push_back(q);
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

Executor local_executor(int jobs, std::function<Simulated(const Point&)> simulate) {
  return [jobs, simulate = std::move(simulate)](
             const std::vector<Point>& points, const std::function<bool(size_t)>& wanted,
             const std::function<void(size_t, const Simulated&)>& done) {
    parallel_for(points.size(), jobs, [&](size_t k) {
      if (wanted(k)) done(k, simulate(points[k]));
    });
  };
}

std::string hash_hex(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

std::pair<std::string, std::vector<int64_t>> parse_space(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw std::invalid_argument(
        fmt::format("--space '{}': expected NAME=V1,V2,..., e.g. --space num_stages=2,4,8", spec));
  std::string name = spec.substr(0, eq);
  std::vector<int64_t> values;
  size_t pos = eq + 1;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string v = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    int64_t x = 0;
    try {
      x = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (v.empty() || used != v.size())
      throw std::invalid_argument(fmt::format(
          "--space '{}': '{}' is not an integer (values are comma-separated)", spec, v));
    if (std::find(values.begin(), values.end(), x) == values.end()) values.push_back(x);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return {name, values};
}

Result run(const Point& base, const Options& o, const Callbacks& cb) {
  Cache cache(o.cache_dir);
  std::vector<Entry> entries;
  std::mutex mu;
  // Prepares, bounds and simulates entries [first, last) in parallel (no pruning).
  auto prepare_all = [&](size_t first, size_t last, Progress* prog) {
    parallel_for(last - first, o.jobs, [&](size_t k) {
      Entry& e = entries[first + k];
      e.prep = cb.prepare(e.params);
      if (!e.prep.ok) {
        e.status = "rejected";
        if (prog) prog->tick();
        return;
      }
      cache.load(e);
      if (!e.have_lb) {
        e.lb = cb.lower_bound(e.params);
        e.have_lb = true;
        cache.store(e);
      }
    });
  };
  const Executor exec = o.executor ? o.executor : local_executor(o.jobs, cb.simulate);
  // Simulates entries[todo[k]] through the executor: started in order when `wanted(k)`,
  // each result stored (entry and cache) before `finished(k)` is told.
  auto simulate = [&](const std::vector<size_t>& todo, const std::function<bool(size_t)>& wanted,
                      const std::function<void(size_t)>& finished) {
    std::vector<Point> points;
    for (size_t i : todo) points.push_back(entries[i].params);
    std::vector<char> reported(todo.size(), 0);
    exec(points, wanted, [&](size_t k, const Simulated& s) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (k >= todo.size() || reported[k])
          throw InternalError("tune: the executor reported a config twice or one it was not given");
        reported[k] = 1;
      }
      Entry& e = entries[todo[k]];
      e.sim = s;
      e.have_sim = true;
      cache.store(e);
      finished(k);
    });
  };
  auto find_or_add = [&](const Point& p) {
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].params == p) return i;
    Entry e;
    e.params = p;
    e.index = entries.size();
    entries.push_back(e);
    return entries.size() - 1;
  };
  auto better = [](const Entry& a, const Entry& b) {  // a strictly better than b
    if (a.sim.cycles != b.sim.cycles) return a.sim.cycles < b.sim.cycles;
    return a.index < b.index;
  };

  if (o.strategy == "grid") {
    for (const auto& p : grid(base, o)) find_or_add(p);
    Progress prog(o.progress, entries.size());
    prepare_all(0, entries.size(), nullptr);
    // Evaluation order: lower bound, then enumeration order.
    std::vector<size_t> order;
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].prep.ok)
        order.push_back(i);
      else
        prog.tick();
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return entries[a].lb < entries[b].lb; });
    if (o.max_evals > 0 && order.size() > static_cast<size_t>(o.max_evals)) {
      for (size_t k = static_cast<size_t>(o.max_evals); k < order.size(); ++k) {
        entries[order[k]].status = "skipped";
        prog.tick();
      }
      order.resize(static_cast<size_t>(o.max_evals));
    }
    // Branch and bound on workers: a config is skipped when a config earlier in the order
    // already beats its lower bound. Only earlier configs count, so the statuses below
    // equal the sequential algorithm's whatever the number of workers.
    // A cached config needs no simulation; it is done from the start.
    std::vector<char> done(order.size(), 0);
    for (size_t k = 0; k < order.size(); ++k)
      if (entries[order[k]].have_sim) {
        done[k] = 1;
        prog.tick();
      }
    auto wanted = [&](size_t k) {
      const Entry& e = entries[order[k]];
      double known = kInf;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (done[k]) return false;
        for (size_t j = 0; j < k; ++j)
          if (done[j] && entries[order[j]].sim.ok)
            known = std::min(known, entries[order[j]].sim.cycles);
        if (!(e.lb > known)) return true;
        done[k] = 1;
      }
      prog.tick();
      return false;
    };
    auto finished = [&](size_t k) {
      {
        std::lock_guard<std::mutex> lock(mu);
        done[k] = 1;
      }
      prog.tick();
    };
    simulate(order, wanted, finished);
    double best = kInf;
    for (size_t k = 0; k < order.size(); ++k) {
      Entry& e = entries[order[k]];
      if (e.lb > best) {
        e.status = "pruned";
        continue;
      }
      e.status = !e.sim.ok ? "rejected" : e.from_cache ? "cached" : "simulated";
      if (e.sim.ok) best = std::min(best, e.sim.cycles);
    }
  } else if (o.strategy == "coord") {
    Point cur = base;
    for (const auto& [name, values] : o.space) {
      // Start from the base value if the space has it, else the first value.
      if (std::find(values.begin(), values.end(), cur[name]) == values.end()) cur[name] = values[0];
    }
    Progress prog(o.progress, 0);
    size_t cur_i = find_or_add(cur);
    int evals = 0;
    bool moved = true;
    for (int round = 0; round < 4 && moved; ++round) {
      moved = false;
      for (const auto& [name, values] : o.space) {
        std::vector<size_t> line;
        for (int64_t v : values) {
          Point q = cur;
          q[name] = v;
          line.push_back(find_or_add(q));
        }
        std::vector<size_t> todo;
        for (size_t i : line)
          if (entries[i].status.empty() && (o.max_evals <= 0 || evals < o.max_evals)) {
            todo.push_back(i);
            ++evals;
          }
        prog.add(todo.size());
        parallel_for(todo.size(), o.jobs, [&](size_t k) {
          Entry& e = entries[todo[k]];
          e.prep = cb.prepare(e.params);
          if (e.prep.ok) {
            cache.load(e);
            if (!e.have_lb) e.lb = cb.lower_bound(e.params), e.have_lb = true;
          }
        });
        std::vector<size_t> to_simulate;
        for (size_t i : todo)
          if (entries[i].prep.ok && !entries[i].have_sim)
            to_simulate.push_back(i);
          else
            prog.tick();
        simulate(
            to_simulate, [](size_t) { return true; }, [&](size_t) { prog.tick(); });
        for (size_t i : todo) {
          Entry& e = entries[i];
          e.status = !e.prep.ok || !e.sim.ok ? "rejected" : e.from_cache ? "cached" : "simulated";
        }
        for (size_t i : line) {
          const Entry& e = entries[i];
          if (!e.have_sim || !e.sim.ok) continue;
          const Entry& c = entries[cur_i];
          if (!c.have_sim || !c.sim.ok || better(e, c)) {
            if (i != cur_i) moved = true;
            cur_i = i;
            cur = e.params;
          }
        }
      }
    }
    for (auto& e : entries)
      if (e.status.empty()) e.status = "skipped";
  } else {
    throw std::invalid_argument(fmt::format("--strategy '{}': expected grid or coord", o.strategy));
  }

  // The winner must be right: check the best timed config, and the next best while the
  // check rejects them (checking every config would cost a functional run each).
  for (bool settled = !cb.check; !settled;) {
    Entry* top = nullptr;
    for (auto& e : entries)
      if ((e.status == "simulated" || e.status == "cached") && (!top || better(e, *top))) top = &e;
    if (!top) break;
    std::string why = cb.check(top->params);
    settled = why.empty();
    if (!settled) {
      top->status = "rejected";
      top->sim.reason = "the functional check run failed: " + why;
    }
  }

  Result r;
  const Entry* best = nullptr;
  for (const auto& e : entries) {
    ConfigResult c;
    c.params = e.params;
    c.status = e.status;
    // A pruned config may have been simulated (by a worker that started it before the
    // result that prunes it came in): only a rejection has a reason.
    c.reason =
        !e.prep.ok ? e.prep.reason : (e.status == "rejected" && e.have_sim ? e.sim.reason : "");
    if (e.have_lb) c.lb_us = e.lb * o.us_per_cycle;
    bool counted = e.status == "simulated" || e.status == "cached";
    if (counted) {
      c.time_us = e.sim.cycles * o.us_per_cycle;
      c.bound = e.sim.bound;
      if (!best || better(e, *best)) best = &e;
    }
    r.simulated += e.status == "simulated";
    r.cached += e.status == "cached";
    r.pruned += e.status == "pruned";
    r.rejected += e.status == "rejected";
    r.skipped += e.status == "skipped";
    r.configs.push_back(c);
  }
  if (best) {
    r.best = best->params;
    r.best_time_us = best->sim.cycles * o.us_per_cycle;
    for (const auto& c : r.configs)
      if (c.time_us > 0 && c.time_us <= *r.best_time_us * (1 + o.error_band_pct / 100))
        r.within_error_band.push_back(c.params);
  }
  r.cache_warning = cache.warning();
  return r;
}

nlohmann::ordered_json rejected_json(const Result& r) {
  json out = json::array();
  for (const auto& c : r.configs)
    if (c.status == "rejected")
      out.push_back({{"params", c.params}, {"reason", prof::one_line(c.reason)}});
  return out;
}

nlohmann::ordered_json to_json(const Result& r) {
  json configs = json::array();
  for (const auto& c : r.configs) {
    json j = {{"params", c.params}, {"status", c.status}, {"reason", c.reason}};
    j["time_us"] = c.time_us >= 0 ? json(c.time_us) : json(nullptr);
    j["lb_us"] = c.lb_us >= 0 ? json(c.lb_us) : json(nullptr);
    j["bound"] = c.bound;
    configs.push_back(j);
  }
  json best_us = r.best_time_us ? json(*r.best_time_us) : json(nullptr);
  return {{"best", {{"params", r.best}, {"time_us", best_us}}},
          {"best_time_us", best_us},
          {"configs", configs},
          {"within_error_band", r.within_error_band},
          {"simulated", r.simulated},
          {"pruned", r.pruned},
          {"rejected_count", r.rejected},
          {"rejected", rejected_json(r)},
          {"cached", r.cached},
          {"skipped", r.skipped}};
}

}  // namespace tilepipe::tune
