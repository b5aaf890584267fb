#include "tools/cli_run_paged.hpp"

#include <algorithm>
#include <iostream>
#include <numeric>
#include <random>

#include "tools/cli.hpp"
#include "tools/cli_run_varlen.hpp"

namespace flashjit::cli {

int run_paged(const Runtime& rt, const ref::Problem& p, const PagedRun& r) {
  const int64_t d_qk = p.spec.head_dim_qk, d_v = p.spec.head_dim_v, ps = r.page_size;
  if (ps <= 0 || ps % 16 != 0)
    throw Error(ErrorKind::usage, "--paged " + std::to_string(ps) + ": the page size must be a positive multiple of 16");
  const Kernel kernel = rt.compile(p.spec, r.options);
  const int64_t per_seq = (p.seq_kv + ps - 1) / ps, pages = p.batch * per_seq;
  if (pages > INT32_MAX) throw Error(ErrorKind::usage, "--paged: more than 2^31-1 pages");
  // A shuffled table: page ids in random order, so that a kernel reading pages in table order
  // without the lookup reads the wrong keys.
  std::vector<int32_t> table(static_cast<size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937_64(r.seed ^ 0x9E3779B97F4A7C15ull));
  // The pools [pages, ps, heads_kv, d]: rows past seq_kv in a sequence's last page stay NaN, so a
  // kernel that reads them fails the check.
  auto pool = [&](const std::vector<uint16_t>& src, int64_t d) {
    const size_t row = size_t(p.heads_kv * d);
    std::vector<uint16_t> out(size_t(pages * ps) * row, 0xFFFF);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t n = 0; n < p.seq_kv; ++n) {
        const int64_t page = table[size_t(b * per_seq + n / ps)];
        std::copy_n(src.begin() + ptrdiff_t(size_t(b * p.seq_kv + n) * row), row,
                    out.begin() + ptrdiff_t(size_t(page * ps + n % ps) * row));
      }
    return out;
  };
  auto upload = [&](const void* data, size_t bytes) {
    DeviceBuffer buf = rt.alloc(bytes);
    buf.upload(data, bytes);
    return buf;
  };
  const std::vector<uint16_t> pk = pool(p.k, d_qk), pv = pool(p.v, d_v);
  DeviceBuffer dq = upload(p.q.data(), p.q.size() * 2), dk = upload(pk.data(), pk.size() * 2),
               dv = upload(pv.data(), pv.size() * 2), dt = upload(table.data(), table.size() * 4);
  DeviceBuffer o = rt.alloc(size_t(p.batch * p.seq_q * p.heads_q * d_v * 2)), lse = rt.alloc(size_t(p.batch * p.heads_q * p.seq_q * 4));
  o.fill_bytes(0xFF);  // NaN: a row nobody writes fails the check
  lse.fill_bytes(0xFF);
  ForwardArgs a;
  static_cast<ProblemShape&>(a) = p;
  a.q = bshd(dq.data(), p.seq_q, p.heads_q, d_qk);
  a.k = bshd(dk.data(), ps, p.heads_kv, d_qk);  // stride[0]: the page stride
  a.v = bshd(dv.data(), ps, p.heads_kv, d_v);
  a.o = bshd(o.data(), p.seq_q, p.heads_q, d_v);
  a.lse = static_cast<float*>(lse.data());
  a.scale = p.scale;
  a.params = p.params;
  a.num_splits = r.splits;
  a.block_table = static_cast<const int32_t*>(dt.data());
  a.page_size = ps, a.max_pages_per_seq = per_seq;
  std::vector<DeviceBuffer> tensors;
  for (const ref::HostTensor& t : p.tensors) {
    const bool i32 = !t.i32.empty() || t.f32.empty();
    const size_t n = i32 ? t.i32.size() : t.f32.size();
    tensors.push_back(upload(i32 ? static_cast<const void*>(t.i32.data()) : t.f32.data(), n * 4));
    a.buffers.push_back({t.name, tensors.back().data(), int64_t(n)});
  }
  kernel.forward(a);
  rt.synchronize();
  std::cout << "paged    " << pages << " pages of " << ps << " rows (" << per_seq << " per sequence, shuffled), batch "
            << p.batch << ", seq_q " << p.seq_q << ", seq_kv " << p.seq_kv << ", heads " << p.heads_q << "/"
            << p.heads_kv << "\nkernel   " << kernel.compiled().key << " " << kernel.compiled().description << "\n";
  std::string verdict = "not verified (--no-verify)";
  bool ok = true;
  if (r.verify) {
    std::vector<uint16_t> out(size_t(p.batch * p.seq_q * p.heads_q * d_v));
    std::vector<float> lse_host(size_t(p.batch * p.heads_q * p.seq_q));
    o.download(out.data(), out.size() * 2);
    lse.download(lse_host.data(), lse_host.size() * 4);
    const ref::Verdict vd = ref::verify(p, out, &lse_host);
    ok = vd.ok;
    verdict = vd.message;  // "PASS max_err=..." or "FAIL ..."
  }
  const double ms = rt.time_forward(kernel, a, 3, r.reps);
  const double kv_bytes = double(p.batch * p.seq_kv * p.heads_kv * (d_qk + d_v) * 2);
  return finish_serving_run(ok, verdict, ms, kv_bytes);
}

}  // namespace flashjit::cli
