// `tilepipe fidelity` (the published anchors simulated, with their errors) and `tilepipe
// calibrate` (chip-config parameters fitted to measurements): the command logic over
// <tilepipe/fidelity.h>, kept out of cli.cc (which only registers the flags). Bad input
// throws driver::ParamError (exit 2).
#pragma once

#include <string>
#include <vector>

namespace tilepipe::cli {

struct FidelityArgs {
  std::string anchors;  // "" = configs/fidelity.json
  std::vector<std::string> only;
  std::string chip;  // "" = each anchor's own
  std::string corpus;
  int jobs = 0;
  bool exact = false, json = false;
};
int cmd_fidelity(const FidelityArgs& a);

struct CalibrateArgs {
  std::string measurements;  // .csv, or an anchors file (.json)
  std::vector<std::string> fit;
  std::vector<std::string> only;
  std::string chip = "a3";
  std::string output, corpus, ranges;
  int jobs = 0, max_evals = 0;
  bool exact = false, json = false, no_loo = false;
};
int cmd_calibrate(const CalibrateArgs& a);

}  // namespace tilepipe::cli
