// Shared test helpers: build-and-expect-diagnostic, golden IR comparison, kernel runs.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/lang.h"
#include "tilepipe/verify.h"

namespace tilepipe::testing {

inline const ChipConfig& a3() {
  static const ChipConfig c = load_chip_config("a3");
  return c;
}

/// Runs `fn` (which builds and checks a program) and expects a UserError whose text
/// contains every fragment (e.g. the message and "file.cc:LINE").
inline void expect_user_error(const std::function<void()>& fn,
                              const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected a UserError, but the program was accepted";
  } catch (const UserError& e) {
    std::string text = e.what();
    for (const auto& f : fragments)
      EXPECT_NE(text.find(f), std::string::npos) << "missing '" << f << "' in:\n" << text;
  }
}

/// Verifies a program and expects a diagnostic of `kind` whose text has each fragment.
inline void expect_diag(const ir::Program& p, const std::string& kind,
                        const std::vector<std::string>& fragments) {
  auto diags = verify(p, a3());
  const Diagnostic* hit = nullptr;
  for (const auto& d : diags)
    if (d.kind == kind) hit = &d;
  ASSERT_NE(hit, nullptr) << "no '" << kind << "' diagnostic; got " << diags.size()
                          << (diags.empty() ? "" : ": " + diags.front().str());
  std::string text = hit->str();
  for (const auto& f : fragments)
    EXPECT_NE(text.find(f), std::string::npos) << "missing '" << f << "' in:\n" << text;
}

/// "file.cc:N" of the line that calls this, for matching diagnostic locations.
inline std::string here(int line_offset = 0,
                        std::source_location l = std::source_location::current()) {
  return ir::Loc::from(l).file + ":" + std::to_string(static_cast<int>(l.line()) + line_offset);
}

/// A small correct Cube -> Vector program (gemm through L0, FIX to a workspace, cross flag,
/// AIV reads its half): shared by the golden-IR and verifier tests.
inline ir::Program small_cube_program(const std::string& name) {
  using namespace lang;
  KernelBuilder kb(name, 24);
  auto a = kb.input("a", {32, 64}, f16);
  auto bt = kb.input("bt", {32, 64}, f16);
  auto ws = kb.workspace("ws", {24, 32, 32}, f32);
  auto [cid, vid] = kb.launch();
  scope_c([&] {
    auto a1 = alloc_L1("a1", {32, 64}, f16);
    auto b1 = alloc_L1("b1", {32, 64}, f16);
    auto a0 = alloc_L0A("a0", {2, 32, 32}, f16);
    auto b0 = alloc_L0B("b0", {2, 32, 32}, f16);
    auto c0 = alloc_L0C("c0", {32, 32}, f32);
    copy(a, a1);
    copy(bt, b1);
    set_flag(Pipe::MTE2, Pipe::MTE1, 0);
    wait_flag(Pipe::MTE2, Pipe::MTE1, 0);
    serial(2, [&](Ex k) {
      copy(a1(all, slice(k * 32, 32)), a0[k]);
      copy(b1(all, slice(k * 32, 32)), b0[k], {.transpose = true, .pad_value = std::nullopt});
      pipe_barrier(Pipe::MTE1);
      if_else(
          k == 0, [&] { gemm(a0[k], b0[k], c0); }, [&] { mma(a0[k], b0[k], c0, /*init=*/false); });
    });
    set_flag(Pipe::M, Pipe::FIX, 0);
    wait_flag(Pipe::M, Pipe::FIX, 0);
    copy(c0, ws[cid]);
    set_cross_flag(Pipe::FIX, 3);
  });
  scope_v([&] {
    auto out = alloc_ub("out", {16, 32}, f32);
    wait_cross_flag(3);
    copy(ws(cid, rows(vid * 16, 16), all), out);
  });
  return kb.finish();
}

}  // namespace tilepipe::testing
