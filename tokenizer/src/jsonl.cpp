#include "dice/tokenizer/jsonl.h"

#include <nlohmann/json.hpp>

#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "dice/core/error.h"
#include "dice/tokenizer/chat_template.h"

namespace dice::tokenizer {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

// A malformed record: the message becomes the line's "error".
struct RecordError {
  std::string message;
};

const Json& field(const Json& record, const char* key) {
  const auto it = record.find(key);
  if (it == record.end()) throw RecordError{std::string("no \"") + key + "\" field"};
  return *it;
}

std::vector<std::int32_t> parse_ids(const Json& value) {
  if (!value.is_array()) throw RecordError{"\"ids\" is not an array"};
  std::vector<std::int32_t> ids;
  ids.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    const Json& v = value[i];
    if (!v.is_number_integer() || v.get<std::int64_t>() < INT32_MIN ||
        v.get<std::int64_t>() > INT32_MAX)
      throw RecordError{"\"ids\"[" + std::to_string(i) + "] is not a token id"};
    ids.push_back(static_cast<std::int32_t>(v.get<std::int64_t>()));
  }
  return ids;
}

std::vector<ChatMessage> parse_messages(const Json& value) {
  if (!value.is_array()) throw RecordError{"\"messages\" is not an array"};
  std::vector<ChatMessage> messages;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const Json& m = value[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw RecordError{where + " is not an object"};
    if (m.contains("tool_calls") && !m["tool_calls"].is_null())
      throw RecordError{where + " has tool_calls; tools are not supported by dice"};
    ChatMessage message;
    if (!m.contains("role") || !m["role"].is_string())
      throw RecordError{where + " has no string \"role\""};
    message.role = m["role"].get<std::string>();
    if (!m.contains("content") || !m["content"].is_string())
      throw RecordError{where + " has no string \"content\""};
    message.content = m["content"].get<std::string>();
    if (const auto it = m.find("reasoning_content"); it != m.end() && !it->is_null()) {
      if (!it->is_string()) throw RecordError{where + ".reasoning_content is not a string"};
      message.reasoning_content = it->get<std::string>();
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

// The result fields of one record; the record keeps its other fields.
void process(const Tokenizer& tokenizer, const TokenizeOptions& options, Json& record) {
  using Mode = TokenizeOptions::Mode;
  switch (options.mode) {
    case Mode::kEncode: {
      const Json& text = field(record, "text");
      if (!text.is_string()) throw RecordError{"\"text\" is not a string"};
      const auto ids = tokenizer.encode(text.get_ref<const std::string&>());
      record.erase("text");
      record["ids"] = ids;
      break;
    }
    case Mode::kPieces: {
      const Json& text = field(record, "text");
      if (!text.is_string()) throw RecordError{"\"text\" is not a string"};
      auto pieces = tokenizer.pieces(text.get_ref<const std::string&>());
      record.erase("text");
      record["pieces"] = std::move(pieces);
      break;
    }
    case Mode::kDecode: {
      const auto ids = parse_ids(field(record, "ids"));
      std::string text = tokenizer.decode(ids, options.skip_special);
      record.erase("ids");
      record["text"] = std::move(text);
      break;
    }
    case Mode::kChat: {
      if (record.contains("tools") && !record["tools"].is_null())
        throw RecordError{"\"tools\" is given; tools are not supported by dice"};
      const auto messages = parse_messages(field(record, "messages"));
      std::string text =
          apply_chat_template(messages, options.add_generation_prompt, options.enable_thinking);
      const auto ids = tokenizer.encode(text);
      record.erase("messages");
      record["text"] = std::move(text);
      record["ids"] = ids;
      break;
    }
  }
}

}  // namespace

std::size_t tokenize_jsonl(const Tokenizer& tokenizer, std::istream& in, std::ostream& out,
                           const TokenizeOptions& options) {
  std::string line;
  std::string buffer;
  std::size_t line_no = 0;
  std::size_t errors = 0;
  const auto flush = [&] {
    out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    out.flush();
    buffer.clear();
  };
  while (std::getline(in, line)) {
    ++line_no;
    Json record;
    std::string error;
    try {
      record = Json::parse(line);
      if (!record.is_object()) throw RecordError{"not a JSON object"};
      process(tokenizer, options, record);
    } catch (const Json::parse_error& e) {
      error = std::string("not valid JSON: ") + e.what();
      record = Json::object();
    } catch (const RecordError& e) {
      error = e.message;
    } catch (const InputError& e) {
      error = e.what();
    }
    if (!error.empty()) {
      ++errors;
      if (!record.is_object()) record = Json::object();
      record["error"] = "line " + std::to_string(line_no) + ": " + error;
    }
    buffer += record.dump(-1, ' ', false, Json::error_handler_t::replace);
    buffer += '\n';
    if (buffer.size() >= kFlushBytes || in.rdbuf()->in_avail() <= 0) flush();
  }
  flush();
  return errors;
}

}  // namespace dice::tokenizer
