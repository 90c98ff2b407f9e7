// libFuzzer target: any bytes as a model file from elsewhere. The safetensors header reader
// (with the JSON reader under it) and the llm.c header reader must accept the bytes or
// throw a UserError (one line); every tensor a header accepts must read in full inside the
// file. Anything else (a crash, a sanitizer report, another exception, a hang) is a bug.
// Built and run by tests/io/fuzz-model-files.sh (clang, not part of CTest).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/llmc_model_file.hpp"
#include "io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "fuzz-model-file." + std::to_string(::getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  const strata::TensorFileReader reader(path);
  try {
    const auto st = strata::read_safetensors_header(reader);
    for (const auto& t : st.tensors) {
      if (t.numel() == 0 || t.numel() > (1 << 20)) continue;
      std::vector<float> out(size_t(t.numel()));
      reader.read_block(t, t.numel(), 0, 1, 0, t.numel(), out.data());
    }
  } catch (const strata::UserError&) {
  }
  try {
    strata::read_llmc_model_header(reader);
  } catch (const strata::UserError&) {
  }
  return 0;
}
