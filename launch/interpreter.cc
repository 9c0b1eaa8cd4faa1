// The workers' interpreter (interpreter.h).
#include "launch/interpreter.h"

#include <fcntl.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include <filesystem>
#include <iterator>

#include "core/base/printable.h"

extern char** environ;

namespace dagsim::launch {

namespace {

bool executable_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The first MiB of a worker's file, or "" for anything but a regular file: the worker wrote it, so
// a FIFO (which a blocking open would wait on forever), a device or a link to either is not read.
std::string read_head(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st{};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    text.resize(1 << 20);
    size_t have = 0;
    while (have < text.size()) {
      const ssize_t n = ::read(fd, text.data() + have, text.size() - have);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      have += static_cast<size_t>(n);
    }
    text.resize(have);
  }
  ::close(fd);
  return text;
}

}  // namespace

std::optional<std::string> resolve_program(const std::string& program, const std::string& path_env) {
  if (program.find('/') != std::string::npos) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(program, ec);
    if (ec || !executable_file(absolute.string())) return std::nullopt;
    return absolute.lexically_normal().string();
  }
  size_t start = 0;
  for (;;) {
    const size_t colon = path_env.find(':', start);
    std::string dir = path_env.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";  // an empty PATH entry is the current folder, as for execvp
    const std::string candidate = dir + "/" + program;
    if (executable_file(candidate)) return resolve_program(candidate, "");
    if (colon == std::string::npos) return std::nullopt;
    start = colon + 1;
  }
}

std::optional<std::string> missing_module(const std::string& text) {
  const size_t at = text.find("No module named");
  if (at == std::string::npos) return std::nullopt;
  // With the exception's name when it comes just before (ModuleNotFoundError: No module named 'x').
  const std::string name = "ModuleNotFoundError: ";
  const size_t begin = at >= name.size() && text.compare(at - name.size(), name.size(), name) == 0 ? at - name.size() : at;
  const size_t end = std::min(text.find_first_of("\r\n\"", at), at + 200);
  return printable(text.substr(begin, (end == std::string::npos ? text.size() : end) - begin), 200);
}

std::optional<std::string> find_missing_module(const std::string& run_log_dir, const std::string& also) {
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(run_log_dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it.depth() >= 2) it.disable_recursion_pending();  // attempt_N/RANK/FILE: no deeper, whatever a worker made
    if (it.depth() > 2 || !(name == "error.json" || name == "stderr.log")) continue;
    if (std::optional<std::string> found = missing_module(read_head(it->path()))) return found;
  }
  return missing_module(also);
}

std::optional<std::string> probe_import(const std::string& python, const std::string& module) {
  const std::string code = "import sys\ntry:\n    import " + module + "\nexcept ModuleNotFoundError:\n    sys.exit(17)\n";
  std::vector<std::string> args = {python, "-c", code};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return std::nullopt;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 17) return "No module named '" + module + "'";
  return std::nullopt;
}

std::string interpreter_note(const std::string& python, const std::optional<std::string>& resolved,
                             const std::optional<std::string>& missing) {
  const std::string which = resolved ? printable(*resolved, kPathMax) + (*resolved != python ? " (" + printable(python, kPathMax) + ")" : "")
                                     : printable(python, kPathMax) + " (not found on PATH)";
  if (!missing) return "the workers ran " + which + "; --python PATH or DAGSIM_PYTHON chooses another interpreter";
  return "the workers ran " + which + ", which lacks a module (" + *missing +
         "); torchrun runs the Python that runs torchrun, dagsim runs --python (python3 from PATH by default): "
         "give --python PATH (or DAGSIM_PYTHON) naming a Python that has it";
}

}  // namespace dagsim::launch
