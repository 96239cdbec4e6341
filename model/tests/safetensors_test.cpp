// The safetensors reader and writer: round trips for every dtype, and every malformed file giving
// an error that names the file and the tensor.

#include "dice/model/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dice/core/error.h"
#include "test_util.h"

namespace dice::model {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

template <typename T>
std::span<const std::byte> as_bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

// The message of the InputError opening `path` throws ("" if none).
std::string open_error(const fs::path& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_mentions(const std::string& message, const std::vector<std::string>& words) {
  EXPECT_FALSE(message.empty()) << "no error";
  for (const std::string& w : words)
    EXPECT_NE(message.find(w), std::string::npos) << "'" << w << "' not in: " << message;
}

TEST(SafetensorsTest, RoundTripEveryDtype) {
  TempDir dir;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> f32{1.5f, -0.0f, inf, -inf, 1e-40f, 3.14159274f};
  std::vector<std::uint16_t> f16;
  std::vector<std::uint16_t> bf16;
  for (const float v : f32) {
    f16.push_back(f32_to_f16(v));
    bf16.push_back(f32_to_bf16(v));
  }
  const std::vector<float> empty;
  const fs::path path = dir / "t.safetensors";
  write_safetensors(path,
                    {{{"a.f32", DType::kF32, {2, 3}}, as_bytes(f32)},
                     {{"b.f16", DType::kF16, {6}}, as_bytes(f16)},
                     {{"c.bf16", DType::kBF16, {3, 1, 2}}, as_bytes(bf16)},
                     {{"d.empty", DType::kF32, {0, 4}}, as_bytes(empty)}},
                    {{"format", "pt"}, {"note", "x"}});
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.data_offset() % 8, 0u);
  EXPECT_EQ(file.metadata().at("note"), "x");
  ASSERT_EQ(file.entries().size(), 4u);

  const TensorView a = file.view(*file.find("a.f32"));
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(a.numel(), 6);
  EXPECT_EQ(a.file, path);
  const std::vector<float> av = a.to_f32();
  for (std::size_t i = 0; i < f32.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(av[i]), std::bit_cast<std::uint32_t>(f32[i])) << i;

  const std::vector<float> bv = file.view(*file.find("b.f16")).to_f32();
  const std::vector<float> cv = file.view(*file.find("c.bf16")).to_f32();
  for (std::size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(bv[i], f16_to_f32(f16[i])) << i;
    EXPECT_EQ(cv[i], bf16_to_f32(bf16[i])) << i;
  }
  EXPECT_EQ(bv[0], 1.5f);
  EXPECT_EQ(cv[2], inf);
  EXPECT_EQ(bv[4], 0.0f);  // 1e-40 is below half's smallest subnormal
  EXPECT_EQ(cv[5], 3.140625f);
  EXPECT_EQ(file.view(*file.find("d.empty")).to_f32().size(), 0u);
  EXPECT_EQ(file.find("absent"), nullptr);
}

TEST(SafetensorsTest, StreamingWriterInOddPieces) {
  TempDir dir;
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  const std::span<const std::byte> bytes = as_bytes(x);
  {
    SafetensorsWriter w(dir / "s.safetensors",
                        {{"x", DType::kF32, {10, 50}}, {"y", DType::kF32, {500}}});
    for (std::size_t off = 0; off < bytes.size(); off += 333)
      w.append(bytes.subspan(off, std::min<std::size_t>(333, bytes.size() - off)));
    w.finish();
  }
  const SafetensorsFile file = SafetensorsFile::open(dir / "s.safetensors");
  const std::vector<float> y = file.view(*file.find("y")).to_f32();
  EXPECT_EQ(y.front(), 250.0f);
  EXPECT_EQ(y.back(), 499.5f);
  EXPECT_FALSE(fs::exists(dir / "s.safetensors.tmp"));
}

TEST(SafetensorsTest, WriterRefusesTooFewOrTooManyBytes) {
  TempDir dir;
  const std::vector<float> x(4, 1.0f);
  {
    SafetensorsWriter w(dir / "short.safetensors",
                        {{"x", DType::kF32, {2}}, {"y", DType::kF32, {2}}});
    w.append(as_bytes(x).first(12));
    try {
      w.finish();
      ADD_FAILURE() << "finish() accepted a short file";
    } catch (const Error& e) {
      expect_mentions(e.what(), {"short.safetensors", "'y'"});
    }
    EXPECT_THROW(w.append(as_bytes(x)), Error);
  }
  EXPECT_FALSE(fs::exists(dir / "short.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "short.safetensors.tmp"));
  EXPECT_THROW(write_safetensors(dir / "w.safetensors", {{{"x", DType::kF32, {3}}, as_bytes(x)}}),
               Error);
  EXPECT_THROW(
      SafetensorsWriter(dir / "d.safetensors", {{"x", DType::kF32, {1}}, {"x", DType::kF32, {1}}}),
      Error);
}

TEST(SafetensorsTest, OtherDtypesAreReadableEntriesButNotViews) {
  TempDir dir;
  const fs::path path = dir / "i.safetensors";
  const std::string data(24, '\1');
  testing::write_bytes(path, testing::safetensors_bytes(
                                 R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                                 R"("w":{"dtype":"F16","shape":[2,2],"data_offsets":[16,24]}})",
                                 data));
  const SafetensorsFile file = SafetensorsFile::open(path);
  const TensorEntry* ids = file.find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype_name, "I64");
  EXPECT_FALSE(ids->dtype.has_value());
  EXPECT_EQ(file.bytes(*ids).size(), 16u);
  try {
    file.view(*ids);
    ADD_FAILURE() << "view of an I64 tensor";
  } catch (const InputError& e) {
    expect_mentions(e.what(), {path.string(), "'ids'", "I64"});
  }
  EXPECT_EQ(file.view(*file.find("w")).dtype, DType::kF16);
}

// One malformed file: the error must name the file and (when given) the tensor and a word
// saying what is wrong.
struct Malformed {
  const char* what;
  std::string bytes;
  std::vector<std::string> words;
};

TEST(SafetensorsTest, MalformedFilesNameFileTensorAndProblem) {
  const std::string ok_header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  const std::vector<Malformed> cases{
      {"shorter than 8 bytes", "abc", {"truncated"}},
      {"header length beyond the file",
       testing::safetensors_bytes(ok_header, eight, 4096),
       {"header length 4096", "beyond the end"}},
      {"header length absurd",
       testing::safetensors_bytes(ok_header, eight, 1ull << 40),
       {"exceeds the limit"}},
      {"bad JSON",
       testing::safetensors_bytes(R"({"w":{"dtype":"F32",)", eight),
       {"not valid JSON"}},
      {"header not an object", testing::safetensors_bytes("[1, 2]", eight), {"not an object"}},
      {"unknown dtype",
       testing::safetensors_bytes(R"({"w":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})",
                                  eight),
       {"'w'", "unknown dtype 'F7'"}},
      {"missing dtype",
       testing::safetensors_bytes(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", eight),
       {"'w'", "dtype"}},
      {"negative dimension",
       testing::safetensors_bytes(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                                  eight),
       {"'w'", "shape"}},
      {"offsets not a pair",
       testing::safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight),
       {"'w'", "data_offsets"}},
      {"offsets reversed",
       testing::safetensors_bytes(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})",
                                  eight),
       {"'w'", "not ordered"}},
      {"truncated data",
       testing::safetensors_bytes(ok_header, std::string(5, '\0')),
       {"'w'", "beyond the data section", "truncated"}},
      {"offsets out of range",
       testing::safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[100,108]}})",
                                  eight),
       {"'w'", "[100, 108]", "out of range"}},
      {"size does not match shape",
       testing::safetensors_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                                  std::string(12, '\0')),
       {"'w'", "hold 8 bytes", "needs 12"}},
      {"overlapping tensors",
       testing::safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("b":{"dtype":"F16","shape":[2],"data_offsets":[6,10]}})",
                                  std::string(12, '\0')),
       {"'a'", "'b'", "overlaps"}},
      {"metadata not strings",
       testing::safetensors_bytes(R"({"__metadata__":{"n":1}})", ""),
       {"__metadata__"}},
  };
  TempDir dir;
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.what);
    const fs::path path = dir / "bad.safetensors";
    testing::write_bytes(path, c.bytes);
    std::vector<std::string> words = c.words;
    words.push_back(path.string());
    expect_mentions(open_error(path), words);
  }
}

TEST(SafetensorsTest, TruncatedWrittenFileIsCaught) {
  TempDir dir;
  const std::vector<float> x(64, 2.0f);
  const fs::path path = dir / "cut.safetensors";
  write_safetensors(path, {{{"first", DType::kF32, {32}}, as_bytes(x).first(128)},
                           {{"second", DType::kF32, {32}}, as_bytes(x).subspan(128)}});
  fs::resize_file(path, fs::file_size(path) - 4);
  expect_mentions(open_error(path), {path.string(), "'second'", "truncated"});
  expect_mentions(open_error(dir / "absent.safetensors"), {"absent.safetensors", "cannot open"});
}

}  // namespace
}  // namespace dice::model
