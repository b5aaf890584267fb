// `flashjit compile SPEC`: the compiler alone, no GPU needed.
#include <iostream>
#include <memory>

#include "tools/cli.hpp"
#include "tools/cli_json.hpp"
#include "tools/cli_spec_flags.hpp"

namespace flashjit::cli {

namespace {

struct CompileArgs {
  std::string spec;
  std::string emit = "ptx";
  std::string arch = "sm_90a";
  std::string config;  // "" → the heuristic table's
  std::string output;  // "" → stdout
  bool backward = false;
  bool json = false;
  SpecFlags flags;
};

// --json: what the stderr summary says, as one object on stdout; the IR or PTX under "text" unless
// it went to -o FILE.
void print_json(const CompiledKernel& k, const CompileArgs& a, const std::string& text, const PtxasReport& r) {
  JsonObject j;
  j.str("key", k.key).str("entry", k.entry).str("arch", k.arch).str("description", k.description);
  j.str("config", k.config.str()).str("config_reason", k.config_reason);
  j.integer("threads", k.threads).integer("shared_bytes", k.shared_bytes).integer("ptx_bytes", int64_t(k.ptx.size()));
  JsonObject ptxas;
  ptxas.boolean("ran", r.ran).boolean("ok", r.ok);
  if (r.ran && r.ok)
    ptxas.integer("registers", r.registers).integer("spill_stores", r.spill_stores).integer("spill_loads", r.spill_loads);
  else if (r.ran)
    ptxas.str("log", r.log);
  j.raw("ptxas", ptxas.dump()).str("emit", a.emit);
  if (a.output.empty()) j.str("text", text);
  else j.str("output", a.output);
  std::cout << j.dump() << "\n";
}

int compile(const CompileArgs& a) {
  AttentionSpec spec = spec_from_args(a.spec, a.flags, false);
  CompileOptions opts;
  opts.arch = a.arch;
  if (!a.config.empty()) (a.backward ? opts.backward_config : opts.config) = parse_tile_config(a.config);
  opts.backward = a.backward;
  opts.keep_llvm_ir = a.emit == "llvm";  // printing the IR is a fifth of a compile; PTX does not need it
  CompiledKernel k = compile_to_ptx(spec, opts);
  const std::string& text = a.emit == "ptx" ? k.ptx : k.llvm_ir;
  if (!a.output.empty()) write_output(a.output, text);
  if (a.json) {
    print_json(k, a, text, run_ptxas(k.ptx, k.arch, k.entry));
    return kOk;
  }
  if (a.output.empty()) std::cout << text;
  std::cerr << "kernel " << k.key << " (" << k.entry << ") for " << k.arch << ": config " << k.config.str() << " — "
            << k.config_reason << "; PTX " << k.ptx.size() << " bytes, " << k.threads << " threads, "
            << k.shared_bytes << " B shared";
  // The help promises registers and spills when ptxas is there: the numbers the tuner prunes by.
  PtxasReport r = run_ptxas(k.ptx, k.arch, k.entry);
  if (r.ran && r.ok)
    std::cerr << "; ptxas: " << r.registers << " registers, " << r.spill_stores << " B spill stores, " << r.spill_loads
              << " B spill loads";
  else if (r.ran)
    std::cerr << "; ptxas FAILED:\n" << r.log;
  else if (!r.path.empty())
    std::cerr << "; ptxas " << r.path << " did not run (registers unknown)";
  std::cerr << "\n";
  return kOk;
}

}  // namespace

Command add_compile(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("compile", "compile a spec to LLVM IR or PTX (no GPU needed)");
  sub->footer(
      "Compiles SPEC (YAML), or the spec that --dtype, --head-dim, --mask, ... build, and writes the\n"
      "optimised LLVM IR or the PTX to FILE (default stdout).\n"
      "A summary (kernel key, tile config and why, sizes; registers and spills when ptxas is found)\n"
      "goes to stderr. FILE is replaced only when the compile succeeds; a device or FIFO is written\n"
      "in place, and a symlink is written through to its target.");
  auto a = std::make_shared<CompileArgs>();
  sub->add_option("SPEC", a->spec, "the spec (YAML file), or the spec flags below")->type_name("");
  sub->add_option("--emit", a->emit, "what to write")
      ->type_name("llvm|ptx")
      ->check(one_of({"llvm", "ptx"}))
      ->capture_default_str();
  sub->add_option("--arch", a->arch, "PTX target: sm_80, sm_86, sm_89, sm_90 or sm_90a")
      ->type_name("ARCH")
      ->capture_default_str();
  sub->add_option("--config", a->config, "tile config (default: the heuristic's)")
      ->type_name("BM,BN,WARPS,STAGES")
      ->check(parsed_by(parse_tile_config));
  sub->add_option("-o,--output", a->output, "write to FILE instead of stdout")->type_name("FILE");
  sub->add_flag("--backward", a->backward,
                "the backward module (dK/dV, dQ and D pre-pass kernels) instead of the forward; --config is the "
                "backward's");
  sub->add_flag("--json", a->json, "print a JSON object (kernel, config, sizes, ptxas; the text unless -o)");
  add_spec_flags(sub, a->flags);
  return {sub, [a] { return compile(*a); }};
}

}  // namespace flashjit::cli
