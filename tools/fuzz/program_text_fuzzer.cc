// libFuzzer target: the program text parser (engines/api/program_text.h).
// Every input must either parse or throw remat::Error with a message of the
// form "FILE:LINE:COLUMN: ..."; never crash, hang or throw anything else.
// A program that parses must print as text that parses back to the same
// program (ProgramDifference empty) and prints the same again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engines/api/error.h"
#include "engines/api/program_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  remat::Program program;
  try {
    program = remat::ParseProgram(text, "fuzz.remat");
  } catch (const remat::Error& e) {
    // "fuzz.remat:LINE:COLUMN: message"
    const std::string message = e.what();
    const std::string prefix = "fuzz.remat:";
    if (message.rfind(prefix, 0) != 0) __builtin_trap();
    size_t i = prefix.size();
    int fields = 0;
    while (fields < 2) {
      const size_t start = i;
      while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
      if (i == start || i >= message.size() || message[i] != ':') __builtin_trap();
      ++i;
      ++fields;
    }
    if (message.size() <= i + 1) __builtin_trap();  // a message after the location
    return 0;
  }
  const std::string printed = remat::PrintProgram(program);
  const remat::Program again = remat::ParseProgram(printed, "printed.remat");
  if (!remat::ProgramDifference(program, again).empty()) __builtin_trap();
  if (remat::PrintProgram(again) != printed) __builtin_trap();
  return 0;
}
