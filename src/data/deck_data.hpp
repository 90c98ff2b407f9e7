#pragma once
// What a deck's [data] section reads: a language model's token source (byte-level text,
// token shards or random tokens) and, for token shards, the tokenizer that wrote them; a
// classifier's images; and either as a data replica's batches. One place, so training,
// generation and the reference tools resolve the same files.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/grid.hpp"
#include "core/deck.hpp"
#include "data/batch_source.hpp"
#include "io/token_source.hpp"
#include "io/tokenizer.hpp"

namespace strata {

// The tokenizer's file: data.tokenizer, or token_dir/tokenizer.model ("" when neither).
std::string tokenizer_path(const DataConfig& data);
// The token shards kind = "tokens" reads: data.shards, or token_dir/shard_*.tok.
std::vector<std::string> shard_patterns(const DataConfig& data);

// The deck's tokenizer, its vocabulary checked against model.vocab_size (at most: a model
// may pad its vocabulary); nullopt when the deck names none and token_dir has none
// (random tokens, llm.c shards). Throws UserError when a named tokenizer is missing or
// unreadable, or its vocabulary exceeds the model's.
std::optional<Tokenizer> deck_tokenizer(const Deck& deck);

// The deck's training data (data.kind "text", "tokens" or "random"), with the byte counts
// of the tokenizer for token shards; shards whose recorded vocabulary differs from the
// tokenizer's are refused (they were written by another one).
std::unique_ptr<TokenSource> make_token_source(const Deck& deck);

// This data replica's batches of the deck's data (data.kind), the replica's place from the grid.
std::unique_ptr<BatchSource> make_batch_source(const Deck& deck, const Grid& grid);

}  // namespace strata
