#include "dice/evaluator/problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "dice/core/error.h"
#include "dice/core/files.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = text.find(sep, start);
    const auto piece = text.substr(start, end == std::string_view::npos ? text.npos : end - start);
    if (!piece.empty()) parts.emplace_back(piece);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Calls `fn(record, origin)` for each non-empty line of a JSON Lines file; a line that is not a
/// JSON object throws InputError naming file and line.
template <typename Fn>
void for_each_record(const fs::path& path, Fn&& fn) {
  std::istringstream lines(read_file(path));
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string origin = fmt::format("{}:{}", path.string(), number);
    json record;
    try {
      record = json::parse(line);
    } catch (const json::exception& e) {
      throw InputError(fmt::format("{}: not valid JSON: {}", origin, e.what()));
    }
    if (!record.is_object()) throw InputError(origin + ": expected a JSON object");
    fn(record, origin);
  }
}

std::string string_field(const json& record, const char* key, const std::string& origin) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_string())
    throw InputError(fmt::format("{}: field \"{}\" missing or not a string", origin, key));
  return it->get<std::string>();
}

Problem problem_from_record(const json& record, const std::string& origin) {
  Problem p;
  p.origin = origin;
  if (record.contains("code")) {
    p.code = string_field(record, "code", origin);
    if (!record.contains("level") || !record.contains("problem_id"))
      throw InputError(origin + ": a record with \"code\" needs \"level\" and \"problem_id\"");
    p.level = record.at("level").get<int>();
    p.id = fmt::format("L{}/{}", p.level, record.at("problem_id").get<int>());
    p.name = record.value("name", p.id);
  } else if (record.contains("pytorch_code")) {
    p.code = string_field(record, "pytorch_code", origin);
    const json& id = record.contains("id") ? record.at("id") : json(origin);
    p.id = "dice/" + (id.is_string() ? id.get<std::string>() : id.dump());
    p.name = p.id;
  } else {
    throw InputError(origin + ": expected a problem record with \"code\" or \"pytorch_code\"");
  }
  return p;
}

Problem problem_from_file(const fs::path& path) {
  Problem p;
  p.code = read_file(path);
  p.id = path.stem().string();
  p.name = p.id;
  p.origin = path.string();
  return p;
}

std::vector<Problem> kernelbench_problems(std::string_view selectors, const fs::path& jsonl) {
  if (!fs::exists(jsonl))
    throw InputError(fmt::format(
        "problem set kernelbench needs {} (the KernelBench problems as JSON Lines); give another "
        "path with --kernelbench",
        jsonl.string()));
  std::vector<Problem> all;
  for_each_record(jsonl, [&](const json& r, const std::string& origin) {
    all.push_back(problem_from_record(r, origin));
  });
  std::vector<Problem> chosen;
  for (const auto& selector : split(selectors, ',')) {
    if (selector.size() < 2 || selector[0] != 'L')
      throw InputError(fmt::format("kernelbench:{}: expected L<level> or L<level>/<id>", selector));
    const auto slash = selector.find('/');
    const std::string level_part =
        selector.substr(1, slash == std::string::npos ? selector.npos : slash - 1);
    int level = 0;
    try {
      level = std::stoi(level_part);
    } catch (const std::exception&) {
      throw InputError(fmt::format("kernelbench:{}: bad level \"{}\"", selector, level_part));
    }
    const std::size_t before = chosen.size();
    for (const auto& p : all) {
      if (p.level != level) continue;
      if (slash != std::string::npos && p.id != selector) continue;
      chosen.push_back(p);
    }
    if (chosen.size() == before)
      throw InputError(
          fmt::format("kernelbench:{}: no such problem in {}", selector, jsonl.string()));
  }
  return chosen;
}

bool is_candidate_file(const fs::path& path) {
  const auto ext = path.extension().string();
  return ext == ".py" || ext == ".txt" || ext == ".md";
}

/// The problem a candidate file belongs to: stem == key or stem starts with key + "__".
const Problem* match_file(const fs::path& path, const std::vector<Problem>& problems) {
  const std::string stem = path.stem().string();
  for (const auto& p : problems) {
    for (const auto& key : p.match_keys()) {
      if (stem == key || stem.starts_with(key + "__")) return &p;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> Problem::match_keys() const {
  std::vector<std::string> keys{name};
  std::string flat = id;
  std::replace(flat.begin(), flat.end(), '/', '_');
  if (flat != name) keys.push_back(flat);
  return keys;
}

std::string Problem::level_label() const {
  return level > 0 ? fmt::format("L{}", level) : std::string("other");
}

std::vector<Problem> load_problems(std::string_view spec, const fs::path& kernelbench_jsonl) {
  std::vector<Problem> problems;
  for (const auto& part : split(spec, '+')) {
    if (part.starts_with("kernelbench:")) {
      auto chosen = kernelbench_problems(std::string_view(part).substr(12), kernelbench_jsonl);
      problems.insert(problems.end(), chosen.begin(), chosen.end());
      continue;
    }
    const fs::path path(part);
    if (fs::is_directory(path)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(path))
        if (entry.is_regular_file() && entry.path().extension() == ".py")
          files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      if (files.empty()) throw InputError("problem folder " + part + " holds no .py file");
      for (const auto& f : files) problems.push_back(problem_from_file(f));
    } else if (ends_with(part, ".jsonl")) {
      for_each_record(path, [&](const json& r, const std::string& origin) {
        problems.push_back(problem_from_record(r, origin));
      });
    } else if (fs::is_regular_file(path)) {
      problems.push_back(problem_from_file(path));
    } else {
      throw InputError("problems: " + part +
                       " is neither a file, a folder nor a problem set (kernelbench:L1)");
    }
  }
  std::set<std::string> seen;
  for (const auto& p : problems)
    if (!seen.insert(p.id).second)
      throw InputError(fmt::format("problems: id {} appears twice ({})", p.id, p.origin));
  return problems;
}

void load_candidates(std::string_view spec, Workload& workload) {
  const fs::path path(spec);
  const auto add_file = [&](const fs::path& file, bool single) {
    const Problem* problem = nullptr;
    if (single && workload.problems.size() == 1) {
      problem = &workload.problems.front();
    } else {
      problem = match_file(file, workload.problems);
    }
    if (problem == nullptr) {
      workload.skipped.push_back(file.string() + ": matches no problem (name it <problem>.py or " +
                                 "<problem>__<tag>.py)");
      return;
    }
    workload.candidates.push_back({problem->id, file.string(), read_file(file)});
  };
  if (fs::is_directory(path)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path))
      if (entry.is_regular_file() && is_candidate_file(entry.path())) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    if (files.empty())
      throw InputError(fmt::format("candidate folder {} holds no .py/.txt/.md", spec));
    for (const auto& f : files) add_file(f, false);
  } else if (ends_with(spec, ".jsonl")) {
    std::set<std::string> known;
    for (const auto& p : workload.problems) known.insert(p.id);
    for_each_record(path, [&](const json& r, const std::string& origin) {
      try {
        if (r.contains("pytorch_code") && r.contains("cuda_code")) {
          Problem p = problem_from_record(r, origin);
          if (known.insert(p.id).second) workload.problems.push_back(p);
          workload.candidates.push_back({p.id, origin, string_field(r, "cuda_code", origin)});
          return;
        }
        const std::string id = string_field(r, "problem", origin);
        if (!known.contains(id))
          throw InputError(
              fmt::format("{}: problem \"{}\" is not among the problems given", origin, id));
        workload.candidates.push_back({id, origin, string_field(r, "candidate", origin)});
      } catch (const InputError& e) {
        workload.skipped.emplace_back(e.what());
      }
    });
  } else if (fs::is_regular_file(path)) {
    add_file(path, true);
  } else {
    throw InputError(fmt::format("candidates: {} is neither a file, a folder nor a .jsonl", spec));
  }
}

void add_reference_candidates(Workload& workload) {
  for (const auto& p : workload.problems)
    workload.candidates.push_back(
        {p.id, p.origin + " (reference as candidate)", p.code + "\n\nModelNew = Model\n", true});
}

}  // namespace dice::eval
