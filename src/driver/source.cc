// The catalogue of kernel sources: registered by name, or made on demand by resolvers
// (file-based sources such as Python files).
#include <fmt/format.h>

#include <mutex>

#include "tilepipe/driver.h"
#include "tilepipe/numeric.h"

namespace tilepipe::driver {
namespace {

struct Catalogue {
  std::mutex mu;
  std::vector<KernelSource> kernels;
  std::vector<Resolver> resolvers;
};

Catalogue& catalogue() {
  static Catalogue c;
  return c;
}

}  // namespace

void register_kernel(KernelSource k) {
  auto& c = catalogue();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& old : c.kernels)
    if (old.name == k.name) {
      old = std::move(k);
      return;
    }
  c.kernels.push_back(std::move(k));
}

void register_resolver(Resolver r) {
  auto& c = catalogue();
  std::lock_guard<std::mutex> lock(c.mu);
  c.resolvers.push_back(std::move(r));
}

bool has_resolvers() {
  auto& c = catalogue();
  std::lock_guard<std::mutex> lock(c.mu);
  return !c.resolvers.empty();
}

std::vector<KernelSource> kernels() {
  auto& c = catalogue();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.kernels;
}

KernelSource find_kernel(const std::string& spec) {
  std::vector<std::string> names;
  std::vector<Resolver> resolvers;
  {
    auto& c = catalogue();
    std::lock_guard<std::mutex> lock(c.mu);
    for (const auto& k : c.kernels) {
      if (k.name == spec) return k;
      names.push_back(k.name);
    }
    resolvers = c.resolvers;
  }
  // Outside the lock: a resolver may load a file (and run a Python script).
  for (const auto& r : resolvers)
    if (auto k = r(spec)) return *k;
  bool file_like = spec.find(".py") != std::string::npos;
  throw ParamError{fmt::format(
      "unknown kernel '{}'; available: {}{}", spec, fmt::join(names, ", "),
      file_like ? " (a Python file FILE.py[:kernel] needs the Python front end: run the "
                  "tilepipe binary of a build with -DTILEPIPE_PYTHON=ON)"
                : "")};
}

std::string resolve_variant(const KernelSource& k, const std::string& variant) {
  if (variant.empty()) return k.variants.front();
  for (const auto& v : k.variants)
    if (v == variant) return v;
  throw ParamError{fmt::format("kernel '{}' has no variant '{}'; available: {}", k.name, variant,
                               fmt::join(k.variants, ", "))};
}

std::string label(const KernelSource& k, const std::string& variant) {
  return variant.empty() ? k.name : fmt::format("{} [{}]", k.name, variant);
}

Params resolve_params(const KernelSource& k, const RawParams& raw) {
  Params p = parse_param_values(k.name, k.params, raw);
  if (k.validate) {
    std::string err = k.validate(p);
    if (!err.empty()) throw ParamError{fmt::format("kernel '{}': {}", k.name, err)};
  }
  return p;
}

std::vector<double> random_tensor(int64_t n, ir::DType dtype, uint64_t seed, double lo, double hi) {
  std::vector<double> v(static_cast<size_t>(n));
  // splitmix64: the same stream on every platform and standard library; the seed itself
  // is mixed first so seeds s and s+1 give unrelated streams.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint64_t s = mix(seed + 0x2545F4914F6CDD1Dull);
  for (auto& x : v) {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = mix(s);
    double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    x = round_to(dtype, lo + (hi - lo) * u);
  }
  return v;
}

}  // namespace tilepipe::driver
