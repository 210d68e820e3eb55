#include "tools/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "engines/api/error.h"

namespace remat {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// A small parser for the Python dict literal in a .npy header:
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& name) : s_(text), name_(name) {}

  std::map<std::string, std::string> ParseDict() {
    std::map<std::string, std::string> out;
    Skip();
    Expect('{');
    while (true) {
      Skip();
      if (Peek() == '}') {
        ++i_;
        break;
      }
      std::string key = ParseString();
      Skip();
      Expect(':');
      Skip();
      out[key] = ParseValue();
      Skip();
      if (Peek() == ',') {
        ++i_;
        continue;
      }
      Skip();
      Expect('}');
      break;
    }
    return out;
  }

  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(StrCat(name_, ": malformed .npy header (", what, " at character ", i_, "): ", s_));
  }

 private:
  char Peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void Skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void Expect(char c) {
    if (Peek() != c) Fail(StrCat("expected '", c, "'"));
    ++i_;
  }
  std::string ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') Fail("expected a quoted key");
    ++i_;
    const size_t end = s_.find(quote, i_);
    if (end == std::string::npos) Fail("unterminated string");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }
  // A value as its source text: a string (unquoted), True/False, or a tuple.
  std::string ParseValue() {
    const char c = Peek();
    if (c == '\'' || c == '"') return ParseString();
    if (c == '(') {
      const size_t end = s_.find(')', i_);
      if (end == std::string::npos) Fail("unterminated tuple");
      std::string out = s_.substr(i_, end + 1 - i_);
      i_ = end + 1;
      return out;
    }
    size_t start = i_;
    while (i_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (start == i_) Fail("expected a value");
    return s_.substr(start, i_ - start);
  }

  const std::string& s_;
  const std::string& name_;
  size_t i_ = 0;
};

std::vector<int64_t> ParseShape(const std::string& tuple, const std::string& name) {
  // "(2, 3)", "(5,)", "()"
  std::vector<int64_t> dims;
  std::string inner = tuple.substr(1, tuple.size() - 2);
  std::stringstream parts(inner);
  std::string part;
  while (std::getline(parts, part, ',')) {
    size_t a = part.find_first_not_of(" \t");
    if (a == std::string::npos) continue;  // the trailing comma of "(5,)"
    size_t b = part.find_last_not_of(" \tL");
    std::string digits = part.substr(a, b + 1 - a);
    if (digits.empty() || digits.size() > 18 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      throw Error(StrCat(name, ": bad shape ", tuple, " in the .npy header (dimension '", part,
                         "')"));
    }
    dims.push_back(std::stoll(digits));
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    throw Error(StrCat(name, ": shape ", tuple, " has rank ", dims.size(),
                       "; remat-bench reads rank 0 to ", kMaxRank));
  }
  return dims;
}

}  // namespace

Tensor ParseNpy(const std::string& bytes, const std::string& name) {
  if (bytes.size() < kMagicSize + 2) {
    throw Error(StrCat(name, ": truncated .npy file (", bytes.size(), " bytes)"));
  }
  if (bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    throw Error(StrCat(name, ": not a .npy file (bad magic; expected \\x93NUMPY)"));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    if (bytes.size() < 10) throw Error(StrCat(name, ": truncated .npy header"));
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw Error(StrCat(name, ": truncated .npy header"));
    for (int i = 0; i < 4; ++i) {
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    }
    header_start = 12;
  } else {
    throw Error(StrCat(name, ": unsupported .npy format version ", major, ".",
                       static_cast<int>(static_cast<unsigned char>(bytes[7])),
                       " (reads 1.0, 2.0, 3.0)"));
  }
  if (header_len > bytes.size() - header_start) {
    throw Error(StrCat(name, ": truncated .npy file: the header says ", header_len,
                       " bytes, the file has ", bytes.size() - header_start, " after the preamble"));
  }
  const std::string header = bytes.substr(header_start, header_len);
  HeaderParser parser(header, name);
  std::map<std::string, std::string> dict = parser.ParseDict();
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (!dict.count(key)) {
      throw Error(StrCat(name, ": malformed .npy header: no '", key, "': ", header));
    }
  }
  const std::string& descr = dict["descr"];
  DType dtype;
  if (descr == "<f4") {
    dtype = DType::kF32;
  } else if (descr == "<f8") {
    dtype = DType::kF64;
  } else if (descr == ">f4" || descr == ">f8") {
    throw Error(StrCat(name, ": big-endian data ('", descr,
                       "'); remat-bench reads little-endian '<f4' and '<f8' (use "
                       "arr.astype('<f4'))"));
  } else {
    throw Error(StrCat(name, ": unsupported dtype '", descr,
                       "'; remat-bench reads '<f4' (float32) and '<f8' (float64)"));
  }
  if (dict["fortran_order"] == "True") {
    throw Error(StrCat(name, ": fortran_order is True: remat-bench reads C order; save with "
                             "np.ascontiguousarray"));
  }
  if (dict["fortran_order"] != "False") {
    throw Error(StrCat(name, ": malformed .npy header: fortran_order is '",
                       dict["fortran_order"], "'"));
  }
  const std::string& shape_text = dict["shape"];
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')') {
    throw Error(StrCat(name, ": malformed .npy header: shape is '", shape_text, "'"));
  }
  std::vector<int64_t> dims = ParseShape(shape_text, name);
  // The element count, checked for overflow before anything is allocated.
  const int64_t item = DTypeSize(dtype);
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / item / d) {
      throw Error(StrCat(name, ": shape ", shape_text, " is too large"));
    }
    count *= d;
  }
  const size_t data_start = header_start + header_len;
  const size_t have = bytes.size() - data_start;
  if (static_cast<uint64_t>(count * item) != have) {
    throw Error(StrCat(name, ": ", have < static_cast<size_t>(count * item) ? "truncated" : "trailing",
                       " data: shape ", shape_text, " of ", descr, " needs ", count * item,
                       " bytes, the file has ", have));
  }
  Tensor t = Tensor::Zeros(dtype, Shape(dims));
  if (count > 0) std::memcpy(t.raw(), bytes.data() + data_start, count * item);
  return t;
}

Tensor ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(StrCat(path, ": cannot open (missing or unreadable)"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(StrCat(path, ": read error"));
  return ParseNpy(buffer.str(), path);
}

std::string SerializeNpy(const Tensor& t) {
  std::string shape = "(";
  for (int i = 0; i < t.shape().rank(); ++i) {
    shape += std::to_string(t.shape().dim(i));
    shape += t.shape().rank() == 1 ? "," : (i + 1 < t.shape().rank() ? ", " : "");
  }
  shape += ")";
  std::string header = StrCat("{'descr': '", t.dtype() == DType::kF32 ? "<f4" : "<f8",
                              "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces so that magic + version + length + header + '\n' is a
  // multiple of 64.
  const size_t unpadded = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicSize);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.bytes());
  return out;
}

void WriteNpy(const std::string& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(StrCat(path, ": cannot open for writing"));
  const std::string bytes = SerializeNpy(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error(StrCat(path, ": write error"));
}

}  // namespace remat
