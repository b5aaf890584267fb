// `flashjit run --paged PAGE_SIZE`: the run's K and V moved into a page pool of PAGE_SIZE-row pages
// under a shuffled block table (ForwardArgs::block_table), checked against the fp64 reference of
// the contiguous problem, timed.
#pragma once

#include <cstdint>

#include "flashjit/flashjit.hpp"
#include "flashjit/reference.hpp"

namespace flashjit::cli {

struct PagedRun {
  int64_t page_size = 0;
  uint64_t seed = 1;
  int splits = 0, reps = 20;
  bool verify = true;
  CompileOptions options;
};

// `p` holds the inputs (filled); prints what ran and returns kOk when the output verified (or
// verification was off).
int run_paged(const Runtime& rt, const ref::Problem& p, const PagedRun& run);

}  // namespace flashjit::cli
