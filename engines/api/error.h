// The one exception type of remat-bench. Every bad input (an unknown name, a
// shape mismatch, a malformed file) is reported by throwing remat::Error with
// a message that names what was wrong and where; the command line and the
// harness catch it and print it. Nothing is reported by crashing. What a
// caller acts on (the smallest cap that works, where a file failed to parse)
// travels as typed facts beside the message (ErrorFacts).
#ifndef REMAT_ENGINES_API_ERROR_H_
#define REMAT_ENGINES_API_ERROR_H_

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace remat {

// What kind of failure an Error is, for callers that act on it (the suite,
// the CLI, the bench) rather than print it. They read kind() and facts(),
// never the message's text.
enum class ErrorKind {
  kInvalid,         // bad input or a broken rule: the message says which
  kParse,           // a program file or flag that does not parse: file, line, column
  kCapTooSmall,     // a run that does not fit a memory cap (dtr's --memory-cap)
  kBudgetTooSmall,  // a schedule's budget:B below the smallest feasible
};

// The structured facts of an Error: each is set where it is known, and
// kept when the error is wrapped with more context (Error(message, cause)).
struct ErrorFacts {
  ErrorKind kind = ErrorKind::kInvalid;
  // kCapTooSmall: the smallest cap that worked; kBudgetTooSmall: the smallest
  // feasible budget. -1 when not known.
  int64_t smallest_feasible_bytes = -1;
  // kParse: where, 1-based; file as the reader was given it.
  std::string file;
  int line = 0;
  int column = 0;
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  Error(const std::string& message, ErrorFacts facts)
      : std::runtime_error(message), facts_(std::move(facts)) {}
  // A new message (usually more context around cause.what()) that keeps the
  // cause's kind and facts.
  Error(const std::string& message, const Error& cause)
      : std::runtime_error(message), facts_(cause.facts_) {}

  ErrorKind kind() const { return facts_.kind; }
  const ErrorFacts& facts() const { return facts_; }

 private:
  ErrorFacts facts_;
};

// Builds a message from streamable parts: throw Error(StrCat("op ", name)).
// Parts that are all strings are appended directly: engines name sites with
// it on every run, and a stream's construction (its locale) costs more than
// the ops it names on the scalar chains.
template <typename... Parts>
std::string StrCat(const Parts&... parts) {
  if constexpr ((std::is_convertible_v<const Parts&, std::string_view> && ...)) {
    std::string out;
    out.reserve((std::string_view(parts).size() + ... + 0));
    (out.append(std::string_view(parts)), ...);
    return out;
  } else {
    std::ostringstream out;
    (out << ... << parts);
    return out.str();
  }
}

// Joins strings with a separator: Join({"a", "b"}, ", ") == "a, b".
template <typename Container>
std::string Join(const Container& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace remat

#endif  // REMAT_ENGINES_API_ERROR_H_
