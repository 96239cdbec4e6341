// Times Tokenizer::encode on one thread over the "text" fields of a JSON Lines file, inside the
// process (load and reading excluded). Prints one JSON object: bytes, tokens, seconds per pass.
// Usage: dice_tokenizer_bench MODEL_DIR TEXTS.jsonl [PASSES]

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "dice/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: dice_tokenizer_bench MODEL_DIR TEXTS.jsonl [PASSES]\n");
    return 2;
  }
  try {
    const int passes = argc > 3 ? std::atoi(argv[3]) : 2;
    const auto load_start = std::chrono::steady_clock::now();
    const auto tok = dice::tokenizer::Tokenizer::load(argv[1]);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    std::vector<std::string> texts;
    std::ifstream in(argv[2]);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[2]);
    std::string line;
    std::size_t bytes = 0;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
      bytes += texts.back().size();
    }
    nlohmann::json report{{"texts", texts.size()}, {"bytes", bytes}, {"load_s", load_s}};
    std::vector<double> seconds;
    std::size_t tokens = 0;
    for (int p = 0; p < passes; ++p) {
      tokens = 0;
      const auto start = std::chrono::steady_clock::now();
      for (const auto& text : texts) tokens += tok.encode(text).size();
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    report["tokens"] = tokens;
    report["seconds"] = seconds;
    std::cout << report.dump() << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dice_tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
