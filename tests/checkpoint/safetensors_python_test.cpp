// Byte-level compatibility with Python. Debian 12 has no python3-safetensors, so the Python side
// follows the format with json + struct + numpy exactly as the official writer does (compact JSON,
// "__metadata__" first, tensors sorted by dtype alignment then name, space padding) and reads
// with the official reader's checks. Python's file must read back here and re-encode to the same
// bytes; our file (tensors in insertion order, so not aligned) must pass Python's reader.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "checkpoint_test_util.h"
#include "safetensors_samples.h"

namespace ds::test {
namespace {

using format::SafetensorsFile;
using format::SafetensorsWriter;
using format::StDtype;
using format::TensorInfo;

const char* kPython = "/usr/bin/python3";
const std::string kNote = "\xc3\xbcnicode \"quoted\" \\ new\nline\ttab \x01";

// Mirrors safetensors_samples.h: same names, dtypes, shapes and element formulas.
const char* kScript = R"PY(
import json, struct, sys
import numpy as np

NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
      "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
      "U64": np.uint64, "U32": np.uint32, "U16": np.uint16}
SIZE = {k: np.dtype(v).itemsize for k, v in NP.items()}
# The official Dtype enum order (writers sort by it, descending, then by name).
RANK = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32",
        "F32", "F64", "I64", "U64"]
SAMPLES = [(n.lower(), n, (2, 3)) for n in
           ["F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "U64", "U32", "U16"]]
SAMPLES += [("scalar", "F32", ()), ("empty", "I64", (0,)), ("empty3d", "F16", (3, 0, 2))]
METADATA = {"format": "pt", "note": "\u00fcnicode \"quoted\" \\ new\nline\ttab \x01"}

def values(dt, shape):
    i = np.arange(int(np.prod(shape, dtype=np.int64)))
    if dt in ("F64", "F32", "F16"):
        a = (i * 0.5 - 1).astype(NP[dt])
    elif dt == "BF16":
        a = ((i * 0.5 - 1).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    elif dt.startswith("I"):
        a = (i - 2).astype(NP[dt])
    elif dt == "BOOL":
        a = i % 2 == 0
    else:
        a = (i.astype(np.uint64) * 40).astype(NP[dt])
    return a.astype(np.dtype(NP[dt]).newbyteorder("<")).reshape(shape)

def write(path):
    header = {"__metadata__": dict(sorted(METADATA.items()))}
    blobs, off = [], 0
    for name, dt, shape in sorted(SAMPLES, key=lambda s: (-RANK.index(s[1]), s[0])):
        b = values(dt, shape).tobytes()
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n <= 100_000_000 and 8 + n <= len(data), n
    assert n % 8 == 0, "header not padded"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    assert header.pop("__metadata__") == METADATA
    buf, start = data[8 + n:], 0
    for name, info in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        s, e = info["data_offsets"]
        assert s == start and e >= s, ("offsets", name)
        assert e - s == int(np.prod(info["shape"], dtype=np.int64)) * SIZE[info["dtype"]], name
        start = e
    assert start == len(buf), "trailing bytes"
    expected = {name: (dt, shape) for name, dt, shape in SAMPLES}
    assert set(header) == set(expected), sorted(header)
    for name, info in header.items():
        dt, shape = expected[name]
        assert info["dtype"] == dt and info["shape"] == list(shape), name
        s, e = info["data_offsets"]
        got = np.frombuffer(buf[s:e], dtype=np.dtype(NP[dt]).newbyteorder("<")).reshape(shape)
        assert np.array_equal(got, values(dt, shape)), (name, got)
    try:  # BF16 as real bfloat16 values too, where Debian's python3-torch is installed
        import torch
        s, e = header["bf16"]["data_offsets"]
        bf = torch.frombuffer(bytearray(buf[s:e]), dtype=torch.bfloat16).float().numpy()
        assert np.array_equal(bf, np.arange(6) * 0.5 - 1), bf
        print("torch bf16 checked")
    except ImportError:
        pass
    print("OK", len(header))

{"write": write, "read": read}[sys.argv[1]](sys.argv[2])
)PY";

bool python_has_numpy() {
  static const bool ok =
      ::access(kPython, X_OK) == 0 && std::system((std::string(kPython) + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

// Runs the script; returns its exit code and output.
std::pair<int, std::string> run_python(const TempDir& dir, const std::string& mode, const std::string& file) {
  write_file(dir.file("st.py"), kScript);
  const std::string out = dir.file("py.out");
  const std::string cmd = std::string(kPython) + " " + dir.file("st.py") + " " + mode + " " + file + " >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return {rc, read_file(out)};
}

const Sample& sample_named(const std::vector<Sample>& samples, const std::string& name) {
  for (const Sample& s : samples)
    if (s.name == name) return s;
  throw std::runtime_error("no sample " + name);
}

TEST(SafetensorsPython, PythonWritesWeReadAndReencodeByteExact) {
  if (!python_has_numpy()) GTEST_SKIP() << kPython << " with numpy is not installed";
  TempDir dir;
  const std::string ref = dir.file("ref.safetensors");
  const auto [rc, out] = run_python(dir, "write", ref);
  ASSERT_EQ(rc, 0) << out;

  const std::vector<Sample> samples = numpy_samples();
  const SafetensorsFile f(ref);
  ASSERT_EQ(f.tensors().size(), samples.size());
  EXPECT_EQ(f.tensors().front().name, "u64");  // official order: last dtype of the enum first
  for (const TensorInfo& t : f.tensors()) {
    SCOPED_TRACE(t.name);
    const Sample& s = sample_named(samples, t.name);
    EXPECT_EQ(t.dtype, s.dtype);
    EXPECT_EQ(t.shape, s.shape);
    std::string bytes(t.nbytes(), '\0');
    f.read(t, bytes.data(), bytes.size());
    EXPECT_EQ(bytes, s.bytes);
  }
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", kNote}}));

  // Same tensors in the file's order and the same metadata: our writer emits the same bytes.
  const std::string ours = dir.file("ours.safetensors");
  SafetensorsWriter w(ours);
  for (const auto& [k, v] : f.metadata()) w.set_metadata(k, v);
  for (const TensorInfo& t : f.tensors()) w.add(t.name, t.dtype, t.shape, sample_named(samples, t.name).bytes.data());
  w.commit();
  EXPECT_TRUE(read_file(ours) == read_file(ref)) << "our encoding differs from the Python reference";
}

TEST(SafetensorsPython, WeWritePythonReads) {
  if (!python_has_numpy()) GTEST_SKIP() << kPython << " with numpy is not installed";
  TempDir dir;
  const std::string path = dir.file("ours.safetensors");
  SafetensorsWriter w(path);
  w.set_metadata("note", kNote);
  w.set_metadata("format", "pt");
  const std::vector<Sample> samples = numpy_samples();  // the bytes must outlive commit()
  for (const Sample& s : samples) w.add(s.name, s.dtype, s.shape, s.bytes.data());
  w.commit();
  const auto [rc, out] = run_python(dir, "read", path);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_CONTAINS(out, "OK 16");
  if (out.find("torch bf16 checked") == std::string::npos)
    std::printf("note: no python3-torch, BF16 compared as bit patterns only\n");
  else
    std::printf("note: BF16 values also checked through torch.bfloat16\n");
}

}  // namespace
}  // namespace ds::test
