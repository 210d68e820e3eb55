#include "engines/api/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "engines/api/error.h"

namespace remat {
namespace {

std::string Temp(const std::string& file) {
  return (std::filesystem::path(::testing::TempDir()) / file).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The message of the Error `f` throws; a test failure if it throws none.
template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// Parsing `bytes` as "in.npy" fails with a message naming the file and
// containing `says`.
void ExpectError(const std::string& bytes, const std::string& says) {
  SCOPED_TRACE(says);
  const std::string m = ErrorOf([&] { ParseNpy(bytes, "in.npy"); });
  EXPECT_EQ(m.rfind("in.npy: ", 0), 0u) << m;
  EXPECT_NE(m.find(says), std::string::npos) << "expected '" << says << "' in: " << m;
}

// A .npy file of version `major`.0 with the header dict `dict` (then '\n',
// no padding) and `data`.
std::string Npy(const std::string& dict, const std::string& data, char major = 1) {
  const std::string header = dict + "\n";
  std::string out = std::string("\x93NUMPY", 6) + major + '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  if (major != 1) out += std::string(2, '\0');
  return out + header + data;
}

std::string Dict(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

// A tensor of `shape` holding values that exercise the bits: NaN (with a
// payload), both infinities, -0, subnormals, and ordinary numbers.
Tensor Interesting(DType dtype, const Shape& shape) {
  Tensor t = Tensor::Zeros(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kI32) {
      const int32_t special[] = {std::numeric_limits<int32_t>::min(),
                                 std::numeric_limits<int32_t>::max(), -1, 0};
      t.i32()[i] = i < 4 ? special[i] : static_cast<int32_t>(i * 1000003);
    } else if (dtype == DType::kF32) {
      const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), -0.0f,
                               std::numeric_limits<float>::denorm_min()};
      float v = i < 5 ? special[i] : 0.25f * static_cast<float>(i) - 3;
      if (i == 0) {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        bits |= 0x1234;  // a NaN payload
        std::memcpy(&v, &bits, 4);
      }
      t.f32()[i] = v;
    } else {
      const double special[] = {std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(), -0.0,
                                std::numeric_limits<double>::denorm_min()};
      double v = i < 5 ? special[i] : 0.1 * static_cast<double>(i) - 3;
      if (i == 0) {
        uint64_t bits;
        std::memcpy(&bits, &v, 8);
        bits |= 0x123456789;
        std::memcpy(&v, &bits, 8);
      }
      t.f64()[i] = v;
    }
  }
  return t;
}

TEST(NpyTest, RoundTripsEveryRankAndDtypeBitwise) {
  const std::vector<Shape> shapes = {Shape(),          Shape({1}),    Shape({7}),
                                     Shape({2, 3}),    Shape({0, 3}), Shape({2, 1, 4}),
                                     Shape({3, 5, 2}), Shape({4, 0, 2})};
  for (const Shape& shape : shapes) {
    for (DType dtype : {DType::kF32, DType::kF64, DType::kI32}) {
      const Tensor t = Interesting(dtype, shape);
      SCOPED_TRACE(t.TypeString());
      const std::string path = Temp("round_trip.npy");
      WriteNpy(path, t);
      // numpy's layout: the data starts at a multiple of 64 bytes.
      const std::string bytes = ReadFile(path);
      ASSERT_GE(bytes.size(), 10u);
      const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                                static_cast<unsigned char>(bytes[9]) << 8;
      EXPECT_EQ((10 + header_len) % 64, 0u);
      EXPECT_EQ(bytes.size(), 10 + header_len + static_cast<size_t>(t.bytes()));
      EXPECT_EQ(bytes[10 + header_len - 1], '\n');
      const Tensor back = ReadNpy(path);
      EXPECT_EQ(back.dtype(), t.dtype());
      EXPECT_EQ(back.shape(), t.shape());
      EXPECT_TRUE(BitwiseEqual(t, back));
    }
  }
}

TEST(NpyTest, WritesAViewsOwnElements) {
  // Step 1 of a stacked [3, 2] tensor: a view at an offset into the buffer.
  const Tensor stacked = Interesting(DType::kF64, Shape({3, 2}));
  const Tensor step = stacked.Slice(1);
  const std::string path = Temp("view.npy");
  WriteNpy(path, step);
  const Tensor back = ReadNpy(path);
  ASSERT_EQ(back.shape(), Shape({2}));
  EXPECT_TRUE(BitwiseEqual(step, back));
}

TEST(NpyTest, WritesTheBytesNumpyWrites) {
  // np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3)): the dict,
  // spaces, '\n', 118 header bytes in all, so the data starts at byte 128.
  Tensor t = Tensor::Zeros(DType::kF32, Shape({2, 3}));
  for (int i = 0; i < 6; ++i) t.f32()[i] = static_cast<float>(i);
  const std::string path = Temp("f32_2x3.npy");
  WriteNpy(path, t);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_EQ(dict.size(), 59u);
  const std::string data(
      "\x00\x00\x00\x00"   // 0.0f
      "\x00\x00\x80\x3f"   // 1.0f
      "\x00\x00\x00\x40"   // 2.0f
      "\x00\x00\x40\x40"   // 3.0f
      "\x00\x00\x80\x40"   // 4.0f
      "\x00\x00\xa0\x40",  // 5.0f
      24);
  const std::string expected =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(58, ' ') + "\n" + data;
  EXPECT_EQ(ReadFile(path), expected);
  EXPECT_EQ(SerializeNpy(t), expected);

  // One-dimensional shapes are 1-tuples, scalars empty tuples.
  EXPECT_EQ(SerializeNpy(Tensor::Zeros(DType::kF64, Shape({3}))).substr(10, 58),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\x20");
  const std::string scalar = SerializeNpy(Tensor::FromF64(Shape(), {2.5}));
  EXPECT_EQ(scalar.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(scalar.substr(10, 56), "{'descr': '<f8', 'fortran_order': False, 'shape': (), } ");
  EXPECT_EQ(scalar.size(), 128u + 8u);
}

// np.save of np.array([1.5, -2.0, 3.0]) (float64, shape (3,)) as numpy 1.x
// writes it: the header padded to 64 bytes (numpy >= 1.14).
const std::string kNumpyF64x3 =
    std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }" + std::string(60, ' ') + "\n" +
    std::string("\x00\x00\x00\x00\x00\x00\xf8\x3f"   // 1.5
                "\x00\x00\x00\x00\x00\x00\x00\xc0"   // -2.0
                "\x00\x00\x00\x00\x00\x00\x08\x40",  // 3.0
                24);

void ExpectF64x3(const Tensor& t) {
  ASSERT_EQ(t.dtype(), DType::kF64);
  ASSERT_EQ(t.shape(), Shape({3}));
  EXPECT_EQ(t.f64()[0], 1.5);
  EXPECT_EQ(t.f64()[1], -2.0);
  EXPECT_EQ(t.f64()[2], 3.0);
}

TEST(NpyTest, ReadsWhatNumpyWrites) {
  ASSERT_EQ(kNumpyF64x3.size(), 128u + 24u);
  ExpectF64x3(ParseNpy(kNumpyF64x3, "numpy.npy"));
  const std::string path = Temp("numpy_f64x3.npy");
  WriteFile(path, kNumpyF64x3);
  ExpectF64x3(ReadNpy(path));
  // And what we write is what numpy wrote.
  EXPECT_EQ(SerializeNpy(Tensor::FromF64(Shape({3}), {1.5, -2.0, 3.0})), kNumpyF64x3);
}

TEST(NpyTest, ReadsHeadersAsOtherWritersSpellThem) {
  const std::string data = kNumpyF64x3.substr(128);
  // numpy < 1.14: padded to 16 bytes.
  ExpectF64x3(ParseNpy(std::string("\x93NUMPY\x01\x00\x46\x00", 10) +
                           "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }" +
                           std::string(12, ' ') + "\n" + data,
                       "in.npy"));
  // Python 2: "3L".
  ExpectF64x3(ParseNpy(Npy(Dict("<f8", "(3L,)"), data), "in.npy"));
  // Double quotes, another key order, no spaces, no trailing comma.
  ExpectF64x3(ParseNpy(Npy("{\"shape\":(3,),\"fortran_order\":False,\"descr\":\"<f8\"}", data),
                       "in.npy"));
  // Generous spacing, tabs and newlines.
  ExpectF64x3(ParseNpy(
      Npy(" {\n\t'descr' : '<f8' ,\n 'fortran_order' :False,'shape':( 3 , ) ,\n}  ", data),
      "in.npy"));
  // Versions 2.0 and 3.0: a 4-byte header length.
  ExpectF64x3(ParseNpy(Npy(Dict("<f8", "(3,)"), data, 2), "in.npy"));
  ExpectF64x3(ParseNpy(Npy(Dict("<f8", "(3,)"), data, 3), "in.npy"));
  // Rank 3 with a trailing comma; a zero-sized array has no data.
  Tensor t = ParseNpy(Npy(Dict("<f4", "(1, 3, 1,)"), std::string(12, '\0')), "in.npy");
  EXPECT_EQ(t.shape(), Shape({1, 3, 1}));
  EXPECT_EQ(ParseNpy(Npy(Dict("<f4", "(0, 5)"), ""), "in.npy").shape(), Shape({0, 5}));
}

TEST(NpyTest, EveryFaultIsNamed) {
  const std::string eight(8, '\0');
  const std::string ok = Npy(Dict("<f4", "(2,)"), eight);
  ASSERT_NO_THROW(ParseNpy(ok, "in.npy"));

  // Truncated and bad preambles.
  ExpectError("", "truncated");
  ExpectError("\x93NUMP", "truncated");
  ExpectError(ok.substr(0, 9), "truncated");
  ExpectError(std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated");
  ExpectError("GIF89a", "bad magic");
  ExpectError("PK\x03\x04", "bad magic");  // an .npz (a zip), not an .npy
  ExpectError(std::string("\x93NUMPX\x01\x00\x10\x00", 10) + std::string(16, ' '), "bad magic");
  ExpectError(Npy(Dict("<f4", "(2,)"), eight, 9), "unsupported .npy format version 9.0");
  std::string minor = ok;
  minor[7] = 5;
  ExpectError(minor, "unsupported .npy format version 1.5");
  std::string long_header = ok;
  long_header[8] = '\xff';
  ExpectError(long_header, "truncated .npy file: the header length is");
  std::string huge_v2 = Npy(Dict("<f4", "(2,)"), eight, 2);
  huge_v2[11] = '\x7f';
  ExpectError(huge_v2, "truncated");
  ExpectError(Npy(std::string(10001, ' '), ""), "longer than the 10000 numpy accepts");

  // Malformed dicts.
  ExpectError(Npy("", eight), "malformed");
  ExpectError(Npy("garbage", eight), "malformed");
  ExpectError(Npy(std::string("\xff\x00\x01", 3), eight), "\\xff\\x00\\x01");
  ExpectError(Npy("{'descr': '<f4', 'shape': (2,), }", eight), "no 'fortran_order'");
  ExpectError(Npy("{'fortran_order': False, 'shape': (2,), }", eight), "no 'descr'");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False}", eight), "no 'shape'");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,) ", eight), "malformed");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", eight),
              "unexpected text after the dict");
  ExpectError(Npy("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", eight),
              "malformed");
  ExpectError(Npy("{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }", eight),
              "expected ':'");
  ExpectError(Npy("{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", eight),
              "expected ',' or '}'");
  ExpectError(Npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
                  eight),
              "duplicate key 'descr'");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }", eight),
              "malformed");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': '', }", eight),
              "unexpected key 'x'");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", eight), "malformed");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': 'False', 'shape': (2,), }", eight),
              "fortran_order is 'False', not True or False");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", eight),
              "expected a value, not 'Maybe'");
  ExpectError(Npy("{'descr': 4, 'fortran_order': False, 'shape': (2,), }", eight), "malformed");
  ExpectError(Npy("{'descr': False, 'fortran_order': False, 'shape': (2,), }", eight),
              "descr is False, not a string");

  // Shapes.
  ExpectError(Npy(Dict("<f4", "(2, x)"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "(2 2)"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "(,)"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "(2,,)"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "(2)"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "(2.0,)"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "[2]"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "'(2,)'"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "(2,"), eight), "bad shape");
  ExpectError(Npy(Dict("<f4", "(-2,)"), eight), "negative dimension");
  ExpectError(Npy(Dict("<f4", "(99999999999999999999,)"), eight), "dimension too large");
  ExpectError(Npy(Dict("<f4", "(1, 1, 1, 1, 1, 1, 2)"), eight), "has rank 7");
  ExpectError(Npy(Dict("<f8", "(999999999999999999, 999999999999999999)"), eight),
              "too large");
  // A zero dimension after an overflowing product does not hide it.
  ExpectError(Npy(Dict("<f4", "(1152921504606846976, 4, 0)"), ""), "too large");
  ExpectError(Npy(Dict("<f4", "(2305843009213693952,)"), eight), "too large");

  // Order, byte order, dtypes.
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", eight),
              "fortran_order is True: remat-bench reads C order; save with np.ascontiguousarray");
  ExpectError(Npy(Dict(">f4", "(2,)"), eight), "big-endian");
  ExpectError(Npy(Dict(">f8", "(1,)"), eight), "big-endian");
  ExpectError(Npy(Dict(">i4", "(2,)"), eight), "big-endian");
  for (const char* descr : {"<i2", "<u4", "<f2", "|u1", "=f4", "f4", "<c8", "|b1", "<U3", "|O", ""}) {
    ExpectError(Npy(Dict(descr, "(2,)"), eight),
                StrCat("unsupported dtype '", descr, "'; remat-bench reads '<f4' (float32), "
                                                     "'<f8' (float64), '<i4' (int32) and '<i8' "
                                                     "(int64, read as int32)"));
  }
  // int64 ids are read as int32; one that does not fit is named by index.
  {
    std::string data(16, '\0');
    const int64_t ids[2] = {7, -3};
    std::memcpy(data.data(), ids, 16);
    const Tensor t = ParseNpy(Npy(Dict("<i8", "(2,)"), data), "ids.npy");
    EXPECT_EQ(t.dtype(), DType::kI32);
    EXPECT_EQ(t.i32()[0], 7);
    EXPECT_EQ(t.i32()[1], -3);
    const int64_t big[2] = {1, int64_t{1} << 40};
    std::memcpy(data.data(), big, 16);
    ExpectError(Npy(Dict("<i8", "(2,)"), data),
                "int64 value 1099511627776 at flat index 1 does not fit int32");
  }
  ExpectError(Npy("{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, "
                  "'shape': (1,), }",
                  eight),
              "unsupported dtype [('a', '<f4'), ('b', '<f4')] (a structured dtype)");

  // Data lengths.
  ExpectError(Npy(Dict("<f4", "(3,)"), eight), "truncated data");
  ExpectError(Npy(Dict("<f4", "(1,)"), eight), "trailing data");
  ExpectError(Npy(Dict("<f4", "()"), eight), "trailing data");
  ExpectError(Npy(Dict("<f4", "(0,)"), eight), "trailing data");
  ExpectError(ok + "x", "trailing data");
  ExpectError(kNumpyF64x3.substr(0, kNumpyF64x3.size() - 1), "truncated data");
}

TEST(NpyTest, ALyingHeaderAllocatesNothing) {
  // 4e18 bytes of f32 would not fit in any memory: the length check must
  // come before the allocation.
  ExpectError(Npy(Dict("<f4", "(1000000000, 1000000000)"), "abcd"),
              "needs 4000000000000000000 bytes, the file has 4");
}

TEST(NpyTest, EveryPrefixAndByteFlipFailsCleanly) {
  // No prefix of a valid file parses, and no single corrupted byte crashes.
  for (size_t n = 0; n < kNumpyF64x3.size(); ++n) {
    EXPECT_THROW(ParseNpy(kNumpyF64x3.substr(0, n), "in.npy"), Error) << n;
  }
  for (size_t i = 0; i < kNumpyF64x3.size(); ++i) {
    for (int flip : {0x01, 0x80, 0xff}) {
      std::string bytes = kNumpyF64x3;
      bytes[i] = static_cast<char>(bytes[i] ^ flip);
      try {
        ParseNpy(bytes, "in.npy");
      } catch (const Error&) {
      }
    }
  }
}

TEST(NpyTest, FileFaultsNameThePath) {
  const std::string missing = Temp("does_not_exist.npy");
  std::string m = ErrorOf([&] { ReadNpy(missing); });
  EXPECT_EQ(m.rfind(missing + ": cannot open", 0), 0u) << m;

  const std::string dir = Temp("a_directory.npy");
  std::filesystem::create_directories(dir);
  m = ErrorOf([&] { ReadNpy(dir); });
  EXPECT_EQ(m.rfind(dir + ": cannot read", 0), 0u) << m;
  EXPECT_NE(m.find("directory"), std::string::npos) << m;

  const std::string empty = Temp("empty.npy");
  WriteFile(empty, "");
  m = ErrorOf([&] { ReadNpy(empty); });
  EXPECT_EQ(m.rfind(empty + ": truncated", 0), 0u) << m;

  const std::string bad = Temp("bad_dtype.npy");
  WriteFile(bad, Npy(Dict("<u8", "(1,)"), std::string(8, '\0')));
  m = ErrorOf([&] { ReadNpy(bad); });
  EXPECT_EQ(m.rfind(bad + ": unsupported dtype '<u8'", 0), 0u) << m;

  const std::string unwritable = Temp("no/such/dir/out.npy");
  m = ErrorOf([&] { WriteNpy(unwritable, Tensor::Zeros(DType::kF32, Shape({2}))); });
  EXPECT_EQ(m.rfind(unwritable + ": cannot open for writing", 0), 0u) << m;

  const std::string out = Temp("undefined.npy");
  m = ErrorOf([&] { WriteNpy(out, Tensor()); });
  EXPECT_EQ(m.rfind(out + ": cannot write an undefined tensor", 0), 0u) << m;
}

}  // namespace
}  // namespace remat
