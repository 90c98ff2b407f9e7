#include "io/safetensors.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "io/json_text.hpp"

namespace strata {
namespace {

constexpr int64_t kMaxHeader = 100 << 20;  // the format's own limit (100 MB)

bool dtype_of(const std::string& name, StoredDtype& out) {
  for (StoredDtype d : {StoredDtype::F32, StoredDtype::BF16, StoredDtype::F16, StoredDtype::F64})
    if (name == dtype_name(d)) {
      out = d;
      return true;
    }
  return false;
}

}  // namespace

const StoredTensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsFile read_safetensors_header(const TensorFileReader& reader) {
  const std::string& path = reader.path();
  const auto fail = [&](const std::string& why) { throw UserError(path + ": not a valid safetensors file: " + why); };
  if (reader.size() < 8) fail("shorter than its 8-byte header length");
  unsigned char len[8];
  reader.read_bytes(0, 8, len);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(len[i]) << (8 * i);
  if (n > uint64_t(kMaxHeader)) fail("its header length " + std::to_string(n) + " is over 100 MB");
  if (int64_t(8 + n) > reader.size())
    fail("its header of " + std::to_string(n) + " bytes runs past the end of the file (" +
         std::to_string(reader.size()) + " bytes: truncated?)");
  std::string text(size_t(n), '\0');
  reader.read_bytes(8, int64_t(n), text.data());
  const JsonValue root = parse_json(text, path + " (its safetensors header)");
  if (root.kind != JsonValue::Kind::Object) fail("its header is not a JSON object");
  const int64_t data_start = int64_t(8 + n), data_bytes = reader.size() - data_start;
  SafetensorsFile out;
  std::vector<std::pair<int64_t, int64_t>> spans;  // relative [begin, end) and tensor index
  for (const auto& member : root.members) {
    const std::string& name = member.first;
    const JsonValue& v = member.second;
    if (name == "__metadata__") {
      if (v.kind != JsonValue::Kind::Object) fail("__metadata__ is not an object");
      for (const auto& [k, m] : v.members) {
        if (m.kind != JsonValue::Kind::String) fail("__metadata__." + k + " is not a string");
        out.metadata.emplace_back(k, m.text);
      }
      continue;
    }
    const auto bad = [&](const std::string& why) { fail("tensor " + name + ": " + why); };
    if (v.kind != JsonValue::Kind::Object) bad("its entry is not an object");
    const JsonValue* dtype = v.find("dtype");
    const JsonValue* shape = v.find("shape");
    const JsonValue* offsets = v.find("data_offsets");
    if (!dtype || dtype->kind != JsonValue::Kind::String) bad("no dtype");
    if (!shape || shape->kind != JsonValue::Kind::Array) bad("no shape");
    if (!offsets || offsets->kind != JsonValue::Kind::Array || offsets->items.size() != 2)
      bad("no data_offsets [begin, end]");
    StoredTensor t;
    t.name = name;
    if (!dtype_of(dtype->text, t.dtype)) bad("dtype " + dtype->text + " is not one strata reads (F32, BF16, F16, F64)");
    for (const auto& d : shape->items) {
      if (!d.is_integer() || d.integer() < 0 || d.integer() > (int64_t(1) << 40)) bad("a bad dimension in its shape");
      t.shape.push_back(d.integer());
    }
    for (const auto& o : offsets->items)
      if (!o.is_integer() || o.integer() < 0) bad("data_offsets are not non-negative integers");
    const int64_t b = offsets->items[0].integer(), e = offsets->items[1].integer();
    if (e < b) bad("data_offsets end before they begin");
    if (e > data_bytes)
      bad("data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "] run past the file's " +
          std::to_string(data_bytes) + " bytes of data (truncated?)");
    if (e - b != t.bytes())
      bad("data_offsets hold " + std::to_string(e - b) + " bytes, its shape " + shape_text(t.shape) + " of " +
          dtype->text + " needs " + std::to_string(t.bytes()));
    t.offset = data_start + b;
    spans.emplace_back(b, e);
    out.tensors.push_back(std::move(t));
  }
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return spans[a] < spans[b]; });
  for (size_t k = 1; k < order.size(); ++k)
    if (spans[order[k]].first < spans[order[k - 1]].second && spans[order[k]].second > spans[order[k]].first)
      fail("tensors " + out.tensors[order[k - 1]].name + " and " + out.tensors[order[k]].name + " overlap");
  return out;
}

std::string safetensors_header(std::vector<StoredTensor>& tensors,
                               const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i)
      json += (i ? "," : "") + json_quote(metadata[i].first) + ":" + json_quote(metadata[i].second);
    json += "}";
  }
  int64_t at = 0;
  for (auto& t : tensors) {
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape[i]);
    json += (json.size() > 1 ? "," : "") + json_quote(t.name) + ":{\"dtype\":\"" + dtype_name(t.dtype) +
            "\",\"shape\":" + shape + "],\"data_offsets\":[" + std::to_string(at) + "," +
            std::to_string(at + t.bytes()) + "]}";
    t.offset = at;
    at += t.bytes();
  }
  json += "}";
  while ((8 + json.size()) % 8 != 0) json += ' ';
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  for (auto& t : tensors) t.offset += int64_t(out.size() + json.size());
  return out + json;
}

}  // namespace strata
