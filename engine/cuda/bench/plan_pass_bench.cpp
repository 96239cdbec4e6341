// Host time of planning one pass (no GPU): plan_pass with fresh buffers each call (what the
// backend did before PassPlanner) against one PassPlanner reusing its buffers, side by side in
// rounds (ABAB), for passes of 1, 16 and 128 sequences in the SDAR-1.7B and -4B head layouts at
// 1,024 and 4,096 positions; fused store passes (4 commit rows + a block of 4) on every fourth
// sequence, block-only passes on the rest, as in static-schedule decoding. Prints us per plan
// (median of the rounds) and the ratio. Usage: dice_plan_pass_bench [rounds (default 7)]
// [plans per round (default 400)].

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "forward_plan.h"

namespace {

using dice::engine::cuda::kPageTokens;
using dice::engine::cuda::PassItem;
using dice::engine::cuda::PassPlanner;
using dice::engine::cuda::PlanShape;

/// Microseconds per call of `f` over `calls` calls.
template <typename F>
double us_per_call(int calls, F&& f) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
  return spent.count() / calls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const int calls = argc > 2 ? std::max(1, std::atoi(argv[2])) : 400;
  std::printf("%-5s %5s %7s %10s %10s %7s\n", "model", "seqs", "context", "fresh_us", "reused_us",
              "ratio");
  for (const auto& [model, heads] : {std::pair{"1.7b", 16}, std::pair{"4b", 32}})
    for (const int sequences : {1, 16, 128})
      for (const int context : {1024, 4096}) {
        const std::int64_t per_sequence = (context + kPageTokens - 1) / kPageTokens;
        std::vector<std::vector<std::int32_t>> pages(static_cast<std::size_t>(sequences));
        const std::vector<std::int32_t> commit(4, 5), block(4, 151669);
        std::vector<PassItem> items(static_cast<std::size_t>(sequences));
        for (int i = 0; i < sequences; ++i) {
          auto& p = pages[static_cast<std::size_t>(i)];
          for (std::int64_t j = 0; j < per_sequence; ++j)
            p.push_back(static_cast<std::int32_t>(1 + i * per_sequence + j));
          auto& item = items[static_cast<std::size_t>(i)];
          if (i % 4 == 0) item.commit = commit;
          item.block = block;
          item.start = context - 8;
          item.block_length = 4;
          item.pages = p;
        }
        // The backend's defaults on an H100 (132 SMs, 3 pipelined blocks each).
        PlanShape shape{heads, 8, 396, 4096, 256, 128, 16};
        shape.pair_tiles = true;
        shape.sms = 132;
        PassPlanner planner;
        std::int64_t sink = 0;
        std::vector<double> fresh, reused;
        for (int r = 0; r < rounds; ++r) {  // ABAB: each round times both, one after the other
          fresh.push_back(us_per_call(
              calls, [&] { sink += dice::engine::cuda::plan_pass(items, shape).attn_work; }));
          reused.push_back(
              us_per_call(calls, [&] { sink += planner.plan(items, shape).attn_work; }));
        }
        std::printf("%-5s %5d %7d %10.2f %10.2f %7.2f%s\n", model, sequences, context,
                    median(fresh), median(reused), median(fresh) / median(reused),
                    sink == 0 ? " (no work)" : "");
      }
  return 0;
}
