// `run` and `compile` on a spec built from flags (tools/cli_spec_flags.hpp).
#include "tools/cli_spec_flags.hpp"

#include <climits>

namespace flashjit::cli {

bool SpecFlags::given() const {
  for (const CLI::Option* o : options)
    if (o->count() > 0) return true;
  return false;
}

void add_spec_flags(CLI::App* sub, SpecFlags& f) {
  const std::string group = "Spec without a file (instead of SPEC; README \"Specs\" has the language)";
  auto add = [&](CLI::Option* o) {
    o->group(group);
    f.options.push_back(o);
    return o;
  };
  add(sub->add_option("--dtype", f.dtype, "element type of q, k, v, o"))
      ->type_name("bf16|fp16")->check(one_of({"bf16", "fp16"}))->capture_default_str();
  add(sub->add_option("--head-dim", f.head_dim, "head dim of q and k (and v)"))
      ->type_name("N")->check(integer_in(1, INT_MAX))->capture_default_str();
  add(sub->add_option("--head-dim-v", f.head_dim_v, "head dim of v and o (default --head-dim)"))
      ->type_name("N")->check(integer_in(1, INT_MAX));
  add(sub->add_option("--mask", f.mask, "mask expression, e.g. \"window(256, 0)\"; none: every key visible"))
      ->type_name("EXPR")->capture_default_str();
  add(sub->add_option("--score", f.score, "score expression, e.g. \"30 * tanh(score / 30)\""))
      ->type_name("EXPR")->capture_default_str();
  add(sub->add_option("--param", f.params, "a param the expressions read (repeatable; DEFAULT 0)"))
      ->type_name("NAME:TYPE[=DEFAULT]")->check(parsed_by(parse_param))->allow_extra_args(false);
  add(sub->add_option("--tensor", f.tensors, "a tensor the expressions read (repeatable; random contents in run)"))
      ->type_name("NAME:TYPE:DIM[,DIM...]")->check(parsed_by(parse_tensor))->allow_extra_args(false);
}

AttentionSpec spec_from_flags(const SpecFlags& f) {
  AttentionSpec s;
  s.name = "cli";
  s.dtype = f.dtype == "fp16" ? DType::f16 : DType::bf16;
  s.head_dim_qk = f.head_dim;
  s.head_dim_v = f.head_dim_v ? f.head_dim_v : f.head_dim;
  s.mask = f.mask;
  s.score = f.score;
  for (const std::string& p : f.params) s.params.push_back(parse_param(p));
  for (const std::string& t : f.tensors) s.tensors.push_back(parse_tensor(t));
  for (const auto& [flag, kind, text] : {std::tuple{"--mask", "mask", &s.mask}, {"--score", "score", &s.score}}) {
    if (*text == "none" && std::string(kind) == "mask") continue;  // AttentionSpec's "every key visible"
    try {
      analyze_expression(*text, kind, s.params, s.tensors);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::spec) throw;
      throw Error(ErrorKind::spec, std::string(flag) + ": " + e.what());
    }
  }
  s.validate();
  return s;
}

AttentionSpec spec_from_args(const std::string& path, const SpecFlags& f, bool allow_default) {
  if (!path.empty() && f.given())
    throw Error(ErrorKind::usage, "SPEC (" + path + ") and the spec flags (--dtype, --head-dim, --mask, ...) exclude "
                                  "each other: give a spec file or the flags");
  if (!path.empty()) return load_spec_arg(path);
  if (f.given() || allow_default) return f.given() ? spec_from_flags(f) : default_spec();
  throw Error(ErrorKind::usage, "missing SPEC: give a spec file, or build one with --head-dim, --dtype, --mask, ...");
}

}  // namespace flashjit::cli
