// The compiler on the CPU: stages, PTX shape, ptxas (when present), dumps, limits, LLVM errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <regex>

#include "flashjit/flashjit.hpp"
#include "tests/codegen_matrix.hpp"
#include "tests/support.hpp"

using namespace flashjit;

using test::make;
using test::ptxas_path;
using test::codegen_matrix;

TEST_CASE("codegen: keep_llvm_ir = false skips the IR text, not the code", "[codegen]") {
  CompileOptions no_ir;
  no_ir.keep_llvm_ir = false;
  CompiledKernel lean = compile_to_ptx(default_spec(), no_ir);
  CompiledKernel full = compile_to_ptx(default_spec());
  CHECK(lean.llvm_ir.empty());
  CHECK_FALSE(full.llvm_ir.empty());
  CHECK(lean.ptx == full.ptx);
  CHECK(lean.key == full.key);
  REQUIRE(lean.stages.size() == full.stages.size());
  for (size_t i = 0; i < lean.stages.size(); ++i) {
    INFO(lean.stages[i].name);
    const bool ir = lean.stages[i].name == "llvm-ir" || lean.stages[i].name == "opt";
    CHECK(lean.stages[i].text.empty() == ir);
  }
}

TEST_CASE("codegen: the default kernel goes through every stage to a PTX .entry", "[codegen]") {
  CompiledKernel k = compile_to_ptx(default_spec());
  std::vector<std::string> names;
  for (auto& s : k.stages) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"spec", "analyze", "plan", "llvm-ir", "opt", "ptx"});
  CHECK_THAT(k.ptx, Catch::Contains(".visible .entry " + k.entry));
  CHECK_THAT(k.ptx, Catch::Contains(".target sm_90a"));
  CHECK_THAT(k.ptx, Catch::Contains(".version 8.0"));
  // The tile primitives must be there. On sm_90a: warpgroup MMA with its fences (S = QKᵀ with n =
  // block_n, and P·V across both of V's 64-column panels, MmaShape::whole_pv: n = 128 for both),
  // Q read by descriptor (no ldmatrix), the mbarriers published to the async proxy, quad
  // shuffles, ex2.approx and the paired bf16 conversion.
  CHECK_THAT(k.ptx, Catch::Contains("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"));
  CHECK_THAT(k.ptx, !Catch::Contains("wgmma.mma_async.sync.aligned.m64n64k16"));
  CHECK_THAT(k.ptx, Catch::Contains("wgmma.fence.sync.aligned"));
  CHECK_THAT(k.ptx, Catch::Contains("wgmma.commit_group.sync.aligned"));
  CHECK_THAT(k.ptx, Catch::Contains("wgmma.wait_group.sync.aligned 0"));
  CHECK_THAT(k.ptx, Catch::Contains("fence.proxy.async.shared::cta"));
  CHECK_THAT(k.ptx, !Catch::Contains("ldmatrix"));
  CHECK_THAT(k.ptx, Catch::Contains("shfl.sync.bfly.b32"));
  CHECK_THAT(k.ptx, Catch::Contains("ex2.approx.ftz.f32"));
  CHECK_THAT(k.ptx, Catch::Contains("cvt.rn.bf16x2.f32"));
  // Two compute warpgroups and a producer warpgroup (ForwardPlan::producer): Q and K/V loaded by
  // the TMA unit (ForwardPlan::tma) into a ring of stages signalled by mbarriers, registers moved
  // to the compute warpgroups.
  CHECK_THAT(k.ptx, Catch::Contains(".maxntid 384, 1, 1"));
  CHECK_THAT(k.ptx, Catch::Contains("mbarrier.init.shared.b64"));
  CHECK_THAT(k.ptx,
             Catch::Contains("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"));
  CHECK_THAT(k.ptx, Catch::Contains("mbarrier.arrive.expect_tx.shared::cta.b64"));
  CHECK(k.tensor_maps);
  CHECK_THAT(k.ptx, Catch::Contains("mbarrier.try_wait.parity.shared.b64"));
  CHECK_THAT(k.ptx, Catch::Contains("mbarrier.arrive.shared.b64"));
  // 128 × 40 + 256 × 232 = 384 × 168, the launch's allocation: asking more deadlocks the CTA.
  CHECK_THAT(k.ptx, Catch::Contains("setmaxnreg.dec.sync.aligned.u32 40"));
  CHECK_THAT(k.ptx, Catch::Contains("setmaxnreg.inc.sync.aligned.u32 232"));
  CHECK_THAT(k.llvm_ir, Catch::Contains("ptx_kernel"));
  CHECK(k.key.size() == 16);
  CHECK(k.threads == 384);
  // Two Q buffers [128][128], two stages of K and V [128][128], O's staging buffer [128][128],
  // 16-bit, four mbarriers per stage (the rotated walk's K and V pairs), the persistent walk's eight
  // and its tile index (8 bytes), plus 1 KB to align the base to 1024.
  CHECK(k.shared_bytes == 2 * 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2 + 128 * 128 * 2 + 2 * 2 * 2 * 8 + 8 * 8 + 8 + 1024);
  // O leaves through that buffer, written by stmatrix: 16-byte vectors, no 4-byte pair stores to
  // global memory.
  CHECK_THAT(k.ptx, Catch::Contains("stmatrix.sync.aligned.m8n8.x4.shared.b16"));
  CHECK_THAT(k.ptx, Catch::Contains("st.global.v4"));
  CHECK_THAT(k.ptx, !Catch::Contains("st.global.b32"));
  // On sm_80 the same spec gets mma.sync: ldmatrix for Q/K, .trans for V.
  CompileOptions sm80;
  sm80.arch = "sm_80";
  CompiledKernel k80 = compile_to_ptx(default_spec(), sm80);
  CHECK_THAT(k80.ptx, Catch::Contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
  CHECK_THAT(k80.ptx, Catch::Contains("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
  CHECK_THAT(k80.ptx, !Catch::Contains("wgmma"));
  CHECK_THAT(k80.ptx, Catch::Contains("cp.async.cg.shared.global"));
  CHECK_THAT(k80.ptx, Catch::Contains("cp.async.wait_group"));
  CHECK_FALSE(k80.tensor_maps);
  CHECK(k80.threads == 128);
  CHECK(k80.shared_bytes == 64 * 128 * 2 + 2 * 2 * 64 * 128 * 2);
}

TEST_CASE("codegen: kernel keys separate what changes code and ignore the name", "[codegen]") {
  AttentionSpec a = make(DType::bf16, 64, "none");
  AttentionSpec b = a;
  b.name = "renamed";
  CHECK(compile_to_ptx(a).key == compile_to_ptx(b).key);
  CHECK(compile_to_ptx(a).key != compile_to_ptx(make(DType::f16, 64, "none")).key);
  CHECK(compile_to_ptx(a).key != compile_to_ptx(make(DType::bf16, 64, "causal")).key);
  CompileOptions sm80;
  sm80.arch = "sm_80";
  CompiledKernel k80 = compile_to_ptx(a, sm80);
  CHECK(k80.key != compile_to_ptx(a).key);
  CHECK_THAT(k80.ptx, Catch::Contains(".target sm_80"));
}

TEST_CASE("codegen: every forward kernel assembles with ptxas for sm_90a and sm_80", "[codegen][ptxas]") {
  const std::string ptxas = ptxas_path();
  test::TempDir dir;
  for (DType dt : {DType::f16, DType::bf16})
    for (int d : {64, 128, 72, 256})
      for (const char* mask : {"none", "causal"})
        for (const char* arch : {"sm_90a", "sm_80"}) {
          CompileOptions o;
          o.arch = arch;
          CompiledKernel k = compile_to_ptx(make(dt, d, mask), o);
          INFO(k.key << " " << arch << " d=" << d << " " << mask);
          REQUIRE_THAT(k.ptx, Catch::Contains(".entry"));
          if (ptxas.empty()) continue;
          std::string path = dir.path + "/" + k.key + ".ptx";
          std::ofstream(path) << k.ptx;
          auto r = test::run_command("'" + ptxas + "' -v -arch=" + arch + " -o " + path + ".cubin " + path);
          INFO(r.output);
          CHECK(r.code == 0);
          CHECK_THAT(r.output, Catch::Contains("Used") && Catch::Contains("registers"));
          CHECK_FALSE(test::spills(r.output));
        }
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the PTX was produced but not assembled");
}

TEST_CASE("codegen: the heuristic configs do not spill (ptxas -v)", "[codegen][ptxas]") {
  const std::string ptxas = ptxas_path();
  if (ptxas.empty()) SKIP_TEST("ptxas not found: no spill check");
  test::TempDir dir;
  for (int d : {64, 128, 256}) {
    CompiledKernel k = compile_to_ptx(make(DType::bf16, d, "causal"));
    std::string path = dir.path + "/k.ptx";
    std::ofstream(path) << k.ptx;
    auto r = test::run_command("'" + ptxas + "' -v -arch=sm_90a -o " + path + ".cubin " + path);
    INFO("d=" << d << "\n" << r.output);
    REQUIRE(r.code == 0);
    // Every entry of the module (the forward kernel and split-KV's combine), in whatever order ptxas
    // reports them.
    CHECK_THAT(r.output, Catch::Contains("Compiling entry function '" + k.entry + "'"));
    CHECK_THAT(r.output, Catch::Contains("0 bytes spill stores, 0 bytes spill loads"));
    CHECK_FALSE(test::spills(r.output));
  }
}

TEST_CASE("codegen: FLASHJIT_DUMP_DIR receives every stage", "[codegen]") {
  test::TempDir dir;
  CompileOptions o;
  o.dump_dir = dir.path;
  CompiledKernel k = compile_to_ptx(make(DType::f16, 80, "causal"), o);
  for (const char* f : {"spec.txt", "analyze.txt", "plan.txt", "llvm-ir.ll", "opt.ll", "ptx.ptx"})
    CHECK(std::filesystem::exists(dir.path + "/" + k.key + "/" + f));
  std::ifstream ptx(dir.path + "/" + k.key + "/ptx.ptx");
  std::string text((std::istreambuf_iterator<char>(ptx)), {});
  CHECK(text == k.ptx);
}

TEST_CASE("codegen: tile configs that break a limit are rejected naming the limit", "[codegen]") {
  AttentionSpec s = make(DType::bf16, 128, "none");
  auto reject = [&](TileConfig c, const char* words) {
    CompileOptions o;
    o.config = c;
    try {
      compile_to_ptx(s, o);
      FAIL("config " << c.str() << " should have been rejected");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::spec);
      CHECK_THAT(e.what(), Catch::Contains(c.str()) && Catch::Contains(words));
    }
  };
  reject({64, 64, 4, 5}, "num_stages must be 1 to 4");
  reject({64, 48, 4, 1}, "block_n must be 32, 64, 96, 128 or 176");
  reject({66, 32, 4, 1}, "block_m must be 16 or 32 × num_warps");
  reject({48, 32, 3, 1}, "num_warps must be 1, 2, 4 or 8");
  AttentionSpec big = make(DType::bf16, 256, "none");
  CompileOptions o;
  // Q 32 KB + 4 × (64 + 64) KB of K/V + 1 KB of alignment slack + the TMA walk's 9 mbarriers
  o.config = TileConfig{64, 128, 4, 4};
  CHECK_THROWS_WITH(compile_to_ptx(big, o),
                    Catch::Contains("need 558152 bytes of shared memory") && Catch::Contains("sm_90a allows 232448"));
  CompileOptions bad_arch;
  bad_arch.arch = "sm_70";
  CHECK_THROWS_WITH(compile_to_ptx(s, bad_arch), Catch::Contains("sm_70") && Catch::Contains("allowed: sm_80"));
}

TEST_CASE("codegen: LLVM failures become flashjit errors and never kill the process", "[codegen]") {
  // An overridden llvm-ir stage that NVPTX cannot select for sm_80 (%clusterid exists from sm_90,
  // PTX ISA §10.17) makes LLVM call report_fatal_error, which by default exits the process.
  AttentionSpec s = make(DType::bf16, 64, "none");
  CompileOptions o80;
  o80.arch = "sm_80";
  CompiledKernel plain = compile_to_ptx(s, o80);
  test::TempDir dir;
  std::filesystem::create_directories(dir.path + "/" + plain.key);
  std::ofstream(dir.path + "/" + plain.key + "/llvm-ir.ll")
      << "target triple = \"nvptx64-nvidia-cuda\"\n"
         "declare i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()\n"
         "define ptx_kernel void @" << plain.entry << "(ptr addrspace(1) %p) {\n"
         "  %x = call i32 @llvm.nvvm.read.ptx.sreg.clusterid.x()\n"
         "  store i32 %x, ptr addrspace(1) %p\n  ret void\n}\n";
  CompileOptions o = o80;
  o.override_dir = dir.path;
  try {
    compile_to_ptx(s, o);
    FAIL("the unselectable override should not compile");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::compile);
    CHECK_THAT(e.what(), Catch::Contains("Cannot select") && Catch::Contains("flashjit bug"));
  }
  // The process is intact: the next compile works.
  CHECK_THAT(compile_to_ptx(s, o80).ptx, Catch::Contains(".entry"));
  // A syntactically broken override is reported with its file, line and column.
  std::ofstream(dir.path + "/" + plain.key + "/llvm-ir.ll") << "define void @f( {\n";
  CHECK_THROWS_WITH(compile_to_ptx(s, o), Catch::Contains("llvm-ir.ll:2:0: expected type"));
}


TEST_CASE("codegen: the matrix of masks, scores and head dims assembles with tensor cores and no spills", "[codegen][ptxas]") {
  const std::string ptxas = ptxas_path();
  const std::vector<AttentionSpec> specs = codegen_matrix();
  test::TempDir dir;
  CompileOptions sm80;
  sm80.arch = "sm_80";
  for (const AttentionSpec& s : specs)
    for (const CompileOptions& o : {CompileOptions{}, sm80}) {
      CompiledKernel k = compile_to_ptx(s, o);
      INFO(s.canonical() << k.arch << " " << k.description);
      // sm_90a: warpgroup MMA, K/V streamed by the TMA unit where the kernel has a producer
      // warpgroup, else by cp.async; sm_80 (and FLASHJIT_MMA=sync): mma.sync with ldmatrix, K/V
      // by cp.async.
      if (k.arch == "sm_90a")
        CHECK_THAT(k.ptx, Catch::Contains("wgmma.mma_async.sync.aligned") &&
                              Catch::Contains(k.tensor_maps ? "cp.async.bulk.tensor.4d" : "cp.async.cg.shared.global"));
      else
        CHECK_THAT(k.ptx, Catch::Contains("mma.sync.aligned.m16n8k16") && Catch::Contains("ldmatrix.sync.aligned") &&
                              Catch::Contains("cp.async.cg.shared.global"));
      if (ptxas.empty()) continue;
      // Every entry (the forward kernel and, for tensor masks, its block-map pre-pass) is spill-free,
      // ptxas never had to serialise the wgmma pipeline, and never had to add a warpgroup.arrive
      // (C7519) the PTX ISA asks us for: every wgmma group is fenced as wgmma.fence requires.
      const std::string report = test::check_assembles(ptxas, dir.path, k);
      INFO(report);
      CHECK_THAT(report, Catch::Contains("0 bytes spill stores, 0 bytes spill loads"));
      CHECK_THAT(report, !Catch::Contains("warpgroup.arrive is injected"));
    }
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the PTX was checked but not assembled");
}

TEST_CASE("codegen: d = 128's 176-key kernels assemble without spills or serialised wgmma", "[codegen][ptxas]") {
  // The long-walk row's tile (forward_shape_heuristic) is not the table's, so the matrix above never
  // builds it. At 192 keys ptxas 13.0 serialises the wgmma pipeline for want of registers (C7512;
  // docs/perf-notes.md §54); 176 keys must stay clear of that in the forms plan_forward allows.
  const std::string ptxas = ptxas_path();
  test::TempDir dir;
  CompileOptions o;
  o.config = TileConfig{128, 176, 8, 2};
  for (const AttentionSpec& s :
       {make(DType::bf16, 128, "none"), make(DType::f16, 128, "none"), make(DType::bf16, 128, "causal"),
        test::with_score(make(DType::bf16, 128, "none"), "30 * tanh(score / 30)")}) {
    const CompiledKernel k = compile_to_ptx(s, o);
    INFO(s.canonical() << k.description);
    CHECK_THAT(k.description,
               Catch::Contains("+producer") && Catch::Contains("+tma") && Catch::Contains("bm128_bn176_w8_s2"));
    if (ptxas.empty()) continue;
    const std::string report = test::check_assembles(ptxas, dir.path, k);
    INFO(report);
    CHECK_THAT(report, Catch::Contains("0 bytes spill stores, 0 bytes spill loads"));
  }
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the PTX was checked but not assembled");
}

TEST_CASE("codegen: with FLASHJIT_MMA=sync the matrix is mma.sync + ldmatrix + cp.async on sm_90a", "[codegen][ptxas]") {
  // Through the CLI (`flashjit compile --emit ptx`, `ptxas -arch=sm_90a -v`): on sm_90a the default
  // instruction is wgmma (test above); the mma.sync template is what FLASHJIT_MMA=sync selects
  // there. Knobs are read once per process, hence the CLI.
  const std::string ptxas = ptxas_path();
  const std::string cli = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();
  test::TempDir dir;
  int i = 0;
  for (const AttentionSpec& s : codegen_matrix()) {
    const std::string base = dir.path + "/k" + std::to_string(i++);
    std::ofstream(base + ".yaml") << s.canonical();
    auto c = test::run_command("FLASHJIT_MMA=sync '" + cli + "' compile '" + base + ".yaml' --emit ptx --arch sm_90a -o '" + base + ".ptx'");
    INFO(s.canonical() << c.output);
    REQUIRE(c.code == 0);
    std::ifstream in(base + ".ptx");
    const std::string ptx((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK_THAT(ptx, Catch::Contains(".target sm_90a") && Catch::Contains("mma.sync.aligned.m16n8k16") &&
                        Catch::Contains("ldmatrix.sync.aligned") && Catch::Contains("cp.async.cg.shared.global"));
    CHECK_THAT(ptx, !Catch::Contains("wgmma"));
    if (ptxas.empty()) continue;
    auto r = test::run_command("'" + ptxas + "' -v -arch=sm_90a -o '" + base + ".cubin' '" + base + ".ptx'");
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("0 bytes spill stores, 0 bytes spill loads"));
    CHECK_FALSE(test::spills(r.output));
  }
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the PTX was checked but not assembled");
}

TEST_CASE("codegen: wgmma kernels read Q by descriptor, every tile size and head dim", "[codegen]") {
  // docs/perf-notes.md §8: with Q as register A operands live across the kv loop, ptxas gave those
  // registers to P at d = 64 with 64-key tiles (wrong results on the H200). Q fragments would be
  // loaded by ldmatrix, which no wgmma kernel needs otherwise (K and V are read by descriptor).
  for (int d : {32, 64, 96, 128, 256})
    for (TileConfig c : {TileConfig{64, 64, 4, 2}, TileConfig{128, 64, 8, 2}, TileConfig{64, 128, 4, 2}, TileConfig{64, 32, 4, 2}}) {
      CompileOptions o;
      o.config = c;
      CompiledKernel k;
      try {
        k = compile_to_ptx(make(DType::bf16, d, "causal"), o);
      } catch (const Error& e) {
        CHECK((d == 256 && c.block_n == 128));  // needs 288 KB of shared memory: the only config that may not build
        CHECK_THAT(e.what(), Catch::Contains("shared memory"));
        continue;
      }
      INFO(k.description);
      CHECK_THAT(k.description, Catch::StartsWith("attention_fwd/wgmma"));
      CHECK_THAT(k.ptx, Catch::Contains("wgmma.mma_async") && !Catch::Contains("ldmatrix"));
    }
}

// The wgmma instructions of each inline-asm statement that issues any (NVPTX brackets every
// statement with "begin inline asm" / "end inline asm" comments).
std::vector<size_t> wgmma_per_statement(const std::string& ptx) {
  std::vector<size_t> counts;
  for (size_t at = ptx.find("// begin inline asm"); at != std::string::npos;
       at = ptx.find("// begin inline asm", at + 1)) {
    const std::string statement = ptx.substr(at, ptx.find("// end inline asm", at) - at);
    size_t n = 0;
    for (size_t w = statement.find("wgmma.mma_async"); w != std::string::npos;
         w = statement.find("wgmma.mma_async", w + 1))
      ++n;
    if (n) counts.push_back(n);
  }
  return counts;
}

// tile::WgmmaSequence: the forward issues each product's k-steps from one asm statement (less LLVM
// time, the same SASS); the backward keeps one per k-step.
TEST_CASE("codegen: the forward issues each wgmma product from one asm statement", "[codegen]") {
  CompileOptions quick;
  quick.tiered = "quick";
  int checked = 0;
  for (const AttentionSpec& s : test::codegen_matrix())
    for (const CompileOptions& options : {CompileOptions{}, quick}) {
      if (s.head_dim_qk < 64 || s.head_dim_v < 64) continue;
      const CompiledKernel k = compile_to_ptx(s, options);
      INFO(k.description);
      REQUIRE_THAT(k.description, Catch::StartsWith("attention_fwd/wgmma"));
      const std::vector<size_t> counts = wgmma_per_statement(k.ptx);
      REQUIRE_FALSE(counts.empty());
      // The fewest k-steps a product has here: d = 64's S (4 of 16 columns), P·V on 64-key tiles (4).
      CHECK(*std::min_element(counts.begin(), counts.end()) >= 4);
      ++checked;
    }
  CHECK(checked > 30);
  AttentionSpec b = make(DType::bf16, 128, "causal");
  CompileOptions backward;
  backward.backward = true;
  const std::vector<size_t> counts = wgmma_per_statement(compile_to_ptx(b, backward).ptx);
  REQUIRE_FALSE(counts.empty());
  CHECK(*std::max_element(counts.begin(), counts.end()) == 1);
}

// The quick form is assembled at ptxas -O1 (KernelPlan::quick) and must still give the
// full kernel's results bit for bit. That holds because ptxas may fuse an f32/f16 add, sub or mul
// into an fma only when it has no rounding modifier (PTX ISA, add.f32): every one the forward
// emits, for every mask and score of the codegen matrix at d = 128, must carry one.
TEST_CASE("codegen: the quick form's floating-point arithmetic all has explicit rounding", "[codegen][tiered]") {
  const std::regex arith(R"((?:^|\s)((?:add|sub|mul)(?:\.[a-z0-9]+)*\.(?:f16|bf16|f16x2|bf16x2|f32|f64))\s)");
  const std::regex rounded(R"(\.(?:rn|rz|rm|rp)\b)");
  CompileOptions quick;
  quick.tiered = "quick";
  int checked = 0;
  for (const AttentionSpec& s : test::codegen_matrix()) {
    if (s.head_dim_qk != 128 || s.head_dim_v != 128) continue;
    const CompiledKernel q = compile_to_ptx(s, quick);
    INFO(q.description);
    REQUIRE_THAT(q.description, Catch::Contains("+quick"));
    int arithmetic = 0;
    for (std::sregex_iterator it(q.ptx.begin(), q.ptx.end(), arith), end; it != end; ++it, ++arithmetic) {
      INFO((*it)[1].str());
      CHECK(std::regex_search((*it)[1].str(), rounded));
    }
    CHECK(arithmetic > 100);  // the softmax's scaling and the row sums: the regex finds them
    ++checked;
  }
  CHECK(checked == 16);  // 8 masks and scores × fp16, bf16
}

// CompileOptions::tiered "quick" (runtime/upgrade.hpp): at d = 128 the wgmma producer kernel
// without its rotated walk, keyed apart from the full kernel, each product issued from one place;
// d = 256 has no rotated walk, so its quick form is the full kernel.
TEST_CASE("codegen: a tiered compile's quick form drops the rotated walk where there is one", "[codegen][tiered]") {
  auto wgmma = [](const std::string& ptx) {
    const std::vector<size_t> counts = wgmma_per_statement(ptx);
    return std::accumulate(counts.begin(), counts.end(), size_t(0));
  };
  CompileOptions quick;
  quick.tiered = "quick";
  for (const char* mask : {"none", "causal", "window(300, 0)"}) {
    INFO(mask);
    const AttentionSpec s = make(DType::bf16, 128, mask);
    const CompiledKernel q = compile_to_ptx(s, quick), f = compile_to_ptx(s);
    CHECK(q.key != f.key);
    CHECK(q.config.str() == f.config.str());
    CHECK_THAT(q.description, Catch::Contains("+quick") && !Catch::Contains("+rotated"));
    CHECK_THAT(f.description, Catch::Contains("+rotated") && !Catch::Contains("+quick"));
    CHECK(wgmma(q.ptx) < wgmma(f.ptx));
  }
  const AttentionSpec d256 = make(DType::bf16, 256, "causal");
  CHECK(compile_to_ptx(d256, quick).key == compile_to_ptx(d256).key);
  CompileOptions bad;
  bad.tiered = "sometimes";
  CHECK_THROWS_WITH(compile_to_ptx(d256, bad),
                    Catch::Contains("CompileOptions::tiered 'sometimes' is not allowed; use on, off or quick"));
}
