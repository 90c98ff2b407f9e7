// Other programs' model files (io/json_text, io/stored_tensor, io/safetensors,
// io/llmc_model_file): the JSON reader's strictness, dtype conversions at their edges, a
// safetensors file of every dtype strata reads written and read back by block, and llm.c's
// header written, read and refused when it does not add up.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "io/json_text.hpp"
#include "io/llmc_model_file.hpp"
#include "io/safetensors.hpp"
#include "io/stored_tensor.hpp"

using namespace strata;

TEST_CASE("the JSON reader takes what the formats write and refuses the rest in one line", "[io][json]") {
  const JsonValue v = parse_json(
      R"({"a": [1, -2, 3.5e2], "s": "x\"\\\u00e9\ud83d\ude00", "o": {"t": true, "f": false, "n": null}})", "test");
  REQUIRE(v.find("a")->items.size() == 3);
  REQUIRE(v.find("a")->items[1].is_integer());
  REQUIRE(v.find("a")->items[1].integer() == -2);
  REQUIRE_FALSE(v.find("a")->items[2].is_integer());
  REQUIRE(v.find("a")->items[2].number == 350.0);
  REQUIRE(v.find("s")->text == "x\"\\\xc3\xa9\xf0\x9f\x98\x80");
  REQUIRE(v.find("o")->find("t")->boolean);
  REQUIRE(v.find("o")->find("n")->kind == JsonValue::Kind::Null);
  REQUIRE(parse_json(json_quote("a\"b\\c\n\x01"), "q").text == "a\"b\\c\n\x01");
  for (const char* bad : {R"({"a": 1, "a": 2})", R"({"a": 1} x)", R"({"a": })", R"(["\ud800"])", R"({"a": 01x})",
                          "[\"\x01\"]", "{\"a\": 1", "99999999999999999999999"}) {
    INFO(bad);
    bool refused = false;
    try {
      const JsonValue j = parse_json(bad, "bad");
      refused = j.kind == JsonValue::Kind::Number && !j.is_integer();  // too large for int64: not an integer
    } catch (const UserError& e) {
      refused = std::string(e.what()).find("bad: malformed JSON at byte") == 0;
    }
    REQUIRE(refused);
  }
  REQUIRE_THROWS_AS(parse_json(std::string(65, '[') + std::string(65, ']'), "deep"), UserError);
  REQUIRE_NOTHROW(parse_json(std::string(64, '[') + std::string(64, ']'), "deep"));
}

TEST_CASE("bf16 rounds to nearest even and f16 widens exactly", "[io][dtype]") {
  const auto bits = [](float x) {
    uint32_t u = 0;
    std::memcpy(&u, &x, 4);
    return u;
  };
  REQUIRE(float_to_bf16(1.0f) == 0x3F80);
  REQUIRE(float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // a tie: to even
  REQUIRE(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // a tie: to even, up
  REQUIRE(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3F81);
  REQUIRE(float_to_bf16(-INFINITY) == 0xFF80);
  REQUIRE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  REQUIRE(float_to_bf16(std::ldexp(1.0f, -130)) == bits(std::ldexp(1.0f, -130)) >> 16);  // subnormals kept
  REQUIRE(f16_to_float(0x3C00) == 1.0f);
  REQUIRE(f16_to_float(0xC000) == -2.0f);
  REQUIRE(f16_to_float(0x7BFF) == 65504.0f);
  REQUIRE(f16_to_float(0x0001) == std::ldexp(1.0f, -24));
  REQUIRE(std::isinf(f16_to_float(0x7C00)));
  REQUIRE(std::isnan(f16_to_float(0x7E00)));
}

TEST_CASE("a safetensors file of every dtype strata reads, written and read back by block", "[io][safetensors]") {
  const std::string path = "test_model_files.safetensors";
  std::remove(path.c_str());
  std::vector<StoredTensor> tensors = {{"m", StoredDtype::F32, {3, 4}, 0},
                                       {"b", StoredDtype::BF16, {5}, 0},
                                       {"h", StoredDtype::F16, {2}, 0},
                                       {"d", StoredDtype::F64, {2, 2}, 0}};
  const std::string header = safetensors_header(tensors, {{"format", "pt"}});
  REQUIRE(header.size() % 8 == 0);
  {
    SequentialFile f(path);
    f.write(header.data(), int64_t(header.size()));
    std::vector<float> m(12);
    for (int i = 0; i < 12; ++i) m[size_t(i)] = float(i) + 0.25f;
    f.write_values(m.data(), 12, StoredDtype::F32);
    const float b[5] = {1.0f, -2.0f, 0.5f, 3.0f, 1.0f + std::ldexp(1.0f, -8)};
    f.write_values(b, 5, StoredDtype::BF16);
    const uint16_t h[2] = {0x3C00, 0xC000};
    f.write(h, 4);
    const double d[4] = {1.5, -0.25, 8.0, 1e-3};
    f.write(d, 32);
    f.close();
  }
  const TensorFileReader r(path);
  const SafetensorsFile s = read_safetensors_header(r);
  REQUIRE(s.metadata.size() == 1);
  REQUIRE(s.tensors.size() == 4);
  for (size_t i = 0; i < 4; ++i) REQUIRE(s.tensors[i].offset == tensors[i].offset);
  float block[4] = {};
  r.read_block(*s.find("m"), 4, 1, 3, 1, 3, block);  // rows 1-2, columns 1-2
  REQUIRE(block[0] == 5.25f);
  REQUIRE(block[3] == 10.25f);
  float b[5] = {};
  r.read_block(*s.find("b"), 5, 0, 1, 0, 5, b);
  REQUIRE(b[1] == -2.0f);
  REQUIRE(b[4] == 1.0f);  // rounded to even on the way out
  float h[2] = {};
  r.read_block(*s.find("h"), 2, 0, 1, 0, 2, h);
  REQUIRE((h[0] == 1.0f && h[1] == -2.0f));
  float d[4] = {};
  r.read_block(*s.find("d"), 2, 0, 2, 0, 2, d);
  REQUIRE(d[3] == 1e-3f);
  REQUIRE_THROWS_AS(SequentialFile(path), IoError);  // never over an existing file
  std::remove(path.c_str());
}

TEST_CASE("llm.c's model header: written, read, and refused when its tensors and the file disagree", "[io][llmc]") {
  LlmcModelHeader h;
  h.max_t = 8, h.vocab = 10, h.layers = 2, h.heads = 2, h.channels = 4, h.padded_vocab = 128;
  const auto t = llmc_model_tensors(h);
  REQUIRE(t.size() == 16);
  REQUIRE(t[0].offset == 1024);
  REQUIRE(t[4].shape == std::vector<int64_t>{2, 12, 4});   // qkvw: [L, 3C, C]
  REQUIRE(t[12].shape == std::vector<int64_t>{2, 4, 16});  // fcprojw: [L, C, 4C]
  REQUIRE(llmc_padded_vocab(50257) == 50304);
  const std::string path = "test_model_files.bin";
  for (const int64_t extra : {0, -4, 4}) {
    std::remove(path.c_str());
    {
      SequentialFile f(path);
      const std::string bytes = llmc_model_header_bytes(h);
      f.write(bytes.data(), int64_t(bytes.size()));
      const int64_t values = (t.back().offset + t.back().bytes() - 1024) / 4 + extra / 4;
      std::vector<float> zeros(size_t(values), 0.0f);
      f.write(zeros.data(), values * 4);
      f.close();
    }
    const TensorFileReader r(path);
    if (extra == 0) {
      const LlmcModelHeader back = read_llmc_model_header(r);
      REQUIRE((back.version == 3 && back.vocab == 10 && back.padded_vocab == 128 && back.channels == 4));
    } else {
      REQUIRE_THROWS_WITH(read_llmc_model_header(r), Catch::Contains("its header's tensors need"));
    }
  }
  std::remove(path.c_str());
}
