#pragma once
// Errors strata reports to the user. A UserError is bad input (deck, data, command line,
// rank count): one line naming the cause, exit code 2. Anything else that escapes is an
// internal error: exit code 1. Both bring every rank down (see app/main.cpp).
#include <stdexcept>
#include <string>

namespace strata {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitUserError = 2;

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& what) : std::runtime_error(what) {}
};

// Throws UserError(message) when cond is false.
inline void require(bool cond, const std::string& message) {
  if (!cond) throw UserError(message);
}

}  // namespace strata
