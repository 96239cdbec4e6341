// Element types and exact conversions (IEEE 754 binary16 and bfloat16 bit manipulation).

#include "dice/model/dtype.h"

#include <array>
#include <bit>
#include <cstdint>
#include <string_view>
#include <utility>

namespace dice::model {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kF16:
      return "float16";
    case DType::kBF16:
      return "bfloat16";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  return std::nullopt;
}

std::optional<std::size_t> safetensors_dtype_size(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, std::size_t>, 15> kSizes{{
      {"BOOL", 1},
      {"U8", 1},
      {"I8", 1},
      {"F8_E4M3", 1},
      {"F8_E5M2", 1},
      {"I16", 2},
      {"U16", 2},
      {"F16", 2},
      {"BF16", 2},
      {"I32", 4},
      {"U32", 4},
      {"F32", 4},
      {"F64", 8},
      {"I64", 8},
      {"U64", 8},
  }};
  for (const auto& [n, size] : kSizes)
    if (n == name) return size;
  return std::nullopt;
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out = 0;
  if (exponent == 0x1f) {  // infinity or NaN: keep the payload
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal: rebias 15 -> 127
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    out = sign;
  } else {                  // subnormal: value = mantissa x 2^-24, normalise it
    std::uint32_t e = 113;  // exponent field of 2^-14
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    out = sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t f32_to_bf16(float value) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep the sign and top payload, force quiet
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

std::uint16_t f32_to_f16(float value) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u)  // NaN: keep the top payload bits, force quiet
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u)  // >= 65520 rounds to infinity (65504 is the largest finite)
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {                     // below 2^-14: subnormal or zero in binary16
    if (abs < 0x33000000u) return sign;        // below 2^-25: rounds to zero (2^-25 ties to even 0)
    const std::uint32_t exponent = abs >> 23;  // 102 .. 112
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exponent;  // 14 .. 24
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half & 1u) != 0)) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  // Normal: rebias 127 -> 15 and round the 13 dropped bits to nearest even; a carry into the
  // exponent is the correct result (up to infinity, excluded above).
  const std::uint32_t rebiased = abs - (112u << 23);
  const std::uint32_t rounding = 0xfffu + ((rebiased >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rebiased + rounding) >> 13));
}

}  // namespace dice::model
