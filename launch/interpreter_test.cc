// The workers' interpreter (interpreter.h): PATH lookup as execvp's, and the missing-module words
// found in what a failed worker left.
#include "launch/interpreter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace dagsim::launch {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dagsim_interpreter_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text, bool executable) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
  if (executable) fs::permissions(path, fs::perms::owner_all);
}

TEST(Interpreter, ResolvesAsExecvpDoesTheFirstExecutableOnPath) {
  const fs::path dir = fresh_dir("path");
  write(dir / "a" / "python3", "not executable", false);
  write(dir / "b" / "python3", "#!/bin/sh\n", true);
  write(dir / "c" / "python3", "#!/bin/sh\n", true);
  const std::string path = (dir / "a").string() + ":" + (dir / "b").string() + ":" + (dir / "c").string();
  EXPECT_EQ(resolve_program("python3", path), (dir / "b" / "python3").string());
  EXPECT_EQ(resolve_program("python3", (dir / "a").string()), std::nullopt);
  EXPECT_EQ(resolve_program((dir / "c" / "python3").string(), ""), (dir / "c" / "python3").string());
  EXPECT_EQ(resolve_program((dir / "c" / ".." / "b" / "python3").string(), ""), (dir / "b" / "python3").string());
}

TEST(Interpreter, FindsTheMissingModuleInErrorFilesStderrLogsOrTheMessage) {
  EXPECT_EQ(missing_module("Traceback...\nModuleNotFoundError: No module named 'torch'\n"),
            "ModuleNotFoundError: No module named 'torch'");
  EXPECT_EQ(missing_module("{\"message\": \"No module named 'numpy'\"}"), "No module named 'numpy'");
  EXPECT_EQ(missing_module("exit code 1"), std::nullopt);
  const fs::path run = fresh_dir("run");
  write(run / "attempt_0" / "0" / "stdout.log", "No module named 'ignored'", false);
  EXPECT_EQ(find_missing_module(run.string(), "nothing"), std::nullopt) << "stdout.log is not read";
  write(run / "attempt_0" / "1" / "stderr.log", "ModuleNotFoundError: No module named 'torch'\n", false);
  EXPECT_EQ(find_missing_module(run.string(), ""), "ModuleNotFoundError: No module named 'torch'");
  EXPECT_EQ(find_missing_module((run / "absent").string(), "No module named 'x'"), "No module named 'x'");
}

// The probe runs the interpreter: a fake one stands for a Python without the module.
TEST(Interpreter, ProbeImportSaysOnlyWhatTheInterpreterShowed) {
  const fs::path dir = fresh_dir("probe");
  write(dir / "lacking", "#!/bin/sh\nexit 17\n", true);  // as the probe's script exits on ModuleNotFoundError
  write(dir / "having", "#!/bin/sh\nexit 0\n", true);
  write(dir / "crashing", "#!/bin/sh\nexit 1\n", true);
  EXPECT_EQ(probe_import((dir / "lacking").string(), "torch"), "No module named 'torch'");
  EXPECT_EQ(probe_import((dir / "having").string(), "torch"), std::nullopt);
  EXPECT_EQ(probe_import((dir / "crashing").string(), "torch"), std::nullopt);
  EXPECT_EQ(probe_import((dir / "absent").string(), "torch"), std::nullopt);
  if (fs::exists("/usr/bin/python3")) {
    EXPECT_EQ(probe_import("/usr/bin/python3", "no_such_module_here"), "No module named 'no_such_module_here'");
    EXPECT_EQ(probe_import("/usr/bin/python3", "os"), std::nullopt);
  }
}

TEST(Interpreter, TheNoteNamesTheInterpreterAndHowToChooseAnother) {
  const std::string plain = interpreter_note("python3", "/usr/bin/python3", std::nullopt);
  EXPECT_NE(plain.find("the workers ran /usr/bin/python3 (python3)"), std::string::npos) << plain;
  EXPECT_NE(plain.find("--python"), std::string::npos) << plain;
  const std::string missing = interpreter_note("python3", std::nullopt, "No module named 'torch'");
  EXPECT_NE(missing.find("python3 (not found on PATH)"), std::string::npos) << missing;
  EXPECT_NE(missing.find("No module named 'torch'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("DAGSIM_PYTHON"), std::string::npos) << missing;
}

}  // namespace
}  // namespace dagsim::launch
