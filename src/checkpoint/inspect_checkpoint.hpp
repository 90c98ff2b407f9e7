#pragma once
// `strata inspect CKPT.h5`: what a checkpoint holds, and whether every tensor still
// passes its checksum.
#include <ostream>
#include <string>

namespace strata {

// Prints step, layout, deck and every tensor (shape, checksum status) to out. Returns
// the number of tensors that fail to read. Throws UserError if the file is unreadable.
int inspect_checkpoint(const std::string& path, std::ostream& out);

}  // namespace strata
