// `flashjit tune SPEC --shapes BxHxSqxSkv,... [--mode quick|full] [--json] [--deadline S]` (issue 5).
#pragma once

namespace flashjit::cli {

// argv[1] == "tune". 0 ok, 1 a shape had no working config, 2 usage or spec error, 69 no GPU.
int cmd_tune(int argc, char** argv);

}  // namespace flashjit::cli
