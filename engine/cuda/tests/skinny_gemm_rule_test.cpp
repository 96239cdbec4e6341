// Which GEMMs the skinny and cluster kernels take, with which tiles and splits (host only, no GPU
// needed).

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cluster_gemm.h"
#include "dice/core/error.h"
#include "skinny_gemm.h"

namespace dice::engine::cuda {
namespace {

const void* at(std::uintptr_t address) {
  return reinterpret_cast<const void*>(address);
}
const float* at_f(std::uintptr_t address) {
  return reinterpret_cast<const float*>(address);
}

bool fits(std::int64_t rows, std::int64_t in, std::int64_t out, std::int64_t max_rows = 16,
          bool bf16 = true) {
  return skinny_gemm_fits(bf16, rows, in, out, max_rows, at(256), at(512), at_f(1024));
}

TEST(SkinnyGemmRule, TakesEverySdarLayerShapeAtFewRows) {
  // SDAR-1.7B, -4B and -8B: q/k/v fused, o, gate/up fused, down, lm_head (in, out).
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes{
      {2048, 4096}, {2048, 2048}, {2048, 12288}, {6144, 2048},  {2048, 151936},
      {2560, 6144}, {4096, 2560}, {2560, 19456}, {9728, 2560},  {2560, 151936},
      {4096, 6144}, {4096, 4096}, {4096, 24576}, {12288, 4096}, {4096, 151936}};
  for (const auto& [in, out] : shapes)
    for (const std::int64_t rows : {1, 3, 4, 8, 13, 16}) {
      EXPECT_TRUE(fits(rows, in, out)) << rows << " x " << in << " -> " << out;
      EXPECT_FALSE(skinny_n_tile_options(rows, out).empty()) << out;
    }
}

TEST(SkinnyGemmRule, RefusesWhatItCannotRun) {
  EXPECT_FALSE(fits(17, 2048, 2048));            // more rows than the limit
  EXPECT_TRUE(fits(17, 2048, 2048, 64));         // unless the limit allows them
  EXPECT_TRUE(fits(64, 2048, 2048, 64));         // up to four m16 tiles
  EXPECT_FALSE(fits(65, 2048, 2048, 128));       // never more than kSkinnyRowsLimit
  EXPECT_FALSE(fits(0, 2048, 2048));             // no rows
  EXPECT_FALSE(fits(8, 2048, 2048, 0));          // 0 turns it off
  EXPECT_FALSE(fits(8, 2048, 2048, 16, false));  // fp32 keeps cuBLASLt
  EXPECT_FALSE(fits(8, 48, 2048));               // in not a multiple of 32
  EXPECT_FALSE(fits(8, 0, 2048));
  EXPECT_FALSE(fits(8, 2048, 12));  // out not a multiple of 8
  EXPECT_FALSE(fits(8, 2048, 0));
  EXPECT_TRUE(fits(8, 32, 8));  // the smallest shape
  // Misaligned pointers (a row offset of a matrix that is not a multiple of 8 elements).
  EXPECT_FALSE(skinny_gemm_fits(true, 8, 2048, 2048, 16, at(258), at(512), at_f(1024)));
  EXPECT_FALSE(skinny_gemm_fits(true, 8, 2048, 2048, 16, at(256), at(520), at_f(1024)));
  EXPECT_FALSE(skinny_gemm_fits(true, 8, 2048, 2048, 16, at(256), at(512), at_f(1028)));
}

TEST(SkinnyGemmRule, TilesFollowRowsAndColumns) {
  EXPECT_EQ(skinny_m_tiles(1), 1);
  EXPECT_EQ(skinny_m_tiles(16), 1);
  EXPECT_EQ(skinny_m_tiles(17), 2);
  EXPECT_EQ(skinny_m_tiles(32), 2);
  EXPECT_EQ(skinny_m_tiles(33), 4);
  EXPECT_EQ(skinny_m_tiles(64), 4);
  EXPECT_EQ(skinny_n_tile_options(8, 2048), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(skinny_n_tile_options(64, 2048), (std::vector<int>{1, 2}));  // registers
  EXPECT_EQ(skinny_n_tile_options(8, 24), (std::vector<int>{1}));
  EXPECT_EQ(skinny_n_tile_options(8, 48), (std::vector<int>{1, 2}));
  // Defaults on 132 SMs: at least two blocks per SM, else the most blocks.
  EXPECT_EQ(skinny_default_n_tiles(8, 2048, 132), 1);     // 256 blocks
  EXPECT_EQ(skinny_default_n_tiles(8, 4096, 132), 1);     // 512 blocks; 2 tiles give 256
  EXPECT_EQ(skinny_default_n_tiles(8, 12288, 132), 4);    // 384 blocks
  EXPECT_EQ(skinny_default_n_tiles(8, 151936, 132), 4);   // lm_head
  EXPECT_EQ(skinny_default_n_tiles(64, 151936, 132), 2);  // four m16 tiles: at most 2
  EXPECT_EQ(skinny_default_n_tiles(8, 24, 132), 1);
}

TEST(ClusterGemmRule, TakesSdarShapesOfMoreRowsAndRefusesTheRest) {
  const auto fits = [](std::int64_t rows, std::int64_t in, std::int64_t out,
                       std::int64_t max_rows = 128, std::uintptr_t x = 256) {
    return cluster_gemm_fits(true, rows, in, out, max_rows, at(x), at(512), at(1024));
  };
  // SDAR-1.7B and -4B layer shapes and an lm_head, 17 to 128 rows.
  for (const std::int64_t rows : {17, 64, 65, 128}) {
    EXPECT_TRUE(fits(rows, 2048, 4096));
    EXPECT_TRUE(fits(rows, 6144, 2048));
    EXPECT_TRUE(fits(rows, 2560, 19456));
    EXPECT_TRUE(fits(rows, 9728, 2560));
    EXPECT_TRUE(fits(rows, 2048, 151936));
  }
  EXPECT_FALSE(fits(129, 2048, 4096));         // over the kernel's limit
  EXPECT_FALSE(fits(65, 2048, 4096, 64));      // over the caller's limit
  EXPECT_FALSE(fits(64, 2048, 4096, 0));       // off
  EXPECT_FALSE(fits(0, 2048, 4096));           // no rows
  EXPECT_FALSE(fits(64, 2080, 4096));          // in not a multiple of 64
  EXPECT_FALSE(fits(64, 2048, 4160));          // out not a multiple of 128
  EXPECT_FALSE(fits(64, 2048, 4096, 128, 8));  // x not 16-byte aligned
  EXPECT_FALSE(cluster_gemm_fits(false, 64, 2048, 4096, 128, at(256), at(512), at(1024)));
}

TEST(ClusterGemmRule, SplitsFillTheResidentClusters) {
  // Residency of an H100 at one block per SM: 132 blocks, fewer whole clusters per GPC as they
  // grow.
  const std::vector<int> h100{132, 66, 44, 32, 26, 22, 18, 16};
  // 1.7B o: 16 column tiles of 32 stages: 8 splits (one wave, 4 stages each, plus the merge).
  EXPECT_EQ(cluster_gemm_splits(16, 2048, h100), 8);
  // 4B qkv: 48 tiles of 40 stages. s = 2: 1 wave x 20 + 1 = 21; s = 5: 2 x 8 + 1 = 17; s = 8:
  // 3 x 5 + 1 = 16.
  EXPECT_EQ(cluster_gemm_splits(48, 2560, h100), 8);
  // 1.7B gate/up: 96 tiles of 32 stages: 4 splits (3 waves x 8 + 1 = 25) over one (32) and,
  // on the tie with 8 (6 x 4 + 1), the fewer.
  EXPECT_EQ(cluster_gemm_splits(96, 2048, h100), 4);
  // An lm_head's 1,187 tiles: no split (9 waves x 32 = 288 against 75 x 4 + 1 and more).
  EXPECT_EQ(cluster_gemm_splits(1187, 2048, h100), 1);
  // Never more splits than stages (2 here, tied with 1: the fewer); a cluster size that does
  // not fit is skipped.
  EXPECT_EQ(cluster_gemm_splits(1, 128, h100), 1);
  EXPECT_EQ(cluster_gemm_splits(16, 2048, std::vector<int>{132, 66, 0, 0, 0, 0, 0, 0}), 2);
  EXPECT_THROW(cluster_gemm_splits(0, 2048, h100), Error);
  EXPECT_THROW(cluster_gemm_splits(16, 2080, h100), Error);
  EXPECT_THROW(cluster_gemm_splits(16, 2048, std::vector<int>(8, 0)), Error);
}

}  // namespace
}  // namespace dice::engine::cuda
