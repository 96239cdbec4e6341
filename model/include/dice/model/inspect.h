#pragma once
// Descriptions of an opened checkpoint for `dice model inspect`.

#include <nlohmann/json.hpp>
#include <string>

#include "dice/model/checkpoint.h"

namespace dice::model {

/// {"dir", "config": config.to_json(), "num_parameters", "total_bytes", "tensors": [{"name",
/// "dtype", "shape", "file" (name inside the folder), "offset" (bytes into the file), "bytes"}]}
/// listing every entry of every file, in file then data order.
nlohmann::json describe_json(const Checkpoint& checkpoint);

/// The same as text: a few lines of config, then a table name / dtype / shape / file.
std::string describe_text(const Checkpoint& checkpoint);

}  // namespace dice::model
