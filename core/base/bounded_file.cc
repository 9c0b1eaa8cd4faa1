// read_bounded_file(): see bounded_file.h.
#include "core/base/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/printable.h"

namespace dagsim {
namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_bounded_file(const std::string& path, size_t max_bytes, ErrorCode code, std::string_view kind) {
  const auto refuse = [&](const std::string& problem) {
    throw Error(code, printable(path, kPathMax) + ": " + problem);
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below as not regular.
  Fd file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0) refuse(std::string("cannot open: ") + std::strerror(errno));
  struct stat info{};
  if (::fstat(file.fd, &info) != 0) refuse(std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) refuse(S_ISDIR(info.st_mode) ? "cannot read: is a directory" : "cannot read: not a regular file");
  const std::string too_large = max_bytes >= (1u << 20)
                                    ? "is larger than " + std::to_string(max_bytes >> 20) + " MiB, the limit of " + std::string(kind)
                                    : "is larger than " + std::to_string(max_bytes) + " bytes, the limit of " + std::string(kind);
  if (static_cast<uint64_t>(info.st_size) > max_bytes) refuse(too_large);
  // Read at most one byte past the limit: a file that grows while read is still bounded. The
  // buffer starts at the file's size (plus the byte that shows growth), not the bound, so a small
  // file read under a large bound costs its own size; it grows, doubling, only if the file does.
  const size_t cap = max_bytes + 1;
  std::string text;
  text.resize(std::min(cap, static_cast<size_t>(info.st_size) + 1));
  size_t size = 0;
  while (size < cap) {
    if (size == text.size()) text.resize(std::min(cap, 2 * text.size()));
    const ssize_t n = ::read(file.fd, text.data() + size, text.size() - size);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      refuse(std::string("cannot read: ") + std::strerror(errno));
    }
    size += static_cast<size_t>(n);
  }
  if (size > max_bytes) refuse(too_large);
  text.resize(size);
  text.shrink_to_fit();
  return text;
}

}  // namespace dagsim
