#include "engines/api/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string_view>
#include <vector>

#include "engines/api/error.h"

namespace remat {

// Tensors are copied to and from the file's little-endian data as raw bytes.
static_assert(std::endian::native == std::endian::little,
              "engines/api/npy.cc copies '<f4'/'<f8' data as raw bytes: little-endian hosts only");

namespace {

constexpr std::string_view kMagic("\x93NUMPY", 6);
// numpy.lib.format.ARRAY_ALIGN: numpy pads the header so the data starts at a
// multiple of this.
constexpr size_t kAlign = 64;
// numpy.lib.format.GROWTH_AXIS_MAX_DIGITS: numpy reserves this many
// characters, less those of the first dimension, as spaces after the dict so
// the shape can be rewritten in place. Copied so our bytes equal numpy's.
constexpr size_t kGrowthAxisMaxDigits = 21;
// numpy.lib.format._MAX_HEADER_SIZE: numpy refuses longer headers (unless
// told to trust the file), and so do we; it also bounds the parser's work and
// the header text echoed in messages.
constexpr size_t kMaxHeaderSize = 10000;
// How much of a bad header an error message quotes.
constexpr size_t kMaxEcho = 160;

// `s` for a message, in `quote`s (none for '\0'): printable ASCII as is,
// other bytes as \xNN, cut after kMaxEcho characters (a garbage header can
// be 10 KB of binary).
std::string Echo(std::string_view s, char quote = '"') {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = quote ? std::string(1, quote) : "";
  for (size_t i = 0; i < s.size() && i < kMaxEcho; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || (quote && c == static_cast<unsigned char>(quote))) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (quote) out += quote;
  if (s.size() > kMaxEcho) out += StrCat("... (", s.size(), " bytes)");
  return out;
}

// One value of the header dict.
struct Value {
  enum class Kind { kString, kBool, kTuple, kList };
  Kind kind = Kind::kString;
  std::string text;           // kString: the contents
  bool flag = false;          // kBool
  std::vector<int64_t> dims;  // kTuple: non-negative integers
  std::string source;         // the literal as written, for messages
};

// A recursive-descent parser for the one Python literal a .npy header holds,
// a dict of string keys to strings, booleans and tuples of non-negative
// integers, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// followed by padding. It accepts what Python's literal syntax accepts for
// those (any spacing, either quote, an optional trailing comma) plus Python
// 2's "3L", and rejects the rest with a message naming the file, the fault
// and where it is. A list value (a structured dtype's descr) is kept as
// source text only, to be reported as an unsupported dtype.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  // The dict; anything after it but whitespace is an error.
  std::map<std::string, Value> Parse() {
    std::map<std::string, Value> out;
    SkipSpace();
    Expect('{', "expected '{' opening the header dict");
    SkipSpace();
    while (Peek() != '}') {
      const size_t key_at = i_;
      if (Peek() != '\'' && Peek() != '"') Fail("expected a quoted key or '}'");
      std::string key = ParseString();
      SkipSpace();
      Expect(':', "expected ':' after a key");
      SkipSpace();
      Value value = ParseValue();
      // Python would keep the last of duplicate keys; a header that states a
      // key twice is not one numpy wrote, and which one to trust is a guess.
      if (!out.emplace(key, std::move(value)).second) {
        i_ = key_at;
        Fail(StrCat("duplicate key ", Echo(key, '\'')));
      }
      SkipSpace();
      if (Peek() == ',') {
        ++i_;
        SkipSpace();
      } else if (Peek() != '}') {
        Fail("expected ',' or '}' after a value");
      }
    }
    ++i_;  // '}'
    SkipSpace();
    if (i_ != s_.size()) Fail("unexpected text after the dict");
    return out;
  }

  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(StrCat(name_, ": malformed .npy header (", what, " at character ", i_,
                       "): ", Echo(s_)));
  }

 private:
  char Peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool AtEnd() const { return i_ >= s_.size(); }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void Expect(char c, const char* what) {
    if (AtEnd() || s_[i_] != c) Fail(what);
    ++i_;
  }

  // A quoted string without escapes (numpy's keys and dtype strings have
  // none; a backslash is taken literally and the value will not match).
  std::string ParseString() {
    const char quote = s_[i_++];
    const size_t end = s_.find(quote, i_);
    if (end == std::string_view::npos) Fail("unterminated string");
    std::string out(s_.substr(i_, end - i_));
    i_ = end + 1;
    return out;
  }

  Value ParseValue() {
    const size_t start = i_;
    Value v;
    const char c = Peek();
    if (c == '\'' || c == '"') {
      v.kind = Value::Kind::kString;
      v.text = ParseString();
    } else if (c == '(') {
      v.kind = Value::Kind::kTuple;
      v.dims = ParseTuple();
    } else if (c == '[') {
      v.kind = Value::Kind::kList;
      SkipBracketed();
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      while (!AtEnd() && std::isalnum(static_cast<unsigned char>(s_[i_]))) ++i_;
      const std::string_view word = s_.substr(start, i_ - start);
      if (word != "True" && word != "False") {
        i_ = start;
        Fail(StrCat("expected a value, not '", word, "'"));
      }
      v.kind = Value::Kind::kBool;
      v.flag = word == "True";
    } else {
      Fail("expected a value");
    }
    v.source = std::string(s_.substr(start, i_ - start));
    return v;
  }

  // "()", "(5,)", "(2, 3)", "(2, 3,)". "(5)" is the integer 5 in Python,
  // not a shape, and is rejected as numpy rejects it.
  std::vector<int64_t> ParseTuple() {
    std::vector<int64_t> dims;
    ++i_;  // '('
    SkipSpace();
    bool comma_after_last = false;
    while (Peek() != ')') {
      dims.push_back(ParseDim());
      SkipSpace();
      comma_after_last = Peek() == ',';
      if (comma_after_last) {
        ++i_;
        SkipSpace();
      } else if (Peek() != ')') {
        Fail("bad shape: expected ',' or ')' after a dimension");
      }
    }
    if (dims.size() == 1 && !comma_after_last) {
      Fail("bad shape: a one-dimensional shape is written (n,)");
    }
    ++i_;  // ')'
    return dims;
  }

  // A decimal integer, with Python 2's optional 'L' suffix.
  int64_t ParseDim() {
    if (Peek() == '-') Fail("bad shape: negative dimension");
    if (!std::isdigit(static_cast<unsigned char>(Peek()))) Fail("bad shape: expected a dimension");
    int64_t d = 0;
    while (!AtEnd() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      const int digit = s_[i_] - '0';
      if (d > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        Fail("bad shape: dimension too large");
      }
      d = d * 10 + digit;
      ++i_;
    }
    if (Peek() == 'L') ++i_;
    return d;
  }

  // Skips a bracketed literal (a structured dtype's list of tuples), quotes
  // respected, to the bracket that closes it.
  void SkipBracketed() {
    int depth = 0;
    do {
      if (AtEnd()) Fail("unterminated list");
      const char c = s_[i_];
      if (c == '\'' || c == '"') {
        ParseString();
        continue;
      }
      if (c == '[' || c == '(') ++depth;
      if (c == ']' || c == ')') --depth;
      ++i_;
    } while (depth > 0);
  }

  std::string_view s_;
  const std::string& name_;
  size_t i_ = 0;
};

// Little-endian unsigned integer of `n` bytes at `p`.
uint64_t LoadLittleEndian(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

// "<errno text>" for a message, after a failed stream operation.
std::string ErrnoText() { return errno != 0 ? std::strerror(errno) : "unknown error"; }

// Rejects what WriteNpy/SerializeNpy cannot write; `name` starts the message.
void CheckWritable(const Tensor& t, const std::string& name) {
  if (!t.defined()) throw Error(StrCat(name, ": cannot write an undefined tensor as .npy"));
  if (t.dry()) {
    throw Error(StrCat(name, ": cannot write a dry-run tensor (it has no data) as .npy"));
  }
}

}  // namespace

Tensor ParseNpy(const std::string& bytes, const std::string& name) {
  const std::string_view all(bytes);
  // Magic first, on whatever prefix there is: a short non-.npy file is "not
  // a .npy file", a short prefix of one is "truncated".
  if (all.substr(0, kMagic.size()) != kMagic.substr(0, std::min(all.size(), kMagic.size()))) {
    throw Error(StrCat(name, ": not a .npy file (bad magic: it does not start with "
                             "\"\\x93NUMPY\")"));
  }
  if (all.size() < kMagic.size() + 2) {
    throw Error(StrCat(name, ": truncated .npy file (", all.size(),
                       " bytes, shorter than the magic string and version)"));
  }
  const int major = static_cast<unsigned char>(all[6]);
  const int minor = static_cast<unsigned char>(all[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw Error(StrCat(name, ": unsupported .npy format version ", major, ".", minor,
                       " (remat-bench reads 1.0, 2.0 and 3.0)"));
  }
  // Version 1.0 has a 2-byte header length; 2.0 and 3.0 a 4-byte one.
  const int length_bytes = major == 1 ? 2 : 4;
  const size_t header_start = 8 + length_bytes;
  if (all.size() < header_start) {
    throw Error(StrCat(name, ": truncated .npy file (", all.size(),
                       " bytes, shorter than the header length field)"));
  }
  const uint64_t header_len = LoadLittleEndian(all.data() + 8, length_bytes);
  if (header_len > all.size() - header_start) {
    throw Error(StrCat(name, ": truncated .npy file: the header length is ", header_len,
                       " bytes, the file has ", all.size() - header_start,
                       " after the preamble"));
  }
  if (header_len > kMaxHeaderSize) {
    throw Error(StrCat(name, ": .npy header of ", header_len, " bytes is longer than the ",
                       kMaxHeaderSize, " numpy accepts"));
  }
  const std::string_view header = all.substr(header_start, header_len);
  HeaderParser parser(header, name);
  std::map<std::string, Value> dict = parser.Parse();

  // numpy writes exactly these keys and refuses files with others.
  static constexpr const char* kKeys[] = {"descr", "fortran_order", "shape"};
  for (const char* key : kKeys) {
    if (!dict.count(key)) {
      throw Error(StrCat(name, ": malformed .npy header: no '", key, "' key: ", Echo(header)));
    }
  }
  for (const auto& [key, value] : dict) {
    if (key != kKeys[0] && key != kKeys[1] && key != kKeys[2]) {
      throw Error(StrCat(name, ": malformed .npy header: unexpected key ", Echo(key, '\''),
                         " (numpy writes only 'descr', 'fortran_order', 'shape'): ",
                         Echo(header)));
    }
  }

  const Value& descr = dict["descr"];
  static constexpr char kSupported[] =
      "remat-bench reads '<f4' (float32), '<f8' (float64), '<i4' (int32) and '<i8' (int64, "
      "read as int32)";
  if (descr.kind == Value::Kind::kList) {
    throw Error(StrCat(name, ": unsupported dtype ", Echo(descr.source, 0),
                       " (a structured dtype); ", kSupported));
  }
  if (descr.kind != Value::Kind::kString) {
    throw Error(StrCat(name, ": malformed .npy header: descr is ", Echo(descr.source, 0),
                       ", not a string"));
  }
  DType dtype;
  bool from_int64 = false;  // '<i8': ids as numpy makes them by default
  if (descr.text == "<f4") {
    dtype = DType::kF32;
  } else if (descr.text == "<f8") {
    dtype = DType::kF64;
  } else if (descr.text == "<i4") {
    dtype = DType::kI32;
  } else if (descr.text == "<i8") {
    dtype = DType::kI32;
    from_int64 = true;
  } else if (descr.text == ">f4" || descr.text == ">f8" || descr.text == ">i4" ||
             descr.text == ">i8") {
    throw Error(StrCat(name, ": big-endian data (dtype '", descr.text, "'); ", kSupported,
                       "; save with arr.astype('<", descr.text.substr(1), "')"));
  } else {
    throw Error(StrCat(name, ": unsupported dtype ", Echo(descr.text, '\''), "; ", kSupported));
  }

  const Value& fortran = dict["fortran_order"];
  if (fortran.kind != Value::Kind::kBool) {
    throw Error(StrCat(name, ": malformed .npy header: fortran_order is ", Echo(fortran.source, 0),
                       ", not True or False"));
  }
  if (fortran.flag) {
    throw Error(StrCat(name, ": fortran_order is True: remat-bench reads C order; save with "
                             "np.ascontiguousarray"));
  }

  const Value& shape = dict["shape"];
  if (shape.kind != Value::Kind::kTuple) {
    throw Error(StrCat(name, ": malformed .npy header: bad shape ", Echo(shape.source, 0),
                       ", not a tuple"));
  }
  if (shape.dims.size() > static_cast<size_t>(kMaxRank)) {
    throw Error(StrCat(name, ": shape ", Echo(shape.source, 0), " has rank ", shape.dims.size(),
                       "; remat-bench reads rank 0 to ", kMaxRank));
  }
  // The byte size, every partial product checked for int64 overflow (a zero
  // dimension later does not excuse an overflow earlier: Shape multiplies in
  // order too).
  const int64_t item = from_int64 ? 8 : DTypeSize(dtype);
  int64_t needed = item;
  for (int64_t d : shape.dims) {
    if (d != 0 && needed > std::numeric_limits<int64_t>::max() / d) {
      throw Error(StrCat(name, ": shape ", Echo(shape.source, 0), " of ", descr.text,
                         " is too large (its byte size overflows int64)"));
    }
    needed *= d;
  }
  // The data must be exactly the shape's bytes, checked before allocating:
  // a header cannot make us allocate more than the file holds.
  const size_t data_start = header_start + header_len;
  const uint64_t have = all.size() - data_start;
  if (have != static_cast<uint64_t>(needed)) {
    throw Error(StrCat(name, ": ",
                       have < static_cast<uint64_t>(needed) ? "truncated data"
                                                            : "trailing data after the array",
                       ": shape ", Echo(shape.source, 0), " of ", descr.text, " needs ", needed,
                       " bytes, the file has ", have, " after the header"));
  }
  Tensor t = Tensor::Zeros(dtype, Shape(shape.dims));
  if (from_int64) {
    // Each value must fit int32, remat-bench's integer dtype.
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      int64_t v;
      std::memcpy(&v, all.data() + data_start + 8 * i, 8);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        throw Error(StrCat(name, ": int64 value ", v, " at flat index ", i,
                           " does not fit int32 (remat-bench's integer inputs are int32)"));
      }
      t.i32()[i] = static_cast<int32_t>(v);
    }
  } else if (needed > 0) {
    std::memcpy(t.raw(), all.data() + data_start, static_cast<size_t>(needed));
  }
  return t;
}

Tensor ReadNpy(const std::string& path) {
  // An ifstream opens a directory on Linux and then reads nothing, which
  // would be reported as an empty file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(StrCat(path, ": cannot read: it is a directory, not a .npy file"));
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(StrCat(path, ": cannot open (", ErrnoText(), ")"));
  std::string bytes;
  // Reserve the file's size where it has one, to read without regrowing.
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) bytes.reserve(size);
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    bytes.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(StrCat(path, ": read error (", ErrnoText(), ")"));
  return ParseNpy(bytes, path);
}

std::string SerializeNpy(const Tensor& t) {
  CheckWritable(t, "SerializeNpy");
  // The dict exactly as numpy's _write_array_header formats it: sorted keys,
  // repr() of each value, ", " after each, so a 1-tuple is "(5,)".
  const Shape& s = t.shape();
  std::string shape = "(";
  for (int i = 0; i < s.rank(); ++i) {
    if (i > 0) shape += ", ";
    shape += std::to_string(s.dim(i));
  }
  shape += s.rank() == 1 ? ",)" : ")";
  const char* descr = t.dtype() == DType::kF32 ? "<f4" : t.dtype() == DType::kI32 ? "<i4" : "<f8";
  std::string header = StrCat("{'descr': '", descr,
                              "', 'fortran_order': False, 'shape': ", shape, ", }");
  if (s.rank() > 0) header.append(kGrowthAxisMaxDigits - std::to_string(s.dim(0)).size(), ' ');
  // Then as numpy's _wrap_header: spaces and '\n' so that magic, version,
  // length and header end at a multiple of kAlign. As in numpy, an already
  // aligned header still gets a full kAlign of spaces.
  constexpr size_t kPreamble = kMagic.size() + 2 + 2;
  const size_t with_newline = header.size() + 1;
  const size_t pad = kAlign - (kPreamble + with_newline) % kAlign;
  header.append(pad, ' ');
  header += '\n';
  // Rank <= 3 keeps the header near 200 bytes, far from version 1.0's 64 KiB.
  if (header.size() > 0xffff) throw Error("SerializeNpy: header too long for version 1.0");
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(t.raw()), static_cast<size_t>(t.bytes()));
  return out;
}

void WriteNpy(const std::string& path, const Tensor& t) {
  CheckWritable(t, path);
  const std::string bytes = SerializeNpy(t);
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(StrCat(path, ": cannot open for writing (", ErrnoText(), ")"));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  // Closing flushes; a full disk shows up here, not at write().
  out.close();
  if (!out) throw Error(StrCat(path, ": write error (", ErrnoText(), ")"));
}

}  // namespace remat
