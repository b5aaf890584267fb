// `flashjit cache list|show KEY|clear|export FILE|import FILE` (DESIGN §7, issue 5).
#pragma once

namespace flashjit::cli {

// argv[1] == "cache". Returns 0 ok, 1 no such entry, 2 usage error or malformed import file.
int cmd_cache(int argc, char** argv);

}  // namespace flashjit::cli
