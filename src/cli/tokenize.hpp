#pragma once
// `strata tokenize DECK`: a corpus tokenized once into token shards that every job reads.
// Rank 0 trains the tokenizer (SentencePiece, data.tokenizer_type, model.vocab_size
// pieces) on the lines of data.files, or every rank loads data.tokenizer; the text is cut
// into shards of about data.shard_mb MB (whole files packed in order; a larger file cut
// after a newline), the same shards on any number of ranks, and rank r encodes shards r,
// r + P, ... . Each shard is checked to decode back to its text, then written into
// token_dir.partial, which becomes data.token_dir (shard_NNNNNN.tok and tokenizer.model)
// only when every rank's shards are written: an existing token_dir is never touched.
#include <cstdint>

#include "comm/mpi_handle.hpp"
#include "core/deck.hpp"
#include "core/log.hpp"

namespace strata {

struct TokenizeReport {
  int64_t files = 0, shards = 0, text_bytes = 0, tokens = 0;
  int64_t vocab = 0;
  int64_t shards_not_reproduced = 0;  // shards whose tokens do not decode to their text
  double train_seconds = 0, encode_seconds = 0;
};

// Collective over comm; errors are agreed (every rank throws the same one). Says on log
// what it does once the deck's files and folders check out.
TokenizeReport tokenize_corpus(const Deck& deck, MPI_Comm comm, const Log& log);

}  // namespace strata
