#pragma once
// Where training sequences come from. A sequence is a pure function of
// (split, step, global sample index), so a restart or any rank layout sees exactly the
// same global batches.
#include <cstdint>
#include <limits>
#include <string>

namespace strata {

enum class Split : uint64_t { Train = 1, Validation = 2 };

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Writes seq_len input tokens and the seq_len next tokens (targets).
  virtual void sequence(Split split, int64_t step, int64_t global_index, int64_t seq_len, int32_t* tokens,
                        int32_t* targets) const = 0;
  // One line for the log about the data ("" when there is nothing to say).
  virtual std::string describe() const { return ""; }
  // Bytes of text n tokens stand for (NaN when unknown, e.g. random tokens): what the
  // validation loss per byte divides by, comparable across tokenizers.
  virtual double text_bytes(const int32_t* tokens, int64_t n) const {
    (void)tokens;
    (void)n;
    return std::numeric_limits<double>::quiet_NaN();
  }
};

}  // namespace strata
