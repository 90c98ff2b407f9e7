#include "comm/agree.hpp"

#include <stdexcept>
#include <string>

#include "core/error.hpp"

namespace strata {

void agree_on_error(MPI_Comm comm, std::exception_ptr local_error) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::string message;
  int kind = 0;  // 1 = user error, 2 = internal error
  if (local_error) {
    try {
      std::rethrow_exception(local_error);
    } catch (const UserError& e) {
      message = e.what();
      kind = 1;
    } catch (const std::exception& e) {
      message = e.what();
      kind = 2;
    } catch (...) {
      message = "unknown error";
      kind = 2;
    }
  }
  int mine = local_error ? rank : size, first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return;
  int len = int(message.size());
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  MPI_Bcast(&kind, 1, MPI_INT, first, comm);
  message.resize(size_t(len));
  MPI_Bcast(message.data(), len, MPI_CHAR, first, comm);
  if (kind == 1) throw UserError(message);
  throw std::runtime_error(message);
}

}  // namespace strata
