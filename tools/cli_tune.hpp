// `flashjit tune SPEC --shapes BxHxSqxSkv,... [--mode quick|full] [--json] [--deadline S] [--device N]`.
#pragma once

#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::cli {

// argv[1] == "tune". 0 ok, 1 a shape had no working config, 2 usage or spec error, 69 no GPU.
int cmd_tune(int argc, char** argv);

// Parses "4x16x4096x4096,1x32x1024x2048" (x or ×; heads_kv = heads); Error(usage) naming the bad item.
std::vector<ProblemShape> parse_tune_shapes(const std::string& text);

}  // namespace flashjit::cli
