// libFuzzer target: the command line's parsing. The input is split into
// arguments at newlines and given to `remat program` (which parses every
// option, resolves --param values, parses --policy and traces the problem,
// or reads the program file --program names, but makes no inputs and runs
// nothing) or, if the first line is "list",
// to `remat list`. Every input must end in an exit status with a message,
// never a crash or an uncaught exception.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tools/remat_cli.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string current;
  for (size_t i = 0; i < size && args.size() < 32; ++i) {
    if (data[i] == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  args.push_back(current);
  if (args[0] != "list") args.insert(args.begin(), "program");
  std::ostringstream out, err;
  const int status = remat::RunRemat(args, out, err);
  if (status != 0 && err.str().empty()) __builtin_trap();  // a failure must say why
  return 0;
}
