// libFuzzer target: the .npy reader on arbitrary bytes. Every input must
// either parse or throw remat::Error; anything else (a crash, a sanitizer
// report, an exception of another type) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engines/api/error.h"
#include "engines/api/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    remat::Tensor t = remat::ParseNpy(bytes, "fuzz.npy");
    // A parsed tensor round-trips: written and read back, the same dtype,
    // shape and bytes (NaN payloads included).
    const remat::Tensor back = remat::ParseNpy(remat::SerializeNpy(t), "roundtrip.npy");
    if (back.dtype() != t.dtype() || back.shape() != t.shape() || !remat::BitwiseEqual(back, t)) {
      __builtin_trap();
    }
  } catch (const remat::Error&) {
  }
  return 0;
}
