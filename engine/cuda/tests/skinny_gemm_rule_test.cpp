// Which GEMMs the skinny, the streaming and the wgmma kernel take and with which tiles, splits and
// stages (host only, no GPU needed).

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "skinny_gemm.h"
#include "stream_gemm.h"
#include "wgmma_gemm.h"

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

TEST(SkinnyGemmRule, OldOutputsAreReadEarlyOnlyWithEveryCondition) {
  // reads_y_early: y_ready, accumulate, PDL and early weights, all four; any one missing keeps
  // the read after the wait.
  EXPECT_TRUE(reads_y_early(true, true, true, true));
  for (int missing = 0; missing < 4; ++missing)
    EXPECT_FALSE(reads_y_early(missing != 0, missing != 1, missing != 2, missing != 3)) << missing;
  // The streaming kernel's: the same, on whole tiles only (no split walk slots).
  float slot = 0.0f;
  EXPECT_TRUE(stream_reads_y_early(true, true, true, true, nullptr));
  EXPECT_FALSE(stream_reads_y_early(true, true, true, true, &slot));
  EXPECT_FALSE(stream_reads_y_early(true, false, true, true, nullptr));
}

TEST(SkinnyGemmRule, WeightsAreStagedOnlyWithEarlyWeightsAndAShareToStage) {
  // skinny_launch_staged_chunks: SDAR-4B's o (4,096 -> 2,560) at 4 rows stages its share with
  // early weights and staging asked for; without either, nothing; the launcher and Gemm's count
  // agree because both call it.
  const int n_tiles = skinny_default_n_tiles(4, 2560, 132);
  const std::int32_t share = skinny_staged_chunks(4, 4096, n_tiles);
  EXPECT_GT(share, 0) << n_tiles;
  EXPECT_EQ(skinny_launch_staged_chunks(SkinnyStaging{true, 2}, true, 4, 4096, n_tiles), share);
  EXPECT_EQ(skinny_launch_staged_chunks(SkinnyStaging{true, 0}, true, 4, 4096, n_tiles), share);
  EXPECT_EQ(skinny_launch_staged_chunks(SkinnyStaging{true, 2}, false, 4, 4096, n_tiles), 0);
  EXPECT_EQ(skinny_launch_staged_chunks(SkinnyStaging{false, 2}, true, 4, 4096, n_tiles), 0);
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

TEST(WgmmaGemmRule, SplitsAndStagesOfTheSdarLayerShapes) {
  // The measured choices at 64 rows on an H100 (132 SMs, 228 KiB of shared memory a SM):
  // bench/results/2026-11-25-wgmma-gemm-h100.
  constexpr int kSms = 132, kShared = 233472;
  EXPECT_EQ(wgmma_default_splits(2048, 4096, 64, kSms, 64), 2);   // 1.7B qkv: 128 blocks
  EXPECT_EQ(wgmma_default_splits(2048, 2048, 64, kSms, 64), 4);   // 1.7B o
  EXPECT_EQ(wgmma_default_splits(2048, 12288, 64, kSms, 64), 1);  // 1.7B gate/up: 192 tiles
  EXPECT_EQ(wgmma_default_splits(6144, 2048, 64, kSms, 64), 4);   // 1.7B down
  EXPECT_EQ(wgmma_default_splits(4096, 2560, 64, kSms, 64), 4);   // 4B o: 40 tiles, 160 blocks
  EXPECT_EQ(wgmma_default_splits(128, 64, 64, kSms, 64), 2);      // at most in / 64 splits
  // k per block (wgmma_min_block_k's measure): the qkv and o projections stream 512-1,280, the
  // MLP ones 1,536-2,560.
  EXPECT_EQ(wgmma_block_k(2048, 2048, 64, kSms, 64), 512);    // 1.7B o: 4 splits
  EXPECT_EQ(wgmma_block_k(2048, 4096, 64, kSms, 64), 1024);   // 1.7B qkv: 2
  EXPECT_EQ(wgmma_block_k(2560, 6144, 64, kSms, 64), 1280);   // 4B qkv: 96 tiles, 2 splits
  EXPECT_EQ(wgmma_block_k(6144, 2048, 64, kSms, 64), 1536);   // 1.7B down: 4
  EXPECT_EQ(wgmma_block_k(2048, 12288, 64, kSms, 64), 2048);  // 1.7B gate/up: 1
  EXPECT_EQ(wgmma_block_k(9728, 2560, 64, kSms, 64), 2432);   // 4B down: 4
  EXPECT_EQ(wgmma_block_k(2560, 19456, 64, kSms, 64), 2560);  // 4B gate/up: 1
  EXPECT_EQ(wgmma_split_options(640, 64), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(wgmma_split_options(192, 64), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(wgmma_split_options(32, 64).empty());
  // 128 k a stage: at most in / 128 splits, none where 128 does not divide `in`.
  EXPECT_EQ(wgmma_split_options(640, 128), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(wgmma_split_options(192, 128).empty());
  EXPECT_TRUE(wgmma_split_options(640, 96).empty());
  // The most splits is the options' last entry, 0 where there is none.
  for (const int stage_k : {64, 96, 128})
    for (const std::int64_t in : {0, 32, 64, 128, 192, 640, 2048, 9728}) {
      const std::vector<int> options = wgmma_split_options(in, stage_k);
      EXPECT_EQ(wgmma_max_splits(in, stage_k), options.empty() ? 0 : options.back())
          << "in " << in << " stage k " << stage_k;
    }
  EXPECT_EQ(wgmma_default_splits(128, 64, 64, kSms, 128), 1);  // at most in / 128
  // 64 k a stage: two blocks a SM up to 2 x SMs blocks (6 stages of 16 KiB), three above (4).
  EXPECT_EQ(wgmma_stages(64, 128, kSms, kShared, 64), 6);
  EXPECT_EQ(wgmma_stages(64, 264, kSms, kShared, 64), 6);
  EXPECT_EQ(wgmma_stages(64, 304, kSms, kShared, 64), 4);  // 4B gate/up: one wave of 3 a SM
  EXPECT_EQ(wgmma_stages(128, 128, kSms, kShared, 64), 4);
  EXPECT_EQ(wgmma_stages(128, 1000, kSms, kShared, 64), 3);
  // 128 k a stage (the default): stages of 32 KiB (tile_n 64) and 48 KiB (128), at least two.
  EXPECT_EQ(kWgmmaStageK, 128);
  EXPECT_EQ(wgmma_stages(64, 160, kSms, kShared, 128), 3);  // 4B down: 160 blocks, two a SM
  EXPECT_EQ(wgmma_stages(64, 304, kSms, kShared, 128), 2);
  EXPECT_EQ(wgmma_stages(128, 128, kSms, kShared, 128), 2);
  EXPECT_EQ(wgmma_stages(128, 1000, kSms, kShared, 128), 2);
  EXPECT_TRUE(wgmma_gemm_fits(64, 2048, 4096, 64, at(256), at(512), at(1024)));
  EXPECT_FALSE(wgmma_gemm_fits(65, 2048, 4096, 64, at(256), at(512), at(1024)));
  EXPECT_FALSE(wgmma_gemm_fits(64, 2016, 4096, 64, at(256), at(512), at(1024)));   // in % 64
  EXPECT_FALSE(wgmma_gemm_fits(64, 2048, 4160, 128, at(256), at(512), at(1024)));  // out % 128
  EXPECT_FALSE(wgmma_gemm_fits(64, 2048, 4096, 96, at(256), at(512), at(1024)));   // tile_n
  EXPECT_FALSE(wgmma_gemm_fits(64, 2048, 4096, 64, at(258), at(512), at(1024)));   // alignment
}

TEST(WgmmaGemmRule, QkEpilogueSplitsLeaveABlockAtMost16Rows) {
  // wgmma_qk_rope_splits: the split rule at the tile within [ceil(rows / (16 x 128 / tile_n)), 4]
  // (at tile_n 64 a head vector's two tiles share its rows).
  constexpr int kSms = 132;
  // tile_n 128
  EXPECT_EQ(wgmma_qk_rope_splits(64, 2048, 4096, kSms, 128, 128), 4);  // 1.7B qkv: the rule's 4
  EXPECT_EQ(wgmma_qk_rope_splits(64, 2560, 6144, kSms, 128, 128), 4);  // 4B: the rule's 3, raised
  EXPECT_EQ(wgmma_default_splits(2560, 6144, 128, kSms, 128), 3);
  EXPECT_EQ(wgmma_qk_rope_splits(40, 2560, 6144, kSms, 128, 128), 3);  // 3 x 14 rows
  EXPECT_EQ(wgmma_qk_rope_splits(17, 2048, 1024, kSms, 128, 128), 4);  // the rule's 8, capped
  EXPECT_EQ(wgmma_qk_rope_splits(64, 256, 4096, kSms, 128, 128), 0);   // at most 2 splits
  // tile_n 64: a split's two blocks take 32 rows
  EXPECT_EQ(wgmma_qk_rope_splits(64, 2048, 4096, kSms, 128, 64), 2);  // 1.7B qkv: the rule's 2
  EXPECT_EQ(wgmma_qk_rope_splits(64, 2560, 6144, kSms, 128, 64), 2);  // 4B qkv: the rule's 2
  EXPECT_EQ(wgmma_qk_rope_splits(64, 256, 4096, kSms, 128, 64), 2);   // 2 x 2 x 16 rows
  EXPECT_EQ(wgmma_qk_rope_splits(17, 2048, 1024, kSms, 128, 64), 4);  // the rule's 8, capped
  EXPECT_EQ(wgmma_qk_rope_splits(64, 128, 4096, kSms, 128, 64), 0);   // one split of 128 k
  for (const int tile_n : {64, 128}) {
    EXPECT_EQ(wgmma_qk_rope_splits(64, 2048, 4096, kSms, 64, tile_n), 0);  // stage k 64
    EXPECT_EQ(wgmma_qk_rope_splits(0, 2048, 4096, kSms, 128, tile_n), 0);
    for (const std::int64_t rows : {1, 16, 17, 33, 48, 49, 64}) {
      const int splits = wgmma_qk_rope_splits(rows, 2048, 4096, kSms, 128, tile_n);
      const std::int64_t shares = static_cast<std::int64_t>(splits) * wgmma_qk_tiles(tile_n);
      EXPECT_LE((rows + shares - 1) / shares, kWgmmaQkRowsPerBlock) << rows << " " << tile_n;
      EXPECT_LE(splits, kWgmmaQkMaxSplits) << rows << " " << tile_n;
    }
  }
  EXPECT_EQ(wgmma_qk_rope_splits(64, 2048, 4096, kSms, 128, 96), 0);  // neither tile
  static_assert(wgmma_qk_tiles(64) == 2 && wgmma_qk_tiles(128) == 1);
  static_assert(wgmma_qk_tiles(96) == 0 && wgmma_qk_tiles(256) == 0);
}

TEST(WgmmaGemmRule, TheDefaultLimitGrowsWithTheBandwidthPerSm) {
  // Peak bandwidths as device_peak_bandwidth() computes them: 2 x memory clock x bus bytes.
  const double h100 = 2.0 * 2619e6 * (5120 / 8);  // H100 SXM, HBM3: 3.35e12 bytes/s
  const double h200 = 2.0 * 3201e6 * (6144 / 8);  // H200 spec, HBM3e: 4.92e12 (devices: 2,176)
  constexpr int kSms = 132;
  const std::int64_t on_h100 = wgmma_auto_min_block_k(h100, kSms);
  const std::int64_t on_h200 = wgmma_auto_min_block_k(h200, kSms);
  EXPECT_EQ(on_h100, 1536);
  EXPECT_EQ(on_h200, 2240);
  // H100: the MLP projections of both models on the kernel, qkv and o not.
  EXPECT_GE(wgmma_block_k(6144, 2048, kWgmmaTileN, kSms, kWgmmaStageK), on_h100);  // 1.7B down
  EXPECT_LT(wgmma_block_k(2560, 6144, kWgmmaTileN, kSms, kWgmmaStageK), on_h100);  // 4B qkv
  // H200: SDAR-4B's MLP projections only (1.7B's gate/up streams 2,048 a block).
  EXPECT_LT(wgmma_block_k(2048, 12288, kWgmmaTileN, kSms, kWgmmaStageK), on_h200);
  EXPECT_GE(wgmma_block_k(9728, 2560, kWgmmaTileN, kSms, kWgmmaStageK), on_h200);  // 4B down
  // Half the SMs for the same bandwidth: twice the k a block (rounded up to kWgmmaTileK).
  EXPECT_EQ(wgmma_auto_min_block_k(h100, kSms / 2), 3008);
  // A device that reports no bandwidth (or no SMs) gives no shape to the kernel.
  EXPECT_EQ(wgmma_auto_min_block_k(0.0, kSms), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(wgmma_auto_min_block_k(h100, 0), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(wgmma_auto_min_block_k(std::numeric_limits<double>::infinity(), kSms),
            std::numeric_limits<std::int64_t>::max());
}

TEST(StreamGemmRule, ShapesAndTheFillOfTheSmsSlots) {
  constexpr int kSms = 132;
  // Every SDAR-1.7B layer shape and the lm_head fill at least 0.97 of 132 SMs' tile slots...
  EXPECT_NEAR(stream_gemm_fill(4096, kSms), 256.0 / 264.0, 1e-12);      // qkv
  EXPECT_NEAR(stream_gemm_fill(2048, kSms), 128.0 / 132.0, 1e-12);      // o, down
  EXPECT_NEAR(stream_gemm_fill(12288, kSms), 768.0 / 792.0, 1e-12);     // gate/up
  EXPECT_NEAR(stream_gemm_fill(151936, kSms), 9496.0 / 9504.0, 1e-12);  // lm_head
  // ...SDAR-4B's o and down projections 160 / 264, below the default rule's 0.9.
  EXPECT_NEAR(stream_gemm_fill(2560, kSms), 160.0 / 264.0, 1e-12);
  EXPECT_LT(stream_gemm_fill(2560, kSms), 0.9);
  EXPECT_NEAR(stream_gemm_fill(16 * kSms, kSms), 1.0, 1e-12);
  EXPECT_EQ(stream_gemm_fill(8, kSms), 0.0);  // not one tile
  EXPECT_EQ(stream_gemm_fill(4096, 0), 0.0);
  // The ring: three stages of 1,280 where 1,280 divides in and 2,048 does not (SDAR-4B's 2,560).
  EXPECT_EQ(stream_ring(2560), StreamRing::kThreeOf1280);
  EXPECT_EQ(stream_ring(1280), StreamRing::kThreeOf1280);
  for (const std::int64_t in : {2048, 4096, 6144, 9728, 10240, 96, 0})
    EXPECT_EQ(stream_ring(in), StreamRing::kTwoOf2048) << in;
  // Shapes: at most 16 rows, in a multiple of 32, out of 16, 16-byte aligned.
  EXPECT_TRUE(stream_gemm_fits(16, 2048, 4096, at(256), at(512), at(1024)));
  EXPECT_FALSE(stream_gemm_fits(17, 2048, 4096, at(256), at(512), at(1024)));
  EXPECT_FALSE(stream_gemm_fits(0, 2048, 4096, at(256), at(512), at(1024)));
  EXPECT_FALSE(stream_gemm_fits(4, 2040, 4096, at(256), at(512), at(1024)));
  EXPECT_FALSE(stream_gemm_fits(4, 2048, 4088, at(256), at(512), at(1024)));
  EXPECT_FALSE(stream_gemm_fits(4, 2048, 4096, at(258), at(512), at(1024)));
}

TEST(StreamGemmRule, TheSplitWalkTakesMoreTilesThanBlocksNotAMultiple) {
  constexpr int kSms = 132;
  // SDAR-4B's o (4,096 -> 2,560) and down (9,728 -> 2,560): 160 tiles on 132 blocks.
  EXPECT_TRUE(stream_split_fits(4096, 2560, kSms));
  EXPECT_TRUE(stream_split_fits(9728, 2560, kSms));
  EXPECT_TRUE(stream_split_fits(512, 160, 7));  // 10 tiles on 7 blocks
  // Whole tiles already balance: a multiple of the blocks, or no more tiles than blocks.
  EXPECT_FALSE(stream_split_fits(4096, 16 * 2 * kSms, kSms));
  EXPECT_FALSE(stream_split_fits(2048, 2048, kSms));  // SDAR-1.7B's o: 128 tiles
  EXPECT_FALSE(stream_split_fits(4096, 16 * kSms, kSms));
  // in a multiple of 256 (whole rounds), at least one block.
  EXPECT_FALSE(stream_split_fits(4064, 2560, kSms));
  EXPECT_FALSE(stream_split_fits(0, 2560, kSms));
  EXPECT_FALSE(stream_split_fits(4096, 2560, 0));
  // The busiest block's k saved: 2 x 4,096 - 20 x 256 (o), 2 x 9,728 - 47 x 256 (down); Gemm
  // splits only the down projection.
  EXPECT_EQ(stream_split_saving_k(4096, 2560, kSms), 3072);
  EXPECT_EQ(stream_split_saving_k(9728, 2560, kSms), 7424);
  EXPECT_LT(stream_split_saving_k(4096, 2560, kSms), kStreamSplitMinSavingK);
  EXPECT_GE(stream_split_saving_k(9728, 2560, kSms), kStreamSplitMinSavingK);
  EXPECT_EQ(stream_split_saving_k(2048, 2048, kSms), 0);  // not split at all
  // No other SDAR-1.7B or -4B shape (qkv, gate/up, lm_head) saves 2,048 k.
  for (const auto& [in, out] : {std::pair<std::int64_t, std::int64_t>{2048, 4096},
                                {2048, 12288},
                                {2048, 151936},
                                {2560, 6144},
                                {2560, 19456},
                                {2560, 151936}})
    EXPECT_LT(stream_split_saving_k(in, out, kSms), 2048) << in << " x " << out;
  // One 16 x 16 fp32 slot and a 4-byte flag per block.
  EXPECT_EQ(stream_split_slot_bytes(kSms), 132u * (256u * 4u + 4u));
  EXPECT_EQ(stream_split_slot_bytes(0), 0u);
}

TEST(SkinnyGemmRule, TheFusedNormFitsWhereItsRowsFitInSharedMemory) {
  const auto norm = [](std::uintptr_t residual, std::uintptr_t weight, float eps) {
    return GemmNorm{reinterpret_cast<const float*>(residual),
                    reinterpret_cast<const float*>(weight), eps};
  };
  const GemmNorm ok = norm(256, 512, 1e-6f);
  // What both prologues ask: rows 1..16, in up to 4,096, eps > 0, aligned residual and weight.
  EXPECT_TRUE(norm_prologue_fits(16, 4096, ok));
  EXPECT_FALSE(norm_prologue_fits(0, 2048, ok));
  EXPECT_FALSE(norm_prologue_fits(17, 2048, ok));
  EXPECT_FALSE(norm_prologue_fits(4, 4128, ok));
  EXPECT_FALSE(norm_prologue_fits(4, 2048, norm(256, 512, 0.0f)));
  EXPECT_FALSE(norm_prologue_fits(4, 2048, norm(260, 512, 1e-6f)));
  EXPECT_FALSE(norm_prologue_fits(4, 2048, norm(256, 520, 1e-6f)));
  // The skinny kernel's: in % 32 == 0 and rows x (in + 8) bf16 within 96 KiB.
  EXPECT_EQ(gemm_norm_shared_bytes(4, 2048), 4u * 2056u * 2u);
  EXPECT_EQ(gemm_norm_shared_bytes(0, 2048), 0u);
  EXPECT_TRUE(skinny_norm_fits(4, 2048, ok));
  EXPECT_TRUE(skinny_norm_fits(16, 2560, ok));  // 82,176 bytes
  EXPECT_TRUE(skinny_norm_fits(8, 4096, ok));
  EXPECT_FALSE(skinny_norm_fits(16, 4096, ok));  // 131,328 bytes
  EXPECT_FALSE(skinny_norm_fits(4, 2052, ok));   // not a multiple of 32
  EXPECT_FALSE(skinny_norm_fits(4, 2048, norm(256, 512, 0.0f)));
}

TEST(StreamGemmRule, TheDynamicTailLeavesEachBlockAStaticRun) {
  // floor(tiles / blocks x (1 - share)) on min(blocks, tiles) blocks where the blocks average at
  // least min_tiles tiles, else 0 (no tail).
  EXPECT_EQ(stream_dynamic_static_tiles(151936, 132, 0.25, 32.0), 53);  // lm_head: 71.9 a block
  EXPECT_EQ(stream_dynamic_static_tiles(151936, 132, 0.5, 32.0), 35);
  EXPECT_EQ(stream_dynamic_static_tiles(19456, 132, 0.25, 32.0), 0);  // SDAR-4B gate/up: 9.2
  EXPECT_EQ(stream_dynamic_static_tiles(19456, 132, 0.25, 4.0), 6);
  EXPECT_EQ(stream_dynamic_static_tiles(640, 7, 0.5, 1.0), 2);       // 40 tiles, 5.7 a block
  EXPECT_EQ(stream_dynamic_static_tiles(64, 132, 0.5, 1.0), 0);      // 4 tiles on 4 blocks: 0.5
  EXPECT_EQ(stream_dynamic_static_tiles(151936, 132, 0.0, 1.0), 0);  // off
  EXPECT_EQ(stream_dynamic_static_tiles(151936, 132, 1.0, 1.0), 0);
  EXPECT_EQ(stream_dynamic_static_tiles(151936, 0, 0.25, 1.0), 0);
  EXPECT_EQ(stream_dynamic_static_tiles(8, 132, 0.25, 1.0), 0);  // no whole tile
  for (const double share : {0.05, 0.25, 0.5, 0.9})
    EXPECT_LE(stream_dynamic_static_tiles(151936, 132, share, 1.0) * 132, 151936 / 16) << share;
  // Where a launch may take it: whole tiles written, no norm, no split walk.
  const GemmNorm norm{at_f(1024), at_f(2048), 1e-6f};
  EXPECT_TRUE(stream_dynamic_applies(false, nullptr, nullptr));
  EXPECT_FALSE(stream_dynamic_applies(true, nullptr, nullptr));
  EXPECT_FALSE(stream_dynamic_applies(false, &norm, nullptr));
  EXPECT_FALSE(stream_dynamic_applies(false, nullptr, at_f(4096)));
}

TEST(StreamGemmRule, TheFusedNormFitsWhereItsRowsFitInSharedMemory) {
  const auto norm = [](std::uintptr_t residual, std::uintptr_t weight, float eps) {
    return GemmNorm{reinterpret_cast<const float*>(residual),
                    reinterpret_cast<const float*>(weight), eps};
  };
  const GemmNorm ok = norm(256, 512, 1e-6f);
  // kStreamSharedBytes plus rows x (in + 8) bf16, within 227 KiB less the prologue's static part.
  EXPECT_EQ(stream_norm_shared_bytes(4, 2048), kStreamSharedBytes + 4u * 2056u * 2u);
  EXPECT_TRUE(stream_norm_fits(4, 2048, ok));  // SDAR-1.7B at 1 sequence
  EXPECT_TRUE(stream_norm_fits(16, 2048, ok));
  EXPECT_TRUE(stream_norm_fits(4, 2560, ok));  // SDAR-4B at 1 sequence
  EXPECT_TRUE(stream_norm_fits(15, 2560, ok));
  EXPECT_FALSE(stream_norm_fits(16, 2560, ok));  // 82,176 bytes of rows: past the limit
  EXPECT_TRUE(stream_norm_fits(8, 4096, ok));    // SDAR-8B
  EXPECT_FALSE(stream_norm_fits(16, 4096, ok));
  EXPECT_FALSE(stream_norm_fits(4, 4128, ok));  // past the norm's 4,096
  EXPECT_FALSE(stream_norm_fits(0, 2048, ok));
  EXPECT_FALSE(stream_norm_fits(17, 2048, ok));
  EXPECT_FALSE(stream_norm_fits(4, 2048, norm(256, 512, 0.0f)));
  EXPECT_FALSE(stream_norm_fits(4, 2048, norm(260, 512, 1e-6f)));
  EXPECT_FALSE(stream_norm_fits(4, 2048, norm(256, 520, 1e-6f)));
}

}  // namespace
}  // namespace dice::engine::cuda
