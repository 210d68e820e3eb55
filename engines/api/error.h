// The one exception type of remat-bench. Every bad input (an unknown name, a
// shape mismatch, a malformed file) is reported by throwing remat::Error with
// a message that names what was wrong and where; the command line and the
// harness catch it and print it. Nothing is reported by crashing.
#ifndef REMAT_ENGINES_API_ERROR_H_
#define REMAT_ENGINES_API_ERROR_H_

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace remat {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
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
