// Units in text: integers and byte sizes, parsed once for every layer (the
// schedule specs, memory caps, the bench's and the CLI's flags).
#ifndef REMAT_ENGINES_API_UNITS_H_
#define REMAT_ENGINES_API_UNITS_H_

#include <cstdint>
#include <string>

namespace remat {

// A whole decimal integer with an optional sign and nothing else: true and
// `out` set, or false (empty, trailing characters, out of range).
bool ParseInt(const std::string& text, int64_t& out);

// "123", "123B", "256KiB", "64MiB", "1.5GiB", "1GB" (KB, MB, GB, TB: powers
// of 1000; KiB, MiB, GiB, TiB: powers of 1024); fractions round down to whole
// bytes. Throws remat::Error on anything else or on overflow.
int64_t ParseBytes(const std::string& text);

}  // namespace remat

#endif  // REMAT_ENGINES_API_UNITS_H_
