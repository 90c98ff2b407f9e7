#include "cli/tokenize.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "comm/agree.hpp"
#include "comm/control.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timers.hpp"
#include "data/deck_data.hpp"
#include "io/text_dataset.hpp"
#include "io/token_shard.hpp"
#include "io/tokenizer.hpp"
#include "model/model_kind.hpp"

namespace strata {
namespace {

// A byte range of one file: [begin, end) before each end is moved past the next newline.
struct TextPiece {
  size_t file;
  int64_t begin, end;
};

int64_t tokenize_file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw UserError("data.files: cannot read '" + path + "'");
  return int64_t(st.st_size);
}

// The shards: lists of pieces, a pure function of the files' sizes and shard_bytes.
std::vector<std::vector<TextPiece>> plan_shards(const std::vector<std::string>& files, int64_t shard_bytes) {
  std::vector<std::vector<TextPiece>> shards;
  int64_t filled = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const int64_t size = tokenize_file_size(files[f]);
    for (int64_t begin = 0; begin < size; begin += shard_bytes) {
      const TextPiece piece{f, begin, std::min(size, begin + shard_bytes)};
      const int64_t n = piece.end - piece.begin;
      if (shards.empty() || filled + n > shard_bytes) {
        shards.emplace_back();
        filled = 0;
      }
      shards.back().push_back(piece);
      filled += n;
    }
  }
  return shards;
}

// A cut at byte `at` of a file moves just past the first newline at or after it (or to
// the end of the file), so pieces hold whole lines.
int64_t after_newline(std::ifstream& in, int64_t at, int64_t size) {
  if (at == 0 || at >= size) return std::min(at, size);
  in.clear();
  in.seekg(at);
  char buf[65536];
  int64_t pos = at;
  while (pos < size) {
    in.read(buf, sizeof(buf));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    if (const void* nl = std::memchr(buf, '\n', size_t(got))) return pos + (static_cast<const char*>(nl) - buf) + 1;
    pos += got;
  }
  return size;
}

std::string read_shard_text(const std::vector<std::string>& files, const std::vector<TextPiece>& pieces) {
  std::string text;
  for (const auto& p : pieces) {
    std::ifstream in(files[p.file], std::ios::binary);
    if (!in) throw UserError("data.files: cannot read '" + files[p.file] + "'");
    const int64_t size = tokenize_file_size(files[p.file]);
    const int64_t begin = after_newline(in, p.begin, size), end = after_newline(in, p.end, size);
    if (end <= begin) continue;
    const size_t at = text.size();
    text.resize(at + size_t(end - begin));
    in.clear();
    in.seekg(begin);
    if (!in.read(&text[at], end - begin)) throw UserError("data.files: cannot read '" + files[p.file] + "'");
  }
  return text;
}

}  // namespace

TokenizeReport tokenize_corpus(const Deck& deck, MPI_Comm comm, const Log& log) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  const auto& d = deck.data;
  namespace fs = std::filesystem;
  const std::string out = d.token_dir, partial = d.token_dir + ".partial";
  TokenizeReport report;
  std::vector<std::string> files;
  std::string model;  // the tokenizer's bytes
  agreed(comm, [&] {
    if (!is_gpt(deck.model))
      throw UserError("strata tokenize: model.kind = \"gpt\" only (the residual network reads images)");
    if (out.empty()) throw UserError("data.token_dir: strata tokenize needs the folder to write the token shards to");
    if (d.files.empty()) throw UserError("data.files: strata tokenize needs the text files to encode");
    std::error_code ec;
    if (fs::exists(out, ec) && !fs::is_empty(out, ec))
      throw UserError("data.token_dir: '" + out +
                      "' already holds files; strata tokenize never overwrites token shards (remove it or name another "
                      "folder)");
    files = TextDataset::expand(d.files);
    if (!d.tokenizer.empty()) model = deck_tokenizer(deck)->serialized();  // checked against model.vocab_size
  });
  log.info(d.tokenizer.empty()
               ? strfmt("strata tokenize: training a %s tokenizer of %lld pieces on %zu files",
                        to_string(d.tokenizer_type).c_str(), (long long)deck.model.vocab_size, files.size())
               : "strata tokenize: encoding with " + d.tokenizer);
  // the tokenizer: one rank trains it, every rank gets its bytes
  const double t0 = Timers::now();
  agreed(comm, [&] {
    if (d.tokenizer.empty() && rank == 0) {
      TokenizerTraining spec;
      spec.type = to_string(d.tokenizer_type);
      spec.vocab_size = deck.model.vocab_size;
      model = Tokenizer::train(files, spec).serialized();
    }
  });
  broadcast_string(comm, model);
  report.train_seconds = d.tokenizer.empty() ? Timers::now() - t0 : 0.0;
  const Tokenizer tok = Tokenizer::from_serialized(model, d.tokenizer.empty() ? "the trained tokenizer" : d.tokenizer);
  report.vocab = tok.vocab_size();
  const int width = tok.vocab_size() <= 65536 ? 2 : 4;
  std::vector<std::vector<TextPiece>> shards;
  agreed(comm, [&] {
    shards = plan_shards(files, std::max<int64_t>(1, int64_t(d.shard_mb * 1e6)));
    if (shards.empty()) throw UserError("data.files: the files hold no text");
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(partial, ec);  // a tokenization that did not finish
      if (!fs::create_directories(partial, ec) && ec)
        throw IoError(partial + ": cannot create the folder: " + ec.message());
    }
  });
  const double t1 = Timers::now();
  std::vector<int64_t> mine = {0, 0, 0};  // text bytes, tokens, shards not reproduced
  agreed(comm, [&] {
    for (size_t s = size_t(rank); s < shards.size(); s += size_t(ranks)) {
      const std::string text = read_shard_text(files, shards[s]);
      const std::vector<uint32_t> ids = tok.encode(text);
      if (tok.decode(ids) != text) ++mine[2];
      write_token_shard(partial + "/" + strfmt("shard_%06zu.tok", s), ids, width, tok.vocab_size());
      mine[0] += int64_t(text.size());
      mine[1] += int64_t(ids.size());
    }
  });
  std::vector<int64_t> total = mine;
  sum_over(comm, total);
  report.encode_seconds = Timers::now() - t1;
  agreed(comm, [&] {
    if (rank != 0) return;
    tok.save(partial + "/tokenizer.model");
    std::error_code ec;
    fs::remove(out, ec);  // an empty folder the user made for it
    fs::rename(partial, out, ec);
    if (ec) throw IoError(out + ": cannot move the finished shards into place: " + ec.message());
  });
  report.files = int64_t(files.size());
  report.shards = int64_t(shards.size());
  report.text_bytes = total[0];
  report.tokens = total[1];
  report.shards_not_reproduced = total[2];
  return report;
}

}  // namespace strata
