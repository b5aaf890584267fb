#include "tools/cli_run_varlen.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>

#include "flashjit/reference.hpp"
#include "tools/cli.hpp"

namespace flashjit::cli {

namespace {

int64_t parse_length(const std::string& item, const std::string& text) {
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != item.size() || item.empty() || n < 0 || n > INT32_MAX)
    throw Error(ErrorKind::usage, "--varlen " + text + ": '" + item +
                                      "' is not a length; give Q or Q:KV per sequence, comma-separated, each 0 to 2^31-1");
  return n;
}

}  // namespace

void parse_varlen_lengths(const std::string& text, std::vector<int64_t>& q, std::vector<int64_t>& kv) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t colon = item.find(':');
    q.push_back(parse_length(item.substr(0, colon), text));
    kv.push_back(colon == std::string::npos ? q.back() : parse_length(item.substr(colon + 1), text));
    start = comma + 1;
  }
  if (q.size() > 65535) throw Error(ErrorKind::usage, "--varlen: at most 65535 sequences");
}

int run_varlen(const Runtime& rt, const AttentionSpec& spec, const VarlenRun& r) {
  const Kernel kernel = rt.compile(spec, r.options);
  const int64_t n = int64_t(r.q.size()), d_qk = spec.head_dim_qk, d_v = spec.head_dim_v;
  const ref::PackedSequences packed = ref::pack_sequences(spec, r.q, r.kv, r.heads_q, r.heads_kv, {}, r.seed);
  const int64_t total_q = packed.cu_q.back(), total_kv = packed.cu_kv.back();
  auto upload = [&](const void* data, size_t bytes) {
    DeviceBuffer buf = rt.alloc(bytes);
    if (bytes) buf.upload(data, bytes);
    return buf;
  };
  DeviceBuffer dq = upload(packed.q.data(), packed.q.size() * 2), dk = upload(packed.k.data(), packed.k.size() * 2),
               dv = upload(packed.v.data(), packed.v.size() * 2);
  DeviceBuffer dcu_q = upload(packed.cu_q.data(), packed.cu_q.size() * 4),
               dcu_kv = upload(packed.cu_kv.data(), packed.cu_kv.size() * 4);
  DeviceBuffer o = rt.alloc(size_t(total_q * r.heads_q * d_v * 2)), lse = rt.alloc(size_t(r.heads_q * total_q * 4));
  o.fill_bytes(0xFF);  // NaN: a row nobody writes fails the check
  lse.fill_bytes(0xFF);
  ForwardArgs a;
  a.batch = n, a.seq_q = total_q, a.seq_kv = total_kv, a.heads_q = r.heads_q, a.heads_kv = r.heads_kv;
  a.q = bshd(dq.data(), total_q, r.heads_q, d_qk);
  a.k = bshd(dk.data(), total_kv, r.heads_kv, d_qk);
  a.v = bshd(dv.data(), total_kv, r.heads_kv, d_v);
  a.o = bshd(o.data(), total_q, r.heads_q, d_v);
  a.lse = static_cast<float*>(lse.data());
  a.num_splits = r.splits;
  a.cu_seqlens_q = static_cast<const int32_t*>(dcu_q.data());
  a.cu_seqlens_kv = static_cast<const int32_t*>(dcu_kv.data());
  a.max_seqlen_q = *std::max_element(r.q.begin(), r.q.end());
  a.max_seqlen_kv = *std::max_element(r.kv.begin(), r.kv.end());
  kernel.forward(a);
  rt.synchronize();
  std::cout << "varlen   " << n << " sequences: " << total_q << " query tokens (longest " << a.max_seqlen_q << "), "
            << total_kv << " key tokens (longest " << a.max_seqlen_kv << "), heads " << r.heads_q << "/" << r.heads_kv
            << "\nkernel   " << kernel.compiled().key << " " << kernel.compiled().description << "\n";
  bool ok = true;
  std::string verdict = "not verified (--no-verify)";
  if (r.verify) {
    std::vector<uint16_t> out(size_t(total_q * r.heads_q * d_v));
    std::vector<float> lse_all(size_t(r.heads_q * total_q));
    if (!out.empty()) o.download(out.data(), out.size() * 2);
    if (!lse_all.empty()) lse.download(lse_all.data(), lse_all.size() * 4);
    const ref::Verdict vd = ref::verify_packed(packed, out, lse_all);
    ok = vd.ok;
    verdict = ok ? "PASS (every sequence against the fp64 reference)" : vd.message;
  }
  const double ms = rt.time_forward(kernel, a, 3, r.reps);
  const double kv_bytes = double(total_kv * r.heads_kv * (d_qk + d_v) * 2);
  return finish_serving_run(ok, verdict, ms, kv_bytes);
}

int finish_serving_run(bool ok, const std::string& verdict, double ms, double kv_bytes) {
  std::cout << "verify   " << verdict << "\n"
            << std::fixed << std::setprecision(3) << "time     " << ms << " ms (median)\n"
            << std::setprecision(2) << "perf     " << kv_bytes / (ms * 1e-3) / 1e12 << " TB/s of K and V\n"
            << std::defaultfloat;
  return ok ? kOk : kFailure;
}

}  // namespace flashjit::cli
