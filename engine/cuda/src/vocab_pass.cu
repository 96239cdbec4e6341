// The fused pass over the vocabulary: the proposal of sampling.h exactly (greedy argmax or
// temperature sampling with top-k / top-p and the Philox uniform; confidence and entropy of the
// temperature-1 softmax of the allowed logits), in one of two layouts:
//
// - whole row (launch_vocab_pass): one block per block row does everything. A few rows leave
//   the GPU nearly idle (4 blocks for 4 rows: ~200 us on an H100 for 4 x 151,936 logits).
// - chunked (launch_vocab_pass_chunked): each row's vocabulary is cut into `chunks` contiguous
//   chunks, one block each. Kernel 1 finds each chunk's maximum (lowest id on ties), lowest NaN
//   id and last allowed id. Kernel 2 reduces the row's chunk maxima itself (the global shift m,
//   so every term is exp(x - m) as on the CPU), sums its chunk's softmax terms, the entropy
//   terms and the sampling weights exp((x - m) / T), and the row's last block to finish (a
//   counter per row; it resets it) adds the chunk sums in chunk order and draws: the inverse CDF
//   target u * total falls in the first chunk whose running sum exceeds it, and that chunk is
//   walked in id order as on the CPU. Rows with top-k or top-p need the whole row's order: their
//   last block runs the whole-row procedure, from the row's maximum and sums.
//
// Every reduction is deterministic (fixed partition and order), so a seed gives the same tokens
// run to run. Softmax sums are in double as on the CPU; they differ from the CPU's sequential
// sums only in association (relative 1e-16), so a drawn token can differ from the CPU's only
// when u * total falls within that of a boundary.
//
// top-k and top-p need the order "logit descending, id ascending", and only through a threshold:
// the last kept id in that order. Instead of sorting, the row's block finds it with bins
// (ThresholdSearch below): one pass counts the allowed ids (and, for top-p, their approximate
// masses) per bin of (row max - logit), a monotone function of the logit, so every id of a lower
// bin comes before every id of a higher one. The bin where the count reaches k (or the mass
// p * total) is refined once more into sub-bins if it holds more than kGatherCap ids.
// - When few ids are kept (all ids up to that bin fit in kGatherCap: top-k of up to ~1,000, top-p
//   of a peaked row), they are gathered into shared memory, ranked, and the selection and the
//   draw happen there, with the CPU's sums in the CPU's order (small_selection).
// - Otherwise the threshold is read off the bin alone (its ids gathered and ranked; top-p from the
//   exact double sum of the kept weights before it), and the draw walks the row.
// - Where neither settles it (a bin of more than kGatherCap ids after refinement, e.g. many equal
//   logits, or approximate masses pointing at the wrong bin), the first procedure runs: a bitwise
//   binary search over the order-preserving 32-bit key of the logit (32 reductions over the row)
//   and a scan in id order for ties at the threshold.
// All give the same threshold (up to the association of double sums, as everywhere here). In the
// chunked pass, the row's last block starts from the chunk blocks' maximum, sums and level-0
// bins (VocabWorkspace). Decoding with top-k 20, or T 0.6 / top-k 20 / top-p 0.95, runs at
// 0.97-0.98 of greedy speed on an H100. Against the binary search alone, that is 2.1x and 3.5x
// for SDAR-1.7B at 1 sequence (bench/results/2026-11-24-top-k-top-p-h100).

#include <cfloat>
#include <climits>
#include <cstdint>
#include <string>

#include "cuda_check.h"
#include "device_utils.cuh"
#include "dice/core/error.h"
#include "launch.cuh"
#include "ops.h"

namespace dice::engine::cuda {

namespace {

constexpr int kThreads = 512;

// The threshold search's bins (see the top of the file).
constexpr int kBins = kVocabBins;      // per level; kBins / kThreads bins per thread
constexpr float kBinScale = 32.0f;     // level-0 bins per logit unit below the row maximum
constexpr int kGatherCap = 1024;       // most ids of one bin ranked in shared memory
constexpr double kMassScale = 0x1p40;  // fixed point of the approximate masses (weights <= 1)
static_assert(kBins == 2 * kThreads, "find_crossing gives each thread two bins");

constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;

/// philox_uniform of sampling.h: Philox4x32-10, key (seed lo, seed hi), counter (position lo,
/// position hi, step, 0), u = out[0] / 2^32.
__device__ double philox_uniform(std::uint64_t seed, std::int64_t position, std::int32_t step) {
  const auto pos = static_cast<std::uint64_t>(position);
  std::uint32_t c0 = static_cast<std::uint32_t>(pos), c1 = static_cast<std::uint32_t>(pos >> 32),
                c2 = static_cast<std::uint32_t>(step), c3 = 0u;
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    const std::uint32_t hi0 = __umulhi(kPhiloxM0, c0), lo0 = kPhiloxM0 * c0;
    const std::uint32_t hi1 = __umulhi(kPhiloxM1, c2), lo1 = kPhiloxM1 * c2;
    const std::uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return static_cast<double>(c0) * 0x1p-32;
}

/// Order-preserving key of a logit: a > b (as floats) iff key(a) > key(b); -0 and +0 are equal
/// (the CPU compares floats).
__device__ __forceinline__ std::uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const std::uint32_t bits = __float_as_uint(f);
  return (bits & 0x80000000u) != 0u ? ~bits : (bits | 0x80000000u);
}

/// Calls f(i, valid, logit) for ids i = begin + threadIdx.x + kThreads * j over [begin, limit)
/// (valid: i < limit; logit 0 otherwise), loading kLoadsInFlight logits per thread before using
/// any: a single block walking a row is bound by L2 latency otherwise. Every thread makes the
/// same calls, so f may use warp-synchronous intrinsics.
constexpr int kLoadsInFlight = 8;
template <typename F>
__device__ __forceinline__ void for_each_logit(const float* logits, int limit, F&& f,
                                               int begin = 0) {
  for (int base = begin; base < limit; base += kLoadsInFlight * kThreads) {
    float v[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int i = base + u * kThreads + static_cast<int>(threadIdx.x);
      v[u] = i < limit ? logits[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int i = base + u * kThreads + static_cast<int>(threadIdx.x);
      f(i, i < limit, v[u]);
    }
  }
}

struct Scratch {
  double sums[32];
  double inclusive[kThreads];
  float best[32];
  int best_id[32];
  int ints[32];
  int result;
  double combined[4];  // chunked pass: the row's sums, the crossing chunk's start, the target
  int crossing;    // chunked pass: the chunk the draw falls in, or the fallback id (< 0: -2 - id)
  int last_block;  // chunked pass: this block finishes the row
  double chunk_sum[3][kMaxVocabChunks];  // chunked pass: the row's chunk sums, gathered
  int chunk_last[kMaxVocabChunks];       // chunked pass: the chunks' last allowed ids
  // ThresholdSearch: a level's bins, the crossing, the gathered bin (any order; ranked).
  std::uint32_t bin_count[kBins];
  unsigned long long bin_mass[kBins];
  int found_bin;
  double found_before;
  int gathered;
  std::uint32_t g_key[kGatherCap];
  int g_id[kGatherCap];
  double g_w[kGatherCap];
  int g_by_rank[kGatherCap];  // g_by_rank[r]: the gathered entry of rank r (0: first in order)
};

/// What the chunked pass's blocks computed for a row, given to the whole-row procedure so that
/// it does not recompute it: the maximum over allowed ids and its lowest id, the temperature-1
/// softmax sums (sum, sum of w * d) and the sampling weights' sum over allowed ids.
struct RowSums {
  float max;
  int argmax;
  double sum;
  double weighted;
  double sample_total;
};

/// (value, id) with the larger value, the lower id on ties; id -1 loses to everything.
__device__ __forceinline__ void better(float& v, int& id, float v2, int id2) {
  if (id2 < 0) return;
  if (id < 0 || v2 > v || (v2 == v && id2 < id)) {
    v = v2;
    id = id2;
  }
}

__device__ void block_argmax(float& v, int& id, Scratch& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int offset = 16; offset > 0; offset >>= 1)
    better(v, id, __shfl_xor_sync(0xffffffffu, v, offset),
           __shfl_xor_sync(0xffffffffu, id, offset));
  __syncthreads();
  if (lane == 0) {
    s.best[warp] = v;
    s.best_id[warp] = id;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? s.best[lane] : 0.0f;
    id = lane < kThreads / 32 ? s.best_id[lane] : -1;
    for (int offset = 16; offset > 0; offset >>= 1)
      better(v, id, __shfl_xor_sync(0xffffffffu, v, offset),
             __shfl_xor_sync(0xffffffffu, id, offset));
    if (lane == 0) {
      s.best[0] = v;
      s.best_id[0] = id;
    }
  }
  __syncthreads();
  v = s.best[0];
  id = s.best_id[0];
}

/// How many logits a thread reads before it takes any of them (for_each_logit).
constexpr int kScanBatch = 8;

/// Calls take(logit, id) for this thread's ids i = begin + threadIdx.x + kThreads j < end, in
/// ascending order, reading kScanBatch logits before taking any: a load behind the caller's
/// `if (id == mask) continue;` is not issued ahead of it, which left one load in flight per
/// thread (the max kernel read 320 rows at 1.47 TB/s on an H200,
/// bench/results/2026-11-28-vocab-loads-h200). The calls come in the plain loop's order, so sums
/// over them keep their bits.
template <typename Take>
__device__ __forceinline__ void for_each_logit(const float* logits, int begin, int end,
                                               Take&& take) {
  int i = begin + static_cast<int>(threadIdx.x);
  for (; i + (kScanBatch - 1) * kThreads < end; i += kScanBatch * kThreads) {
    float v[kScanBatch];
#pragma unroll
    for (int j = 0; j < kScanBatch; ++j) v[j] = logits[i + j * kThreads];
#pragma unroll
    for (int j = 0; j < kScanBatch; ++j) take(v[j], i + j * kThreads);
  }
  for (; i < end; i += kThreads) take(logits[i], i);
}

/// This thread's share of the allowed ids i = begin + threadIdx.x + kThreads j < end (every id
/// but `mask`): the largest non-NaN logit and its lowest id (`better`), the lowest NaN id
/// (INT_MAX if none) and the last allowed id (-1 if none), folded into the values given. The
/// block's come from block_argmax and block_min_max after it.
__device__ __forceinline__ void scan_allowed(const float* logits, int begin, int end, int mask,
                                             float& best, int& best_id, int& nan_id, int& last) {
  for_each_logit(logits, begin, end, [&](float v, int i) {
    if (i == mask) return;
    last = i;
    if (isnan(v)) {
      if (i < nan_id) nan_id = i;
      return;
    }
    better(best, best_id, v, i);
  });
}

/// min (or max with `max`) over the block.
__device__ int block_min_max(int v, bool max, Scratch& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int offset = 16; offset > 0; offset >>= 1) {
    const int o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = max ? (o > v ? o : v) : (o < v ? o : v);
  }
  __syncthreads();
  if (lane == 0) s.ints[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    int r = s.ints[0];
    for (int w = 1; w < kThreads / 32; ++w)
      r = max ? (s.ints[w] > r ? s.ints[w] : r) : (s.ints[w] < r ? s.ints[w] : r);
    s.ints[0] = r;
  }
  __syncthreads();
  return s.ints[0];
}

/// Inclusive prefix sums over the threads in thread order, stored in s.inclusive; returns the
/// thread's own. One thread adds the 512 values in order: deterministic, and non-decreasing for
/// non-negative values (a tree scan is not: two threads could each see the crossing).
__device__ double block_inclusive_scan(double v, Scratch& s) {
  __syncthreads();  // s.inclusive free
  s.inclusive[threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    s.result = -1;  // for scan_select's crossing thread, which writes after the next barrier
    double running = 0;
    for (int t = 0; t < kThreads; ++t) {
      running += s.inclusive[t];
      s.inclusive[t] = running;
    }
  }
  __syncthreads();
  return s.inclusive[threadIdx.x];
}

/// Walks ids begin..end-1 in ascending order accumulating weight(i) over members (member(i)),
/// starting from `start`: returns the first member id at which the running sum reaches `target`
/// (> with `strict`, >= otherwise); if none does (rounding), the last member id; -1 if there
/// is no member. Each thread owns a contiguous chunk of ids; chunk sums are scanned in thread
/// order, then the one thread whose chunk crosses the target walks it.
template <typename Member, typename Weight>
__device__ int scan_select(int begin, int end, Member member, Weight weight, double start,
                           double target, bool strict, Scratch& s) {
  const int chunk = (end - begin + kThreads - 1) / kThreads;
  const int lo = begin + static_cast<int>(threadIdx.x) * chunk;
  const int hi = lo + chunk < end ? lo + chunk : end;
  double sum = 0;
  int last = -1;
  for (int i = lo; i < hi; ++i)
    if (member(i)) {
      sum += weight(i);
      last = i;
    }
  const double inclusive = block_inclusive_scan(sum, s);
  const double exclusive = threadIdx.x > 0 ? s.inclusive[threadIdx.x - 1] : 0.0;
  const auto reached = [&](double running) {
    return strict ? running > target : running >= target;
  };
  if (reached(start + inclusive) && !reached(start + exclusive)) {
    double running = start + exclusive;
    int found = last;
    for (int i = lo; i < hi; ++i)
      if (member(i)) {
        running += weight(i);
        if (reached(running)) {
          found = i;
          break;
        }
      }
    s.result = found;
  }
  __syncthreads();
  const int found = s.result;
  if (found >= 0) return found;
  return block_min_max(last, true, s);
}

/// The largest key t such that sum over members with key >= t of weight reaches `target` (>=):
/// a bitwise binary search, one block reduction per bit.
template <typename Member, typename Weight>
__device__ std::uint32_t search_key(const float* logits, int limit, Member member, Weight weight,
                                    double target, Scratch& s) {
  std::uint32_t t = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const std::uint32_t candidate = t | (1u << bit);
    double mass = 0;
    for (int i = threadIdx.x; i < limit; i += kThreads)
      if (member(i) && order_key(logits[i]) >= candidate) mass += weight(i);
    mass = block_sum(mass, s.sums);
    if (mass >= target) t = candidate;
  }
  return t;
}

/// (row max - logit) in level-0 bin units; >= 0 for every non-NaN logit (+inf for -inf).
__device__ __forceinline__ float bin_value(float m, float l) {
  return __fmul_rn(__fsub_rn(m, l), kBinScale);
}
/// The level-0 bin of a bin value: monotone, the last bin holding everything beyond.
__device__ __forceinline__ int bin_of(float v) {
  return v < static_cast<float>(kBins - 1) ? static_cast<int>(v) : kBins - 1;
}
/// The level-1 bin of a value of level-0 bin b0: monotone in v within the bin.
__device__ __forceinline__ int sub_bin_of(float v, int b0) {
  const float f = __fmul_rn(__fsub_rn(v, static_cast<float>(b0)), static_cast<float>(kBins));
  return f < static_cast<float>(kBins - 1) ? (f > 0.0f ? static_cast<int>(f) : 0) : kBins - 1;
}

/// Counts (and with `masses` approximate masses: __expf of (l - m) * inv_t in 2^-40 fixed point)
/// of the ids in [begin, end) with member(i) per bin of `level` (level 1: the sub-bins of b0),
/// into s.bin_count / s.bin_mass. Lanes of one bin add once (match_any), so a bin holding most
/// of the row costs no more than others; integer sums: deterministic.
template <typename Member>
__device__ void bin_histogram(const float* logits, int begin, int end, float m, float inv_t,
                              Member member, int level, int b0, bool masses, Scratch& s) {
  for (int j = static_cast<int>(threadIdx.x); j < kBins; j += kThreads) {
    s.bin_count[j] = 0u;
    s.bin_mass[j] = 0ull;
  }
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x) & 31;
  for_each_logit(
      logits, end,
      [&](int i, bool valid, float l) {
        int b = -1;
        unsigned long long f = 0;
        if (valid && member(i)) {
          const float v = bin_value(m, l);
          const int a = bin_of(v);
          b = level == 0 ? a : (a == b0 ? sub_bin_of(v, b0) : -1);
          if (b >= 0 && masses)
            f = static_cast<unsigned long long>(__expf((l - m) * inv_t) * kMassScale);
        }
        const unsigned peers = __match_any_sync(0xffffffffu, b);
        if (b < 0) return;
        unsigned long long group = 0;
        if (masses)
          for (unsigned rest = peers; rest != 0u; rest &= rest - 1u)
            group += __shfl_sync(peers, f, __ffs(static_cast<int>(rest)) - 1);
        if (lane == __ffs(static_cast<int>(peers)) - 1) {
          atomicAdd(&s.bin_count[b], static_cast<std::uint32_t>(__popc(peers)));
          if (masses && group != 0ull) atomicAdd(&s.bin_mass[b], group);
        }
      },
      begin);
  __syncthreads();
}

/// One row's level-0 bins as the chunked pass's blocks built them (VocabWorkspace): global
/// memory, read once by the row's last block, which leaves them zero.
struct RowBins {
  std::uint32_t* counts;
  unsigned long long* masses;
};

/// A bin of the threshold search: level 0 (bin b0) or level 1 (sub-bin b1 of bin b0).
struct BinPath {
  int level = 0;
  int b0 = 0;
  int b1 = 0;
  /// -1: the logit's id comes before every id of this bin; 0: it is in it; 1: after.
  __device__ int compare(float m, float l) const {
    const float v = bin_value(m, l);
    const int a = bin_of(v);
    if (a != b0) return a < b0 ? -1 : 1;
    if (level == 0) return 0;
    const int b = sub_bin_of(v, b0);
    return b < b1 ? -1 : (b == b1 ? 0 : 1);
  }
};

/// A bin found by ThresholdSearch::find_bin: where the members' count (or approximate mass) in
/// order reaches the target. `count_before`: the members before it (exact); `members`: its own
/// (at most kGatherCap).
struct FoundBin {
  BinPath path;
  int count_before = 0;
  int members = 0;
};

/// The bin search of the top-k / top-p threshold over one row, by one block (see the top of the
/// file). `member(i)`: ids taking part (allowed; for top-p, also kept by top-k); `weight(i)`:
/// the exact double sampling weight; m: the row maximum; inv_t: 1 / temperature.
template <typename Member, typename Weight>
struct ThresholdSearch {
  const float* logits;
  int limit;
  float m;
  float inv_t;
  Member member;
  Weight weight;
  Scratch& s;

  /// The members' bins of `level` (bin_histogram over the row). With `given` (level 0), the
  /// chunk blocks' bins instead: read into shared memory and zeroed.
  __device__ void histogram(int level, int b0, bool masses, const RowBins* given = nullptr) const {
    if (given != nullptr && level == 0) {
      __syncthreads();  // s.bin_* free
      for (int j = static_cast<int>(threadIdx.x); j < kBins; j += kThreads) {
        s.bin_count[j] = __ldcg(given->counts + j);
        s.bin_mass[j] = __ldcg(given->masses + j);
        given->counts[j] = 0u;
        given->masses[j] = 0ull;
      }
      __syncthreads();
      return;
    }
    bin_histogram(logits, 0, limit, m, inv_t, member, level, b0, masses, s);
  }

  /// The bin of the last histogram where the running count (or mass) from bin 0 reaches
  /// `target`: before < target <= before + its own. Returns it (and `before`), or -1 if the
  /// histogram's total stays below the target (approximate masses).
  __device__ int find_crossing(bool masses, double target, double& before) const {
    const int j0 = 2 * static_cast<int>(threadIdx.x), j1 = j0 + 1;
    const double h0 = masses ? static_cast<double>(s.bin_mass[j0]) / kMassScale
                             : static_cast<double>(s.bin_count[j0]);
    const double h1 = masses ? static_cast<double>(s.bin_mass[j1]) / kMassScale
                             : static_cast<double>(s.bin_count[j1]);
    if (threadIdx.x == 0) s.found_bin = -1;
    const double inclusive = block_inclusive_scan(h0 + h1, s);
    const double exclusive = threadIdx.x > 0 ? s.inclusive[threadIdx.x - 1] : 0.0;
    const double middle = exclusive + h0;
    if (h0 > 0 && exclusive < target && target <= middle) {
      s.found_bin = j0;
      s.found_before = exclusive;
    } else if (h1 > 0 && middle < target && target <= inclusive) {
      s.found_bin = j1;
      s.found_before = middle;
    }
    __syncthreads();
    const int bin = s.found_bin;
    before = s.found_before;
    __syncthreads();  // s.found_* free
    return bin;
  }

  /// The members of the last histogram's bins below `bin` (exact).
  __device__ int count_below(int bin) const {
    const int j0 = 2 * static_cast<int>(threadIdx.x), j1 = j0 + 1;
    const double mine = (j0 < bin ? static_cast<double>(s.bin_count[j0]) : 0.0) +
                        (j1 < bin ? static_cast<double>(s.bin_count[j1]) : 0.0);
    return static_cast<int>(block_sum(mine, s.sums));
  }

  /// The bin (level 0, else one level-1 sub-bin) where the members' count (or approximate mass)
  /// in order reaches `target`, holding at most kGatherCap members. false if there is none.
  /// `given`: level 0's bins (histogram).
  __device__ bool find_bin(bool masses, double target, FoundBin& found,
                           const RowBins* given = nullptr) const {
    histogram(0, 0, masses, given);
    double before0 = 0;
    const int b0 = find_crossing(masses, target, before0);
    if (b0 < 0) return false;
    found.count_before = count_below(b0);
    found.members = static_cast<int>(s.bin_count[b0]);
    if (found.members <= kGatherCap) {
      found.path = BinPath{0, b0, 0};
      return true;
    }
    __syncthreads();  // every thread has read s.bin_count[b0]
    histogram(1, b0, masses);
    double before1 = 0;
    const int b1 = find_crossing(masses, target - before0, before1);
    if (b1 < 0) return false;
    found.count_before += count_below(b1);
    found.members = static_cast<int>(s.bin_count[b1]);
    found.path = BinPath{1, b0, b1};
    return found.members <= kGatherCap;
  }

  /// Gathers the members of `path` (with `upto`, also every member before it; at most
  /// kGatherCap) into s.g_* with their exact weights and ranks them in order (logit descending,
  /// id ascending; s.g_by_rank). Returns their number (more than kGatherCap: not all there).
  __device__ int gather(const BinPath& path, bool upto = false) const {
    if (threadIdx.x == 0) s.gathered = 0;
    __syncthreads();
    for_each_logit(logits, limit, [&](int i, bool valid, float l) {
      if (!valid || !member(i)) return;
      const int c = path.compare(m, l);
      if (upto ? c > 0 : c != 0) return;
      const int slot = atomicAdd(&s.gathered, 1);
      if (slot >= kGatherCap) return;
      s.g_key[slot] = order_key(l);
      s.g_id[slot] = i;
      s.g_w[slot] = weight(i);
    });
    __syncthreads();
    const int n = s.gathered < kGatherCap ? s.gathered : kGatherCap;
    for (int j = static_cast<int>(threadIdx.x); j < n; j += kThreads) {
      const std::uint32_t key = s.g_key[j];
      const int id = s.g_id[j];
      int rank = 0;
      for (int q = 0; q < n; ++q)
        rank += s.g_key[q] > key || (s.g_key[q] == key && s.g_id[q] < id) ? 1 : 0;
      s.g_by_rank[rank] = j;
    }
    __syncthreads();
    return s.gathered;
  }

  /// The exact (double) sum of the members' weights before `path`'s bin.
  __device__ double weight_before(const BinPath& path) const {
    double sum = 0;
    for_each_logit(logits, limit, [&](int i, bool valid, float l) {
      if (valid && member(i) && path.compare(m, l) < 0) sum += weight(i);
    });
    return block_sum(sum, s.sums);
  }

  /// The whole selection and draw in shared memory, when the kept ids are few: top-k (k > 0)
  /// and/or top-p (p < 1; `total_allowed`: the weight sum of every member, used without top-k)
  /// select, then the draw at uniform u walks the kept ids in id order (sampling.h). The ids up
  /// to the threshold's bin are gathered and ranked (at most kGatherCap); with top-k, its
  /// total and the top-p running sums are added in rank order as on the CPU. `chosen`: the
  /// drawn id. false (nothing decided) when more ids come before the threshold's bin than fit,
  /// or the approximate masses point past what was gathered. `first` (with `have_first`): the
  /// bin of its search (top-k's k-th id, else top-p's crossing), for kth() or crossing() when it
  /// cannot finish. `given`: the row's level-0 bins from the chunk blocks (counts with top-k,
  /// masses without), consumed.
  __device__ bool small_selection(int k, double top_p, double total_allowed, double u, int& chosen,
                                  FoundBin& first, bool& have_first,
                                  const RowBins* given = nullptr) const {
    const bool by_count = k > 0;
    const double target = by_count ? static_cast<double>(k) : top_p * total_allowed;
    if (!find_bin(!by_count, target, first, given)) return false;
    have_first = true;
    if (first.count_before + first.members > kGatherCap) return false;
    const int n = gather(first.path, true);
    if (n > kGatherCap || (by_count && n < k)) return false;
    if (threadIdx.x == 0) {
      int kept = by_count ? k : n;
      double total = 0;
      if (by_count)
        for (int r = 0; r < kept; ++r) total += s.g_w[s.g_by_rank[r]];
      else
        total = total_allowed;
      if (top_p < 1.0) {
        const double goal = top_p * total;
        double running = 0;
        int prefix = 0;
        while (prefix < kept) {
          running += s.g_w[s.g_by_rank[prefix]];
          ++prefix;
          if (running >= goal) break;
        }
        // Without top-k the crossing must lie among the gathered ids.
        if (!by_count && running < goal) prefix = -1;
        kept = prefix;
      }
      s.found_bin = kept;
    }
    __syncthreads();
    const int kept = s.found_bin;
    __syncthreads();  // s.found_bin free
    if (kept < 1) return false;
    // The kept entries in id order (s.bin_count is free after the gather): a rank by id.
    auto* by_id = reinterpret_cast<int*>(s.bin_count);
    for (int r = static_cast<int>(threadIdx.x); r < kept; r += kThreads) {
      const int id = s.g_id[s.g_by_rank[r]];
      int position = 0;
      for (int q = 0; q < kept; ++q) position += s.g_id[s.g_by_rank[q]] < id ? 1 : 0;
      by_id[position] = s.g_by_rank[r];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0;
      for (int q = 0; q < kept; ++q) total += s.g_w[by_id[q]];
      const double goal = u * total;
      double running = 0;
      int pick = s.g_id[by_id[kept - 1]];
      for (int q = 0; q < kept; ++q) {
        running += s.g_w[by_id[q]];
        if (running > goal) {
          pick = s.g_id[by_id[q]];
          break;
        }
      }
      s.found_bin = pick;
    }
    __syncthreads();
    chosen = s.found_bin;
    __syncthreads();  // s.found_bin and s.bin_count free
    return true;
  }

  /// top-k: the k-th member in order (key and id), searched in the bin `known` when given (a
  /// count search for k). false if the bins cannot settle it.
  __device__ bool kth(int k, std::uint32_t& key, int& id, const FoundBin* known = nullptr) const {
    FoundBin found;
    if (known != nullptr)
      found = *known;
    else if (!find_bin(false, static_cast<double>(k), found))
      return false;
    const int n = gather(found.path);
    const int r = k - found.count_before;
    if (n > kGatherCap || r < 1 || r > n) return false;
    const int t = s.g_by_rank[r - 1];
    key = s.g_key[t];
    id = s.g_id[t];
    __syncthreads();  // s.g_* free
    return true;
  }

  /// top-p: the first member in order at which the running weight reaches `target` (key and
  /// id), searched in the bin `known` when given (a mass search for `target`). false if the bins
  /// cannot settle it.
  __device__ bool crossing(double target, std::uint32_t& key, int& id,
                           const FoundBin* known = nullptr) const {
    FoundBin found;
    if (known != nullptr)
      found = *known;
    else if (!find_bin(true, target, found))
      return false;
    const int n = gather(found.path);
    if (n > kGatherCap) return false;
    const double start = weight_before(found.path);
    if (!(start < target)) return false;  // the approximate masses pointed too far
    if (threadIdx.x == 0) {
      double running = start;
      int found = -1;
      for (int r = 0; r < n; ++r) {
        const int t = s.g_by_rank[r];
        running += s.g_w[t];
        if (running >= target) {
          found = t;
          break;
        }
      }
      s.found_bin = found;
    }
    __syncthreads();
    const int t = s.found_bin;
    if (t >= 0) {
      key = s.g_key[t];
      id = s.g_id[t];
    }
    __syncthreads();  // s.found_bin and s.g_* free
    return t >= 0;
  }
};

template <typename Member, typename Weight>
__device__ ThresholdSearch<Member, Weight> threshold_search(const float* logits, int limit, float m,
                                                            float inv_t, Member member,
                                                            Weight weight, Scratch& s) {
  return ThresholdSearch<Member, Weight>{logits, limit, m, inv_t, member, weight, s};
}

/// Whether top-k is in effect for a row: k > 0 and fewer than its allowed ids.
__device__ __forceinline__ bool uses_top_k(const SampleInfo& p, int limit) {
  const int allowed_count = limit - (p.mask_id >= 0 && p.mask_id < limit ? 1 : 0);
  return p.top_k > 0 && p.top_k < allowed_count;
}
/// Whether a row's draw needs the whole row's order (top-k or top-p in effect).
__device__ __forceinline__ bool needs_whole_row(const SampleInfo& p, int limit) {
  if (p.temperature <= 0) return false;
  return uses_top_k(p, limit) || p.top_p < 1.0;
}

/// The proposal of one block row from its whole row of `vocab` logits, by one block of kThreads.
/// `given`: the row's maximum and sums as the chunked pass's blocks computed them (not
/// recomputed; the row is valid); `bins`: its level-0 bins from those blocks (consumed).
__device__ void whole_row_proposal(const SampleInfo& p, const float* logits, std::int32_t vocab,
                                   ProposalOut* out_row, Scratch& s, const RowSums* given = nullptr,
                                   const RowBins* bins = nullptr) {
  const int limit = vocab < p.vocab_limit ? vocab : p.vocab_limit;
  const int mask = p.mask_id;
  const auto allowed = [&](int i) { return i != mask; };  // i < limit by the loops

  float best = -INFINITY;
  int best_id = -1;
  double sum = 0, weighted = 0;
  if (given != nullptr) {
    best = given->max;
    best_id = given->argmax;
    sum = given->sum;
    weighted = given->weighted;
  } else {
    // The maximum over allowed ids (lowest id on ties): the greedy choice and the softmax shift.
    int nan_id = INT_MAX, last = -1;
    scan_allowed(logits, 0, limit, mask, best, best_id, nan_id, last);
    block_argmax(best, best_id, s);
    nan_id = block_min_max(nan_id, false, s);
    if (nan_id != INT_MAX || best_id < 0 || isinf(best)) {
      if (threadIdx.x == 0)
        *out_row = ProposalOut{nan_id != INT_MAX ? nan_id : best_id, 0.0f, 0.0f,
                               nan_id != INT_MAX ? kProposalNaN : kProposalNoAllowed};
      return;
    }
    // Temperature-1 softmax over the allowed ids: confidence and entropy (double, as the CPU).
    const double m = best;
#pragma unroll 4
    for (int i = threadIdx.x; i < limit; i += kThreads) {
      if (!allowed(i)) continue;
      const double d = static_cast<double>(logits[i]) - m;
      const double w = exp(d);
      sum += w;
      if (w > 0) weighted += w * d;
    }
    sum = block_sum(sum, s.sums);
    weighted = block_sum(weighted, s.sums);
  }
  const double m = best;
  const double log_sum = log(sum);
  const auto finish = [&](int token) {
    if (threadIdx.x != 0) return;
    const double d = static_cast<double>(logits[token]) - m;
    const double entropy = log_sum - weighted / sum;
    *out_row = ProposalOut{token, static_cast<float>(exp(d - log_sum)),
                           static_cast<float>(entropy > 0.0 ? entropy : 0.0), kProposalOk};
  };
  if (p.temperature <= 0) {
    finish(best_id);
    return;
  }

  // Sampling weights at the temperature; top-k and top-p choose which ids are kept.
  const double temperature = p.temperature;
  const auto weight = [&](int i) {
    return exp((static_cast<double>(logits[i]) - m) / temperature);
  };
  const bool use_top_k = uses_top_k(p, limit);
  const bool use_top_p = p.top_p < 1.0;
  // kept by top-k: key > k_key, or key == k_key and id <= k_id (everything allowed without it).
  std::uint32_t k_key = 0;
  int k_id = INT_MAX;
  const float inv_t = static_cast<float>(1.0 / temperature);
  FoundBin first;  // small_selection's bin: top-k's k-th id, else top-p's crossing
  bool have_first = false;
  double total_allowed = 0;  // without top-k: the sampling weights' sum over allowed ids
  if (use_top_k || use_top_p) {
    // Every kept id in shared memory when few are (ThresholdSearch::small_selection).
    if (!use_top_k) {
      if (given != nullptr) {
        total_allowed = given->sample_total;
      } else {
        for_each_logit(logits, limit, [&](int i, bool valid, float) {
          if (valid && allowed(i)) total_allowed += weight(i);
        });
        total_allowed = block_sum(total_allowed, s.sums);
      }
    }
    int chosen = -1;
    if (threshold_search(logits, limit, best, inv_t, allowed, weight, s)
            .small_selection(use_top_k ? p.top_k : 0, use_top_p ? p.top_p : 1.0, total_allowed,
                             philox_uniform(p.seed, p.position, p.step), chosen, first, have_first,
                             bins)) {
      finish(chosen);
      return;
    }
  }
  if (use_top_k && !threshold_search(logits, limit, best, inv_t, allowed, weight, s)
                        .kth(p.top_k, k_key, k_id, have_first ? &first : nullptr)) {
    const auto one = [](int) { return 1.0; };
    k_key = search_key(logits, limit, allowed, one, static_cast<double>(p.top_k), s);
    double greater = 0;
    if (k_key != 0xFFFFFFFFu) {
      for (int i = threadIdx.x; i < limit; i += kThreads)
        if (allowed(i) && order_key(logits[i]) > k_key) greater += 1.0;
      greater = block_sum(greater, s.sums);
    }
    const auto tie = [&](int i) { return allowed(i) && order_key(logits[i]) == k_key; };
    k_id = scan_select(0, limit, tie, one, greater, static_cast<double>(p.top_k), false, s);
  }
  const auto kept_k = [&](int i) {
    if (!allowed(i)) return false;
    const std::uint32_t key = order_key(logits[i]);
    return key > k_key || (key == k_key && i <= k_id);
  };
  std::uint32_t p_key = 0;
  int p_id = INT_MAX;
  if (use_top_p) {
    double total = total_allowed;  // without top-k, kept_k is allowed
    if (use_top_k) {
      for_each_logit(logits, limit, [&](int i, bool valid, float) {
        if (valid && kept_k(i)) total += weight(i);
      });
      total = block_sum(total, s.sums);
    }
    const double target = p.top_p * total;
    if (!threshold_search(logits, limit, best, inv_t, kept_k, weight, s)
             .crossing(target, p_key, p_id, have_first && !use_top_k ? &first : nullptr)) {
      p_key = search_key(logits, limit, kept_k, weight, target, s);
      double greater = 0;
      if (p_key != 0xFFFFFFFFu) {
        for (int i = threadIdx.x; i < limit; i += kThreads)
          if (kept_k(i) && order_key(logits[i]) > p_key) greater += weight(i);
        greater = block_sum(greater, s.sums);
      }
      const auto tie = [&](int i) { return kept_k(i) && order_key(logits[i]) == p_key; };
      p_id = scan_select(0, limit, tie, weight, greater, target, false, s);
    }
  }
  const auto kept = [&](int i) {
    if (!kept_k(i)) return false;
    const std::uint32_t key = order_key(logits[i]);
    return key > p_key || (key == p_key && i <= p_id);
  };
  // u * (sum of kept weights), then the first kept id (ascending) whose running sum exceeds it.
  double total = 0;
  for_each_logit(logits, limit, [&](int i, bool valid, float) {
    if (valid && kept(i)) total += weight(i);
  });
  total = block_sum(total, s.sums);
  const double target = philox_uniform(p.seed, p.position, p.step) * total;
  const int chosen = scan_select(0, limit, kept, weight, 0.0, target, true, s);
  finish(chosen);
}

__global__ void __launch_bounds__(kThreads)
    vocab_pass_kernel(const PassHeader* meta, const float* logits_all, std::int32_t vocab,
                      ProposalOut* out) {
  wait_for_prior_grid();
  __shared__ Scratch s;
  const std::int32_t row = blockIdx.x;
  if (row >= meta->block_rows) return;
  const SampleInfo p = pass_section<SampleInfo>(meta, meta->samples_offset)[row];
  whole_row_proposal(p, logits_all + static_cast<std::int64_t>(row) * vocab, vocab, out + row, s);
}

/// The bounds [begin, end) of chunk `chunk` of `chunks` over ids [0, vocab), clipped to `limit`.
__device__ __forceinline__ void chunk_bounds(int vocab, int limit, int chunk, int chunks,
                                             int& begin, int& end) {
  const int len = (vocab + chunks - 1) / chunks;
  begin = chunk * len < limit ? chunk * len : limit;
  end = begin + len < limit ? begin + len : limit;
}

/// Chunked pass, kernel 1 (grid chunks x block rows): each chunk's maximum over allowed ids
/// (lowest id on ties), its lowest NaN id and its last allowed id.
__global__ void __launch_bounds__(kThreads)
    vocab_chunk_max_kernel(const PassHeader* meta, const float* logits_all, std::int32_t vocab,
                           VocabPartial* partials) {
  wait_for_prior_grid();
  __shared__ Scratch s;
  const int row = static_cast<int>(blockIdx.y), chunk = static_cast<int>(blockIdx.x),
            chunks = static_cast<int>(gridDim.x);
  if (row >= meta->block_rows) return;
  const SampleInfo p = pass_section<SampleInfo>(meta, meta->samples_offset)[row];
  const float* logits = logits_all + static_cast<std::int64_t>(row) * vocab;
  const int limit = vocab < p.vocab_limit ? vocab : p.vocab_limit;
  int begin = 0, end = 0;
  chunk_bounds(vocab, limit, chunk, chunks, begin, end);
  float best = -INFINITY;
  int best_id = -1, nan_id = INT_MAX, last = -1;
  scan_allowed(logits, begin, end, p.mask_id, best, best_id, nan_id, last);
  block_argmax(best, best_id, s);
  nan_id = block_min_max(nan_id, false, s);
  last = block_min_max(last, true, s);
  if (threadIdx.x == 0)
    partials[row * chunks + chunk] = VocabPartial{best, best_id, nan_id, last, 0.0, 0.0, 0.0};
}

/// Chunked pass, kernel 2 (grid chunks x block rows): the chunk's softmax, entropy and sampling
/// sums at the row's maximum; the row's last block combines them and writes the proposal.
/// kMinBlocks: blocks of 512 threads per SM that __launch_bounds__ asks registers for (1: 104
/// registers, one block per SM; 3: 40, its rarely run finishing code spilling to the stack;
/// vocab_sum_blocks_per_sm). The same code, so the same bits.
template <int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    vocab_chunk_sum_kernel(const PassHeader* meta, const float* logits_all, std::int32_t vocab,
                           ProposalOut* out, VocabWorkspace workspace) {
  wait_for_prior_grid();
  __shared__ Scratch s;
  const int row = static_cast<int>(blockIdx.y), chunk = static_cast<int>(blockIdx.x),
            chunks = static_cast<int>(gridDim.x);
  if (row >= meta->block_rows) return;
  const SampleInfo p = pass_section<SampleInfo>(meta, meta->samples_offset)[row];
  const float* logits = logits_all + static_cast<std::int64_t>(row) * vocab;
  const int limit = vocab < p.vocab_limit ? vocab : p.vocab_limit;
  VocabPartial* part = workspace.partials + static_cast<std::int64_t>(row) * chunks;

  // The row's maximum from the chunk maxima (chunks <= kThreads; lowest id on ties).
  float best = -INFINITY;
  int best_id = -1, nan_id = INT_MAX;
  if (static_cast<int>(threadIdx.x) < chunks) {
    const VocabPartial c = part[threadIdx.x];
    best = c.max;
    best_id = c.argmax;
    nan_id = c.nan_id;
  }
  block_argmax(best, best_id, s);
  nan_id = block_min_max(nan_id, false, s);
  const bool valid = nan_id == INT_MAX && best_id >= 0 && !isinf(best);
  const bool whole_row = needs_whole_row(p, limit);
  const bool sampling = p.temperature > 0;
  const double m = best;

  if (valid) {  // whole-row rows too: their last block starts from these sums
    int begin = 0, end = 0;
    chunk_bounds(vocab, limit, chunk, chunks, begin, end);
    double sum = 0, weighted = 0, sample = 0;
    const auto add = [&](float v, int i) {
      if (i == p.mask_id) return;
      const double d = static_cast<double>(v) - m;
      const double w = exp(d);
      sum += w;
      if (w > 0) weighted += w * d;  // an id at -inf contributes nothing (0 * -inf is NaN)
      // At temperature 1 the sampling weight is w itself (d / 1 == d): one exp, the same bits.
      if (sampling) sample += p.temperature == 1.0 ? w : exp(d / p.temperature);
    };
    for_each_logit(logits, begin, end, add);
    sum = block_sum(sum, s.sums);
    weighted = block_sum(weighted, s.sums);
    if (sampling) sample = block_sum(sample, s.sums);
    if (threadIdx.x == 0) {
      part[chunk].sum = sum;
      part[chunk].weighted = weighted;
      part[chunk].sample_sum = sample;
    }
    if (whole_row) {
      // The chunk's level-0 bins of the threshold search, added into the row's: counts with
      // top-k, approximate masses without (ThresholdSearch::small_selection's first search).
      const int mask = p.mask_id;
      const bool masses = !uses_top_k(p, limit);
      bin_histogram(
          logits, begin, end, best, static_cast<float>(1.0 / p.temperature),
          [&](int i) { return i != mask; }, 0, 0, masses, s);
      std::uint32_t* counts = workspace.bin_counts + static_cast<std::int64_t>(row) * kBins;
      unsigned long long* row_masses =
          workspace.bin_masses + static_cast<std::int64_t>(row) * kBins;
      for (int j = static_cast<int>(threadIdx.x); j < kBins; j += kThreads) {
        if (s.bin_count[j] != 0u) atomicAdd(counts + j, s.bin_count[j]);
        if (masses && s.bin_mass[j] != 0ull) atomicAdd(row_masses + j, s.bin_mass[j]);
      }
      __threadfence();  // the adds are done before this block counts itself in
      __syncthreads();
    }
  }
  // The last block of the row to get here finishes it (threadFenceReduction's pattern).
  if (threadIdx.x == 0) {
    __threadfence();
    s.last_block =
        atomicAdd(workspace.counters + row, 1u) == static_cast<std::uint32_t>(chunks - 1);
  }
  __syncthreads();
  if (s.last_block == 0) return;
  __threadfence();
  if (threadIdx.x == 0) workspace.counters[row] = 0u;  // ready for the next pass (and graph replay)

  if (!valid) {
    if (threadIdx.x == 0)
      out[row] = ProposalOut{nan_id != INT_MAX ? nan_id : best_id, 0.0f, 0.0f,
                             nan_id != INT_MAX ? kProposalNaN : kProposalNoAllowed};
    return;
  }
  // The chunk sums, gathered in parallel (L2 reads: the other blocks wrote them), then added in
  // chunk order by one thread, which also finds the chunk the draw falls in.
  if (static_cast<int>(threadIdx.x) < chunks) {
    const VocabPartial* c = part + threadIdx.x;
    s.chunk_sum[0][threadIdx.x] = __ldcg(&c->sum);
    s.chunk_sum[1][threadIdx.x] = __ldcg(&c->weighted);
    s.chunk_sum[2][threadIdx.x] = __ldcg(&c->sample_sum);
    s.chunk_last[threadIdx.x] = c->last_allowed;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0, weighted = 0, total = 0;
    for (int c = 0; c < chunks; ++c) {
      sum += s.chunk_sum[0][c];
      weighted += s.chunk_sum[1][c];
      total += s.chunk_sum[2][c];
    }
    s.combined[0] = sum;
    s.combined[1] = weighted;
    s.combined[2] = total;
    s.crossing = -1;
    if (sampling && !whole_row) {
      // u * total, then the first chunk whose running sum exceeds it; if none does
      // (rounding), the last allowed id, as the CPU's walk ends there.
      const double target = philox_uniform(p.seed, p.position, p.step) * total;
      double running = 0;
      int last_allowed = -1;
      for (int c = 0; c < chunks; ++c) {
        const double next = running + s.chunk_sum[2][c];
        if (next > target) {
          s.crossing = c;
          break;
        }
        running = next;
        if (s.chunk_last[c] > last_allowed) last_allowed = s.chunk_last[c];
      }
      if (s.crossing < 0) s.crossing = -2 - last_allowed;
      s.combined[2] = running;
      s.combined[3] = target;
    }
  }
  __syncthreads();
  if (whole_row) {
    const RowSums given{best, best_id, s.combined[0], s.combined[1], s.combined[2]};
    const RowBins bins{workspace.bin_counts + static_cast<std::int64_t>(row) * kBins,
                       workspace.bin_masses + static_cast<std::int64_t>(row) * kBins};
    __syncthreads();  // s.combined free
    whole_row_proposal(p, logits, vocab, out + row, s, &given, &bins);
    return;
  }
  const double sum = s.combined[0], weighted = s.combined[1];
  const double log_sum = log(sum);
  int token = best_id;
  if (sampling) {
    const int crossing = s.crossing;
    if (crossing >= 0) {
      int begin = 0, end = 0;
      chunk_bounds(vocab, limit, crossing, chunks, begin, end);
      const int mask = p.mask_id;
      const double temperature = p.temperature;
      token = scan_select(
          begin, end, [&](int i) { return i != mask; },
          [&](int i) { return exp((static_cast<double>(logits[i]) - m) / temperature); },
          s.combined[2], s.combined[3], true, s);
    } else {
      token = -2 - crossing;
    }
  }
  if (threadIdx.x == 0) {
    const double d = static_cast<double>(logits[token]) - m;
    const double entropy = log_sum - weighted / sum;
    out[row] = ProposalOut{token, static_cast<float>(exp(d - log_sum)),
                           static_cast<float>(entropy > 0.0 ? entropy : 0.0), kProposalOk};
  }
}

}  // namespace

int vocab_sum_blocks_per_sm(std::int32_t block_rows_pad) {
  return block_rows_pad > kVocabSumFewRows ? 3 : 1;
}

std::int32_t vocab_pass_chunks(std::int32_t vocab, std::int32_t block_rows_pad, std::int32_t sms) {
  if (block_rows_pad <= 0 || vocab <= 0) return 1;
  const std::int64_t wanted = (4ll * sms + block_rows_pad - 1) / block_rows_pad;
  const std::int64_t by_size = (vocab + kMinVocabChunk - 1) / kMinVocabChunk;
  std::int64_t chunks = wanted < by_size ? wanted : by_size;
  if (chunks > kMaxVocabChunks) chunks = kMaxVocabChunks;
  return static_cast<std::int32_t>(chunks < 1 ? 1 : chunks);
}

void launch_vocab_pass_chunked(const PassHeader* meta, const float* logits, std::int32_t vocab,
                               ProposalOut* out, std::int32_t block_rows_pad, std::int32_t chunks,
                               VocabWorkspace workspace, cudaStream_t stream, bool pdl,
                               int sum_blocks_per_sm) {
  if (block_rows_pad <= 0) return;
  if (chunks < 1 || chunks > kMaxVocabChunks)
    throw Error("vocabulary pass: " + std::to_string(chunks) + " chunks per row (1 to " +
                std::to_string(kMaxVocabChunks) + ")");
  const int blocks =
      sum_blocks_per_sm != 0 ? sum_blocks_per_sm : vocab_sum_blocks_per_sm(block_rows_pad);
  if (blocks != 1 && blocks != 3)
    throw Error("vocabulary pass: the sum kernel runs at 1 or 3 blocks per SM, not " +
                std::to_string(blocks));
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(block_rows_pad));
  launch_kernel("vocab_chunk_max_kernel", vocab_chunk_max_kernel, grid, kThreads, 0, stream, pdl,
                meta, logits, vocab, workspace.partials);
  launch_kernel("vocab_chunk_sum_kernel",
                blocks == 3 ? vocab_chunk_sum_kernel<3> : vocab_chunk_sum_kernel<1>, grid, kThreads,
                0, stream, pdl, meta, logits, vocab, out, workspace);
}

void launch_vocab_pass(const PassHeader* meta, const float* logits, std::int32_t vocab,
                       ProposalOut* out, std::int32_t block_rows_pad, cudaStream_t stream,
                       bool pdl) {
  if (block_rows_pad <= 0) return;
  launch_kernel("vocab_pass_kernel", vocab_pass_kernel, static_cast<unsigned>(block_rows_pad),
                kThreads, 0, stream, pdl, meta, logits, vocab, out);
}

}  // namespace dice::engine::cuda
