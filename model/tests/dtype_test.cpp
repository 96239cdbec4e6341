// Exact fp16/bf16 conversions: exhaustive round trips and round-to-nearest-even ties.

#include "dice/model/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace dice::model {
namespace {

bool f16_is_nan(std::uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}
bool bf16_is_nan(std::uint16_t b) {
  return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0;
}

TEST(DTypeTest, NamesAndSizes) {
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_STREQ(dtype_name(DType::kBF16), "BF16");
  EXPECT_STREQ(torch_dtype_name(DType::kBF16), "bfloat16");
  EXPECT_EQ(dtype_from_name("F16"), DType::kF16);
  EXPECT_EQ(dtype_from_name("I64"), std::nullopt);
  EXPECT_EQ(safetensors_dtype_size("I64"), 8u);
  EXPECT_EQ(safetensors_dtype_size("F8_E4M3"), 1u);
  EXPECT_EQ(safetensors_dtype_size("Q4_K"), std::nullopt);
}

TEST(DTypeTest, F16KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(DTypeTest, F16ExhaustiveRoundTrip) {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = f16_to_f32(bits);
    if (f16_is_nan(bits)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(f16_is_nan(f32_to_f16(f))) << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), bits) << "half bits " << h;
  }
}

TEST(DTypeTest, F16RoundsToNearestEven) {
  // Every pair of neighbouring positive finite halves: the midpoint (exact in fp32) goes to the
  // one with an even mantissa, a hair either side goes to the nearer one.
  for (std::uint16_t a = 0; a < 0x7bff; ++a) {
    const auto b = static_cast<std::uint16_t>(a + 1);
    const float fa = f16_to_f32(a);
    const float fb = f16_to_f32(b);
    const float mid = (fa + fb) / 2;
    ASSERT_EQ(f32_to_f16(mid), (a & 1u) == 0 ? a : b) << a;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 0.0f)), a) << a;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 1e9f)), b) << a;
    ASSERT_EQ(f32_to_f16(-mid), static_cast<std::uint16_t>(0x8000u | f32_to_f16(mid))) << a;
  }
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // ties away to infinity (65504 has an odd mantissa)
  EXPECT_EQ(f32_to_f16(1e30f), 0x7c00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // exactly half the smallest subnormal
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
}

TEST(DTypeTest, BF16ExhaustiveRoundTrip) {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = bf16_to_f32(bits);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(f), h << 16);
    if (bf16_is_nan(bits)) {
      EXPECT_TRUE(bf16_is_nan(f32_to_bf16(f))) << h;
      continue;
    }
    ASSERT_EQ(f32_to_bf16(f), bits) << "bf16 bits " << h;
  }
}

TEST(DTypeTest, BF16RoundsToNearestEven) {
  for (std::uint16_t a = 0; a < 0x7f7f; a = static_cast<std::uint16_t>(a + 7)) {
    const auto b = static_cast<std::uint16_t>(a + 1);
    const std::uint32_t mid = (static_cast<std::uint32_t>(a) << 16) | 0x8000u;
    ASSERT_EQ(f32_to_bf16(std::bit_cast<float>(mid)), (a & 1u) == 0 ? a : b) << a;
    ASSERT_EQ(f32_to_bf16(std::bit_cast<float>(mid - 1)), a) << a;
    ASSERT_EQ(f32_to_bf16(std::bit_cast<float>(mid + 1)), b) << a;
  }
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
  // A signalling NaN whose payload lies only in the low bits must not become infinity.
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(std::bit_cast<float>(0x7f800001u))));
}

}  // namespace
}  // namespace dice::model
