#include "tools/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engines/api/error.h"

namespace remat {
namespace {

std::string Temp(const std::string& file) {
  return (std::filesystem::path(::testing::TempDir()) / file).string();
}

void ExpectError(const std::string& bytes, const std::string& says) {
  try {
    ParseNpy(bytes, "in.npy");
    ADD_FAILURE() << "accepted: expected an error saying '" << says << "'";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("in.npy"), std::string::npos) << m;
    EXPECT_NE(m.find(says), std::string::npos) << "expected '" << says << "' in: " << m;
  }
}

// A version 1.0 file with the given header dict and data bytes.
std::string Npy(const std::string& dict, const std::string& data, char major = 1) {
  std::string header = dict + "\n";
  std::string out = std::string("\x93NUMPY", 6) + major + '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

TEST(NpyTest, RoundTripsEveryRankAndDtype) {
  const std::vector<Shape> shapes = {Shape(), Shape({5}), Shape({2, 3}), Shape({2, 1, 4})};
  for (const Shape& shape : shapes) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      Tensor t = Tensor::Zeros(dtype, shape);
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const double v = i == 1 ? NAN : (i == 2 ? -INFINITY : 0.25 * i - 1);
        if (dtype == DType::kF32) {
          t.f32()[i] = static_cast<float>(v);
        } else {
          t.f64()[i] = v;
        }
      }
      const std::string path = Temp("round_trip.npy");
      WriteNpy(path, t);
      Tensor back = ReadNpy(path);
      EXPECT_TRUE(BitwiseEqual(t, back)) << t.TypeString();
    }
  }
}

TEST(NpyTest, WritesTheBytesNumpyWrites) {
  // np.save of np.zeros((2, 3), np.float32): a 118-byte header dict padded to
  // put the data at byte 128.
  const std::string bytes = SerializeNpy(Tensor::Zeros(DType::kF32, Shape({2, 3})));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]), 118);
  EXPECT_EQ(bytes[9], 0);
  EXPECT_EQ(bytes.substr(10, dict.size()), dict);
  EXPECT_EQ(bytes[127], '\n');
  EXPECT_EQ(bytes.substr(10 + dict.size(), 117 - dict.size()), std::string(117 - dict.size(), ' '));
  // One-dimensional shapes are 1-tuples; scalars empty tuples.
  EXPECT_NE(SerializeNpy(Tensor::Zeros(DType::kF64, Shape({3}))).find("'shape': (3,), }"),
            std::string::npos);
  EXPECT_NE(SerializeNpy(Tensor::Zeros(DType::kF64, Shape())).find("'shape': (), }"),
            std::string::npos);
}

TEST(NpyTest, ReadsHeadersAsOtherWritersSpellThem) {
  // Double quotes, another key order, no trailing comma, version 2.0.
  std::string data(3 * 8, '\0');
  double values[3] = {1.5, -2, 3};
  std::memcpy(data.data(), values, sizeof values);
  Tensor t = ParseNpy(Npy("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<f8\"}", data),
                      "in.npy");
  EXPECT_EQ(t.shape(), Shape({3}));
  EXPECT_EQ(t.f64()[0], 1.5);
  std::string v2 = Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", data);
  v2[6] = 2;
  v2.insert(10, std::string("\0\0", 2));  // a 4-byte header length
  EXPECT_EQ(ParseNpy(v2, "in.npy").f64()[2], 3);
}

TEST(NpyTest, EveryFaultIsNamed) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string eight(8, '\0');
  ExpectError("", "truncated");
  ExpectError("\x93NUMP", "truncated");
  ExpectError(std::string("GIF89a\x01\x00\x10\x00", 10) + "xxxxxxxxxxxxxxxx", "bad magic");
  ExpectError(Npy(ok_dict, eight, 9), "unsupported .npy format version 9");
  std::string long_header = Npy(ok_dict, eight);
  long_header[8] = '\xff';
  ExpectError(long_header, "truncated");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", eight),
              "fortran_order is True");
  ExpectError(Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", eight),
              "big-endian");
  ExpectError(Npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", eight),
              "unsupported dtype '<i4'");
  ExpectError(Npy("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", eight),
              "unsupported dtype '<f2'");
  ExpectError(Npy("{'descr': '<f4', 'shape': (2,), }", eight), "no 'fortran_order'");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,) ", eight), "malformed");
  ExpectError(Npy("garbage", eight), "malformed");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", eight),
              "bad shape");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", eight),
              "bad shape");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 2), }", eight),
              "rank 4");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", eight),
              "truncated data");
  ExpectError(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", eight),
              "trailing data");
  ExpectError(Npy("{'descr': '<f8', 'fortran_order': False, "
                  "'shape': (999999999999999999, 999999999999999999), }",
                  eight),
              "too large");
  try {
    ReadNpy(Temp("does_not_exist.npy"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does_not_exist.npy: cannot open"), std::string::npos);
  }
}

}  // namespace
}  // namespace remat
