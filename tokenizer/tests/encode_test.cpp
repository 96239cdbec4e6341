// Encoding and decoding: hand-checked ids of the SDAR tokenizer (values from Hugging Face's
// Qwen2Tokenizer), added-token flags, invalid input, the BPE merge strategies, UTF-8 helpers,
// NFC and the streaming decoder.

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bpe.h"
#include "dice/core/error.h"
#include "dice/tokenizer/tokenizer.h"
#include "normalizer.h"
#include "test_support.h"
#include "utf8.h"

namespace dice::tokenizer {
namespace {

using testing::ScratchDir;
using testing::ToyTokenizer;
using Ids = std::vector<std::int32_t>;

const std::filesystem::path kSdar =
    std::filesystem::path(DICE_SOURCE_DIR) / ".." / "shared" / "models" / "sdar" / "tokenizer";

// The SDAR tokenizer, loaded once for the suite; skips when ../shared is absent.
const Tokenizer* sdar() {
  static const std::optional<Tokenizer> tok = [] {
    return std::filesystem::exists(kSdar) ? std::optional<Tokenizer>(Tokenizer::load(kSdar))
                                          : std::nullopt;
  }();
  return tok ? &*tok : nullptr;
}
#define REQUIRE_SDAR() \
  if (sdar() == nullptr) GTEST_SKIP() << kSdar << " is absent (../shared)"

TEST(TokenizerEncode, SdarHandCheckedIds) {
  REQUIRE_SDAR();
  const Tokenizer& tok = *sdar();
  EXPECT_EQ(tok.vocab_size(), 151670);
  EXPECT_EQ(tok.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok.token_id("<|MASK|>"), 151669);  // the mask token's name in tokenizer_config.json
  EXPECT_TRUE(tok.is_special(151669));
  EXPECT_TRUE(tok.is_special(151643));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is added but not special
  EXPECT_EQ(tok.encode("Hello world"), (Ids{9707, 1879}));
  EXPECT_EQ(tok.encode("Hello  world\n\n"), (Ids{9707, 220, 1879, 271}));
  EXPECT_EQ(tok.encode("<|im_start|>user\nWrite a CUDA kernel.<|im_end|>\n<|im_start|>assistant\n"),
            (Ids{151644, 872, 198, 7985, 264, 54809, 10001, 13, 151645, 198, 151644, 77091, 198}));
  EXPECT_EQ(tok.encode("__global__ void add(float* x) { x[threadIdx.x] += 1.0f; }"),
            (Ids{563,   9752, 563, 737,  912, 8268, 9,  856, 8,  314, 856, 91580,
                 11420, 1993, 60,  1421, 220, 16,   13, 15,  69, 26,  335}));
  EXPECT_EQ(tok.encode("It's 'LL"), (Ids{2132, 594, 364, 4086}));
  EXPECT_EQ(tok.encode("\xE4\xB8\xAD\xE6\x96\x87"), (Ids{104811}));  // 中文
  EXPECT_EQ(tok.encode("e\xCC\x81"), (Ids{963}));                    // NFC: e + U+0301 -> é
  EXPECT_EQ(tok.encode("\t\tx"), (Ids{197, 10225}));
  EXPECT_EQ(tok.encode("12345"), (Ids{16, 17, 18, 19, 20}));
  EXPECT_EQ(tok.encode("a<MASK>b<|MASK|>"), (Ids{64, 33274, 7384, 51407, 151669}));
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(TokenizerEncode, ManyThreadsGetTheSameIds) {
  REQUIRE_SDAR();
  const Tokenizer& tok = *sdar();
  std::vector<std::string> texts;
  for (int k = 0; k < 200; ++k)
    texts.push_back("int x" + std::to_string(k) + " = foo(bar, " + std::to_string(k * 7) +
                    ");\n\t// caf\xC3\xA9 \xE4\xB8\xAD " + std::string(k % 13, ' ') + "<|im_end|>");
  std::vector<Ids> want;
  for (const auto& t : texts) want.push_back(tok.encode(t));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round)
        for (std::size_t k = 0; k < texts.size(); ++k) {
          const std::size_t i = (k * 7 + static_cast<std::size_t>(t + round)) % texts.size();
          if (tok.encode(texts[i]) != want[i]) ++mismatches;
        }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerEncode, InvalidUtf8IsAnInputError) {
  REQUIRE_SDAR();
  for (const std::string bad : {"\xFF", "ab\xC3", "\xED\xA0\x80", "\xC0\xAF", "x\xF4\x90\x80\x80"})
    EXPECT_THROW(sdar()->encode(bad), InputError) << testing::byte_level(bad);
  EXPECT_EQ(sdar()->encode(std::string("a\0b", 3)).size(), 3u);  // NUL is valid text
}

TEST(TokenizerDecode, InvalidBytesBecomeReplacementCharacters) {
  REQUIRE_SDAR();
  const Tokenizer& tok = *sdar();
  const std::int32_t c3 = *tok.token_id("\xC3\x83");  // "Ã": the symbol of byte 0xC3
  const std::int32_t a4 = *tok.token_id("\xC2\xA4");  // "¤": the symbol of byte 0xA4
  EXPECT_EQ(tok.token_bytes(c3), "\xC3");
  EXPECT_EQ(tok.decode(Ids{c3, a4}), "\xC3\xA4");  // ä across two tokens
  EXPECT_EQ(tok.decode(Ids{c3}), "\xEF\xBF\xBD");  // lone lead byte
  EXPECT_EQ(tok.decode(Ids{a4, 64}),
            "\xEF\xBF\xBD"
            "a");                                                   // lone continuation
  EXPECT_EQ(tok.decode(Ids{151669, 9707, 151645}, true), "Hello");  // specials skipped
  EXPECT_EQ(tok.decode(Ids{151667, 9707}, true), "<think>Hello");   // <think> is not special
  EXPECT_EQ(tok.decode(Ids{151644, 872}), "<|im_start|>user");
  EXPECT_THROW(tok.decode(Ids{151670}), InputError);
  EXPECT_THROW(tok.decode(Ids{-1}), InputError);
  EXPECT_THROW(tok.token_bytes(200000), InputError);
}

TEST(TokenizerDecode, StreamingDecoderEqualsDecodeOfTheWhole) {
  REQUIRE_SDAR();
  const Tokenizer& tok = *sdar();
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int32_t> any(0, tok.vocab_size() - 1);
  std::uniform_int_distribution<std::int32_t> byte_token(124, 255);  // bytes 0x80..: split UTF-8
  for (int round = 0; round < 300; ++round) {
    Ids ids;
    for (int k = 0; k < 20; ++k) ids.push_back(round % 2 == 0 ? any(rng) : byte_token(rng));
    for (const bool skip : {false, true}) {
      StreamingDecoder stream(tok, skip);
      std::string text;
      for (const auto id : ids) text += stream.push(id);
      text += stream.finish();
      EXPECT_EQ(text, tok.decode(ids, skip));
    }
  }
  // A character split over two tokens comes out whole, with the second.
  StreamingDecoder stream(tok);
  EXPECT_EQ(stream.push(*tok.token_id("\xC3\x83")), "");
  EXPECT_EQ(stream.push(*tok.token_id("\xC2\xA4")), "\xC3\xA4");
  EXPECT_EQ(stream.push(*tok.token_id("\xC3\x83")), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  EXPECT_THROW(stream.push(151670), InputError);
}

TEST(TokenizerEncode, AddedTokenFlagsAsHuggingFace) {
  ToyTokenizer toy;
  toy.merge(" ", " ");
  const int left = toy.add("<L>", false, /*lstrip=*/true);
  const int right = toy.add("<R>", false, false, /*rstrip=*/true);
  const int word = toy.add("<W>", false, false, false, /*single_word=*/true);
  const int norm = toy.add("\xC3\xA9!", false, false, false, false, /*normalized=*/true);  // é!
  const int longer = toy.add("<L><R>", true);
  ScratchDir dir("dice_tok_flags");
  toy.write_vocab_merges(dir);
  const auto tok = Tokenizer::load(dir.path());
  const int a = 'a';
  const int sp = toy.id(" ");
  const int two = toy.id("  ");
  EXPECT_EQ(tok.encode("a  <L>a"), (Ids{a, left, a}));   // lstrip swallows the spaces
  EXPECT_EQ(tok.encode("a<R>  a"), (Ids{a, right, a}));  // rstrip too
  EXPECT_EQ(tok.encode("a <W> a"), (Ids{a, sp, word, sp, a}));
  EXPECT_EQ(tok.encode("a<W>a").size(), 5u);              // glued to word characters: not matched
  EXPECT_EQ(tok.encode("e\xCC\x81!"), (Ids{norm}));       // matched on NFC text
  EXPECT_EQ(tok.encode("  <L><R>"), (Ids{two, longer}));  // the longest match wins
  EXPECT_EQ(tok.pieces("x  <L>y"), (std::vector<std::string>{"x", "<L>", "y"}));
}

// A toy vocabulary over "abc" with many random merges (some merged strings reachable from several
// pairs): the scan and heap strategies must agree on every word.
TEST(TokenizerBpe, ScanAndHeapMergeIdentically) {
  std::mt19937 rng(11);
  std::map<std::string, std::int32_t> vocab;
  std::vector<std::string> tokens;
  std::array<std::int32_t, 256> byte_ids{};
  byte_ids.fill(-1);
  for (const char c : std::string("abc")) {
    byte_ids[static_cast<unsigned char>(c)] = static_cast<std::int32_t>(vocab.size());
    vocab[std::string(1, c)] = static_cast<std::int32_t>(vocab.size());
    tokens.emplace_back(1, c);
  }
  detail::MergeTable merges;
  for (std::uint32_t rank = 0; rank < 400; ++rank) {
    const std::string x = tokens[rng() % tokens.size()];
    const std::string y = tokens[rng() % tokens.size()];
    if (x.size() + y.size() > 12) continue;
    const std::string xy = x + y;
    if (!vocab.contains(xy)) {
      vocab[xy] = static_cast<std::int32_t>(vocab.size());
      tokens.push_back(xy);
    }
    merges.add(vocab[x], vocab[y], rank, vocab[xy]);
  }
  const detail::BpeModel model(byte_ids, std::move(merges));
  detail::BpeScratch scratch;
  for (int round = 0; round < 2000; ++round) {
    std::string word(1 + rng() % 120, 'a');
    for (auto& c : word) c = "abc"[rng() % 3];
    Ids scan;
    Ids heap;
    model.encode_word(word, scan, scratch, detail::MergeStrategy::kScan);
    model.encode_word(word, heap, scratch, detail::MergeStrategy::kHeap);
    ASSERT_EQ(scan, heap) << word;
    std::string back;
    for (const auto id : scan) back += tokens[static_cast<std::size_t>(id)];
    ASSERT_EQ(back, word);
  }
}

TEST(TokenizerUtf8, LossyConversionReplacesMaximalSubparts) {
  const auto lossy = [](std::string_view bytes) {
    std::string out;
    detail::append_lossy_utf8(out, bytes);
    return out;
  };
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(lossy("abc"), "abc");
  EXPECT_EQ(lossy("\xF0\x90\x80"
                  "A"),
            r + "A");                           // one maximal subpart
  EXPECT_EQ(lossy("\xE0\x80"), r + r);          // E0 needs A0..BF next
  EXPECT_EQ(lossy("\xED\xA0\x80"), r + r + r);  // surrogates are ill-formed
  EXPECT_EQ(lossy("\xC3"), r);                  // incomplete at the end
  EXPECT_EQ(lossy("\xFF\xFE"), r + r);
  EXPECT_EQ(lossy("\xC3\xA4\xE2\x82"), "\xC3\xA4" + r);
  EXPECT_EQ(detail::settled_prefix_length("a\xC3\xA4\xE2\x82"), 3u);
  EXPECT_EQ(detail::settled_prefix_length("a\xE0\x80"), 3u);  // already known to be invalid
  EXPECT_EQ(detail::find_invalid_utf8("plain ascii text, long enough for words"),
            std::string::npos);
  EXPECT_EQ(detail::find_invalid_utf8("0123456789\xC3"), 10u);
}

// nfc_quick_check may answer "stable" only for text NFC leaves alone: every code point it passes
// is its own NFC, and no code point that can be the second half of a composition passes.
TEST(TokenizerNfc, QuickCheckIsConservative) {
  detail::NfcScratch scratch;
  std::string out;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string one;
    detail::append_utf8(one, cp);
    if (!detail::nfc_quick_check(one)) continue;
    detail::nfc(one, out, scratch);
    ASSERT_EQ(out, one) << std::hex << static_cast<unsigned>(cp);
    // Composites: the code points after the first of a canonical decomposition must not pass.
    std::array<utf8proc_int32_t, 8> parts{};
    int boundclass = 0;
    const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), parts.data(), 8,
                                           UTF8PROC_DECOMPOSE, &boundclass);
    if (n < 2) continue;
    std::string decomposed;
    for (int k = 0; k < n; ++k) detail::append_utf8(decomposed, static_cast<char32_t>(parts[k]));
    detail::nfc(decomposed, out, scratch);
    if (out != one) continue;  // not a primary composite
    for (int k = 1; k < n; ++k) {
      std::string part;
      detail::append_utf8(part, static_cast<char32_t>(parts[k]));
      ASSERT_FALSE(detail::nfc_quick_check(part)) << std::hex << static_cast<unsigned>(parts[k]);
    }
  }
  // Hugging Face's Unicode 9.0 tables: U+1DF6 (Unicode 10, ccc 232) does not reorder.
  detail::nfc(" \xE1\xB7\xB6\xCC\x81", out, scratch);
  EXPECT_EQ(out, " \xE1\xB7\xB6\xCC\x81");
  detail::nfc("a\xCC\x81", out, scratch);
  EXPECT_EQ(out, "\xC3\xA1");
}

TEST(TokenizerPieces, Qwen2PatternSplits) {
  REQUIRE_SDAR();
  using P = std::vector<std::string>;
  const Tokenizer& tok = *sdar();
  EXPECT_EQ(tok.pieces("Hello  world\n\n  x"), (P{"Hello", " ", " world", "\n\n", " ", " x"}));
  EXPECT_EQ(tok.pieces("it's DON'T 'ſa"), (P{"it", "'s", " DON", "'T", " '",
                                             "\xC5\xBF"
                                             "a"}));
  EXPECT_EQ(tok.pieces("x+=1;\r\n\tif"), (P{"x", "+=", "1", ";\r\n", "\tif"}));
  EXPECT_EQ(tok.pieces("  \t"), (P{"  \t"}));
  EXPECT_EQ(tok.pieces("a \xE1\xA0\x8E"
                       "b"),
            (P{"a", " \xE1\xA0\x8E", "b"}));  // U+180E: not \s
}

}  // namespace
}  // namespace dice::tokenizer
