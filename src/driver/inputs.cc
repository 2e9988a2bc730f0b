// The user's arrays (`--inputs FILE.npz`): reading NumPy archives, checking them against the
// kernel's tensors; and what a report says about where input values came from and what
// depends on them (tilepipe/driver.h, "the user's inputs").
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "tilepipe/driver.h"
#include "tilepipe/numeric.h"

namespace tilepipe::driver {
namespace {

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw ParamError{fmt::format(
      "--inputs '{}': {}; give a NumPy archive of the kernel's arrays by parameter name, "
      "written by np.savez(FILE, A=a, B=b) or np.savez_compressed",
      file, what)};
}

uint64_t le(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(b[at + i]);
  return v;
}

/// The members of a zip archive: name -> uncompressed bytes (stored or deflated).
std::map<std::string, std::string> unzip(const std::string& file, const std::string& z) {
  const size_t kEocd = 22;
  size_t eocd = std::string::npos;
  for (size_t i = z.size() >= kEocd ? z.size() - kEocd + 1 : 0; i-- > 0;)
    if (le(z, i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) bad(file, "not a .npz (zip) archive");
  uint64_t entries = le(z, eocd + 10, 2), cd = le(z, eocd + 16, 4);
  if (entries == 0xFFFF || cd == 0xFFFFFFFF) {  // zip64: the locator precedes the record
    if (eocd < 20 || le(z, eocd - 20, 4) != 0x07064b50) bad(file, "a damaged zip64 archive");
    uint64_t rec = le(z, eocd - 12, 8);
    if (rec + 56 > z.size() || le(z, rec, 4) != 0x06064b50) bad(file, "a damaged zip64 archive");
    entries = le(z, rec + 32, 8);
    cd = le(z, rec + 48, 8);
  }
  std::map<std::string, std::string> out;
  size_t at = cd;
  for (uint64_t e = 0; e < entries; ++e) {
    if (at + 46 > z.size() || le(z, at, 4) != 0x02014b50) bad(file, "a damaged zip directory");
    uint64_t method = le(z, at + 10, 2), csize = le(z, at + 20, 4), usize = le(z, at + 24, 4);
    uint64_t nlen = le(z, at + 28, 2), xlen = le(z, at + 30, 2), clen = le(z, at + 32, 2);
    uint64_t local = le(z, at + 42, 4);
    if (at + 46 + nlen + xlen > z.size()) bad(file, "a damaged zip directory");
    std::string name = z.substr(at + 46, nlen);
    // Zip64 extra field: the sizes and offset that did not fit, in this order.
    for (size_t x = at + 46 + nlen; x + 4 <= at + 46 + nlen + xlen;) {
      uint64_t id = le(z, x, 2), len = le(z, x + 2, 2);
      size_t f = x + 4;
      if (id == 1) {
        for (uint64_t* v : {&usize, &csize, &local})
          if (*v == 0xFFFFFFFF && f + 8 <= x + 4 + len) {
            *v = le(z, f, 8);
            f += 8;
          }
      }
      x += 4 + len;
    }
    at += 46 + nlen + xlen + clen;
    if (local + 30 > z.size() || le(z, local, 4) != 0x04034b50) bad(file, "a damaged zip member");
    size_t data = local + 30 + le(z, local + 26, 2) + le(z, local + 28, 2);
    if (data + csize > z.size() || usize > (uint64_t{1} << 40))
      bad(file, fmt::format("member '{}' runs past the end of the file", name));
    std::string bytes;
    if (method == 0) {
      bytes = z.substr(data, csize);
    } else if (method == 8) {
      bytes.resize(usize);
      z_stream s{};
      if (inflateInit2(&s, -15) != Z_OK) bad(file, "zlib failed");
      s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data() + data));
      s.avail_in = static_cast<uInt>(csize);
      s.next_out = reinterpret_cast<Bytef*>(bytes.data());
      s.avail_out = static_cast<uInt>(usize);
      int rc = inflate(&s, Z_FINISH);
      inflateEnd(&s);
      if (rc != Z_STREAM_END || s.total_out != usize)
        bad(file, fmt::format("member '{}' does not inflate", name));
    } else {
      bad(file, fmt::format("member '{}' uses zip compression method {} (np.savez writes 0 or 8)",
                            name, method));
    }
    out[name] = std::move(bytes);
  }
  return out;
}

/// NumPy's dtype names of the .npy type codes tilepipe reads, and the element type that
/// decodes them.
struct NpyType {
  const char* code;  // descr without the byte-order mark
  const char* name;
  std::optional<ir::DType> dtype;  // nullopt: float64, decoded apart
};
constexpr NpyType kNpyTypes[] = {
    {"f2", "float16", ir::DType::F16}, {"f4", "float32", ir::DType::F32},
    {"f8", "float64", std::nullopt},   {"i1", "int8", ir::DType::I8},
    {"u1", "uint8", ir::DType::U8},    {"i2", "int16", ir::DType::I16},
    {"u2", "uint16", ir::DType::U16},  {"i4", "int32", ir::DType::I32},
    {"u4", "uint32", ir::DType::U32},  {"i8", "int64", ir::DType::I64},
    {"u8", "uint64", ir::DType::U64},  {"b1", "bool", ir::DType::Bool},
};

GivenInputs::Array parse_npy(const std::string& file, const std::string& name,
                             const std::string& b) {
  auto fail = [&](const std::string& what) {
    bad(file, fmt::format("array '{}': {}", name, what));
  };
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) fail("not a .npy array");
  const int major = static_cast<uint8_t>(b[6]);
  const size_t hlen = major == 1 ? le(b, 8, 2) : le(b, 8, 4);
  const size_t start = major == 1 ? 10 : 12;
  if (start + hlen > b.size()) fail("a truncated header");
  const std::string h = b.substr(start, hlen);
  std::smatch m;
  if (!std::regex_search(h, m, std::regex(R"('descr'\s*:\s*'([<>|=])([a-zA-Z]\d+)')")))
    fail(fmt::format("a dtype tilepipe does not read (header {})", h));
  const std::string order = m[1], code = m[2];
  const NpyType* t = nullptr;
  for (const auto& c : kNpyTypes)
    if (code == c.code) t = &c;
  if (!t) fail(fmt::format("dtype '{}{}' is not a number type a kernel takes", order, code));
  if (order == ">" && code.back() != '1') fail("big-endian data; save it little-endian");
  const bool fortran = std::regex_search(h, std::regex(R"('fortran_order'\s*:\s*True)"));
  if (!std::regex_search(h, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    fail("a header without a shape");
  GivenInputs::Array a;
  a.dtype = t->name;
  const std::string dims = m[1];
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it)
    a.shape.push_back(std::stoll(it->str()));
  const int64_t n = ir::checked_extent_product(a.shape);
  const int size = std::stoi(code.substr(1));
  const size_t data = start + hlen;
  if (n > ir::kMaxBufferBytes || data + static_cast<size_t>(n) * size > b.size())
    fail(fmt::format("shape {} needs more data than the file holds", fmt::join(a.shape, "x")));
  std::vector<double> flat(static_cast<size_t>(n));
  const auto* p = reinterpret_cast<const uint8_t*>(b.data() + data);
  for (int64_t i = 0; i < n; ++i) {
    if (t->dtype) {
      flat[i] = load_elem(*t->dtype, p + i * size);
    } else {
      std::memcpy(&flat[i], p + i * size, 8);
    }
  }
  if (!fortran || a.shape.size() < 2) {
    a.values = std::move(flat);
    return a;
  }
  // Fortran order: element (i0, i1, ...) is at i0 + d0 * (i1 + d1 * ...); reorder to C.
  a.values.resize(flat.size());
  std::vector<int64_t> idx(a.shape.size(), 0);
  for (int64_t c = 0; c < n; ++c) {
    int64_t f = 0;
    for (size_t d = a.shape.size(); d-- > 0;) f = f * a.shape[d] + idx[d];
    a.values[c] = flat[f];
    for (size_t d = a.shape.size(); d-- > 0;) {
      if (++idx[d] < a.shape[d]) break;
      idx[d] = 0;
    }
  }
  return a;
}

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

/// NumPy's name of an element type (the one its arrays of that type print).
std::string numpy_name(ir::DType t) {
  for (const auto& c : kNpyTypes)
    if (c.dtype == t) return c.name;
  return t == ir::DType::BF16 ? "bfloat16" : ir::to_string(t);
}

std::string tensors_of(const ir::Program& p) {
  std::vector<std::string> ts;
  for (const auto& b : p.params)
    ts.push_back(fmt::format("{} ({} {}, {})", b->name, numpy_name(b->dtype), shape_str(b->shape),
                             b->role == ir::TensorRole::Output ? "output" : "input"));
  return fmt::format("{}", fmt::join(ts, ", "));
}

}  // namespace

GivenInputs load_inputs(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot be read (no such file, or permission denied)");
  std::ostringstream s;
  s << f.rdbuf();
  GivenInputs in;
  in.file = path;
  for (const auto& [member, bytes] : unzip(path, s.str())) {
    std::string name = member;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    in.arrays[name] = parse_npy(path, name, bytes);
  }
  if (in.arrays.empty()) bad(path, "the archive holds no array");
  return in;
}

sim::HostData host_inputs(const GivenInputs& in, const ir::Program& p, const std::string& kernel) {
  const std::string where = fmt::format("--inputs '{}'", in.file);
  for (const auto& [name, a] : in.arrays) {
    bool known = std::any_of(p.params.begin(), p.params.end(),
                             [&](const ir::Buffer& b) { return b->name == name; });
    if (!known)
      throw ParamError{fmt::format("{}: array '{}' is no parameter of {}; its tensors: {}", where,
                                   name, kernel, tensors_of(p))};
  }
  sim::HostData io;
  for (const auto& b : p.params) {
    auto it = in.arrays.find(b->name);
    const std::string want = fmt::format("{} {}", numpy_name(b->dtype), shape_str(b->shape));
    if (it == in.arrays.end()) {
      if (b->role == ir::TensorRole::Output) continue;  // its initial values: zero
      std::vector<std::string> has;
      for (const auto& kv : in.arrays) has.push_back(kv.first);
      throw ParamError{
          fmt::format("{}: no array '{}' for the input {} of {} ({}; the file has {}); add it: "
                      "np.savez(FILE, {}=..., ...)",
                      where, b->name, b->name, kernel, want, fmt::join(has, ", "), b->name)};
    }
    const auto& a = it->second;
    if (a.shape != b->shape)
      throw ParamError{fmt::format(
          "{}: array '{}' has shape {}; {} declares {} ({}): reshape it, or save the array the "
          "kernel takes",
          where, b->name, shape_str(a.shape), kernel, want, b->loc.str())};
    const std::string want_type = numpy_name(b->dtype);
    bool ok = a.dtype == want_type || (b->dtype == ir::DType::BF16 && a.dtype == "float32") ||
              ((b->dtype == ir::DType::U8 || b->dtype == ir::DType::Bool) && a.dtype == "bool");
    if (!ok)
      throw ParamError{
          fmt::format("{}: array '{}' has dtype {}; {} declares {} ({}): convert it, e.g. "
                      "a.astype(np.{})",
                      where, b->name, a.dtype, kernel, want, b->loc.str(),
                      b->dtype == ir::DType::BF16 ? "float32" : want_type)};
    std::vector<double> v = a.values;
    if (b->dtype == ir::DType::BF16)
      for (auto& x : v) x = round_to(ir::DType::BF16, x);
    io[b->name] = std::move(v);
  }
  return io;
}

std::string InputsReport::note() const {
  if (uses.empty()) return "";
  // Per tensor: its uses and their lines, in the order the analysis sorted them.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> per;
  for (const auto& u : uses) {
    if (!per.count(u.tensor)) order.push_back(u.tensor);
    per[u.tensor].push_back(fmt::format("{} at {}", u.use, u.loc.str()));
  }
  std::vector<std::string> parts;
  for (const auto& t : order) {
    auto& v = per[t];
    const size_t shown = std::min<size_t>(v.size(), 3);
    std::string s = fmt::format("{} ({}{})", t, fmt::join(v.begin(), v.begin() + shown, ", "),
                                v.size() > shown ? fmt::format(", {} more", v.size() - shown) : "");
    parts.push_back(s);
  }
  std::string from = source == "seeded"
                         ? fmt::format(
                               "they ran on seeded random values (seed {}), made up: give the real "
                               "ones with --inputs FILE.npz",
                               seed)
                     : source == "file" ? fmt::format("they ran on the arrays of {}", file)
                                        : "they ran on the arrays the caller passed";
  return fmt::format("the time depends on the values of {}; {}", fmt::join(parts, ", "), from);
}

InputsReport inputs_report(const KernelSource& k, const RunRequest& req, const ir::Program& p) {
  InputsReport r;
  if (req.given_inputs) {
    r.source = "file";
    r.file = req.given_inputs->file;
  } else if (k.seeded_inputs) {
    r.source = "seeded";
    r.seed = req.seed;
  } else {
    r.source = "host";
  }
  r.uses = ir::data_dependence(p);
  return r;
}

InputsReport inputs_report(const KernelSource& k, const RunRequest& req, const ChipConfig& chip) {
  return inputs_report(k, req, compile(k, req, chip).program);
}

nlohmann::ordered_json inputs_json(const InputsReport& r) {
  nlohmann::ordered_json in = {{"source", r.source}};
  if (r.source == "seeded") in["seed"] = r.seed;
  if (r.source == "file") in["file"] = r.file;
  nlohmann::ordered_json uses = nlohmann::ordered_json::array();
  for (const auto& u : r.uses)
    uses.push_back({{"tensor", u.tensor}, {"use", u.use}, {"where", u.loc.str()}});
  return {{"inputs", in},
          {"data_dependent", {{"depends", !r.uses.empty()}, {"uses", uses}, {"note", r.note()}}}};
}

}  // namespace tilepipe::driver
