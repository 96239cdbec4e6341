#pragma once
// Element types of checkpoint tensors and exact conversions between them.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dice::model {

/// Element types a checkpoint may hold (safetensors names: F32, F16, BF16).
enum class DType { kF32, kF16, kBF16 };

/// Bytes per element of `dtype`.
std::size_t dtype_size(DType dtype);
/// "F32", "F16", "BF16".
const char* dtype_name(DType dtype);
/// The DType of a safetensors dtype name ("F32", "F16", "BF16"); nullopt for any other name.
std::optional<DType> dtype_from_name(std::string_view name);
/// Bytes per element of any byte-sized safetensors dtype (BOOL, U8, I8, F8_E4M3, F8_E5M2, I16,
/// U16, F16, BF16, I32, U32, F32, F64, I64, U64); nullopt for a name safetensors does not define.
std::optional<std::size_t> safetensors_dtype_size(std::string_view name);
/// The torch_dtype string of config.json: "float32", "float16", "bfloat16".
const char* torch_dtype_name(DType dtype);

/// bfloat16 bits -> float (exact: the top 16 bits of the fp32 pattern).
inline float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}
/// IEEE binary16 bits -> float (exact, subnormals, infinities and NaN payloads included).
float f16_to_f32(std::uint16_t bits);
/// float -> bfloat16 bits, rounding to nearest even; NaN stays a (quiet) NaN.
std::uint16_t f32_to_bf16(float value);
/// float -> IEEE binary16 bits, rounding to nearest even; overflow gives infinity, NaN stays NaN.
std::uint16_t f32_to_f16(float value);

}  // namespace dice::model
