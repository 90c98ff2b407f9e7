// strata tokenize DECK [--set ...]: the corpus as token shards (tokenize.hpp), on any number of ranks.
#include <algorithm>

#include "cli/command.hpp"
#include "cli/tokenize.hpp"
#include "comm/agree.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"

namespace strata {
namespace {

class TokenizeCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub = app.add_subcommand(
        "tokenize",
        "train a SentencePiece tokenizer on a deck's data.files (or use data.tokenizer) and write the "
        "corpus as token shards into data.token_dir, for data.kind = \"tokens\"; any number of ranks");
    deck_.add_to(*sub);
    return sub;
  }

  int run(int rank) override {
    Deck deck;
    agreed(MPI_COMM_WORLD, [&] { deck = load_model_deck(deck_.path, deck_.overrides); });
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const Log log(rank);
    const auto r = tokenize_corpus(deck, MPI_COMM_WORLD, log);
    if (r.shards_not_reproduced > 0)
      log.warn(
          strfmt("%lld of %lld shards do not decode back to their text exactly: the tokenizer normalizes "
                 "text (bits per byte count the decoded text)",
                 (long long)r.shards_not_reproduced, (long long)r.shards));
    log.info(strfmt(
        "strata tokenize: %lld files, %lld bytes of text -> %lld tokens (%.3f bytes/token) in %lld "
        "shard%s; vocabulary %lld%s; encoded in %.1f s on %d rank%s; wrote %s",
        (long long)r.files, (long long)r.text_bytes, (long long)r.tokens,
        double(r.text_bytes) / double(std::max<int64_t>(r.tokens, 1)), (long long)r.shards, r.shards == 1 ? "" : "s",
        (long long)r.vocab, deck.data.tokenizer.empty() ? strfmt(" (trained in %.1f s)", r.train_seconds).c_str() : "",
        r.encode_seconds, ranks, ranks == 1 ? "" : "s", deck.data.token_dir.c_str()));
    return kExitOk;
  }

 private:
  DeckArgs deck_;
};

}  // namespace

std::unique_ptr<Command> tokenize_command() { return std::make_unique<TokenizeCommand>(); }

}  // namespace strata
