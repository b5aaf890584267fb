// `flashjit compile SPEC`: the compiler alone, no GPU needed.
#include <iostream>

#include "tools/cli.hpp"

namespace flashjit::cli {

namespace {

TileConfig parse_config(const std::string& text) {
  int v[4];
  if (std::sscanf(text.c_str(), "%d,%d,%d,%d", &v[0], &v[1], &v[2], &v[3]) != 4)
    throw Error(ErrorKind::usage, "--config expects bm,bn,warps,stages (e.g. 32,32,4,1), got '" + text + "'");
  return TileConfig{v[0], v[1], v[2], v[3]};
}

}  // namespace

int cmd_compile(int argc, char** argv) {
  Args a = parse_args(argc, argv, 2, {"--emit", "--arch", "--config", "-o", "--output"}, {"--help"});
  if (a.has("--help")) {
    std::cout << "usage: flashjit compile SPEC [--emit llvm|ptx] [--arch sm_90a] [--config bm,bn,warps,stages] [-o FILE]\n"
                 "Compiles SPEC (YAML) and writes the optimised LLVM IR or the PTX to FILE (default stdout).\n"
                 "A summary (kernel key, tile config and why, sizes; registers and spills when ptxas is found)\n"
                 "goes to stderr. FILE is replaced only when the compile succeeds.\n";
    return kOk;
  }
  if (a.positional.size() != 1) throw Error(ErrorKind::usage, "compile needs exactly one SPEC file (see --help)");
  std::string emit = a.get("--emit").value_or("ptx");
  if (emit != "ptx" && emit != "llvm") throw Error(ErrorKind::usage, "--emit '" + emit + "' is not allowed; use llvm or ptx");
  AttentionSpec spec = load_spec_arg(a.positional[0]);
  CompileOptions opts;
  opts.arch = a.get("--arch").value_or("sm_90a");
  if (auto c = a.get("--config")) opts.config = parse_config(*c);
  CompiledKernel k = compile_to_ptx(spec, opts);
  const std::string& text = emit == "ptx" ? k.ptx : k.llvm_ir;
  auto out = a.get("-o") ? a.get("-o") : a.get("--output");
  if (out) write_output(*out, text);
  else std::cout << text;
  std::cerr << "kernel " << k.key << " (" << k.entry << ") for " << k.arch << ": config " << k.config.str() << " — "
            << k.config_reason << "; PTX " << k.ptx.size() << " bytes, " << k.threads << " threads, "
            << k.shared_bytes << " B shared";
  // The help promises registers and spills when ptxas is there: the numbers the tuner prunes by.
  PtxasReport r = run_ptxas(k.ptx, k.arch);
  if (r.ran && r.ok)
    std::cerr << "; ptxas: " << r.registers << " registers, " << r.spill_stores << " B spill stores, " << r.spill_loads
              << " B spill loads";
  else if (r.ran)
    std::cerr << "; ptxas FAILED:\n" << r.log;
  std::cerr << "\n";
  return kOk;
}

}  // namespace flashjit::cli
