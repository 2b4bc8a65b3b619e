// ServeProcess (tests only): a `hearth serve` child process, the real binary as a user
// starts it. Its stdout is read here (for the "listening on HOST:PORT" line); its stderr
// goes to a log file. The process is terminated (SIGTERM) and reaped on destruction.
//
// Thread safety: one thread uses a ServeProcess.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hearth::testing {

class ServeProcess {
 public:
  // Spawns args[0] with `args`; stderr truncates and goes to `log_path`.
  ServeProcess(const std::vector<std::string>& args, const std::string& log_path);
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // The port from the "listening on HOST:PORT" line; nullopt when the process exits or
  // stays silent for `timeout`.
  std::optional<int> WaitForPort(std::chrono::seconds timeout);
  // True while the process runs. Once it has exited (a crash included), false, and
  // exit_description() says how.
  bool Running();
  const std::string& exit_description() const { return exit_description_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string exit_description_;
};

// The whole file at `path` ("" when it cannot be read).
std::string ReadFile(const std::string& path);

}  // namespace hearth::testing
