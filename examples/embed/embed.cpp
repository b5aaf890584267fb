// Embedding flashjit from C++ (CMake: find_package(flashjit) or add_subdirectory, target
// flashjit::flashjit): compile a spec to PTX (no GPU needed), then, when a GPU is present, run it
// on random inputs and judge the output against flashjit's fp64 CPU reference.
// Exit 0 on success, including "no GPU here: compiled only"; 1 on any failure.
#include <flashjit/flashjit.hpp>
#include <flashjit/reference.hpp>

#include <cstdio>
#include <random>

static_assert(FLASHJIT_VERSION_MAJOR == 0 && FLASHJIT_VERSION_NUMBER >= 100, "flashjit/version.h: this example needs 0.x, x >= 1");

namespace fj = flashjit;

static std::vector<uint16_t> random_bits(size_t n, fj::DType dtype, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) x = fj::ref::to_half_bits(normal(rng), dtype);
  return out;
}

static int run_on_gpu(const fj::AttentionSpec& spec) {
  fj::Runtime rt = fj::Runtime::create(0);
  fj::Kernel kernel = rt.compile(spec);
  fj::ref::Problem p;
  p.spec = spec;
  p.batch = 1, p.seq_q = p.seq_kv = 256, p.heads_q = p.heads_kv = 2;
  std::mt19937 rng(1);
  p.q = random_bits(p.seq_q * p.heads_q * p.d_qk(), spec.dtype, rng);
  p.k = random_bits(p.seq_kv * p.heads_kv * p.d_qk(), spec.dtype, rng);
  p.v = random_bits(p.seq_kv * p.heads_kv * p.d_v(), spec.dtype, rng);
  std::vector<uint16_t> o(p.seq_q * p.heads_q * p.d_v());
  fj::DeviceBuffer q = rt.alloc(p.q.size() * 2), k = rt.alloc(p.k.size() * 2), v = rt.alloc(p.v.size() * 2),
                   out = rt.alloc(o.size() * 2);
  q.upload(p.q.data(), p.q.size() * 2);
  k.upload(p.k.data(), p.k.size() * 2);
  v.upload(p.v.data(), p.v.size() * 2);
  fj::ForwardArgs a;
  static_cast<fj::ProblemShape&>(a) = p;
  a.q = fj::bshd(q.data(), p.seq_q, p.heads_q, p.d_qk());
  a.k = fj::bshd(k.data(), p.seq_kv, p.heads_kv, p.d_qk());
  a.v = fj::bshd(v.data(), p.seq_kv, p.heads_kv, p.d_v());
  a.o = fj::bshd(out.data(), p.seq_q, p.heads_q, p.d_v());
  kernel.forward(a);
  rt.synchronize();
  out.download(o.data(), o.size() * 2);
  const fj::ref::Verdict verdict = fj::ref::verify(p, o, nullptr);
  std::printf("ran on %s: %s\n", rt.device().name.c_str(), verdict.message.c_str());
  return verdict.ok ? 0 : 1;
}

int main() {
  try {
    fj::AttentionSpec spec = fj::AttentionSpec::from_yaml(
        "name: embed_example\n"
        "dtype: bf16\n"
        "head_dim: 64\n"
        "mask: \"causal && q - kv < 128\"\n");
    const fj::CompiledKernel compiled = fj::compile_to_ptx(spec);  // no GPU needed
    std::printf("flashjit %s (header %d.%d.%d): %s, %zu bytes of PTX for %s\n", fj::versions().flashjit.c_str(),
                FLASHJIT_VERSION_MAJOR, FLASHJIT_VERSION_MINOR, FLASHJIT_VERSION_PATCH, compiled.entry.c_str(),
                compiled.ptx.size(), compiled.arch.c_str());
    try {
      return run_on_gpu(spec);
    } catch (const fj::Error& e) {
      if (e.kind() != fj::ErrorKind::no_gpu) throw;
      std::printf("no GPU here (%s): compiled only\n", e.what());
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embed_cpp: %s\n", e.what());
    return 1;
  }
}
