// Which GEMMs the skinny kernel takes and with which tiles (host only, no GPU needed).

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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

}  // namespace
}  // namespace dice::engine::cuda
