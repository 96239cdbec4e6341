#pragma once
// Errors of dice: exceptions that carry their context (which input, what is wrong).

#include <stdexcept>
#include <string>

namespace dice {

/// Base of every error dice throws. The message names the input and what is wrong with it.
/// Caught at process and worker boundaries and turned into verdicts or clear messages.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad user input (a missing file, a malformed record, an unknown problem id): the command-line
/// program reports it and exits with status 2.
class InputError : public Error {
 public:
  using Error::Error;
};

}  // namespace dice
